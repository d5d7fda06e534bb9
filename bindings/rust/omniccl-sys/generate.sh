#!/usr/bin/env bash
# Regenerates src/bindings.rs from capi/include/omniccl/omniccl.h with bindgen
# (the gen-bindings program next to this crate; needs libclang and rustfmt,
# which formats with bindings/rust/rustfmt.toml).
#
# Usage: generate.sh            write src/bindings.rs
#        generate.sh --check    fail if src/bindings.rs differs from a fresh run
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
include="$root/capi/include"
out="$here/src/bindings.rs"
target=${CARGO_TARGET_DIR:-$here/../target}
[ -f "$here/../gen-bindings/Cargo.toml" ] || {
  echo "generate.sh: needs the repository checkout (bindings/rust/gen-bindings)" >&2; exit 2; }

fresh=$(mktemp)
trap 'rm -f "$fresh"' EXIT
CARGO_TARGET_DIR="$target" cargo run --quiet --locked --manifest-path "$here/../gen-bindings/Cargo.toml" -- \
  "$include" "$fresh" "$here/../rustfmt.toml"

if [ "${1:-}" = "--check" ]; then
  if ! diff -u "$out" "$fresh" >/dev/null; then
    echo "FAIL: omniccl-sys/src/bindings.rs differs from bindgen's output for omniccl.h" >&2
    diff -u "$out" "$fresh" | head -40 >&2
    echo "run bindings/rust/omniccl-sys/generate.sh and commit the result" >&2
    exit 1
  fi
  echo "OK: omniccl-sys/src/bindings.rs matches omniccl.h"
else
  cp "$fresh" "$out"
  echo "wrote $out"
fi
