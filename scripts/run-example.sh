#!/usr/bin/env bash
# Builds OmniCCL and runs the main example: an all_reduce across 4 local ranks.
# Usage: scripts/run-example.sh [NRANKS]   (default: 4)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build >/dev/null
cmake --build build -j"${OMNICCL_BUILD_JOBS:-2}" --target omniccl-run example_c_all_reduce >/dev/null
exec build/tools/omniccl-run -n "${1:-4}" build/examples/c/all_reduce
