#!/usr/bin/env bash
# Builds OmniCCL and runs the main example: an all_reduce across 4 local ranks.
# Usage: scripts/run-example.sh [NRANKS]   (default: 4)
# The build directory is `build`, or OMNICCL_BUILD_DIR (e.g. one that
# scripts/test-all.sh made: then nothing is built again).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${OMNICCL_BUILD_DIR:-build}
echo "== configuring (cmake -S . -B $build)"
cmake -S . -B "$build" >/dev/null
# What `cmake --install build` installs (the library, omniccl-run,
# omniccl-bench) is built too, so that this build can be installed as it is.
echo "== building the library, omniccl-run, omniccl-bench and the example (a first build takes a few minutes)"
cmake --build "$build" -j"${OMNICCL_BUILD_JOBS:-2}" --target omniccl omniccl-run omniccl-bench example_c_all_reduce
echo "== $build/tools/omniccl-run -n ${1:-4} $build/examples/c/all_reduce"
exec "$build/tools/omniccl-run" -n "${1:-4}" "$build/examples/c/all_reduce"
