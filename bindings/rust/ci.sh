#!/usr/bin/env bash
# CI for the Rust crates (omniccl-sys, omniccl) against an already-built C
# library (OMNICCL_DIR, so the checks do not build it again):
#   formatting, clippy (warnings are errors), tests (unit, multi-process,
#   doc tests), rustdoc (warnings are errors), the bindings drift check, the
#   examples under omniccl-run checked against their documented output,
#   `cargo package` of both crates, and a new crate outside the checkout that
#   depends on the two packages: cargo builds the library from the sources
#   packaged in omniccl-sys (the one build of the library here) and links it
#   statically, and the program runs on 2 ranks without LD_LIBRARY_PATH
#   (package-test.sh).
#
# Usage: bindings/rust/ci.sh BUILD_DIR   (a CMake build directory of this
#        repository holding capi/libomniccl.so and tools/omniccl-run)
#
# Needs a Rust toolchain >= 1.85 with rustfmt and clippy (rustup's default
# profile), network access to crates.io, and libclang (apt libclang-dev) for
# the drift check. Exits non-zero if any step fails.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$here"

[ -d "$HOME/.cargo/bin" ] && PATH="$HOME/.cargo/bin:$PATH"
command -v cargo >/dev/null || {
  echo "ci.sh: no cargo on PATH; install a Rust toolchain (https://rustup.rs)" >&2; exit 1; }
for lib in capi/libomniccl.so tools/omniccl-run; do
  [ -e "$build/$lib" ] || { echo "ci.sh: $build/$lib is missing; build the C library first" >&2; exit 1; }
done

export OMNICCL_DIR="$build"
export LD_LIBRARY_PATH="$build/capi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CARGO_TERM_COLOR=never CARGO_INCREMENTAL=0 RUST_BACKTRACE=0
start=$SECONDS
# shellcheck source=package-test.sh
. "$here/package-test.sh"
step() { echo "== rust: $* ($((SECONDS - start)) s)"; }

step "toolchain: $(cargo --version), $(rustc --version)"
step "cargo fmt --check"
cargo fmt --all --check
cargo fmt --manifest-path gen-bindings/Cargo.toml --check

step "cargo clippy -D warnings"
cargo clippy --locked --workspace --all-targets --all-features -- -D warnings

step "bindings drift check (bindgen on omniccl.h)"
omniccl-sys/generate.sh --check

step "cargo test (unit, multi-process, doc tests)"
cargo test --locked --workspace --all-features

step "cargo doc -D warnings"
RUSTDOCFLAGS="-D warnings" cargo doc --locked --workspace --all-features --no-deps

step "examples under omniccl-run -n 4, checked against their documented output"
cargo build --locked -p omniccl --examples
for src in omniccl/examples/*.rs; do
  name=$(basename "$src" .rs)
  timeout 120 bash "$root/examples/check_output.sh" "$src" -- \
    "$build/tools/omniccl-run" -n 4 "target/debug/examples/$name" >/dev/null ||
    { echo "FAIL: example $name" >&2; exit 1; }
  echo "example $name: ok"
done

step "cargo package (both crates)"
# omniccl-sys carries the library's sources (vendor/, written by vendor.sh,
# removed again on exit). cargo does not verify the packages here
# (--no-verify): the next step builds both as cargo's verification would, but
# outside the checkout and without OMNICCL_DIR, so the library is built once,
# from the packaged sources. `cargo package --workspace` resolves omniccl
# against the omniccl-sys it just packaged through a local overlay registry
# extracted under $CARGO_HOME/registry/src/-<hash of the overlay's path>/ and
# never extracted again for the same name and version, so a copy left there
# by an earlier run (an older omniccl-sys 0.3.0) is removed first (crates.io's
# copies are untouched).
trap 'omniccl-sys/vendor.sh --clean; rm -rf "${package_test_dir:-}"' EXIT
omniccl-sys/vendor.sh
cargo_home=${CARGO_HOME:-$HOME/.cargo}
rm -rf "$cargo_home"/registry/src/-*/omniccl-sys-* "$cargo_home"/registry/src/-*/omniccl-[0-9]* \
  "$cargo_home"/registry/cache/-*/omniccl-*.crate target/package
cargo package --locked --workspace --allow-dirty --no-verify

step "a new crate on the packaged crates, outside the checkout: 2 ranks, no LD_LIBRARY_PATH"
package_test "$here/target/package" "$build/tools/omniccl-run"

step "all Rust checks passed in $((SECONDS - start)) s"
