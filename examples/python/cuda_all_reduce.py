"""cuda_all_reduce.py - all_reduce on GPU arrays (CuPy, or PyTorch), ordered on a CUDA stream.

Rank r fills a GPU array with r + 1 on a stream of its own; inside
``omniccl.cuda_stream(s)`` the all_reduce is enqueued on that stream and the
call returns at once; work queued on the stream afterwards (here: doubling
the array) sees the sum. Ranks share GPUs (rank r uses GPU r % count), so
this runs on a machine with one GPU.

Run: python -m omniccl.run -n 4 examples/python/cuda_all_reduce.py
Needs CuPy or a CUDA build of PyTorch, and a GPU; without them it prints
why and exits with status 77 (skipped).
Output with 4 ranks, in any order:
    rank 0: sum 10.0, doubled on the same stream 20.0
    rank 1: sum 10.0, doubled on the same stream 20.0
    rank 2: sum 10.0, doubled on the same stream 20.0
    rank 3: sum 10.0, doubled on the same stream 20.0
"""
import sys

import omniccl as dist


def gpu_backend():
    """(name, module) of CuPy or CUDA PyTorch with a GPU, or None."""
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() > 0:
            return "cupy", cupy
    except Exception:  # noqa: BLE001 - not installed, or no driver
        pass
    try:
        import torch
        if torch.cuda.is_available():
            return "torch", torch
    except Exception:  # noqa: BLE001
        pass
    return None


backend = gpu_backend()
if backend is None:
    print("SKIPPED: needs CuPy or CUDA PyTorch and a GPU")
    sys.exit(77)
name, lib = backend

dist.init_process_group()
rank = dist.get_rank()
if name == "cupy":
    lib.cuda.Device(rank % lib.cuda.runtime.getDeviceCount()).use()
    stream = lib.cuda.Stream(non_blocking=True)
    with stream:
        x = lib.full(1 << 20, rank + 1, dtype=lib.float32)
    with dist.cuda_stream(stream):
        dist.all_reduce(x)           # enqueued on `stream`; returns at once
    with stream:
        total = float(x[0])          # (a device-to-host copy on the stream)
        x *= 2                       # queued after the all_reduce: sees the sum
    stream.synchronize()
else:
    lib.cuda.set_device(rank % lib.cuda.device_count())
    stream = lib.cuda.Stream()
    with lib.cuda.stream(stream):
        x = lib.full((1 << 20,), float(rank + 1), device="cuda")
        with dist.cuda_stream(stream):
            dist.all_reduce(x)
        total = float(x[0])
        x *= 2
    stream.synchronize()
print(f"rank {rank}: sum {total}, doubled on the same stream {float(x[-1])}")
dist.destroy_process_group()
