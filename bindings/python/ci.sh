#!/usr/bin/env bash
# CI for the Python package: in a fresh virtual environment, install the
# package from this checkout (which builds libomniccl and the extension) with
# its test extra, then run its test suite.
#
# Usage: bindings/python/ci.sh [VENV_DIR]     (default: build-py/venv)
#
# Needs python3 (with venv), a C++20 compiler and network access to PyPI
# (scikit-build-core, pybind11, numpy, pytest; cmake/ninja if missing).
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

echo "== pip install ./bindings/python[test] (builds libomniccl and the extension)"
"$venv/bin/python" -m pip install --quiet "./bindings/python[test]" </dev/null

echo "== pytest bindings/python/tests"
# pytest exits 5 when it collected no test: non-zero, so a failure here too.
"$venv/bin/python" -m pytest bindings/python/tests -q -p no:cacheprovider </dev/null
