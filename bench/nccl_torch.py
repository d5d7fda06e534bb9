#!/usr/bin/env python3
"""NCCL through PyTorch's ``nccl`` backend on the same sizes as omniccl-bench.

Usage: nccl_torch.py --ranks N [--sizes 8,1K,...] [--colls allreduce,...] [--csv OUT]

Every rank uses GPU 0 when the machine has one GPU (rank r uses GPU r % count),
which NCCL allows only from 2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1 (set here).
Ranks are processes started here (spawn), rendezvous through a file on this
machine (no network). Prints one CSV line per point in omniccl-bench's
columns (peer=nccl), time per call in microseconds (the mean over the timed
calls, ended by torch.cuda.synchronize()), and a first line
``# nccl <version> torch <version>``. Exits 3 with the reason when NCCL cannot
run here (too old for several ranks per GPU, no CUDA).
"""

import argparse
import os
import sys
import tempfile
import time

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
COLLS = ["allreduce", "allgather", "bcast", "reduce", "reduce_scatter", "alltoall"]


def parse_size(text):
    """'8', '1K', '16M', '1G' -> bytes."""
    text = text.strip().upper()
    if text and text[-1] in UNITS:
        return int(text[:-1]) * UNITS[text[-1]]
    return int(text)


def iters_for(nbytes):
    """omniccl-bench's -n auto."""
    if nbytes <= 64 << 10:
        return 1000
    if nbytes <= 1 << 20:
        return 50
    return 10 if nbytes <= 16 << 20 else 3


def one_call(dist, coll, x, out, chunks):
    """Runs collective `coll` once on the prepared tensors."""
    if coll == "allreduce":
        dist.all_reduce(x)
    elif coll == "allgather":
        dist.all_gather_into_tensor(out, x)
    elif coll == "bcast":
        dist.broadcast(x, 0)
    elif coll == "reduce":
        dist.reduce(x, 0)
    elif coll == "reduce_scatter":
        dist.reduce_scatter_tensor(chunks, x)
    elif coll == "alltoall":
        dist.all_to_all_single(out[: x.numel()], x)


def bus_factor(coll, n):
    """nccl-tests' bus bandwidth factors."""
    return {"allreduce": 2 * (n - 1) / n, "allgather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
            "alltoall": (n - 1) / n}.get(coll, 1.0)


def time_point(torch, dist, coll, nbytes, n):
    """Mean microseconds per call of `coll` at `nbytes` per rank."""
    count = max(1, nbytes // 4)
    x = torch.ones(count, dtype=torch.float32, device="cuda")
    out = torch.empty(count * n, dtype=torch.float32, device="cuda")
    chunks = torch.empty(max(1, count // n), dtype=torch.float32, device="cuda")
    if coll in ("reduce_scatter", "alltoall"):
        x = torch.ones(max(n, count - count % n), dtype=torch.float32, device="cuda")
    iters = iters_for(nbytes)
    for _ in range(max(5, iters // 10)):
        one_call(dist, coll, x, out, chunks)
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        one_call(dist, coll, x, out, chunks)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6 / iters


def worker(rank, n, init_file, sizes, colls, out_path):
    """One rank: every point; rank 0 writes the CSV."""
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank, world_size=n)
    lines = []
    for coll in colls:
        for nbytes in sizes:
            us = time_point(torch, dist, coll, nbytes, n)
            gbps = nbytes / us / 1e3
            lines.append(f"nccl,cuda,{coll},{n},{nbytes},{max(1, nbytes // 4)},float,{iters_for(nbytes)},"
                         f"{us:.2f},{us:.2f},{gbps:.3f},{gbps * bus_factor(coll, n):.3f},")
    if rank == 0:
        with open(out_path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    dist.destroy_process_group()


def main():
    """Parses the options, checks NCCL, runs the ranks."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--sizes", default="8,1K,64K,1M,16M,256M,1G")
    ap.add_argument("--colls", default=",".join(COLLS))
    ap.add_argument("--csv", default="-")
    args = ap.parse_args()
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError as e:
        print(f"nccl_torch: no PyTorch here ({e})", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("nccl_torch: PyTorch has no CUDA device here", file=sys.stderr)
        return 3
    version = ".".join(str(v) for v in torch.cuda.nccl.version())
    print(f"# nccl {version} torch {torch.__version__}")
    if args.ranks > torch.cuda.device_count() and torch.cuda.nccl.version() < (2, 30, 0):
        print(f"nccl_torch: NCCL {version} cannot run {args.ranks} ranks on "
              f"{torch.cuda.device_count()} GPU(s) (needs >= 2.30)", file=sys.stderr)
        return 3
    os.environ["NCCL_MULTI_RANK_GPU_ENABLE"] = "1"
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "out.csv")
        mp.spawn(worker, args=(args.ranks, os.path.join(tmp, "init"), sizes, args.colls.split(","), out_path),
                 nprocs=args.ranks, join=True)
        with open(out_path, encoding="utf-8") as f:
            text = f.read()
    if args.csv == "-":
        sys.stdout.write(text)
    else:
        with open(args.csv, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
