# package_test PACKAGES LAUNCHER (sourced by ci.sh): what a user of the
# published crates gets. Unpacks omniccl-sys-*.crate and omniccl-*.crate from
# PACKAGES into a temporary directory outside the checkout, makes a new crate
# there that depends on omniccl (omniccl-sys through [patch.crates-io], as
# crates.io would give it), builds it with neither OMNICCL_DIR nor
# OMNICCL_SOURCE_DIR (so omniccl-sys builds the library from the sources it
# carries and links it statically; ccache is used where installed), and runs
# it under LAUNCHER -n 2 without LD_LIBRARY_PATH. Fails if the program needs
# libomniccl.so at run time or does not print the all_reduce's result. Sets
# package_test_dir to the temporary directory, which the caller removes.
package_test() {
  local packages=$1 launcher=$2 dir sys safe out
  dir=$(mktemp -d)
  package_test_dir=$dir  # for the caller to remove, also after a failure
  sys=$(basename "$(ls "$packages"/omniccl-sys-[0-9]*.crate)" .crate)
  safe=$(basename "$(ls "$packages"/omniccl-[0-9]*.crate)" .crate)
  tar -xzf "$packages/$sys.crate" -C "$dir"
  tar -xzf "$packages/$safe.crate" -C "$dir"
  mkdir -p "$dir/app/src"
  cat >"$dir/app/Cargo.toml" <<TOML
[package]
name = "omniccl-package-test"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
omniccl = { path = "../$safe" }

[patch.crates-io]
omniccl-sys = { path = "../$sys" }
TOML
  cat >"$dir/app/src/main.rs" <<'RUST'
use omniccl::{Communicator, InitMethod, ReduceOp};

fn main() -> Result<(), omniccl::Error> {
    let comm = Communicator::init(InitMethod::Env)?;
    let r = comm.rank() as i64;
    let mut data = [2 * r + 1, 2 * r + 2];
    comm.all_reduce_in_place(&mut data, ReduceOp::Sum)?;
    println!("rank {r} of {}: {data:?}", comm.size());
    Ok(())
}
RUST
  # The same versions of the crates.io dependencies as the workspace.
  cp "$(dirname "${BASH_SOURCE[0]}")/Cargo.lock" "$dir/app/"
  # ccache, where installed, with paths taken relative to the temporary
  # directory, so a later run (another directory) finds this one's objects.
  local launcher_env=()
  if command -v ccache >/dev/null; then
    launcher_env=(CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
      CCACHE_BASEDIR="$dir" CCACHE_NOHASHDIR=1)
  fi
  (cd "$dir/app" && env -u OMNICCL_DIR -u OMNICCL_SOURCE_DIR -u LD_LIBRARY_PATH "${launcher_env[@]}" \
    CARGO_TARGET_DIR="$dir/target" timeout 1200 cargo build --quiet)
  local bin="$dir/target/debug/omniccl-package-test"
  # (No grep -q: readelf could die of SIGPIPE first, which pipefail counts
  # as no match.)
  if readelf -d "$bin" | grep 'NEEDED.*libomniccl' >/dev/null; then
    echo "FAIL: the program needs libomniccl.so at run time:" >&2
    readelf -d "$bin" | grep NEEDED >&2
    return 1
  fi
  out=$(env -u LD_LIBRARY_PATH timeout 60 "$launcher" -n 2 "$bin" 2>&1) || {
    echo "FAIL: the program did not run on 2 ranks:" >&2; echo "$out" >&2; return 1; }
  if [ "$(grep -c 'of 2: \[4, 6\]' <<<"$out")" != 2 ]; then
    echo "FAIL: expected 'rank r of 2: [4, 6]' from both ranks, got:" >&2; echo "$out" >&2; return 1
  fi
  echo "$out"
  echo "package test: ok (libomniccl built from $sys's sources, linked statically)"
}
