"""What a rank does when it dies of an uncaught exception.

Without this, the interpreter would print the traceback, then tear down the
communicators in an orderly way at exit, so the other ranks were told that
this rank *left* ("has destroyed its communicator") although it crashed, and
often exited before it, so a launcher named one of them as the rank that
failed. Instead, before the traceback is printed:

1. when started by ``omniccl-run`` / ``python -m omniccl.run``, the rank tells
   the launcher the time of its failure (one line "RANK MONOTONIC_NS" on the
   descriptor in ``OMNICCL_RUN_FAILURE_FD``), so the launcher reports the rank
   that failed first, whatever order the ranks exit in;
2. every live communicator is aborted (local, bounded), so the peers learn at
   once that this rank failed, not that it left.
"""

from __future__ import annotations

import os
import sys
import time
import weakref
from types import TracebackType
from typing import Any, Optional, Type

#: Communicators not yet destroyed (weak: a dropped communicator is not kept).
_live: "weakref.WeakSet[Any]" = weakref.WeakSet()
_installed = False


def track(comm: Any) -> None:
    """Registers a communicator to be aborted if this process dies of an uncaught exception."""
    _live.add(comm)


def report_failure() -> None:
    """Tells the launcher (if any) that this rank is failing now; never raises."""
    fd_text, rank_text = os.environ.get("OMNICCL_RUN_FAILURE_FD"), os.environ.get("RANK")
    if not fd_text or not rank_text:
        return
    try:
        fd = int(fd_text)
        # A process started by a rank may have the variable but not the pipe,
        # and its descriptor number may now be another file: write only to
        # the launcher's pipe.
        if os.readlink(f"/proc/self/fd/{fd}") != os.environ.get("OMNICCL_RUN_FAILURE_PIPE"):
            return
        os.write(fd, f"{int(rank_text)} {time.monotonic_ns()}\n".encode())
    except (OSError, ValueError):
        pass  # not started by our launcher after all, or it is gone


def abort_all() -> None:
    """Aborts every live communicator (local and bounded); never raises."""
    for comm in list(_live):
        try:
            comm.abort()
        except Exception:  # noqa: BLE001 - dying anyway; the traceback comes next
            pass


def _hook(previous: Any) -> Any:
    def excepthook(exc_type: Type[BaseException], exc: BaseException, tb: Optional[TracebackType]) -> None:
        report_failure()
        abort_all()
        previous(exc_type, exc, tb)

    return excepthook


def install() -> None:
    """Wraps ``sys.excepthook`` once (keeps any hook installed before)."""
    global _installed
    if _installed:
        return
    _installed = True
    sys.excepthook = _hook(sys.excepthook)
