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

MPI error classes (mpi4py's ``MPI.Exception.Get_error_class()``): every
OmniCCL error answers :meth:`OmniCCLError.Get_error_class` with one of the
``ERR_*`` constants below (MPICH's numbers). The C status decides it, and for
an invalid argument the message does (the C library's messages name the
argument at fault):

==========================================  ============================================
status / message                            error class
==========================================  ============================================
``TRUNCATED``                               ``ERR_TRUNCATE``
``UNSUPPORTED``                             ``ERR_UNSUPPORTED_OPERATION``
``OUT_OF_MEMORY``                           ``ERR_NO_MEM``
``PEER_FAILURE``, ``COMM_FAILED``           ``ERR_PROC_FAILED``
``ABORTED``                                 ``ERR_COMM``
``INTERNAL``                                ``ERR_INTERN``
``INVALID_ARGUMENT``, message names ...     ``root``: ``ERR_ROOT``; ``reduce op``/``op``:
                                            ``ERR_OP``; ``dtype``/``type``: ``ERR_TYPE``;
                                            ``count``/``elements``: ``ERR_COUNT``;
                                            ``tag``: ``ERR_TAG``; ``rank``/``peer``/
                                            ``dest``/``source``: ``ERR_RANK``;
                                            ``buffer``/``read-only``/``contiguous``:
                                            ``ERR_BUFFER``; else ``ERR_ARG``
``TIMEOUT``, ``MISMATCH``, anything else    ``ERR_OTHER``
==========================================  ============================================
"""

from __future__ import annotations

import builtins
import enum
import re
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
    "ERR_BUFFER", "ERR_COUNT", "ERR_TYPE", "ERR_TAG", "ERR_COMM", "ERR_RANK", "ERR_ROOT", "ERR_OP", "ERR_ARG",
    "ERR_UNKNOWN", "ERR_TRUNCATE", "ERR_OTHER", "ERR_INTERN", "ERR_REQUEST", "ERR_NO_MEM",
    "ERR_UNSUPPORTED_OPERATION", "ERR_PROC_FAILED", "ERR_LASTCODE", "error_class",
]

# MPI error classes, with MPICH's numbers.
SUCCESS = 0
ERR_BUFFER = 1
ERR_COUNT = 2
ERR_TYPE = 3
ERR_TAG = 4
ERR_COMM = 5
ERR_RANK = 6
ERR_ROOT = 7
ERR_OP = 9
ERR_ARG = 12
ERR_UNKNOWN = 13
ERR_TRUNCATE = 14
ERR_OTHER = 15
ERR_INTERN = 16
ERR_REQUEST = 19
ERR_NO_MEM = 34
ERR_UNSUPPORTED_OPERATION = 52
ERR_LASTCODE = 0x3FFFFFFF
ERR_PROC_FAILED = 101

# An invalid argument's class, from the first of these its message names.
_ARGUMENT_CLASSES = (
    (re.compile(r"\broot\b", re.I), ERR_ROOT),
    (re.compile(r"\b(reduce )?op\b", re.I), ERR_OP),
    (re.compile(r"\b(d(ata)?type|typecode)s?\b", re.I), ERR_TYPE),
    (re.compile(r"\b(count|counts|elements)\b", re.I), ERR_COUNT),
    (re.compile(r"\btags?\b", re.I), ERR_TAG),
    (re.compile(r"\b(rank|peer|dest|source)\b", re.I), ERR_RANK),
    (re.compile(r"\b(buffer|buf|read-only|contiguous)\b", re.I), ERR_BUFFER),
)

_STATUS_CLASSES = {
    14: ERR_TRUNCATE,  # Status.TRUNCATED
    2: ERR_UNSUPPORTED_OPERATION,  # UNSUPPORTED
    11: ERR_NO_MEM,  # OUT_OF_MEMORY
    4: ERR_PROC_FAILED,  # PEER_FAILURE
    12: ERR_PROC_FAILED,  # COMM_FAILED
    8: ERR_COMM,  # ABORTED
    7: ERR_INTERN,  # INTERNAL
}


def error_class(status: int, message: str) -> int:
    """The MPI error class (``ERR_*``) of a C status and its message (the table in the module doc)."""
    if status == 0:
        return SUCCESS
    if status == 1:  # INVALID_ARGUMENT
        for pattern, cls in _ARGUMENT_CLASSES:
            if pattern.search(message):
                return cls
        return ERR_ARG
    return _STATUS_CLASSES.get(int(status), ERR_OTHER)


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

    # mpi4py's MPI.Exception interface.
    def Get_error_class(self) -> int:  # noqa: N802 - mpi4py's names
        """The MPI error class (``omniccl.ERR_ROOT``, ...; see the module doc for the mapping)."""
        return error_class(int(self.status), self.message)

    def Get_error_code(self) -> int:  # noqa: N802
        """The MPI error code: the same as :meth:`Get_error_class` (OmniCCL has no finer codes)."""
        return self.Get_error_class()

    def Get_error_string(self) -> str:  # noqa: N802
        """The message."""
        return self.message

    @property
    def error_class(self) -> int:
        """Same as :meth:`Get_error_class`."""
        return self.Get_error_class()

    @property
    def error_code(self) -> int:
        """Same as :meth:`Get_error_code`."""
        return self.Get_error_code()

    @property
    def error_string(self) -> str:
        """The message."""
        return self.message


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
