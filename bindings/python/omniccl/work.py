"""Work: the handle of an operation started with ``async_op=True`` (or ``Isend``/``Irecv``)."""

from __future__ import annotations

import datetime
from typing import Any, Callable, List, Optional, Union

from . import _omniccl
from .errors import OmniCCLError, Status, _from_status

__all__ = ["Work"]

Timeout = Union[None, float, int, datetime.timedelta]


def _seconds(timeout: Timeout, what: str = "timeout") -> Optional[float]:
    """Seconds from a timedelta or number (None stays None)."""
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        return float(timeout)
    raise TypeError(f"{what} must be a datetime.timedelta or a number of seconds, not {type(timeout).__name__}")


class Work:
    """An operation in progress (torch.distributed's ``Work``, mpi4py's ``Request``).

    The arrays it uses stay valid until it ends. Results are guaranteed in the
    output arrays only after :meth:`wait` returned (or :meth:`is_completed`
    returned True and :meth:`is_success` is True): operations that return
    results through a list of arrays (``all_gather``, ``gather``,
    ``all_to_all``) copy them into the list at that point.

    Waiting releases the GIL and reacts to Ctrl-C within 100 ms: the
    KeyboardInterrupt aborts the communicator (see "Blocking, the GIL and
    Ctrl-C" in the docs, docs/getting-started/python.md), so the
    program can always exit.
    """

    __slots__ = ("_native", "_finish", "_outputs", "_finished")

    def __init__(self, native: Any, finish: Optional[Callable[[], None]] = None,
                 outputs: Optional[List[Any]] = None) -> None:
        self._native = native
        self._finish = finish
        self._outputs = outputs if outputs is not None else []
        self._finished = False

    def _complete(self) -> None:
        if not self._finished:
            self._finished = True
            if self._finish is not None:
                finish, self._finish = self._finish, None
                finish()

    def wait(self, timeout: Timeout = None) -> bool:
        """Blocks until the operation has completed; returns True.

        Raises the operation's error (an :class:`~omniccl.OmniCCLError`) if it
        failed. With ``timeout`` (seconds or a ``datetime.timedelta``), raises
        :class:`~omniccl.TimeoutError` if it has not completed by then; the
        operation goes on and can be waited for again.
        """
        self._native.wait(_seconds(timeout))
        self._complete()
        return True

    def is_completed(self) -> bool:
        """True once the operation has ended, successfully or not (never blocks)."""
        if not self._native.test():
            return False
        if self._native.status == Status.SUCCESS:
            self._complete()
        return True

    def is_success(self) -> bool:
        """True if the operation has ended successfully (never blocks)."""
        return self.is_completed() and self._native.status == Status.SUCCESS

    def exception(self) -> Optional[OmniCCLError]:
        """The error the operation ended with, or None (also while it runs)."""
        if not self._native.test() or self._native.status == Status.SUCCESS:
            return None
        return _from_status(self._native.status, self._native.message)

    def result(self) -> List[Any]:
        """The operation's output arrays (after :meth:`wait`)."""
        return list(self._outputs)

    # mpi4py spellings (Request.Wait / Request.Test).
    def Wait(self) -> None:
        """mpi4py-style :meth:`wait`."""
        self.wait()

    def Test(self) -> bool:
        """mpi4py-style :meth:`is_completed` (raises if the operation failed)."""
        if not self.is_completed():
            return False
        self.wait()
        return True

    def __repr__(self) -> str:
        state = "running"
        if self._native.done:
            status = self._native.status
            name = Status(status).name if status in Status._value2member_map_ else str(status)
            state = "done" if status == Status.SUCCESS else f"failed ({name})"
        return f"<omniccl.Work {self._native.what} {state}>"


# The native class, for isinstance checks in tests.
_NativeWork = _omniccl.Work
