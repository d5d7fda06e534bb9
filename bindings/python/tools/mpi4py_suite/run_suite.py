#!/usr/bin/env python3
"""Runs mpi4py's own collective and point-to-point unit tests against OmniCCL and against mpi4py.

    python run_suite.py --sdist DIR [--ranks 2] [--only omniccl|mpi4py] [--no-fake-gpu] [--files test_p2p_buf ...]

DIR is an unpacked mpi4py sdist (``pip download --no-deps --no-binary :all:
mpi4py``, then tar xzf); its test/ folder holds the test files (FILES: the
blocking and non-blocking collective files and the point-to-point ones). For OmniCCL,
the tests import the stand-in ``mpi4py`` package next to this file (a map
of names onto omniccl) and run under ``python -m omniccl.run``; for mpi4py
they run under ``mpirun`` with the real mpi4py (needs Open MPI and
``pip install mpi4py``). --no-fake-gpu drops the test suite's two "fake
GPU" array backends (host memory announced as CUDA memory through
__cuda_array_interface__, which OmniCCL refuses by design) from every
test's loop over array types, for both libraries. Prints, per file, the tests run, passed, failed,
errored and skipped on rank 0 for each, and the totals.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FILES = ["test_cco_buf", "test_cco_obj", "test_cco_vec", "test_p2p_buf", "test_p2p_obj", "test_cco_nb_buf",
         "test_cco_nb_vec"]
HERE = Path(__file__).resolve().parent


def parse(output):
    """(run, failed, skipped) on rank 0: tests run, tests with any error or failure, tests skipped.

    unittest counts each failing subTest; a test counts once here, as failed
    if any of its subtests failed.
    """
    if "\n[0] " in "\n" + output:  # omniccl.run prefixes each line with its rank
        output = "\n".join(line[4:] for line in output.splitlines() if line.startswith("[0] "))
    ran = re.search(r"^Ran (\d+) tests?", output, re.M)
    if not ran:
        return None
    body = output[:ran.start()]
    failed = set(re.findall(r"^(?:ERROR|FAIL): (\S+ \(\S+\))", body, re.M))
    skipped = re.search(r"skipped=(\d+)", output[ran.end():])
    return int(ran.group(1)), len(failed), int(skipped.group(1)) if skipped else 0


WRAPPER = """
import runpy, sys
import arrayimpl
arrayimpl.ArrayBackends[:] = [b for b in arrayimpl.ArrayBackends if not b.__name__.startswith("FakeGPU")]
sys.argv[0] = {path!r}
runpy.run_path({path!r}, run_name="__main__")
"""


def run(which, test_dir, f, ranks, timeout, no_fake_gpu=False, scratch=None):
    env = dict(os.environ)
    program = test_dir / f"{f}.py"
    if no_fake_gpu:
        program = scratch / f"{f}_no_fake_gpu.py"
        program.write_text(WRAPPER.format(path=str(test_dir / f"{f}.py")))
    if which == "omniccl":
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(test_dir)])
        env.setdefault("OMNICCL_TIMEOUT", "20s")
        cmd = [sys.executable, "-m", "omniccl.run", "-n", str(ranks), "--timeout", str(timeout),
               str(program)]
    else:
        env["PYTHONPATH"] = str(test_dir)
        mpirun = shutil.which("mpirun")
        if mpirun is None:
            return None, "mpirun not found"
        cmd = [mpirun, "--oversubscribe", "-n", str(ranks), sys.executable, str(program)]
        if os.geteuid() == 0:
            cmd.insert(1, "--allow-run-as-root")
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
    ap.add_argument("--files", nargs="+", choices=FILES, default=FILES, help="test files to run (default: all)")
    ap.add_argument("--no-fake-gpu", action="store_true",
                    help="leave out the fake-GPU (__cuda_array_interface__ on host memory) array backends")
    args = ap.parse_args()
    test_dir = args.sdist / "test"
    kinds = [args.only] if args.only else ["omniccl", "mpi4py"]
    scratch = Path(tempfile.mkdtemp(prefix="mpi4py-suite-"))
    totals = {k: [0, 0] for k in kinds}
    print(f"{'file':<14}" + "".join(f"{k + ' pass/run (failed skipped)':>36}" for k in kinds))
    for f in args.files:
        row = f"{f:<14}"
        for k in kinds:
            res, out = run(k, test_dir, f, args.ranks, args.timeout, args.no_fake_gpu, scratch)
            if args.logs:
                args.logs.mkdir(parents=True, exist_ok=True)
                (args.logs / f"{k}_{f}.log").write_text(out)
            if res is None:
                row += f"{'no result':>36}"
                continue
            ran, failed, skip = res
            passed = ran - failed - skip
            totals[k][0] += passed
            totals[k][1] += ran
            row += f"{f'{passed}/{ran} ({failed} {skip})':>36}"
        print(row, flush=True)
    print(f"{'total':<14}" + "".join(f"{f'{p}/{r}':>36}" for p, r in totals.values()))


if __name__ == "__main__":
    main()
