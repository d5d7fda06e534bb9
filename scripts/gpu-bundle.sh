#!/usr/bin/env bash
# Makes the part of a CUDA build that scripts/gpu-check.sh needs into a small
# folder to bring to a GPU machine (a whole build folder is hundreds of MB,
# mostly debug information and objects): the library, the tools, the CUDA
# example, the programs of every `gpu`-labelled test, the CTest files and the
# CMake cache, the programs stripped of debug information. On the GPU machine,
# next to a checkout of the same commit, gpu-check.sh rewrites the paths the
# CTest files hold (its `relocate` step).
#
# Usage: scripts/gpu-bundle.sh BUILD_DIR OUT_DIR
#   BUILD_DIR  a CUDA build of this checkout, built (cmake --build): best a
#              Release one (-DCMAKE_BUILD_TYPE=Release), the benchmarks' build
#   OUT_DIR    created; then: scripts/gpu-check.sh OUT_DIR [RESULTS_DIR] there
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR OUT_DIR" >&2; exit 2; }
build=$(realpath "$1")
out=$(realpath -m "$2")
cache=$build/CMakeCache.txt
[ -f "$cache" ] || { echo "gpu-bundle: $build is not a CMake build folder (no CMakeCache.txt)" >&2; exit 1; }
if [ -x "$build/tools/omniccl-bench" ] && [ ! -e "$build/tools/omniccl-cuda-kernel-bench" ]; then
  echo "gpu-bundle: $build is a build without CUDA (configure it with -DOMNICCL_CUDA=ON)" >&2
  exit 1
fi
type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$cache")
[ "$type" = Release ] || echo "gpu-bundle: note: a $type build; benchmarks are meant for a Release one" >&2

# What the gpu tests run: each test's program and the arguments that are
# files of the build (the CUDA example that omniccl-run starts, say).
mapfile -t files < <(ctest --test-dir "$build" -L gpu --show-only=json-v1 | python3 -c '
import json, os, sys
build = sys.argv[1]
seen = set()
for t in json.load(sys.stdin)["tests"]:
    for a in t.get("command") or []:
        if a.startswith(build + "/") and a not in seen:
            seen.add(a)
            print(a)
' "$build")
files+=("$build/tools/omniccl-run" "$build/tools/omniccl-bench" "$build/tools/omniccl-cuda-kernel-bench"
  "$build/examples/cuda/all_reduce_cuda")
for f in "${files[@]}"; do
  case $f in
    *_NOT_BUILT) echo "gpu-bundle: a gpu test is not built ($f): cmake --build $build first" >&2; exit 1 ;;
  esac
  [ -f "$f" ] || { echo "gpu-bundle: $f is missing: cmake --build $build first" >&2; exit 1; }
done

rm -rf "$out"
mkdir -p "$out"
copy() {  # copy FILE: to the same place under $out
  local rel=${1#"$build"/}
  mkdir -p "$out/$(dirname "$rel")"
  cp -P "$1" "$out/$rel"
}
for f in "${files[@]}"; do copy "$f"; done
for f in "$build"/capi/libomniccl.so*; do copy "$f"; done
copy "$cache"
while IFS= read -r -d '' f; do copy "$f"; done < <(find "$build" -path "$build/CMakeFiles" -prune -o \
  \( -name CTestTestfile.cmake -o -name '*_include.cmake' -o -name '*_tests.cmake' \) -print0)
# Programs without their debug information (symbols stay for backtraces).
find "$out" -type f -perm -u+x -exec strip --strip-debug {} +
strip --strip-debug "$out"/capi/libomniccl.so.*.*
echo "gpu-bundle: $(du -sh "$out" | cut -f1) in $out ($(find "$out" -type f | wc -l) files)"
