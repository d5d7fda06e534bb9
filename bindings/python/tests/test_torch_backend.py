"""The ``omniccl`` PyTorch backend: ``dist.init_process_group("omniccl")`` under torchrun.

The ranks run torch_backend_worker.py under an interpreter that has torch
(see conftest.torch_python: this one, or Debian's python3-torch); the tests
are skipped, saying why, where there is none. Every rank talks over
127.0.0.1 only. Each test is bounded in time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLES, TESTS, free_port, run_ranks

WORKER = TESTS / "torch_backend_worker.py"


def torchrun(python, env, scenario, nproc, out_dir: Path, timeout=150):
    """Runs ``torchrun --nproc_per_node NPROC worker SCENARIO``; returns each rank's JSON result."""
    e = dict(os.environ)
    e.pop("PYTHONPATH", None)
    e.update(env, OMNICCL_TEST_OUT=str(out_dir), OMNICCL_TIMEOUT="60s", OMNICCL_SOCKET_ADDR="127.0.0.1",
             OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    # --redirects/--tee: Debian 12's torch 1.13 on Python 3.11 cannot parse its own default
    # (see tests/bootstrap/torchrun_test.sh).
    cmd = [python, "-m", "torch.distributed.run", "--redirects", "1", "--tee", "1", "--nnodes", "1",
           "--nproc_per_node", str(nproc), "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
           "--max_restarts", "0", str(WORKER), scenario]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e, stdin=subprocess.DEVNULL)
    results = []
    for rank in range(nproc):
        path = out_dir / f"rank{rank}.json"
        results.append(json.loads(path.read_text()) if path.exists() else None)
    report = f"torchrun exit {proc.returncode}\n[stdout]\n{proc.stdout[-6000:]}\n[stderr]\n{proc.stderr[-8000:]}"
    assert proc.returncode == 0 and all(results), report
    for r in results:
        assert not r["failures"], "\n".join(r["failures"]) + "\n" + report
    return results


def test_every_operation_under_torchrun(torch_python, tmp_path):
    python, env = torch_python
    results = torchrun(python, env, "ops", 3, tmp_path)
    assert all(r["checks"] >= 55 for r in results), results


def test_ddp_and_gradient_averaging_match_gloo(torch_python, tmp_path):
    python, env = torch_python
    results = torchrun(python, env, "ddp", 2, tmp_path)
    assert all(r["max_difference"] == {"ddp": 0.0, "ddp averaging": 0.0} for r in results), results


def test_dead_peer_raises_in_the_survivors(torch_python, tmp_path):
    # The ranks meet through a FileStore (init_method="file://...") here, not torchrun's TCPStore.
    python, env = torch_python
    extra = {**env, "OMNICCL_TIMEOUT": "60s", "OMNICCL_SOCKET_ADDR": "127.0.0.1",
             "OMNICCL_TEST_INIT_FILE": str(tmp_path / "store")}
    results = run_ranks(3, "peer_dies", python=python, env=extra, timeout=120, check=False, script=WORKER)
    assert results[2].returncode == 3, [r.stderr[-2000:] for r in results]
    for r in results[:2]:
        res = r.result
        assert r.returncode == 0 and res and not res["failures"], (r.stdout[-3000:], r.stderr[-3000:])
        assert res["error"] and res["seconds"] < 30, res


@pytest.mark.gpu
def test_cuda_tensors(torch_python, tmp_path):
    python, env = torch_python
    probe = subprocess.run([python, "-c", "import torch; print(torch.cuda.device_count())"], capture_output=True,
                           text=True, timeout=60, env={**os.environ, **env}, stdin=subprocess.DEVNULL)
    if probe.returncode != 0 or int(probe.stdout.strip() or 0) < 1:
        pytest.skip("gpu: no CUDA device visible to torch; the CUDA paths of the omniccl backend are not run")
    torchrun(python, env, "cuda", 2, tmp_path)


EXAMPLE = EXAMPLES / "torch_backend.py"


def documented_output(path):
    """The "rank N: ..." lines after "Output with 2 ranks" in the example's docstring."""
    text = path.read_text().split("Output with 2 ranks", 1)[1].split('"""', 1)[0]
    return sorted(m.group(0) for m in re.finditer(r"rank [0-9]+: .*", text))


def printed_output(stdout):
    return sorted(m.group(0) for m in re.finditer(r"rank [0-9]+: .*", stdout))


def test_tutorial_example_under_torchrun(torch_python):
    python, env = torch_python
    e = dict(os.environ)
    e.pop("PYTHONPATH", None)
    e.update(env, OMNICCL_SOCKET_ADDR="127.0.0.1", OMP_NUM_THREADS="1")
    cmd = [python, "-m", "torch.distributed.run", "--redirects", "1", "--tee", "1", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()), str(EXAMPLE)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=150, env=e, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert printed_output(proc.stdout) == documented_output(EXAMPLE), proc.stdout


# Open MPI's own traffic on loopback only: its runtime's messages between mpirun and the ranks
# (oob) and, were the ranks to call MPI, its byte transfer layers (btl); the ranks' torch and
# OmniCCL traffic goes to MASTER_ADDR and OMNICCL_SOCKET_ADDR, both 127.0.0.1.
# --oversubscribe: more ranks than cores is allowed (CI has 2). --allow-run-as-root: CI runs
# as root, which Open MPI refuses otherwise.
MPIRUN_LOOPBACK = ["--mca", "oob_tcp_if_include", "lo", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"]


def mpirun(python, env, nproc, program, out_dir: Path, timeout=150):
    """Runs ``mpirun -n NPROC python PROGRAM`` (Open MPI) on loopback, bounded in time.

    Returns (exit status, the ranks' stdout, mpirun's stdout and stderr). Each rank's stdout
    is read from its own file (``--output-filename``): mpirun's own stdout interleaves the
    ranks' writes, even within a line.
    """
    e = dict(os.environ)
    e.pop("PYTHONPATH", None)
    e.update(env, OMNICCL_SOCKET_ADDR="127.0.0.1", OMNICCL_TIMEOUT="60s", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    cmd = ["mpirun", "--oversubscribe", "-n", str(nproc), *MPIRUN_LOOPBACK, "--output-filename", str(out_dir),
           "-x", "MASTER_ADDR=127.0.0.1",
           "-x", f"MASTER_PORT={free_port()}", "-x", "OMNICCL_SOCKET_ADDR", "-x", "OMNICCL_TIMEOUT",
           "-x", "OMP_NUM_THREADS", "-x", "PYTHONUNBUFFERED"]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    if "PYTHONPATH" in e:
        cmd += ["-x", "PYTHONPATH"]
    # A session of its own, so that a timeout ends mpirun and every rank it started, not mpirun alone.
    proc = subprocess.Popen(cmd + [python, str(program)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=e, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"mpirun -n {nproc} {program.name} did not finish within {timeout} s\n{out[-4000:]}{err[-4000:]}")
    # Open MPI 4.1 writes DIR/1/rank.N/stdout.
    ranks = "".join(f.read_text() for f in sorted(out_dir.rglob("stdout")))
    return proc.returncode, ranks, out, err


def open_mpi():
    """Skips the test, saying why, unless Open MPI's mpirun is installed (the flags above are Open MPI's)."""
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun is not installed (apt-get install openmpi-bin)")
    version = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL).stdout
    if "Open MPI" not in version:
        pytest.skip(f"mpirun is not Open MPI's ({version.strip()[:80]}); the test passes Open MPI's options")


def test_tutorial_example_under_mpirun(torch_python, tmp_path):
    open_mpi()
    python, env = torch_python
    rc, ranks, out, err = mpirun(python, env, 2, EXAMPLE, tmp_path)
    assert rc == 0, out[-4000:] + err[-4000:]
    assert printed_output(ranks) == documented_output(EXAMPLE), (ranks, out[-4000:], err[-4000:])


def _launcher_module():
    # Loaded by path: omniccl.torch itself imports torch, which this interpreter may lack.
    import importlib.util

    import omniccl

    path = Path(omniccl.__file__).parent / "torch" / "_launcher.py"
    spec = importlib.util.spec_from_file_location("omniccl_torch_launcher", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("environ, want", [
    ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
      "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
     {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}),
    ({"PMI_RANK": "0", "PMI_SIZE": "2"}, {"RANK": "0", "WORLD_SIZE": "2"}),
    ({"SLURM_PROCID": "3", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "2(x4)"},
     {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"}),
    ({"RANK": "0", "WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}, {}),
    ({}, {}),
])
def test_torchrun_variables_from_other_launchers(environ, want):
    assert _launcher_module().torch_env_from_launcher(environ) == want


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-rs"]))
