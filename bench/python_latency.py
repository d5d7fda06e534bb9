#!/usr/bin/env python3
"""Latency of OmniCCL's Python API next to mpi4py's, in the same processes of one run.

    python bench/python_latency.py [--ranks 2 4] [--sizes 8 1024 65536 1048576] [--seconds 0.3]

Starts each rank count with ``mpirun`` (Open MPI) when mpi4py and mpirun are
present: every rank imports mpi4py (MPI_Init) and creates the OmniCCL
default group from env:// (Open MPI's rank variables, MASTER_ADDR/PORT set
here), then times, op by op and size by size, OmniCCL then mpi4py:

    all_reduce   omniccl.all_reduce(x)              comm.Allreduce(MPI.IN_PLACE, x)
    broadcast    omniccl.broadcast(x, 0)            comm.Bcast(x, 0)
    all_gather   omniccl.all_gather_into_tensor()   comm.Allgather(x, out)
    barrier      omniccl.barrier()                  comm.Barrier()

on float32 numpy arrays (size = bytes per rank). Each cell is the mean time
per call over a loop of about --seconds, the slowest rank's, the median of
--repeats loops. Without mpi4py or mpirun the ranks start with
``python -m omniccl.run`` and only OmniCCL is measured. Prints a table with
the ratio omniccl / mpi4py (below 1: OmniCCL faster); --json writes the rows.

    python bench/python_latency.py --overhead [--ranks 1 2]

measures the Python layer alone, less sensitive to load: in each rank's
process, the blocking C call looped in C (``_omniccl.c_loop_seconds``:
occl_all_reduce, occl_broadcast, occl_barrier on 8 bytes) against each
Python form of the same call, interleaved, the smallest difference over
many short trials (load only adds time), in us per call.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

OPS = ["all_reduce", "broadcast", "all_gather", "barrier"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- one rank
def _loop(fn, seconds: float, sync) -> float:
    """Mean seconds per call of fn over a loop of about `seconds` (calibrated on a short run)."""
    for _ in range(20):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(20):  # the same count on every rank: collectives must match
        fn()
    per_call = (time.perf_counter() - t0) / 20
    iters = sync(max(5, int(seconds / max(per_call, 1e-9))))  # every rank runs the largest count
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


OVERHEAD_FORMS = ["all_reduce", "Allreduce", "broadcast", "Bcast", "barrier", "Barrier", "all_gather",
                  "Allgather"]


def overhead_worker(args) -> None:
    import numpy as np

    import omniccl
    from omniccl import _omniccl

    omniccl.init_process_group()
    world = omniccl.COMM_WORLD
    native = world._native
    x = np.ones(2, np.float32)  # 8 bytes
    out = np.zeros(2 * world.size, np.float32)
    forms = {
        "all_reduce": ("all_reduce", lambda: omniccl.all_reduce(x)),
        "Allreduce": ("all_reduce", lambda: world.Allreduce(omniccl.IN_PLACE, x)),
        "broadcast": ("broadcast", lambda: omniccl.broadcast(x, 0)),
        "Bcast": ("broadcast", lambda: world.Bcast(x, 0)),
        "barrier": ("barrier", omniccl.barrier),
        "Barrier": ("barrier", world.Barrier),
        # no C loop of all_gather: compared with the all_reduce C call (same bytes in)
        "all_gather": ("all_reduce", lambda: omniccl.all_gather_into_tensor(out, x)),
        "Allgather": ("all_reduce", lambda: world.Allgather(x, out)),
    }
    row = {"ranks": world.size}
    for name in OVERHEAD_FORMS:
        c_name, call = forms[name]
        best = c_best = py_best = None
        for _ in range(args.trials):
            c = _omniccl.c_loop_seconds(native, c_name, x, args.iters)
            t0 = time.perf_counter()
            for _ in range(args.iters):
                call()
            py = (time.perf_counter() - t0) / args.iters
            x[:] = 1
            if best is None or py - c < best:
                best, c_best, py_best = py - c, c, py
        row[name] = {"overhead_us": best * 1e6, "c_us": c_best * 1e6, "python_us": py_best * 1e6}
    if world.rank == 0:
        print("ROWS " + json.dumps({"rows": [row], "omniccl": omniccl.__version__}), flush=True)
    omniccl.destroy_process_group()


def run_overhead(args) -> None:
    me = os.path.abspath(__file__)
    rows = []
    for ranks in args.ranks:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        cmd = [sys.executable, "-m", "omniccl.run", "--no-prefix", "-n", str(ranks), me, "--overhead-worker",
               "--iters", str(args.iters), "--trials", str(args.trials)]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout,
                           stdin=subprocess.DEVNULL)
        got = [json.loads(line[5:]) for line in p.stdout.splitlines() if line.startswith("ROWS ")]
        if not got:
            raise SystemExit(f"{' '.join(cmd)} failed (exit {p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        rows += got[0]["rows"]
    print(f"# Python layer over the blocking C call, 8 bytes, us per call (smallest of {args.trials} trials of "
          f"{args.iters} calls; load average {os.getloadavg()[0]:.2f})")
    heads = [str(r["ranks"]) + " ranks: C  python  over" for r in rows]
    print(f"{'form':<12}" + "".join(f"{h:>30}" for h in heads))
    for name in OVERHEAD_FORMS:
        print(f"{name:<12}" + "".join(
            f"{r[name]['c_us']:>12.2f}{r[name]['python_us']:>9.2f}{r[name]['overhead_us']:>9.2f}" for r in rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"overhead": rows, "loadavg": os.getloadavg()}, f, indent=1)


def worker(args) -> None:
    import numpy as np

    import omniccl

    try:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    except ImportError:
        MPI = comm = None
    omniccl.init_process_group()
    world = omniccl.COMM_WORLD
    rank, size = world.rank, world.size

    def sync(value=None):
        world.Barrier()
        if value is None:
            return None
        return world.allreduce(value, op=omniccl.MAX)

    rows = []
    for op in OPS:
        for nbytes in ([0] if op == "barrier" else args.sizes):
            n = max(1, nbytes // 4)
            x = np.ones(n, np.float32)
            out = np.zeros(n * size, np.float32)
            cases = {
                "all_reduce": (lambda: omniccl.all_reduce(x),
                               (lambda: comm.Allreduce(MPI.IN_PLACE, x)) if comm else None),
                "broadcast": (lambda: omniccl.broadcast(x, 0), (lambda: comm.Bcast(x, 0)) if comm else None),
                "all_gather": (lambda: omniccl.all_gather_into_tensor(out, x),
                               (lambda: comm.Allgather(x, out)) if comm else None),
                "barrier": (omniccl.barrier, comm.Barrier if comm else None),
            }
            ours, theirs = cases[op]
            times = {"omniccl": [], "mpi4py": []}
            for _ in range(args.repeats):
                t = _loop(ours, args.seconds, sync)
                times["omniccl"].append(world.allreduce(t, op=omniccl.MAX))
                if theirs is not None:
                    t = _loop(theirs, args.seconds, sync)
                    times["mpi4py"].append(world.allreduce(t, op=omniccl.MAX))
                if op == "all_reduce":
                    x[:] = 1  # keep the values finite
            row = {"op": op, "bytes": nbytes, "ranks": size,
                   "omniccl_us": statistics.median(times["omniccl"]) * 1e6,
                   "mpi4py_us": statistics.median(times["mpi4py"]) * 1e6 if times["mpi4py"] else None}
            rows.append(row)
    if rank == 0:
        print("ROWS " + json.dumps({"rows": rows, "mpi": MPI.Get_library_version().splitlines()[0] if MPI else None,
                                    "omniccl": omniccl.__version__}), flush=True)
    omniccl.destroy_process_group()


# --------------------------------------------------------------------------- the driver
def _has_mpi4py() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return shutil.which("mpirun") is not None


def run_job(ranks: int, args, with_mpi: bool) -> dict:
    me = os.path.abspath(__file__)
    worker_args = ["--worker", "--seconds", str(args.seconds), "--repeats", str(args.repeats), "--sizes",
                   *map(str, args.sizes)]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), PYTHONUNBUFFERED="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(k, None)
    if with_mpi:
        cmd = ["mpirun", "--oversubscribe", "-n", str(ranks), "-x", "MASTER_ADDR", "-x", "MASTER_PORT"]
        if os.geteuid() == 0:
            cmd.insert(1, "--allow-run-as-root")
        cmd += [sys.executable, me, *worker_args]
    else:
        cmd = [sys.executable, "-m", "omniccl.run", "--no-prefix", "-n", str(ranks), me, *worker_args]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout, stdin=subprocess.DEVNULL)
    for line in p.stdout.splitlines():
        if line.startswith("ROWS "):
            return json.loads(line[5:])
    raise SystemExit(f"{' '.join(cmd)} failed (exit {p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")


def _size(n: int) -> str:
    if n == 0:
        return "-"
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 1024, 65536, 1 << 20], help="bytes per rank")
    ap.add_argument("--seconds", type=float, default=0.3, help="length of one timed loop")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--no-mpi4py", action="store_true", help="measure OmniCCL only")
    ap.add_argument("--json", help="write the rows to this file")
    ap.add_argument("--overhead", action="store_true",
                    help="measure the Python layer over the C call (8 B, in one process) instead")
    ap.add_argument("--iters", type=int, default=4000, help="--overhead: calls per trial")
    ap.add_argument("--trials", type=int, default=25, help="--overhead: trials (the smallest difference is kept)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--overhead-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    if args.overhead_worker:
        overhead_worker(args)
        return
    if args.overhead:
        run_overhead(args)
        return
    with_mpi = not args.no_mpi4py and _has_mpi4py()
    if not with_mpi and not args.no_mpi4py:
        print("mpi4py or mpirun not found: measuring OmniCCL only", file=sys.stderr)
    rows, meta = [], {}
    for ranks in args.ranks:
        job = run_job(ranks, args, with_mpi)
        rows += job["rows"]
        meta = job
    print(f"# omniccl {meta.get('omniccl')}; mpi4py over: {meta.get('mpi') or 'not measured'}; "
          f"{os.cpu_count()} CPUs; times in us per call (slowest rank, median of {args.repeats})")
    print(f"{'op':<12}{'size':>9}{'ranks':>6}{'omniccl':>10}{'mpi4py':>10}{'ratio':>8}")
    for r in rows:
        theirs = r["mpi4py_us"]
        ratio = f"{r['omniccl_us'] / theirs:.2f}" if theirs else "n/a"
        theirs_s = f"{theirs:.1f}" if theirs else "n/a"
        print(f"{r['op']:<12}{_size(r['bytes']):>9}{r['ranks']:>6}{r['omniccl_us']:>10.1f}{theirs_s:>10}{ratio:>8}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "mpi": meta.get("mpi"), "omniccl": meta.get("omniccl")}, f, indent=1)


if __name__ == "__main__":
    main()
