"""OmniCCL's exceptions: one hierarchy, each carrying the C library's status and message.

Every failure of the C library becomes an :class:`OmniCCLError` (or a subclass
of it), whose ``status`` is the C status code (a :class:`Status`) and whose
message is the C library's message (``occl_last_error()``), which names the
operation, the ranks and the fields involved.

==========================================  ============================================
C status                                    exception
==========================================  ============================================
``OCCL_ERR_TIMEOUT``                        :class:`TimeoutError` (also ``builtins.TimeoutError``)
``OCCL_ERR_PEER_FAILURE``                   :class:`PeerFailureError`
``OCCL_ERR_MISMATCH``                       :class:`MismatchError`
``OCCL_ERR_TRUNCATED``                      :class:`TruncatedError`
``OCCL_ERR_INVALID_ARGUMENT``               :class:`InvalidArgumentError` (also ``ValueError``)
``OCCL_ERR_UNSUPPORTED``                    :class:`UnsupportedError` (also ``NotImplementedError``)
anything else                               :class:`OmniCCLError`
==========================================  ============================================
"""

from __future__ import annotations

import builtins
import enum
from typing import Dict, Optional, Type

__all__ = [
    "Status",
    "OmniCCLError",
    "InvalidArgumentError",
    "TruncatedError",
    "UnsupportedError",
    "TimeoutError",
    "PeerFailureError",
    "MismatchError",
]


class Status(enum.IntEnum):
    """The C library's status codes (``occl_status_t``); values never change."""

    SUCCESS = 0
    INVALID_ARGUMENT = 1
    UNSUPPORTED = 2
    TIMEOUT = 3
    PEER_FAILURE = 4
    MISMATCH = 5
    SYSTEM = 6
    INTERNAL = 7
    ABORTED = 8
    IN_PROGRESS = 9
    VERSION = 10
    OUT_OF_MEMORY = 11
    COMM_FAILED = 12
    INTERRUPTED = 13
    TRUNCATED = 14


class OmniCCLError(RuntimeError):
    """Base class of every OmniCCL error.

    Attributes:
        status: the C status code (:class:`Status`, or a plain int for a code
            this version does not know).
        message: the C library's message.
    """

    _default_status = Status.INTERNAL

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        if status is None:
            status = self._default_status
        try:
            self.status: int = Status(status)
        except ValueError:
            self.status = status
        self.message: str = message

    def __reduce__(self):  # picklable, e.g. to send it to another rank
        return (type(self), (self.message, int(self.status)))


class InvalidArgumentError(OmniCCLError, ValueError):
    """An argument is wrong (found before anything was sent; the communicator stays usable).

    Raised for read-only or non-contiguous arrays where the operation needs
    them otherwise, sizes that do not fit, a root outside the communicator,
    a reduce op undefined for the dtype, unsupported dtypes, and so on.
    """

    _default_status = Status.INVALID_ARGUMENT


class UnsupportedError(OmniCCLError, NotImplementedError):
    """The request is well-formed but this build cannot do it (e.g. a CUDA array in a CPU build)."""

    _default_status = Status.UNSUPPORTED


class TimeoutError(OmniCCLError, builtins.TimeoutError):  # noqa: A001 - the documented name
    """A deadline passed; the message names the ranks that did not arrive."""

    _default_status = Status.TIMEOUT


class PeerFailureError(OmniCCLError):
    """A peer exited, was killed or disconnected."""

    _default_status = Status.PEER_FAILURE


class TruncatedError(OmniCCLError):
    """A message was larger than its receive buffer (MPI's ERR_TRUNCATE): the buffer holds its first
    part, the status says how much; the communicator stays usable."""


class MismatchError(OmniCCLError):
    """Ranks called different operations (op, dtype, count, root or reduce op)."""

    _default_status = Status.MISMATCH


_BY_STATUS: Dict[int, Type[OmniCCLError]] = {
    Status.INVALID_ARGUMENT: InvalidArgumentError,
    Status.UNSUPPORTED: UnsupportedError,
    Status.TIMEOUT: TimeoutError,
    Status.PEER_FAILURE: PeerFailureError,
    Status.MISMATCH: MismatchError,
    Status.TRUNCATED: TruncatedError,
}


def _from_status(status: int, message: str) -> OmniCCLError:
    """The exception for a C status (used by the native layer)."""
    cls = _BY_STATUS.get(status, OmniCCLError)
    return cls(message, status)
