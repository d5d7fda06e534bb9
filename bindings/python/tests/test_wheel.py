"""The built wheel and sdist on their own: installed into a fresh virtual environment elsewhere.

ci.sh builds the sdist (build_sdist.sh), builds the wheel from it (so the
sdist is shown to build on its own) and names both in OMNICCL_WHEEL and
OMNICCL_SDIST. Without them (a developer's ``pytest``) these tests are
skipped, visibly.
"""

import os
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

WHEEL = os.environ.get("OMNICCL_WHEEL")
SDIST = os.environ.get("OMNICCL_SDIST")
needs_wheel = pytest.mark.skipif(not WHEEL, reason="OMNICCL_WHEEL not set (ci.sh sets it)")
needs_sdist = pytest.mark.skipif(not SDIST, reason="OMNICCL_SDIST not set (ci.sh sets it)")

PROGRAM = textwrap.dedent("""
    import array, omniccl
    omniccl.init_process_group()
    x = array.array("d", [omniccl.get_rank() + 1.0])
    omniccl.all_reduce(x)
    omniccl.COMM_WORLD.Allreduce(omniccl.IN_PLACE, [x, "d"], op=omniccl.MAX)
    print("SUM", x[0], omniccl.__file__)
    omniccl.destroy_process_group()
""")


def _clean_env():
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env["OMNICCL_TIMEOUT"] = "30s"
    return env


@needs_wheel
def test_wheel_installs_and_runs_in_a_fresh_venv_elsewhere(tmp_path):
    venv = tmp_path / "elsewhere" / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120, stdin=subprocess.DEVNULL)
    py = venv / "bin" / "python"
    # --no-deps: nothing from PyPI or the build tree; the package needs no numpy to run.
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--no-deps", WHEEL], check=True, timeout=300,
                   stdin=subprocess.DEVNULL)
    work = tmp_path / "run"
    work.mkdir()
    (work / "prog.py").write_text(PROGRAM)
    launcher = venv / "bin" / "omniccl-run"
    assert launcher.is_file(), "the omniccl-run console script is not installed"
    out = subprocess.run([str(launcher), "-n", "2", "--timeout", "120", "prog.py"], cwd=str(work),
                         capture_output=True, text=True, timeout=180, env=_clean_env(), stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = [line for line in out.stdout.splitlines() if "SUM" in line]
    assert len(lines) == 2 and all("SUM 3.0" in line for line in lines), out.stdout
    assert all(str(venv) in line for line in lines), "imported omniccl from somewhere else: " + out.stdout
    # The extension finds the bundled library by $ORIGIN alone.
    ldd = subprocess.run(["ldd", *map(str, (venv / "lib").glob("python3*/site-packages/omniccl/_omniccl*.so"))],
                         capture_output=True, text=True, timeout=60)
    libline = [line for line in ldd.stdout.splitlines() if "libomniccl.so.1" in line]
    assert libline and str(venv) in libline[0], ldd.stdout


@needs_wheel
def test_wheel_carries_the_library_stubs_and_launcher():
    names = zipfile.ZipFile(WHEEL).namelist()
    assert "omniccl/libomniccl.so.1" in names
    assert "omniccl/py.typed" in names and "omniccl/_omniccl.pyi" in names
    assert "omniccl/torch/__init__.py" in names  # the PyTorch backend
    assert any(n.startswith("omniccl/_omniccl") and n.endswith(".so") for n in names)
    entry = [n for n in names if n.endswith("entry_points.txt")]
    assert entry, names
    assert "omniccl-run = omniccl.run:main" in zipfile.ZipFile(WHEEL).read(entry[0]).decode()


@needs_wheel
def test_auditwheel_reports_a_manylinux_tag():
    try:
        import auditwheel  # noqa: F401
    except ImportError:
        pytest.skip("auditwheel is not installed (ci.sh installs it)")
    out = subprocess.run([sys.executable, "-m", "auditwheel", "show", WHEEL], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "manylinux_" in out.stdout, out.stdout


@needs_sdist
def test_sdist_carries_the_cpp_sources():
    with tarfile.open(SDIST) as tar:
        names = tar.getnames()
    top = names[0].split("/")[0]
    for needed in ("omniccl-src/CMakeLists.txt", "omniccl-src/capi/include/omniccl/omniccl.h",
                   "omniccl-src/core/CMakeLists.txt", "omniccl-src/kernels/CMakeLists.txt", "CMakeLists.txt",
                   "pyproject.toml", "omniccl/__init__.py"):
        assert f"{top}/{needed}" in names, needed
    assert Path(SDIST).name.startswith("omniccl-")
