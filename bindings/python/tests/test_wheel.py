"""The built wheel and sdist on their own: installed into a fresh virtual environment elsewhere.

ci.sh builds the sdist (build_sdist.sh), builds the wheel from it (so the
sdist is shown to build on its own), repairs that wheel with auditwheel into
a manylinux wheel and names the sdist and the repaired wheel in OMNICCL_SDIST
and OMNICCL_WHEEL. Without them (a developer's ``pytest``) these tests are
skipped, visibly.
"""

import glob
import os
import re
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

WHEEL = os.environ.get("OMNICCL_WHEEL")
SDIST = os.environ.get("OMNICCL_SDIST")
needs_wheel = pytest.mark.skipif(not WHEEL, reason="OMNICCL_WHEEL not set (ci.sh sets it)")
needs_sdist = pytest.mark.skipif(not SDIST, reason="OMNICCL_SDIST not set (ci.sh sets it)")

PROGRAM = textwrap.dedent("""
    import array, sys, omniccl
    omniccl.init_process_group()
    x = array.array("d", [omniccl.get_rank() + 1.0])
    omniccl.all_reduce(x)
    omniccl.COMM_WORLD.Allreduce(omniccl.IN_PLACE, [x, "d"], op=omniccl.MAX)
    print("SUM", x[0], omniccl.__file__, "PYTHON", sys.base_prefix)
    omniccl.destroy_process_group()
""")


def _clean_env():
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env["OMNICCL_TIMEOUT"] = "30s"
    return env


def _run_two_ranks(venv: Path, work: Path) -> List[str]:
    """Runs PROGRAM on two ranks with the venv's omniccl-run; returns the ranks' SUM lines, checked."""
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
    return lines


def _other_python() -> Tuple[Optional[str], List[str]]:
    """Another CPython of this one's version (the wheel's cpXY tag), not the one running the tests.

    The tests run in a venv of the interpreter that built the wheel (ci.sh),
    so "another" is one whose sys.base_prefix differs: Debian's
    /usr/bin/python3.X beside pyenv's, or the other way round. Returns the
    first found (OMNICCL_OTHER_PYTHON first, if set) and every place looked at.
    """
    xy = f"{sys.version_info.major}.{sys.version_info.minor}"
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    places = [os.environ.get("OMNICCL_OTHER_PYTHON", ""), f"/usr/bin/python{xy}", f"/usr/local/bin/python{xy}",
              *sorted(glob.glob(f"{pyenv}/versions/{xy}.*/bin/python{xy}"))]
    places = [p for p in places if p]
    for p in places:
        if not os.access(p, os.X_OK):
            continue
        probe = subprocess.run([p, "-c", "import sys; print(sys.version_info[:2] == %s, sys.base_prefix)"
                                % (tuple(sys.version_info[:2]),)],
                               capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        same_version, _, prefix = probe.stdout.strip().partition(" ")
        if probe.returncode == 0 and same_version == "True" and os.path.realpath(prefix) != os.path.realpath(
                sys.base_prefix):
            return p, places
    return None, places


@needs_wheel
def test_wheel_installs_and_runs_in_a_fresh_venv_elsewhere(tmp_path):
    venv = tmp_path / "elsewhere" / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120, stdin=subprocess.DEVNULL)
    py = venv / "bin" / "python"
    # --no-deps: nothing from PyPI or the build tree; the package needs no numpy to run.
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--no-deps", WHEEL], check=True, timeout=300,
                   stdin=subprocess.DEVNULL)
    _run_two_ranks(venv, tmp_path / "run")
    # The extension finds the bundled library by $ORIGIN alone.
    ldd = subprocess.run(["ldd", *map(str, (venv / "lib").glob("python3*/site-packages/omniccl/_omniccl*.so"))],
                         capture_output=True, text=True, timeout=60)
    libline = [line for line in ldd.stdout.splitlines() if "libomniccl.so.1" in line]
    assert libline and str(venv) in libline[0], ldd.stdout


@needs_wheel
def test_wheel_runs_under_another_python_of_the_same_version(tmp_path):
    """The repaired wheel in a venv made by another interpreter (another build of CPython X.Y) than the
    one that built it: two ranks all-reduce there."""
    other, places = _other_python()
    if other is None:
        pytest.skip(f"no other Python {sys.version_info.major}.{sys.version_info.minor} than the one that built "
                    f"the wheel ({sys.base_prefix}); looked at: {', '.join(places)}")
    venv = tmp_path / "other-python" / "venv"
    # Without pip (Debian splits ensurepip into python3-venv); this pip installs into that venv, and runs
    # under its interpreter (--python), so that interpreter is the one that decides the wheel fits.
    subprocess.run([other, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120,
                   stdin=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
                    "--no-deps", WHEEL], check=True, timeout=300, stdin=subprocess.DEVNULL)
    prefix = subprocess.run([str(venv / "bin" / "python"), "-c", "import sys; print(sys.base_prefix)"],
                            capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    lines = _run_two_ranks(venv, tmp_path / "run")
    assert all(line.endswith("PYTHON " + prefix) for line in lines), (prefix, lines)


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
def test_wheel_is_repaired_to_the_lowest_manylinux_tag_it_fits():
    try:
        import auditwheel  # noqa: F401
    except ImportError:
        pytest.skip("auditwheel is not installed (ci.sh installs it)")
    # The platform tags in the file name (PEP 425): ...-cp311-cp311-manylinux_2_X_x86_64[.alias].whl
    tags = Path(WHEEL).name[:-len(".whl")].rsplit("-", 1)[1].split(".")
    assert any(t.startswith("manylinux_") for t in tags), Path(WHEEL).name
    out = subprocess.run([sys.executable, "-m", "auditwheel", "show", WHEEL], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    # auditwheel's lowest tag for this wheel, which the repaired wheel must carry.
    lowest = re.search(r'platform tag:\s*"(manylinux_[^"]+)"', " ".join(out.stdout.split()))
    assert lowest, out.stdout
    assert lowest.group(1) in tags, (lowest.group(1), tags)


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
