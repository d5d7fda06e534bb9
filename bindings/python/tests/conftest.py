"""Multi-process test harness: run N ranks of a scenario from workers.py.

Each rank is a separate Python process (``python workers.py SCENARIO ARGS``)
with the env:// variables set (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT = a
free port), its output in files (so no rank blocks on a full pipe), and the
whole job bounded in time: a hang fails the test, it never stalls the suite.
A rank reports its result as the last line ``RESULT <json>`` of its stdout.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest

TESTS = Path(__file__).resolve().parent
WORKERS = TESTS / "workers.py"
REPO = TESTS.parents[2]
EXAMPLES = REPO / "examples" / "python"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RankResult:
    """What one rank did."""

    rank: int
    returncode: Optional[int]
    stdout: str
    stderr: str

    @property
    def result(self) -> Any:
        """The JSON value of the rank's last ``RESULT`` line (None if it printed none)."""
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        return None


def describe(results: List[RankResult]) -> str:
    """All ranks' exit codes and output, for failure messages."""
    parts = []
    for r in results:
        parts.append(f"--- rank {r.rank}: exit {r.returncode}\n[stdout]\n{r.stdout[-4000:]}\n"
                     f"[stderr]\n{r.stderr[-6000:]}")
    return "\n".join(parts)


def sigint_default() -> None:
    """``preexec_fn`` of every process the tests start: SIGINT at its default.

    A child inherits an ignored SIGINT (as a shell without job control gives
    its background jobs), and Python then never raises KeyboardInterrupt, so
    the tests that press Ctrl-C would depend on how the suite was started.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def package_path() -> Dict[str, str]:
    """PYTHONPATH for the processes the tests start: none (they import the installed
    omniccl), or OMNICCL_PYTHONPATH, a folder holding an omniccl package that is not
    installed (scripts/gpu-check.sh builds one for a GPU machine's Python)."""
    path = os.environ.get("OMNICCL_PYTHONPATH")
    return {"PYTHONPATH": path} if path else {}


def rank_env(rank: int, size: int, port: int, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment of one rank (torchrun's variables)."""
    env = dict(os.environ)
    env.update(RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(size),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMNICCL_TIMEOUT="30s", PYTHONUNBUFFERED="1",
               PYTHONFAULTHANDLER="1")
    env.pop("PYTHONPATH", None)
    env.update(package_path())
    if extra:
        env.update(extra)
    return env


def run_ranks(size: int, scenario: str, args: Optional[Dict[str, Any]] = None, *, timeout: float = 90,
              env: Optional[Dict[str, str]] = None, rank_envs: Optional[Dict[int, Dict[str, str]]] = None,
              check: bool = True, python: Optional[str] = None, script: Optional[Path] = None,
              while_running: Optional[Callable[[List[subprocess.Popen], Path], None]] = None) -> List[RankResult]:
    """Runs ``size`` ranks of ``scenario`` and returns what each did.

    With ``check``, fails the test unless every rank exits 0. ``python``: the
    interpreter (default: this one); ``script``: the rank program (default:
    workers.py), given ``SCENARIO ARGS_JSON``. ``while_running``
    is called with the processes (and the output folder) after they start,
    to send signals for instance.
    """
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="omniccl-test-") as tmp:
        out_dir = Path(tmp)
        procs, files = [], []
        try:
            for rank in range(size):
                e = rank_env(rank, size, port, env)
                if rank_envs and rank in rank_envs:
                    e.update(rank_envs[rank])
                out = open(out_dir / f"{rank}.out", "w+")
                err = open(out_dir / f"{rank}.err", "w+")
                files.append((out, err))
                procs.append(subprocess.Popen(
                    [python or sys.executable, str(script or WORKERS), scenario, json.dumps(args or {})],
                    stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=e, cwd=tmp, preexec_fn=sigint_default))
            if while_running is not None:
                while_running(procs, out_dir)
            deadline = time.monotonic() + timeout
            timed_out = False
            for p in procs:
                try:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    timed_out = True
                    break
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        results = []
        for rank, (p, (out, err)) in enumerate(zip(procs, files)):
            out.seek(0)
            err.seek(0)
            results.append(RankResult(rank, None if timed_out and p.returncode < 0 else p.returncode,
                                      out.read(), err.read()))
            out.close()
            err.close()
    if timed_out:
        pytest.fail(f"{scenario} with {size} ranks did not finish within {timeout} s\n{describe(results)}")
    if check:
        bad = [r for r in results if r.returncode != 0]
        if bad:
            pytest.fail(f"{scenario} with {size} ranks failed\n{describe(results)}")
    return results


def wait_for_line(out_dir: Path, rank: int, text: str, timeout: float = 30) -> None:
    """Waits until rank's stdout contains ``text`` (fails the test after ``timeout``)."""
    deadline = time.monotonic() + timeout
    path = out_dir / f"{rank}.out"
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.05)
    pytest.fail(f"rank {rank} never printed {text!r}")


def run_launcher(args: List[str], *, timeout: float = 60, cwd: Optional[Path] = None,
                 env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    """Runs ``python -m omniccl.run ARGS`` to completion (bounded in time)."""
    e = dict(os.environ)
    e.pop("PYTHONPATH", None)
    e.setdefault("OMNICCL_TIMEOUT", "30s")
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "omniccl.run", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=str(cwd) if cwd else None, env=e, stdin=subprocess.DEVNULL)


def send_signal(proc: subprocess.Popen, sig: int = signal.SIGINT) -> None:
    """Sends a signal to one rank process."""
    proc.send_signal(sig)


# ------------------------------------------------------------------ torch
SYSTEM_PYTHON = "/usr/bin/python3"


def _has_torch(python):
    try:
        return subprocess.run([python, "-c", "import torch"], capture_output=True, timeout=60,
                              stdin=subprocess.DEVNULL).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="session")
def torch_python(tmp_path_factory):
    """(interpreter, extra environment) that imports torch and this omniccl."""
    if _has_torch(sys.executable):
        return sys.executable, package_path()
    import omniccl

    if os.path.exists(SYSTEM_PYTHON) and _has_torch(SYSTEM_PYTHON):
        shim = tmp_path_factory.mktemp("omniccl-path")
        (shim / "omniccl").symlink_to(Path(omniccl.__file__).parent)
        env = {"PYTHONPATH": str(shim)}
        check = subprocess.run([SYSTEM_PYTHON, "-c", "import omniccl, sys; print(omniccl.__file__)"],
                               capture_output=True, text=True, timeout=60, env={**os.environ, **env},
                               stdin=subprocess.DEVNULL)
        if check.returncode == 0:
            return SYSTEM_PYTHON, env
        pytest.skip(f"{SYSTEM_PYTHON} has torch but cannot import this omniccl build: {check.stderr[-500:]}")
    pytest.skip("torch is not installed (pip install torch, or apt-get install python3-torch)")
