#!/usr/bin/env bash
# Copies what the library's build from source needs (the top CMakeLists.txt,
# cmake/, kernels/, core/, capi/ and LICENSE: the files git tracks there)
# into vendor/, so that the packaged crate (`cargo package`, a registry)
# builds libomniccl.a without a checkout, as libgit2-sys carries libgit2.
# vendor/ is ignored by git, and build.rs reads it only in a packaged crate
# (never in the checkout); --clean removes it once the crates are packaged.
#
# Usage: vendor.sh            (re)create vendor/
#        vendor.sh --clean    remove vendor/
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
rm -rf "$here/vendor"
[ "${1:-}" = "--clean" ] && exit 0
[ -d "$root/.git" ] || [ -f "$root/.git" ] || {
  echo "vendor.sh: needs the repository checkout (git) at $root" >&2; exit 2; }
mkdir -p "$here/vendor"
# Tracked files only, as they are in the working tree (edits included).
git -C "$root" ls-files -z -- CMakeLists.txt LICENSE cmake kernels core capi |
  (cd "$root" && xargs -0 cp --parents -t "$here/vendor")
echo "vendor.sh: $(find "$here/vendor" -type f | wc -l) files in $here/vendor"
