"""Collectives on CUDA arrays from PyTorch and CuPy, across processes (marker ``gpu``).

Ranks share the machine's GPUs (rank r uses GPU r % count), so one GPU is
enough. Each test is skipped, visibly, where the interpreter has no CUDA
PyTorch (or no CuPy) with a GPU, or where this omniccl build has no CUDA.
Expected values are written by hand, never computed by OmniCCL.
"""

import subprocess
import sys

import pytest

from conftest import describe, run_ranks

NO_CUDA = "this build of OmniCCL has no CUDA support"

pytestmark = pytest.mark.gpu

_PROBE = {
    "torch": "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)",
    "cupy": "import cupy, sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 else 3)",
}


def _require(backend):
    """Skips unless ``backend`` imports with a GPU in this interpreter."""
    try:
        probe = subprocess.run([sys.executable, "-c", _PROBE[backend]], capture_output=True, text=True,
                               timeout=120, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.skip(f"{backend} did not answer within 120 s")
    if probe.returncode != 0:
        pytest.skip(f"no {backend} with a GPU here: {(probe.stderr.strip().splitlines() or ['no GPU'])[-1]}")


def _run(size, scenario, args):
    """Runs the scenario; skips (visibly) where this omniccl was built without CUDA."""
    results = run_ranks(size, scenario, args, timeout=240, check=False)
    if any(NO_CUDA in r.stderr for r in results):
        pytest.skip(f"{NO_CUDA} (pip install ./bindings/python -C cmake.define.OMNICCL_CUDA=ON ...)")
    assert all(r.returncode == 0 for r in results), describe(results)
    return results


@pytest.mark.parametrize("size", [2, 4])
def test_torch_cuda_tensors(tmp_path, size):
    _require("torch")
    results = _run(size, "torch_cuda", {"init_method": f"file://{tmp_path}/init"})
    # rank 0 also checks the reduce's result (10 checks), the others 9; a failed check raises in the rank
    assert [r.result["checks"] for r in results] == [10] + [9] * (size - 1), [r.result for r in results]


@pytest.mark.parametrize("size", [2, 3])
def test_cupy_arrays(size):
    _require("cupy")
    results = _run(size, "cupy_cuda", {})
    assert all(r.result and r.result["checks"] == 4 for r in results), [r.result for r in results]


@pytest.mark.parametrize("size", [2, 3])
def test_torch_registered_windows(tmp_path, size):
    _require("torch")
    results = _run(size, "torch_cuda_windows", {"init_method": f"file://{tmp_path}/init"})
    assert all(r.result["checks"] == 7 for r in results), [r.result for r in results]
