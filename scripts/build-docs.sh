#!/usr/bin/env bash
# Builds the documentation site (docs/) with Sphinx, warnings as errors.
# Creates (or reuses) a virtual environment in OUT/venv with the pinned
# docs/requirements.txt (reinstalled only when that file changes), runs
# sphinx-build -W --keep-going -b html docs OUT/html, and ends with one line:
#   docs: built N pages, 0 warnings
# Exits non-zero on any warning or error. The network is needed only for the
# first pip install (PyPI); link checking is not run (sphinx-build -b
# linkcheck docs DIR does that by hand).
# Usage: scripts/build-docs.sh [OUT]   (default: build/docs)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/docs}
mkdir -p "$out"
out=$(cd "$out" && pwd)
venv=$out/venv
stamp=$venv/.requirements
if [[ ! -x $venv/bin/sphinx-build ]] || ! cmp -s docs/requirements.txt "$stamp"; then
  echo "== docs: virtual environment in $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r docs/requirements.txt
  cp docs/requirements.txt "$stamp"
fi
log=$out/sphinx.log
rc=0
"$venv/bin/sphinx-build" -W --keep-going -q -b html -d "$out/doctrees" docs "$out/html" 2>&1 | tee "$log" || rc=$?
warnings=$(grep -c -E 'WARNING|ERROR' "$log" || true)
pages=$(find "$out/html" -name '*.html' -not -path '*/_*' -not -name 'genindex.html' -not -name 'search.html' | wc -l)
if ((rc != 0 || warnings != 0)); then
  echo "docs: FAILED, $warnings warning(s) or error(s) (exit $rc); see $log"
  exit 1
fi
echo "docs: built $pages pages, 0 warnings"
