#!/usr/bin/env bash
# Builds OmniCCL and runs the main example: an all_reduce across 4 local ranks.
# Usage: scripts/run-example.sh [NRANKS]   (default: 4)
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== configuring (cmake -S . -B build)"
cmake -S . -B build >/dev/null
echo "== building the library, omniccl-run and the example (a first build takes about a minute)"
cmake --build build -j"${OMNICCL_BUILD_JOBS:-2}" --target omniccl-run example_c_all_reduce
echo "== build/tools/omniccl-run -n ${1:-4} build/examples/c/all_reduce"
exec build/tools/omniccl-run -n "${1:-4}" build/examples/c/all_reduce
