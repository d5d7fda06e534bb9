"""torch.distributed habits with real torch tensors (torch from the environment or Debian's python3-torch).

The ranks run under an interpreter that has torch: this one if it imports
torch, else /usr/bin/python3 (Debian's python3-torch) with only the
installed omniccl package added to its path (Debian's own numpy stays).
The test is skipped, visibly, where neither has torch.
"""

import pytest

from conftest import run_ranks


@pytest.mark.parametrize("size", [2, 3])
def test_torch_distributed_code_runs_unchanged(torch_python, tmp_path, size):
    python, env = torch_python
    results = run_ranks(size, "torch_habits", {"init_method": f"file://{tmp_path}"}, python=python, env=env,
                        timeout=120)
    assert all(r.result["checks"] == 6 for r in results), [r.result for r in results]
