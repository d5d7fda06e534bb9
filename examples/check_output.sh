#!/usr/bin/env bash
# check_output.sh - run an example under a launcher and compare what it
# printed with the output documented in its source file.
#
# Usage: check_output.sh SOURCE [--require REGEX]... -- COMMAND [ARG]...
#
# The documented output is the block of comment lines right after the line
# "Output with 4 ranks" in SOURCE: lines "rank N: ..." (after " * " or "// ").
# Exit status 77 (skipped) when COMMAND exits with 77 and prints "SKIPPED: ...".
# The test passes when COMMAND exits with status 0 and its "rank N: ..." lines
# (the launcher's "[N] " prefix removed) are exactly the documented ones, in
# any order, and every --require REGEX (grep -E) matches a line of output.
set -u

src=$1
shift
required=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    --require) required+=("$2"); shift 2 ;;
    *) echo "check_output.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "check_output.sh: no command given" >&2; exit 2; }

want=$(awk '
  /Output with 4 ranks/ { inblock = 1; next }
  inblock && match($0, /rank [0-9]+: .*/) { print substr($0, RSTART); next }
  inblock { exit }' "$src" | sort)
if [ -z "$want" ]; then
  echo "check_output.sh: $src documents no output (no 'Output with 4 ranks' block)" >&2
  exit 2
fi

out=$("$@" 2>&1)
status=$?
printf '%s\n' "$out"
# Status 77 with a "SKIPPED: why" line: the example cannot run on this
# machine (e.g. no GPU); CTest reports it as skipped (SKIP_RETURN_CODE).
if [ $status -eq 77 ] && printf '%s\n' "$out" | grep -q 'SKIPPED: '; then
  exit 77
fi
if [ $status -ne 0 ]; then
  echo "FAIL: '$*' exited with status $status" >&2
  exit 1
fi

got=$(printf '%s\n' "$out" | sed -nE 's/^(\[[0-9]+\] )?(rank [0-9]+: .*)$/\2/p' | sort)
if [ "$got" != "$want" ]; then
  echo "FAIL: the output differs from the one documented in $src (- documented, + printed):" >&2
  diff -u <(printf '%s\n' "$want") <(printf '%s\n' "$got") | tail -n +3 >&2
  exit 1
fi
for re in "${required[@]}"; do
  if ! printf '%s\n' "$out" | grep -Eq -- "$re"; then
    echo "FAIL: no output line matches '$re'" >&2
    exit 1
  fi
done
echo "OK: output matches the documentation in $(basename "$src")"
