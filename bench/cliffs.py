#!/usr/bin/env python3
"""Finds size cliffs: points whose time per operation is more than 1.5x that
of the next larger size (issue 12, item 3).

Runs omniccl-bench REPS times over 8 B .. 64 KiB (every power of two) for
every collective, alternating, takes the median time per point, and prints
one row per collective with each time and each ratio t(s) / t(2s) above the
limit. Exits 1 when a cliff is found.

  python3 bench/cliffs.py [--build build] [--ranks 2] [--reps 3] [--rt]

--rt runs the ranks under SCHED_FIFO priority 1 (chrt, root only), so that a
machine busy with other work (compilers) does not decide the timings.
"""
import argparse
import collections
import statistics
import subprocess
import sys

SIZES = [8 << i for i in range(14)]  # 8 B .. 64 KiB
COLLS = "allreduce,allgather,bcast,reduce,reduce_scatter,alltoall,gather,scatter"
LIMIT = 1.5


def run_once(args):
    cmd = [f"{args.build}/tools/omniccl-run", "-n", str(args.ranks), "--no-prefix",
           f"{args.build}/tools/omniccl-bench", "--coll", COLLS, "--sizes",
           ",".join(str(s) for s in SIZES), "-n", str(args.iters), "-w", str(args.iters // 10), "--csv"]
    if args.rt:
        cmd = ["chrt", "-f", "1"] + cmd
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600).stdout
    points = {}
    for line in out.splitlines():
        f = line.split(",")
        if len(f) < 10 or f[0] == "peer":
            continue
        # bytes column: whole buffer for some collectives; key by position.
        points.setdefault(f[2], []).append(float(f[8]))
    return points


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--rt", action="store_true")
    args = ap.parse_args()
    runs = collections.defaultdict(list)  # coll -> list of per-run time lists
    for _ in range(args.reps):
        for coll, times in run_once(args).items():
            runs[coll].append(times)
    cliffs = 0
    for coll, reps in runs.items():
        med = [statistics.median(r[i] for r in reps) for i in range(len(SIZES))]
        row = " ".join(f"{s}:{t:.2f}" for s, t in zip(SIZES, med))
        bad = [f"{SIZES[i]} B {med[i]:.2f} us = {med[i] / med[i + 1]:.2f}x {SIZES[i + 1]} B"
               for i in range(len(SIZES) - 1) if med[i] > LIMIT * med[i + 1]]
        cliffs += len(bad)
        print(f"{coll:15s} {row}")
        for b in bad:
            print(f"  CLIFF {b}")
    print(f"{cliffs} cliff(s) over {args.reps} run(s), {args.ranks} ranks, median time per operation (us)")
    return 1 if cliffs else 0


if __name__ == "__main__":
    sys.exit(main())
