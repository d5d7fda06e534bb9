#!/usr/bin/env bash
# Builds OmniCCL once (warnings are errors) and runs every test suite on that
# build: the format check (scripts/check-format.sh), the function-length check
# (scripts/check-function-length.sh), the docs site (scripts/build-docs.sh),
# CTest (C/C++), the Rust crates, the sanitizer builds and fuzzers
# (scripts/sanitize.sh; OMNICCL_SKIP_SANITIZERS=1 skips them visibly), the
# Python package (fresh virtual environment) and the Java bindings. Every suite runs even when an earlier one
# failed; the run ends with one verdict line over all suites and their summary
# lines, and a skipped CTest test is listed with the reason it gave. Exits
# non-zero if any suite failed.
# Usage: scripts/test-all.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
jobs=${OMNICCL_BUILD_JOBS:-2}
start=$SECONDS

# CUDA kernels: compiled with nvcc from PyPI (no GPU needed); OMNICCL_CUDA=OFF skips them.
cuda_args=(-DOMNICCL_CUDA=OFF)
if [ "${OMNICCL_CUDA:-ON}" != OFF ]; then
  echo "== CUDA toolkit (pip wheels) into $build/cuda-toolkit"
  nvcc=$(scripts/install-cuda-toolkit.sh "$build/cuda-toolkit")
  cuda_args=(-DOMNICCL_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc")
fi
cmake -S . -B "$build" -DOMNICCL_WERROR=ON -DOMNICCL_BUILD_TESTS=ON -DOMNICCL_BUILD_EXAMPLES=ON \
  "${cuda_args[@]}" >/dev/null
cmake --build "$build" -j"$jobs"

summary=()  # one "name: summary line (exit N)" per suite
failed=0

# run_suite NAME REGEX COMMAND...: runs COMMAND with its output shown and kept
# in $build/NAME-summary.log, and records the last line matching REGEX (the
# runner's own summary line) with the exit status. No summary line counts as
# a failure: the suite did not run its tests.
run_suite() {
  local name=$1 regex=$2
  shift 2
  local log="$build/$name-summary.log" rc=0 line
  "$@" 2>&1 | tee "$log" || rc=$?
  line=$(grep -E "$regex" "$log" | tail -n 1 || true)
  [[ -n "$line" || $rc -ne 0 ]] || rc=1
  ((rc == 0)) || failed=1
  summary+=("$name: ${line:-no summary} (exit $rc)")
  # A failing suite names its failing tests under its line (the runners'
  # own failure lines: pytest, gtest, ctest, cargo, Maven), at most 10.
  if ((rc != 0)); then
    local t
    while IFS= read -r t; do summary+=("     $t"); done < <(
      grep -E '^FAILED |^ERROR |\[  FAILED  \] [A-Za-z]|\*\*\*(Failed|Timeout|Exception)|^test .* \.\.\. FAILED|<<< (FAILURE|ERROR)!' \
        "$log" | sort -u | head -n 10 || true)
  fi
}

echo "== format (clang-format over every C/C++ source: scripts/check-format.sh)"
run_suite format '^format: ' scripts/check-format.sh

echo "== function length (no function over 60 lines: scripts/check-function-length.sh)"
run_suite function-length '^function-length: ' scripts/check-function-length.sh "$build"

echo "== parity (every C entry point wrapped by each binding, or listed with a reason: scripts/check-parity.py)"
run_suite parity '^check-parity: ' python3 scripts/check-parity.py

echo "== docs (Sphinx site, warnings are errors, no link check: scripts/build-docs.sh)"
run_suite docs '^docs: ' scripts/build-docs.sh "$build/docs"

echo "== ctest (C/C++ suites: unit, abi, tools, bootstrap, install, collectives, examples, gpu)"
# Multi-rank suites are RUN_SERIAL; the rest run two at a time.
run_suite ctest '^[0-9]+% tests passed' ctest --test-dir "$build" -j2 --output-on-failure --timeout 900
# Skipped tests, each with the reason it printed (CTest itself shows none).
skipped=$(sed -n '/The following tests did not run:/,/^$/p' "$build/ctest-summary.log" | grep -E '^\s+[0-9]+ - ' || true)
if [[ -n "$skipped" ]]; then
  echo "== skipped by ctest, with their reasons:"
  while read -r _ _ name _; do
    reason=$(awk -v t="$name" '
      $0 ~ "^[0-9]+/[0-9]+ Test: " && $3 == t { inside = 1; next }
      inside && /^<end of output>/ { exit }
      inside && (/SKIP/ || /Skipped/ || prev ~ /Skipped$/) { print; }
      inside { prev = $0 }' "$build/Testing/Temporary/LastTest.log" | head -n 3 | tr '\n' ' ')
    echo "  $name: ${reason:-(no reason printed)}"
  done <<<"$skipped"
fi

echo "== Rust crates (fmt, clippy, bindings drift, cargo test, rustdoc, examples, cargo package)"
run_suite rust '^test result: ' bindings/rust/ci.sh "$build"

if [ "${OMNICCL_SKIP_SANITIZERS:-0}" = 1 ]; then
  echo "== sanitizers and fuzzers: SKIPPED (OMNICCL_SKIP_SANITIZERS=1)"
else
  echo "== sanitizers and fuzzers (ASan+UBSan, libFuzzer, TSan builds in ${build}-san)"
  run_suite sanitizers '^== sanitizers \(all\): done' scripts/sanitize.sh all "${build}-san"
fi

echo "== Python package (fresh virtual environment, pip install, pytest)"
run_suite pytest '^=*\s*[0-9]+ (passed|failed)|^[0-9]+ (passed|failed)' bindings/python/ci.sh "$build/py-venv"

echo "== Java bindings (mvn verify + install, tutorial examples, Spark pipeline)"
run_suite java 'Tests run: [0-9]+, Failures' bindings/java/ci.sh "$build"

verdict=PASS
((failed == 0)) || verdict=FAIL
echo "== verdict: $verdict after $((SECONDS - start)) s$([[ -n "$skipped" ]] && echo " (ctest skipped: $(echo "$skipped" | wc -l))")"
for s in "${summary[@]}"; do echo "   $s"; done
[[ $verdict == PASS ]]
