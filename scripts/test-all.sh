#!/usr/bin/env bash
# Builds OmniCCL (warnings are errors) and runs every test suite (CTest, then
# the Python package's pytest suite in a fresh virtual environment), failing if
# any test fails. Ends with one verdict line over all suites; a skipped test is
# listed with the reason it gave.
# Usage: scripts/test-all.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
jobs=${OMNICCL_BUILD_JOBS:-2}
start=$SECONDS

cmake -S . -B "$build" -DOMNICCL_WERROR=ON -DOMNICCL_BUILD_TESTS=ON -DOMNICCL_BUILD_EXAMPLES=ON >/dev/null
cmake --build "$build" -j"$jobs"

echo "== ctest (C/C++ suites: unit, abi, tools, bootstrap, install, collectives, examples)"
# Multi-rank suites are RUN_SERIAL; the rest run two at a time.
ctest_log="$build/ctest-summary.log"
ctest_rc=0
ctest --test-dir "$build" -j2 --output-on-failure --timeout 900 2>&1 | tee "$ctest_log" || ctest_rc=$?
ctest_line=$(grep -E '^[0-9]+% tests passed' "$ctest_log" | tail -n 1 || true)
[[ -n "$ctest_line" || $ctest_rc -ne 0 ]] || ctest_rc=1  # no summary: the tests did not run
# Skipped tests, each with the reason it printed (CTest itself shows none).
skipped=$(sed -n '/The following tests did not run:/,/^$/p' "$ctest_log" | grep -E '^\s+[0-9]+ - ' || true)
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

echo "== Python package (fresh virtual environment, pip install, pytest)"
py_log="$build/pytest-summary.log"
py_rc=0
bindings/python/ci.sh "$build/py-venv" 2>&1 | tee "$py_log" || py_rc=$?
py_line=$(grep -E '^=*\s*[0-9]+ (passed|failed)|^[0-9]+ (passed|failed)' "$py_log" | tail -n 1 || true)

verdict=PASS
((ctest_rc == 0 && py_rc == 0)) || verdict=FAIL
echo "== verdict: $verdict after $((SECONDS - start)) s | ctest: ${ctest_line:-no summary} (exit $ctest_rc)" \
     "| pytest: ${py_line:-no summary} (exit $py_rc)$([[ -n "$skipped" ]] && echo " | ctest skipped: $(echo "$skipped" | wc -l)")"
[[ $verdict == PASS ]]
