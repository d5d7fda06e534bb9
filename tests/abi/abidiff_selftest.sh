#!/usr/bin/env bash
# Shows that the ABI check (capi/abi/abi.sh check, CTest abi_abidiff) catches
# incompatible changes: a small library shaped like omniccl.h
# (tests/abi/abidiff/) is dumped as the "release", then built once per change
# and checked against that dump. Compatible changes (an appended function,
# field of an extensible struct, enumerator; no change) must pass, the others
# (a removed function, a changed parameter type, a field inserted before
# others, a fixed-size struct grown, an enumerator renumbered) must fail.
# Exits 77 (skipped) without abidw/abidiff.
# Usage: abidiff_selftest.sh CC
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 CC" >&2; exit 2; }
cc=$1
here=$(cd "$(dirname "$0")" && pwd)
abi="$here/../../capi/abi/abi.sh"
for tool in abidw abidiff; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not found (Debian: apt-get install abigail-tools)"; exit 77; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

build() {  # build NAME [-DMACRO]: libfixture-NAME.so
  "$cc" -std=c99 -g -O0 -shared -fPIC -I"$here/abidiff/include" ${2:+"$2"} \
    -Wl,-soname,libfixture.so.1 -o "$work/libfixture-$1.so" "$here/abidiff/fixture.c"
}
build released
"$abi" --headers "$here/abidiff/include" dump "$work/libfixture-released.so" "$work/released.abi"

failures=0
expect() {  # expect pass|fail NAME [-DMACRO]
  local want=$1 name=$2 got=pass
  build "$name" ${3:+"$3"}
  "$abi" --headers "$here/abidiff/include" check "$work/released.abi" "$work/libfixture-$name.so" \
    >"$work/$name.log" 2>&1 || got=fail
  if [ "$got" = "$want" ]; then
    echo "ok: $name: $got"
  else
    echo "WRONG: $name: the check said $got, expected $want:"; sed 's/^/    /' "$work/$name.log"
    failures=$((failures + 1))
  fi
}
expect pass unchanged
expect pass appended_function -DAPPENDED_FUNCTION
expect pass appended_field -DAPPENDED_FIELD
expect pass appended_enumerator -DAPPENDED_ENUMERATOR
expect fail removed_function -DREMOVED_FUNCTION
expect fail changed_parameter -DCHANGED_PARAMETER
expect fail inserted_field -DINSERTED_FIELD
expect fail grown_fixed_struct -DGROWN_FIXED_STRUCT
expect fail renumbered_enumerator -DRENUMBERED_ENUMERATOR
if ((failures)); then echo "FAIL: $failures case(s) judged wrong"; exit 1; fi
echo "OK: the ABI check passes the 4 compatible changes and catches the 5 incompatible ones"
