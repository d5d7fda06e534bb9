#!/usr/bin/env bash
# Builds the Python package's sdist so that it builds on its own: the C++
# sources it needs (the root CMakeLists.txt, cmake/, core/, capi/, kernels/, tools/,
# LICENSE) are copied into a staging copy of bindings/python as omniccl-src/,
# and the staging pyproject.toml reads the version from there.
#
# Usage: bindings/python/build_sdist.sh OUT_DIR [PYTHON]
#   (PYTHON needs the `build` package: pip install build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
python=${2:-python3}
stage=$(mktemp -d "${TMPDIR:-/tmp}/omniccl-sdist.XXXXXX")
trap 'rm -rf "$stage"' EXIT

# The package folder without build outputs.
tar -C "$here" --exclude=./build --exclude=./dist --exclude=./omniccl-src --exclude=__pycache__ \
    --exclude=.pytest_cache --exclude='*.so' --exclude='*.so.*' -cf - . | tar -C "$stage" -xf -
mkdir "$stage/omniccl-src"
for p in CMakeLists.txt LICENSE cmake core capi kernels tools; do
  cp -a "$root/$p" "$stage/omniccl-src/"
done
sed -i 's|input = "../../capi/include/omniccl/omniccl.h"|input = "omniccl-src/capi/include/omniccl/omniccl.h"|' \
    "$stage/pyproject.toml"
grep -q 'input = "omniccl-src/' "$stage/pyproject.toml" || { echo "build_sdist.sh: version input not found" >&2; exit 1; }
"$python" -m build --sdist --outdir "$out" "$stage" </dev/null
