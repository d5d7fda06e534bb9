#!/usr/bin/env bash
# Checks that no function in the C, C++ and CUDA sources of core/, capi/,
# kernels/, tools/ and the Python extension (bindings/python/src/) is longer
# than 60 lines, as lizard measures length: from the line where the function
# starts to the line where it ends. A function short enough to read at once
# is easier to name, to test and to change.
#
# scripts/function-length-allowlist.txt names (one "path:function" a line,
# '#' starts a comment) the longer functions that are known and being split.
# The list may only shrink: the check also fails when a function listed
# there is no longer over the limit (or no longer exists), so that its line
# is removed with the change that shortened it.
#
# lizard comes from PyPI: the one on PATH, or else one installed into a
# virtual environment under BUILD_DIR (system Pythons such as Debian's refuse
# pip installs into themselves).
#
# Usage: scripts/check-function-length.sh [BUILD_DIR]   (default: build)
# Ends with one line "function-length: N checked, 0 over 60 lines (M allowlisted)";
# exits non-zero, listing each offender, if any function is over the limit.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
limit=60
allowlist=scripts/function-length-allowlist.txt
lizard_version=1.24.3
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

mkdir -p "$build"
lizard=$(command -v lizard || true)
if [[ -z "$lizard" ]]; then
  venv="$build/lizard-venv"
  if [[ ! -x "$venv/bin/lizard" ]]; then
    echo "== installing lizard $lizard_version into $venv" >&2
    rm -rf "$venv"
    if ! python3 -m venv "$venv" </dev/null >&2; then
      # Debian ships venv's ensurepip separately (as bindings/python/ci.sh).
      if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        rm -rf "$venv"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv </dev/null >&2
        python3 -m venv "$venv" </dev/null >&2
      else
        echo "check-function-length.sh: 'python3 -m venv' failed; install python3-venv" >&2
        echo "function-length: not checked, lizard missing"
        exit 1
      fi
    fi
    "$venv/bin/python" -m pip install --quiet "lizard==$lizard_version" </dev/null >&2
  fi
  lizard="$venv/bin/lizard"
fi

mapfile -t files < <(git ls-files -- core capi kernels tools bindings/python/src |
  grep -E '\.(c|cc|cpp|cxx|h|hh|hpp|cu|cuh)$')
# Every function as CSV (the thresholds select the warnings, which CSV
# output does not print): length is column 5, file column 7, name column 8.
"$lizard" --csv -L "$limit" -C 100000 "${files[@]}" >"$build/function-length.csv"

python3 - "$build/function-length.csv" "$allowlist" "$limit" <<'EOF'
import csv
import sys

table, allowlist, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
checked = 0
over = {}  # "path:function" -> (length, start line)
with open(table, newline="") as f:
    for row in csv.reader(f):
        if len(row) < 10 or not row[0].isdigit():
            continue  # a header or a blank line
        checked += 1
        length, path, name, start = int(row[4]), row[6], row[7], row[9]
        if length > limit:
            over[f"{path}:{name}"] = (length, start)
allowed = set()
with open(allowlist) as f:
    for line in f:
        line = line.split("#", 1)[0].strip()
        if line:
            allowed.add(line)
failed = False
def place(key):
    return key.split(":", 1)[0], int(over[key][1])


for key in sorted(over.keys() - allowed, key=place):
    length, start = over[key]
    path, name = key.split(":", 1)
    print(f"  {path}:{start}: {name} is {length} lines long (at most {limit}; split it)")
    failed = True
for key in sorted(allowed - over.keys()):
    print(f"  {key} is allowlisted but not over {limit} lines: remove it from {allowlist}")
    failed = True
offenders = len(over.keys() - allowed)
print(f"function-length: {checked} checked, {offenders} over {limit} lines ({len(allowed & over.keys())} allowlisted)")
sys.exit(1 if failed else 0)
EOF
