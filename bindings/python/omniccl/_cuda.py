"""CUDA arrays: the stream OmniCCL orders its operations on.

Operations on CUDA arrays (anything whose ``__dlpack_device__`` is CUDA: CuPy,
PyTorch, ...) follow NCCL's contract: the call enqueues the work on a CUDA
stream and returns without waiting for the GPU; work queued on that stream
afterwards sees the results. The stream is the thread's OmniCCL stream, set
with :func:`cuda_stream` (the legacy default stream when none is set). The
arrays are taken over DLPack with that stream (``__dlpack__(stream=...)``),
so the producer makes its own pending work on them visible first.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from . import _omniccl


def stream_handle(stream: Any) -> int:
    """The ``cudaStream_t`` of ``stream`` as an integer (0: the legacy default stream).

    Takes None, an int, a PyTorch stream (``.cuda_stream``) or a CuPy stream (``.ptr``).
    """
    if stream is None:
        return 0
    if isinstance(stream, bool):
        raise TypeError("stream must be a CUDA stream, an int handle or None, not bool")
    if isinstance(stream, int):
        handle = stream
    elif hasattr(stream, "cuda_stream"):  # torch.cuda.Stream
        handle = int(stream.cuda_stream)
    elif hasattr(stream, "ptr"):  # cupy.cuda.Stream
        handle = int(stream.ptr)
    else:
        raise TypeError(f"stream must be a CUDA stream (torch.cuda.Stream, cupy.cuda.Stream), an int handle "
                        f"or None, not {type(stream).__name__}")
    if handle < 0 or handle >= 1 << 64:
        raise ValueError(f"stream handle {handle} is not a pointer value")
    return handle


@contextlib.contextmanager
def cuda_stream(stream: Any) -> Iterator[None]:
    """Orders this thread's OmniCCL operations on CUDA arrays on ``stream`` inside the ``with`` block.

    ``stream`` is a ``torch.cuda.Stream``, a ``cupy.cuda.Stream``, a raw ``cudaStream_t``
    as an int, or None (the legacy default stream). Inside the block a call on CUDA
    arrays returns once its work is enqueued on the stream; ``async_op=True`` gives a
    Work whose ``wait()`` returns once the results are in the arrays. Arrays are
    exported to OmniCCL for this stream (DLPack's ``__dlpack__(stream=...)``). CPU
    arrays are not affected. Blocks nest; the previous stream comes back on exit::

        s = torch.cuda.Stream()
        with omniccl.cuda_stream(s):
            omniccl.all_reduce(t)     # t is a CUDA tensor; ordered on s
        s.synchronize()
    """
    previous = _omniccl.set_cuda_stream(stream_handle(stream))
    try:
        yield
    finally:
        _omniccl.set_cuda_stream(previous)


def current_cuda_stream() -> int:
    """This thread's OmniCCL stream as an int handle (0: none set, the legacy default stream)."""
    return int(_omniccl.cuda_stream())
