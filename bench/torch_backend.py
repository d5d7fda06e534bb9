"""torch.distributed backends side by side: ``omniccl`` against ``gloo`` on CPU tensors.

Run under torchrun (every rank runs it; rank 0 prints the table)::

    torchrun --nproc_per_node 2 bench/torch_backend.py            # or 4
    torchrun --nproc_per_node 2 bench/torch_backend.py --csv out.csv

One process group of each backend over the same ranks (the default group is
gloo, ``new_group(backend="omniccl")`` the other), measured alternately in
the same processes: ``dist.all_reduce`` (SUM, float32) at 8 B, 1 MiB and
64 MiB, and DDP training steps (forward, backward with the gradient
all_reduce, SGD step) of two models: a small MLP on a batch of 32 (about 4 MB
of gradients, mostly computation), and one 2048x2048 linear layer on a batch
of 1 (16 MB of gradients and almost no computation: the step a backend can
speed up). Each figure is
the median of several timed rounds; a round is ``iters`` back-to-back calls
after a barrier. A benchmark, not a test: it checks nothing but that the
results agree.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch.distributed as dist

import omniccl.torch  # noqa: F401 - registers the "omniccl" backend

SIZES = [(8, "8 B", 2000), (1 << 20, "1 MiB", 100), (64 << 20, "64 MiB", 4)]


def time_all_reduce(group, nbytes: int, iters: int, rounds: int) -> float:
    """Median seconds per dist.all_reduce of ``nbytes`` on ``group``."""
    t = torch.ones(nbytes // 4)
    for _ in range(min(iters, 20)):
        dist.all_reduce(t, group=group)
    samples = []
    for _ in range(rounds):
        dist.barrier(group=group)
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t, group=group)
        samples.append((time.perf_counter() - start) / iters)
    return statistics.median(samples)


def make_model(kind: str) -> tuple[torch.nn.Module, int, int]:
    """The model of a DDP row, its input width and batch size."""
    if kind == "mlp":
        return torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512)), 512, 32
    return torch.nn.Linear(2048, 2048), 2048, 1


def time_ddp_step(group, rounds: int, kind: str, steps: int = 10) -> float:
    """Median seconds per DDP training step of model ``kind`` (make_model)."""
    torch.manual_seed(0)
    net, width, batch = make_model(kind)
    model = torch.nn.parallel.DistributedDataParallel(net, process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(batch, width), torch.randn(batch, width)

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    samples = []
    for _ in range(rounds):
        dist.barrier(group=group)
        start = time.perf_counter()
        for _ in range(steps):
            step()
        samples.append((time.perf_counter() - start) / steps)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--csv", help="also write the rows to this CSV file (rank 0)")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    groups = {"gloo": None, "omniccl": dist.new_group(backend="omniccl")}
    rank, size = dist.get_rank(), dist.get_world_size()
    rows = []
    for nbytes, label, iters in SIZES:
        row = {"what": f"all_reduce {label}", "ranks": size}
        for name, group in groups.items():
            row[name] = time_all_reduce(group, nbytes, iters, args.rounds)
        rows.append(row)
    for kind, label in (("mlp", "DDP step (4 MB grads)"), ("wide", "DDP step (16 MB, batch 1)")):
        row = {"what": label, "ranks": size}
        for name, group in groups.items():
            row[name] = time_ddp_step(group, args.rounds, kind)
        rows.append(row)
    if rank == 0:
        print(f"torch {torch.__version__}, {size} ranks")
        print(f"{'operation':26} {'gloo':>12} {'omniccl':>12} {'gloo/omniccl':>13}")
        for r in rows:
            print(f"{r['what']:26} {r['gloo'] * 1e6:10.1f}us {r['omniccl'] * 1e6:10.1f}us "
                  f"{r['gloo'] / r['omniccl']:12.2f}x")
        if args.csv:
            with open(args.csv, "a") as f:
                for r in rows:
                    f.write(f"{r['what']},{r['ranks']},{r['gloo']:.9f},{r['omniccl']:.9f}\n")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
