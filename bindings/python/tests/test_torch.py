"""torch.distributed habits with real torch tensors (torch from the environment or Debian's python3-torch).

The ranks run under an interpreter that has torch: this one if it imports
torch, else /usr/bin/python3 (Debian's python3-torch) with only the
installed omniccl package added to its path (Debian's own numpy stays).
The test is skipped, visibly, where neither has torch.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import omniccl

from conftest import run_ranks

SYSTEM_PYTHON = "/usr/bin/python3"


def _has_torch(python):
    try:
        return subprocess.run([python, "-c", "import torch"], capture_output=True, timeout=60,
                              stdin=subprocess.DEVNULL).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def torch_python(tmp_path_factory):
    """(interpreter, extra environment) that imports torch and this omniccl."""
    if _has_torch(sys.executable):
        return sys.executable, {}
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


@pytest.mark.parametrize("size", [2, 3])
def test_torch_distributed_code_runs_unchanged(torch_python, tmp_path, size):
    python, env = torch_python
    results = run_ranks(size, "torch_habits", {"init_method": f"file://{tmp_path}"}, python=python, env=env,
                        timeout=120)
    assert all(r.result["checks"] == 6 for r in results), [r.result for r in results]
