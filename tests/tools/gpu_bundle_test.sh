#!/usr/bin/env bash
# scripts/gpu-bundle.sh and the relocate step of scripts/gpu-check.sh, without a
# GPU: the bundle of this CUDA build, brought to a copy of the checkout under
# other paths, runs every `gpu` test there through its rewritten CTest files
# (each skips, saying why, without a GPU), and the CUDA example starts from it.
# Usage: gpu_bundle_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
tmp=$(mktemp -d /tmp/omniccl_gpu_bundle_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAILED: $*"
  for f in "$tmp"/bundle.log "$tmp"/check.log "$tmp"/results/*; do
    [ -f "$f" ] && { echo "--- $f"; tail -n 40 "$f"; }
  done
  exit 1
}

mkdir "$tmp/co"  # the checkout's files (not its build folders), elsewhere
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$src" ls-files -z | tar -C "$src" --null -T - -cf - | tar -C "$tmp/co" -xf -
else
  tar -C "$src" --exclude='./build*' --exclude='./bindings/*/target' --exclude=./bindings/python/build -cf - . |
    tar -C "$tmp/co" -xf -
fi
timeout 120 "$src/scripts/gpu-bundle.sh" "$build" "$tmp/co/build-gpu" >"$tmp/bundle.log" 2>&1 || fail "gpu-bundle.sh"
kib=$(du -sk "$tmp/co/build-gpu" | cut -f1)
((kib < 64 * 1024)) || fail "the bundle takes $kib KiB: it is meant to be small to bring along"

cd "$tmp/co"
OMNICCL_GPU_CHECK_STEPS='relocate|ctest-gpu|example-cuda' OMNICCL_PYTHONPATH=/nonexistent \
  timeout 600 scripts/gpu-check.sh build-gpu "$tmp/results" >"$tmp/check.log" 2>&1 || fail "gpu-check.sh"
r=$tmp/results
grep -q '^relocate: exit 0 ' "$r/summary.txt" || fail "the relocate step"
grep -q "rewrote the CTest files' paths" "$r/relocate.log" || fail "relocate rewrote nothing"
left=$(grep -rl --include='*.cmake' -F "$build/" build-gpu || true)
[ -z "$left" ] || fail "CTest files still name the build's first folder: $left"
grep -q '^ctest-gpu: exit 0 ' "$r/summary.txt" || fail "ctest -L gpu on the bundle"
n=$(sed -n 's/.*tests passed, 0 tests failed out of \([0-9]*\)$/\1/p' "$r/ctest-gpu.log")
[ -n "$n" ] && ((n > 0)) || fail "no gpu test ran"
! grep -q 'Could not find executable' "$r/ctest-gpu.log" || fail "a test's program was not found"
# Without a GPU the example exits 77 (skipped); a missing library would be 127.
grep -qE '^example-cuda: exit (0|77) ' "$r/summary.txt" || fail "the CUDA example from the bundle"
grep -q '^kernel-bench: skipped, not in OMNICCL_GPU_CHECK_STEPS' "$r/summary.txt" || fail "the step filter"
echo "ok: a bundle of $kib KiB ran $n gpu tests through rewritten paths"
