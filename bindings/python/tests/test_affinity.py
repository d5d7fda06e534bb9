"""Ranks bound to CPUs, as mpirun binds them: the library's choices follow the cores they have between them.

mpirun binds each of 2 ranks to a core of its own, so each rank's affinity
mask holds one CPU. The library used to compare the host's 2 ranks with that
one CPU, took itself for oversubscribed and then waited without spinning and
sent a 1 MiB broadcast in two copies instead of by reference: 1 MiB
broadcasts took ~220 us in mpirun's processes against ~85 us unbound. Here
each rank binds itself (``os.sched_setaffinity``) before it initialises,
broadcasts 1 MiB with single copy forced on (``OMNICCL_SHM_SINGLE_COPY=1``:
the choice then depends on the oversubscription judgement alone, not on this
machine's calibration), and the INFO log says what the library decided: how
many CPUs the host's ranks have between them and how many payloads went by
reference.
"""
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import free_port, rank_env

RANK_SCRIPT = r"""
import os, sys
import numpy as np
os.sched_setaffinity(0, {int(sys.argv[1])})
import omniccl
omniccl.init_process_group()
rank = omniccl.get_rank()
for i in range(4):
    x = np.full(1 << 18, float(i + 1) if rank == 0 else -1.0, np.float32)  # 1 MiB
    omniccl.broadcast(x, 0)
    assert (x == i + 1).all(), (i, x[:4])
omniccl.destroy_process_group()
print("DONE", flush=True)
"""


def _run_bound(cpus, timeout=60):
    """Runs 2 ranks, rank r bound to cpus[r]; returns each rank's stderr (its INFO log)."""
    port = free_port()
    extra = {"OMNICCL_DEBUG": "INFO", "OMNICCL_SHM_SINGLE_COPY": "1", "OMNICCL_TRANSPORT": "shm"}
    with tempfile.TemporaryDirectory(prefix="omniccl-affinity-") as tmp:
        procs, errs = [], []
        try:
            for rank, cpu in enumerate(cpus):
                err = open(Path(tmp) / f"{rank}.err", "w+")
                errs.append(err)
                procs.append(subprocess.Popen([sys.executable, "-c", RANK_SCRIPT, str(cpu)],
                                              env=rank_env(rank, len(cpus), port, extra), stdout=subprocess.PIPE,
                                              stderr=err, stdin=subprocess.DEVNULL, text=True, cwd=tmp))
            deadline = time.monotonic() + timeout
            outs = [p.communicate(timeout=max(0.1, deadline - time.monotonic()))[0] for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        logs = []
        for e in errs:
            e.seek(0)
            logs.append(e.read())
            e.close()
    for rank, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0 and "DONE" in out, f"rank {rank} (exit {p.returncode}):\n{out}\n{logs[rank][-4000:]}"
    return logs


def _usable_cpus():
    return sorted(os.sched_getaffinity(0))


def _single_copy_possible(logs):
    # Single copy needs process_vm_readv on the peer (same user, ptrace rules).
    return all("single copy on" in log for log in logs)


def _sent_by_reference(log):
    m = re.search(r"shared memory with rank \d+: (\d+) payload\(s\) sent by reference", log)
    assert m, f"no by-reference count in the log:\n{log[-3000:]}"
    return int(m.group(1))


def test_ranks_bound_to_a_core_each_are_not_oversubscribed():
    cpus = _usable_cpus()
    if len(cpus) < 2:
        pytest.skip("this process may use only one CPU")
    logs = _run_bound(cpus[:2])
    for log in logs:
        assert "2 rank(s) of this communicator on this host, on 2 CPU(s)" in log, log[-3000:]
        assert "more ranks than cores" not in log, log[-3000:]
    if not _single_copy_possible(logs):
        pytest.skip("process_vm_readv is not permitted here: no single copy to choose")
    assert _sent_by_reference(logs[0]) > 0, logs[0][-3000:]


def test_ranks_bound_to_one_core_are_oversubscribed():
    cpu = _usable_cpus()[0]
    logs = _run_bound([cpu, cpu])
    for log in logs:
        assert "2 rank(s) of this communicator on this host, on 1 CPU(s)" in log, log[-3000:]
        assert "more ranks than cores" in log, log[-3000:]
    # Oversubscribed, a broadcast keeps two copies even with single copy on.
    assert _sent_by_reference(logs[0]) == 0, logs[0][-3000:]
