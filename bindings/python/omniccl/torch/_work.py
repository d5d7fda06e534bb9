"""The PyTorch ``Work`` that the ``omniccl`` process group returns.

A :class:`TorchWork` is a Python subclass of PyTorch's C++ ``Work``, so both
callers see it: Python code (``dist.all_reduce(..., async_op=True)``) calls
its methods directly, and C++ code (DistributedDataParallel's reducer,
``dist._broadcast_coalesced``) reaches them through PyTorch's trampoline. It
wraps the OmniCCL operations (:class:`omniccl.Work` or
:class:`omniccl.Request`) started for one PyTorch call.

Two details of PyTorch decide the shape of this file:

- A Python object returned to C++ dies with its last Python reference, and
  with it the overrides: the C++ side would then fall back to the base
  ``Work.wait``, which never returns. So the process group holds every work
  until it has been settled (waited for or its future set), and a few
  settled ones after that (:class:`KeepAlive`).
- ``Work.get_future()`` must give a future that completes on its own (the
  reducer waits on it from C++). A :class:`Completer` thread per process
  group waits for the works whose future was asked for, in the order they
  were asked, and sets each future's result or exception.
"""

from __future__ import annotations

import collections
import datetime
import queue
import threading
from typing import Any, Callable, Deque, List, Optional, Set

import torch
from torch._C._distributed_c10d import Work as _CWork

from .._p2p import Request, RecvStatus

__all__ = ["TorchWork", "KeepAlive", "Completer"]

# How many settled works a process group keeps referenced for C++ callers
# that look at a work again after waiting for it.
_SETTLED_KEPT = 64


def _seconds(timeout: Any) -> Optional[float]:
    """Seconds from torch's wait timeout; None for "no timeout" (None, or 0 as torch's kNoTimeout)."""
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    timeout = float(timeout)
    return None if timeout <= 0 else timeout


class KeepAlive:
    """The works of one process group that C++ may still call: all unsettled ones, the last few settled ones."""

    def __init__(self) -> None:
        """An empty set."""
        self._lock = threading.Lock()
        self._pending: Set["TorchWork"] = set()
        self._settled: Deque["TorchWork"] = collections.deque(maxlen=_SETTLED_KEPT)

    def hold(self, work: "TorchWork") -> None:
        """Keeps ``work`` referenced until it is settled."""
        with self._lock:
            self._pending.add(work)

    def settled(self, work: "TorchWork") -> None:
        """Moves ``work`` to the short list of settled works."""
        with self._lock:
            if work in self._pending:
                self._pending.discard(work)
                self._settled.append(work)

    def clear(self) -> None:
        """Forgets every work (when the process group is shut down)."""
        with self._lock:
            self._pending.clear()
            self._settled.clear()


class Completer:
    """One thread that waits for works whose future was asked for and completes those futures."""

    def __init__(self, name: str) -> None:
        """A completer whose thread (named ``name``) starts with the first work."""
        self._name = name
        self._queue: "queue.SimpleQueue[Optional[TorchWork]]" = queue.SimpleQueue()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def submit(self, work: "TorchWork") -> None:
        """Queues ``work``; its future is set once it has ended."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
        self._queue.put(work)

    def stop(self) -> None:
        """Lets the thread end after the works queued so far."""
        with self._lock:
            if self._thread is not None:
                self._queue.put(None)

    def _loop(self) -> None:
        while True:
            work = self._queue.get()
            if work is None:
                return
            work._complete_future()


class TorchWork(_CWork):
    """A PyTorch ``Work`` over OmniCCL operations: ``wait()``, ``is_completed()``, ``get_future()`` as with gloo.

    ``wait()`` raises the operation's error (an :class:`omniccl.OmniCCLError`,
    which is a ``RuntimeError``, as PyTorch's backends raise), on every call
    after a failure too. ``result()`` and the future's value are the output
    tensors.
    """

    def __init__(self, parts: List[Any], result: List[torch.Tensor], keep: KeepAlive, completer: Completer,
                 finish: Optional[Callable[[], None]] = None, hold: Any = None) -> None:
        """Wraps started operations ``parts``; ``finish`` runs once after they all succeeded (a copy out).

        ``hold`` (a staging tensor the operations read) is kept until they ended.
        """
        super().__init__()
        self._hold = hold
        self._parts = parts
        self._result = result
        self._finish = finish
        self._keep = keep
        self._completer = completer
        self._lock = threading.Lock()  # one waiter at a time on the OmniCCL operations
        self._done = False
        self._error: Optional[BaseException] = None
        self._source: int = -1
        self._future: Optional[torch.futures.Future] = None
        keep.hold(self)

    # ------------------------------------------------------------ waiting
    def _settle(self, timeout: Optional[float]) -> None:
        """Waits for every part (under the lock), then records success or the first error."""
        if self._done:
            return
        try:
            for part in self._parts:
                if isinstance(part, Request):
                    status = RecvStatus()
                    part.Wait(status)
                    if part._recv:
                        self._source = status.Get_source()
                else:
                    part.wait(timeout)
            if self._finish is not None:
                self._finish()
        except BaseException as e:  # noqa: BLE001 - kept and raised by every wait
            from ..errors import TimeoutError as _Timeout

            if isinstance(e, _Timeout) and timeout is not None and not _any_failed(self._parts):
                raise  # only this wait's deadline passed; the operation goes on
            self._error = e
        self._done = True
        self._parts = []
        self._finish = None
        self._hold = None
        self._keep.settled(self)

    def wait(self, timeout: Any = None) -> bool:
        """Blocks until the operation ended; returns True or raises its error.

        With ``timeout`` (a ``datetime.timedelta`` or seconds), raises
        :class:`omniccl.TimeoutError` if it has not ended by then.
        """
        with self._lock:
            self._settle(_seconds(timeout))
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        """True once the operation ended, successfully or not (never blocks)."""
        if self._done:
            return True
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if all(p._native is None or p._native.test() for p in self._parts):
                self._settle(None)
            return self._done
        finally:
            self._lock.release()

    def is_success(self) -> bool:
        """True once the operation ended without an error (never blocks)."""
        return self.is_completed() and self._error is None

    def exception(self) -> Optional[BaseException]:
        """The error the operation ended with, or None."""
        return self._error if self.is_completed() else None

    def result(self) -> List[torch.Tensor]:
        """The output tensors."""
        return self._result

    def source_rank(self) -> int:
        """The group rank a receive from any source got its message from (-1 before it completed)."""
        return self._source

    def _source_rank(self) -> int:
        return self._source

    def synchronize(self) -> None:
        """Nothing to do: CUDA operations are already ordered on the stream they were issued on."""

    # ------------------------------------------------------------ future
    def get_future(self) -> torch.futures.Future:
        """A future completed with the output tensors (or the error) when the operation ends."""
        with self._lock:
            if self._future is None:
                self._future = torch.futures.Future()
                if self._done:
                    self._set_future()
                else:
                    self._completer.submit(self)
            return self._future

    def _complete_future(self) -> None:
        """On the completer thread: waits, then sets the future."""
        with self._lock:
            self._settle(None)
            self._set_future()

    def _set_future(self) -> None:
        assert self._future is not None
        if self._error is not None:
            self._future.set_exception(self._error)
        else:
            self._future.set_result(self._result)


def _any_failed(parts: List[Any]) -> bool:
    """Whether an operation of ``parts`` has ended with an error (a timeout of its own, a peer failure)."""
    for p in parts:
        native = p._native
        if native is not None and native.test() and native.status != 0:
            return True
    return False
