"""examples/python/*.py run under ``python -m omniccl.run -n 4`` and print the output their docstring documents."""

import re

import pytest

from conftest import EXAMPLES, run_launcher

NAMES = ["hello_all_reduce.py", "tutorial.py", "ddp_average.py", "mpi_style.py"]


def documented(path):
    """The "rank N: ..." lines after "Output with 4 ranks" (check_output.sh's rule)."""
    lines, inside = [], False
    for line in path.read_text().splitlines():
        if "Output with 4 ranks" in line:
            inside = True
            continue
        if inside:
            m = re.search(r"rank [0-9]+: .*", line)
            if not m:
                break
            lines.append(m.group(0))
    return sorted(lines)


@pytest.mark.parametrize("name", NAMES)
def test_example(name):
    path = EXAMPLES / name
    want = documented(path)
    assert want, f"{name} documents no output"
    p = run_launcher(["-n", "4", "--timeout", "120", str(path)], timeout=150)
    assert p.returncode == 0, p.stdout + p.stderr
    got = sorted(re.sub(r"^\[\d+\] ", "", line) for line in p.stdout.splitlines() if re.match(r"^\[\d+\] rank ", line))
    assert got == want, p.stdout + p.stderr


def test_cuda_example_runs_or_says_why_not():
    """cuda_all_reduce.py needs CuPy or CUDA PyTorch and a GPU: it runs as documented, or exits 77 saying why."""
    path = EXAMPLES / "cuda_all_reduce.py"
    p = run_launcher(["-n", "4", "--timeout", "120", str(path)], timeout=150)
    if p.returncode == 77 and "SKIPPED: " in p.stdout:
        pytest.skip("cuda_all_reduce.py: " + p.stdout.split("SKIPPED: ", 1)[1].splitlines()[0])
    assert p.returncode == 0, p.stdout + p.stderr
    got = sorted(re.sub(r"^\[\d+\] ", "", line) for line in p.stdout.splitlines() if re.match(r"^\[\d+\] rank ", line))
    assert got == documented(path), p.stdout + p.stderr


def test_readme_example_is_ten_lines():
    code = [line for line in (EXAMPLES / "hello_all_reduce.py").read_text().split('"""', 2)[2].splitlines()
            if line.strip()]
    assert len(code) <= 10
