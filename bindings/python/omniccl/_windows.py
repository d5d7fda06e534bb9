"""Registered buffers: CUDA memory every rank maps once (``Communicator.register_window``).

On the CUDA IPC path, an operation whose buffers lie in registered ones on
every rank reads the peers' buffers in place instead of copying through the
communicator's scratch buffers (as NCCL's ``ncclCommWindowRegister``). Where
CUDA tensors are staged, or without GPUs, registering changes nothing.
"""

from __future__ import annotations

from typing import Any, Optional

from ._tensors import Tensor


class Window:
    """A registered buffer; deregister it (collective) with :meth:`deregister` or ``with``.

    Every rank must deregister its windows in the same order, as it
    registered them. The window keeps the registered array alive until then.
    """

    def __init__(self, native: Any, handle: int, tensor: Optional[Tensor]) -> None:
        self._native: Any = native
        self._handle = handle
        self._tensor = tensor

    @property
    def handle(self) -> int:
        """The C handle (``occl_window_t``); 0 once deregistered."""
        return self._handle

    @property
    def registered(self) -> bool:
        """Whether the buffer is still registered."""
        return self._handle != 0

    def deregister(self) -> None:
        """Deregisters the buffer (collective; waits for the operations that may read it). Safe to call twice."""
        if self._handle == 0:
            return
        handle, self._handle = self._handle, 0
        try:
            self._native.window_deregister(handle)
        finally:
            self._tensor = None

    close = deregister

    def __enter__(self) -> "Window":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.deregister()

    def __repr__(self) -> str:
        state = f"handle {self._handle}" if self._handle else "deregistered"
        return f"<omniccl.Window {state}>"
