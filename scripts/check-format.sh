#!/usr/bin/env bash
# Checks that every C and C++ source tracked by git is formatted as
# .clang-format says (clang-format 14, Debian 12's clang-format-14 package).
# Rust has rustfmt (bindings/rust/ci.sh); generated and vendored files are
# left out (see `files` below).
# Usage: scripts/check-format.sh [--fix]   (--fix rewrites the files in place)
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
case ${1:-} in
  --fix) fix=1 ;;
  "") ;;
  *) echo "check-format.sh: unknown argument '$1' (use --fix or nothing)" >&2; exit 2 ;;
esac
cf=""
for c in clang-format-14 clang-format; do
  if command -v "$c" >/dev/null 2>&1; then cf=$c; break; fi
done
if [[ -z "$cf" ]]; then
  echo "check-format.sh: clang-format is not installed (apt-get install clang-format-14)" >&2
  echo "format: not checked, clang-format missing"
  exit 1
fi
# Everything C/C++ under git, except the Rust crates' generated bindings and
# vendored third-party headers.
mapfile -t files < <(git ls-files '*.c' '*.cc' '*.h' '*.cu' '*.cuh' | grep -v -E '^bindings/rust/|^tests/abi/official/')
if ((fix)); then
  "$cf" -i "${files[@]}"
  echo "format: ${#files[@]} files rewritten with $cf"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$cf" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  printf '  needs formatting: %s\n' "${bad[@]}"
  echo "format: ${#bad[@]} of ${#files[@]} files need formatting (run scripts/check-format.sh --fix)"
  exit 1
fi
echo "format: ${#files[@]} files checked, all formatted"
