#!/usr/bin/env python3
"""bench/report_spread_test.py - report.py --spread names every library's spread.

Writes three results folders by hand (shm2 only: OmniCCL and Open MPI at
16 MiB, two collectives; MPICH in one run only) and checks what report.py
prints and writes: OmniCCL's spread target rows, and the table of every
library's run-to-run spread (the machine's share of it), with the numbers
worked out below by hand. Exit status 0 when all hold, 1 otherwise.

Usage: report_spread_test.py [REPORT_PY] (default: report.py beside it)
"""

import os
import subprocess
import sys
import tempfile

HEADER = "peer,transport,collective,ranks,bytes,count,dtype,iters,time_us,time_max_us,algbw_GBps,busbw_GBps,check"
MIB16 = 16 << 20

# run -> library -> collective -> time (us) at 16 MiB.
RUNS = [
    {"omniccl": {"allreduce": 1000, "bcast": 500}, "openmpi": {"allreduce": 100, "bcast": 100},
     "mpich": {"allreduce": 900}},
    {"omniccl": {"allreduce": 1100, "bcast": 1000}, "openmpi": {"allreduce": 110, "bcast": 105}},
    {"omniccl": {"allreduce": 1200, "bcast": 600}, "openmpi": {"allreduce": 130, "bcast": 120}},
]
# By hand: largest / smallest - 1.
#   OmniCCL allreduce 1200/1000 -> 20 %, bcast 1000/500 -> 100 %: 1 of 2 within 25 %,
#     median 60 %, largest 100 % (bcast).
#   Open MPI allreduce 130/100 -> 30 %, bcast 120/100 -> 20 %: 1 of 2, median 25 %,
#     largest 30 % (allreduce).
#   MPICH: one run only -> no spread.
EXPECTED_MD = [
    "| shm2 | omniccl | 3 | 1 of 2 | 60 % | 100 % (bcast) |",
    "| shm2 | openmpi | 3 | 1 of 2 | 25 % | 30 % (allreduce) |",
]


def write_run(root, run):
    """One results folder holding shm2/<library>.csv."""
    os.makedirs(os.path.join(root, "shm2"))
    for lib, colls in run.items():
        with open(os.path.join(root, "shm2", lib + ".csv"), "w") as f:
            f.write(HEADER + "\n")
            for coll, us in colls.items():
                f.write("%s,shm,%s,2,%d,%d,float32,20,%.3f,%.3f,1.0,1.0,0\n" % (lib, coll, MIB16, MIB16 // 4, us, us))


def main(argv):
    """Runs report.py on the hand-written folders and checks its output."""
    report = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "report.py")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        dirs = []
        for i, run in enumerate(RUNS):
            d = os.path.join(tmp, "run%d" % i)
            write_run(d, run)
            dirs.append(d)
        md = os.path.join(tmp, "spread.md")
        p = subprocess.run([sys.executable, report, dirs[2], "--markdown", md, "--spread", dirs[0], dirs[1]],
                           capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            failures.append("report.py exited %d: %s" % (p.returncode, p.stderr))
        with open(md) as f:
            text = f.read()
        for line in EXPECTED_MD:
            if line not in text:
                failures.append("spread.md lacks %r" % line)
        if "mpich" in text.split("Run-to-run spread of every library")[-1].split("\n\n")[1]:
            failures.append("MPICH (one run) has a spread row")
        for want in ("R7 shm2: 16 MiB run-to-run spread <= 25% (3 runs) | allreduce | 16 MiB | 1000-1200 us",
                     "| 20 % | <= 25 % | PASS |", "| 100 % | <= 25 % | MISS |"):
            if want not in text:
                failures.append("spread.md lacks %r" % want)
        if "Run-to-run spread of every library" not in p.stdout:
            failures.append("the printed report lacks the libraries' spread")
    for f in failures:
        print("FAIL: " + f)
    print("report_spread_test: %d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
