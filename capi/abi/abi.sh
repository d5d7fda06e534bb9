#!/usr/bin/env bash
# The C ABI against the last release's, with libabigail (Debian: abigail-tools).
#
# Usage: abi.sh dump LIB OUT       write LIB's ABI (functions exported from
#                                  LIB and the types of the public headers
#                                  they use) to OUT as abidw XML
#        abi.sh check BASELINE LIB compare LIB with the dump BASELINE; fail on
#                                  an incompatible change
# Options (before the command): --headers DIR (the public headers; default
# capi/include/omniccl).
#
# check passes when LIB offers everything BASELINE did, unchanged: functions
# may be added, fields appended to the extensible structs and enumerators
# appended (capi/abi/abidiff.suppr says which). Any other change abidiff
# reports fails it (exit 1) with abidiff's report: a function removed, a
# parameter, return or field type changed, a field inserted or moved, an
# enumerator renumbered. LIB needs debug information (-g; a RelWithDebInfo
# or Debug build); without it, or without abidiff, check exits 77 (skipped)
# saying why. abidw and abidiff exit with bit 4 for a change and bit 8 for
# an incompatible one (libabigail's ABIDIFF_* bits); 1 and 2 are errors.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
headers=$here/../include/omniccl
if [ "${1:-}" = "--headers" ]; then headers=$2; shift 2; fi
headers=$(cd "$headers" && pwd)
usage() { sed -n '3,10s/^# \{0,1\}//p' "$0" >&2; exit 2; }

# The dump keeps the types of the public headers only (--headers-dir with
# --drop-private-types; the handles' structs stay opaque), without source
# locations; abidw names each translation unit by its path, which is written
# from the source folder on (capi/src/api.cc), so a dump does not say where
# it was built.
dump() {
  local lib=$1 out=$2
  abidw --headers-dir "$headers" --drop-private-types --exported-interfaces-only \
    --no-corpus-path --no-comp-dir-path --no-show-locs --out-file "$out" "$lib"
  sed -i -E "s#path='[^']*/(capi|core|kernels)/#path='\\1/#" "$out"
}

check() {
  local baseline=$1 lib=$2 rc=0 report
  command -v abidiff >/dev/null || { echo "SKIP: abidiff not found (Debian: apt-get install abigail-tools)"; exit 77; }
  # (grep reads all of readelf's output: with -q, readelf could die of SIGPIPE
  # first, and pipefail would count that as no match.)
  readelf -S "$lib" | grep '\.debug_info' >/dev/null || {
    echo "SKIP: $lib has no debug information (build with -g: CMAKE_BUILD_TYPE RelWithDebInfo or Debug)"; exit 77; }
  # (No --headers-dir2 here: the dump's types carry no locations, so abidiff
  # would count them all as private and filter every change out.)
  report=$(abidiff --exported-interfaces-only --no-added-syms --suppressions "$here/abidiff.suppr" "$baseline" "$lib") || rc=$?
  if ((rc & 3)); then
    echo "FAIL: abidiff could not compare $baseline with $lib (exit $rc)"; echo "$report"; exit 1
  elif ((rc != 0)); then
    echo "FAIL: the C ABI of $lib is not compatible with $baseline (abidiff exit $rc):"
    echo "$report"
    echo "(appending functions, fields of the extensible structs and enumerators is compatible;"
    echo " see CONTRIBUTING.md, 'The C ABI')"
    exit 1
  fi
  echo "OK: $lib offers the ABI of $(basename "$baseline") (additions only)"
}

case "${1:-}" in
  dump) [ $# -eq 3 ] || usage; dump "$2" "$3" ;;
  check) [ $# -eq 3 ] || usage; check "$2" "$3" ;;
  *) usage ;;
esac
