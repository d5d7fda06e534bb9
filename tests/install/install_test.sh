#!/usr/bin/env bash
# Installs the build into a temporary prefix, moves the prefix elsewhere (an
# installed tree must be relocatable), then checks what a user of the
# installed package relies on:
#   - the library file is libomniccl.so.1.<minor>.<patch> (named after the ABI
#     major, like its SONAME libomniccl.so.1);
#   - a C program builds with `pkg-config --cflags --libs omniccl` and runs;
#   - a CMake project builds with find_package(omniccl) and runs;
#   - the installed omniccl-bench and omniccl-run start without LD_LIBRARY_PATH.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -u
BUILD=${1:?usage: $0 BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: $0 BUILD_DIR SOURCE_DIR}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/omniccl-install-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }
unset LD_LIBRARY_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH

if ! timeout 120 cmake --install "$BUILD" --prefix "$TMP/first" >"$TMP/install.log" 2>&1; then
  cat "$TMP/install.log" >&2
  echo "FAIL: cmake --install $BUILD --prefix $TMP/first" >&2
  exit 1
fi
mv "$TMP/first" "$TMP/moved"   # nothing may point at the prefix used at install time
P="$TMP/moved"
libdir=$(dirname "$(find "$P" -name 'libomniccl.so.1' | head -n1)")
[[ -d "$libdir" ]] || { echo "FAIL: no libomniccl.so.1 under $P" >&2; exit 1; }

# 1. Library file name follows the ABI major.
real=$(basename "$(readlink -f "$libdir/libomniccl.so.1")")
if [[ "$real" =~ ^libomniccl\.so\.1\.[0-9]+\.[0-9]+$ ]]; then
  ok "library file is $real"
else
  fail "library file is '$real'; expected libomniccl.so.1.<minor>.<patch>"
fi
soname=$(objdump -p "$libdir/$real" | awk '/SONAME/ {print $2}')
[[ "$soname" == libomniccl.so.1 ]] && ok "SONAME $soname" || fail "SONAME is '$soname'"

cat >"$TMP/app.c" <<'C'
#include <omniccl/omniccl.h>
#include <stdio.h>
int main(void) {
  int v = 0;
  if (occl_get_version(&v) != OCCL_SUCCESS || v != OCCL_VERSION_CODE) return 1;
  printf("omniccl %d\n", v);
  return 0;
}
C

# 2. pkg-config from the moved prefix.
export PKG_CONFIG_PATH="$libdir/pkgconfig"
if flags=$(pkg-config --cflags --libs omniccl 2>"$TMP/pc.err"); then
  case "$flags" in
    *"$P"*) ok "pkg-config points into the moved prefix: $flags" ;;
    *) fail "pkg-config flags '$flags' do not point into $P" ;;
  esac
  # shellcheck disable=SC2086
  if cc -std=c99 -o "$TMP/app_pc" "$TMP/app.c" $flags >"$TMP/cc.log" 2>&1; then
    out=$(LD_LIBRARY_PATH="$libdir" timeout 30 "$TMP/app_pc" 2>&1) &&
      ok "pkg-config program runs: $out" || fail "pkg-config program failed: $out"
  else
    cat "$TMP/cc.log" >&2
    fail "cc with pkg-config flags '$flags' failed"
  fi
else
  cat "$TMP/pc.err" >&2
  fail "pkg-config --cflags --libs omniccl failed"
fi
unset PKG_CONFIG_PATH

# 3. find_package(omniccl) from the moved prefix.
mkdir -p "$TMP/cmakeapp"
cp "$TMP/app.c" "$TMP/cmakeapp/app.c"
cat >"$TMP/cmakeapp/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.22)
project(app C)
find_package(omniccl 0.1 REQUIRED)
add_executable(app app.c)
target_link_libraries(app omniccl::omniccl)
CM
if timeout 120 cmake -S "$TMP/cmakeapp" -B "$TMP/cmakeapp/build" -DCMAKE_PREFIX_PATH="$P" \
     >"$TMP/cm.log" 2>&1 && timeout 120 cmake --build "$TMP/cmakeapp/build" >>"$TMP/cm.log" 2>&1; then
  out=$(timeout 30 "$TMP/cmakeapp/build/app" 2>&1) &&
    ok "find_package program runs: $out" || fail "find_package program failed: $out"
else
  cat "$TMP/cm.log" >&2
  fail "find_package(omniccl) project did not build"
fi

# 4. Installed tools find the library by themselves (RPATH $ORIGIN/../lib).
if out=$(timeout 30 "$P/bin/omniccl-bench" --help 2>&1); then
  ok "installed omniccl-bench starts"
else
  echo "$out" | head -n 5 >&2
  fail "installed omniccl-bench does not start without LD_LIBRARY_PATH"
fi
if out=$(timeout 60 "$P/bin/omniccl-run" -n 2 "$P/bin/omniccl-bench" -b 8 -e 8 -n 2 -w 1 --coll allreduce 2>&1); then
  ok "installed omniccl-run runs the installed omniccl-bench on 2 ranks"
else
  echo "$out" | tail -n 5 >&2
  fail "installed omniccl-run -n 2 omniccl-bench failed"
fi

if ((FAILS > 0)); then
  echo "install test: $FAILS check(s) failed" >&2
  exit 1
fi
echo "install test: all checks passed"
