#!/usr/bin/env python3
"""Runs mpi4py's own collective and point-to-point unit tests against OmniCCL and against mpi4py.

    python run_suite.py [--ranks 2] [--sdist DIR] [--only omniccl|mpi4py]

DIR is an unpacked mpi4py sdist (``pip download --no-deps --no-binary :all:
mpi4py``, then tar xzf); its test/ folder holds the test files. For OmniCCL,
the tests import the stand-in ``mpi4py`` package next to this file (a map
of names onto omniccl) and run under ``python -m omniccl.run``; for mpi4py
they run under ``mpirun`` with the real mpi4py (needs Open MPI and
``pip install mpi4py``). Prints, per file, the tests run, passed, failed,
errored and skipped on rank 0 for each, and the totals.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

FILES = ["test_cco_buf", "test_cco_obj", "test_cco_vec", "test_p2p_buf", "test_p2p_obj"]
HERE = Path(__file__).resolve().parent


def parse(output):
    """(run, failures, errors, skipped) from unittest's summary on rank 0 (the first printed)."""
    ran = re.search(r"^Ran (\d+) tests?", output, re.M)
    if not ran:
        return None
    tail = output[ran.end():]
    status = re.search(r"^(OK|FAILED)(?: \((.*)\))?", tail, re.M)
    counts = {"failures": 0, "errors": 0, "skipped": 0}
    if status and status.group(2):
        for part in status.group(2).split(","):
            k, _, v = part.strip().partition("=")
            if k in counts:
                counts[k] = int(v)
    return int(ran.group(1)), counts["failures"], counts["errors"], counts["skipped"]


def run(which, test_dir, f, ranks, timeout):
    env = dict(os.environ)
    if which == "omniccl":
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(test_dir)])
        env.setdefault("OMNICCL_TIMEOUT", "20s")
        cmd = [sys.executable, "-m", "omniccl.run", "-n", str(ranks), "--timeout", str(timeout),
               str(test_dir / f"{f}.py")]
    else:
        env["PYTHONPATH"] = str(test_dir)
        mpirun = shutil.which("mpirun")
        if mpirun is None:
            return None, "mpirun not found"
        cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-n", str(ranks), sys.executable,
               str(test_dir / f"{f}.py")]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 30, env=env, cwd=str(test_dir),
                           stdin=subprocess.DEVNULL)
        out = p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
        return None, "timed out\n" + out[-2000:]
    return parse(out), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--sdist", type=Path, required=True, help="an unpacked mpi4py sdist")
    ap.add_argument("--only", choices=["omniccl", "mpi4py"])
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--logs", type=Path, help="folder to write each run's output to")
    args = ap.parse_args()
    test_dir = args.sdist / "test"
    kinds = [args.only] if args.only else ["omniccl", "mpi4py"]
    totals = {k: [0, 0] for k in kinds}
    print(f"{'file':<14}" + "".join(f"{k + ' pass/run (fail err skip)':>36}" for k in kinds))
    for f in FILES:
        row = f"{f:<14}"
        for k in kinds:
            res, out = run(k, test_dir, f, args.ranks, args.timeout)
            if args.logs:
                args.logs.mkdir(parents=True, exist_ok=True)
                (args.logs / f"{k}_{f}.log").write_text(out)
            if res is None:
                row += f"{'no result':>36}"
                continue
            ran, fail, err, skip = res
            passed = ran - fail - err - skip
            totals[k][0] += passed
            totals[k][1] += ran
            row += f"{f'{passed}/{ran} ({fail} {err} {skip})':>36}"
        print(row, flush=True)
    print(f"{'total':<14}" + "".join(f"{f'{p}/{r}':>36}" for p, r in totals.values()))


if __name__ == "__main__":
    main()
