#!/usr/bin/env bash
# Sanitizer and fuzzing suites (run by scripts/test-all.sh in CI).
#
#   scripts/sanitize.sh [asan|tsan|fuzz|all] [BUILD_ROOT]   (default: all build-san)
#
#   asan  clang, AddressSanitizer + UndefinedBehaviorSanitizer (every finding
#         fatal), libFuzzer coverage: the unit, abi, examples and hardening
#         suites, the errors, api and faults suites, then a subset of the
#         collectives matrix (OMNICCL_SAN_MATRIX=full: all of it, ~6 min).
#   fuzz  the libFuzzer targets of tests/fuzz, from the asan build, each for
#         OMNICCL_FUZZ_SECONDS (default 15) from its checked-in corpus in
#         tests/fuzz/corpus/<target>; a crash, leak or sanitizer report fails.
#   tsan  gcc, ThreadSanitizer: the threaded tests (the staged CUDA path and
#         the CUDA IPC path over the emulated GPU: caller, worker, watchdog
#         and stream threads; two threads on one
#         communicator and the issuer handed between threads, work handles
#         waited with long deadlines, the store server's thread with many
#         clients, two meshes built by two threads).
# The sets are kept small so the three builds fit CI's time; build more
# targets in build-san/* and run ctest there for a wider sweep.
#
# Each build dir is configured once and built only for the targets it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
root=${2:-build-san}
jobs=${OMNICCL_BUILD_JOBS:-2}
fuzz_seconds=${OMNICCL_FUZZ_SECONDS:-15}
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
fuzz_targets=(store_server unique_id init_method settings capi_args hello)

# Line tables are all the sanitizers' reports need (file:line in every
# frame); full debug information made these builds about a third slower.
# Unity builds (a folder's sources compiled as one unit) compile the engine
# in a fraction of the time: most of it is the same headers parsed again for
# each source file. The release build (scripts/test-all.sh) keeps one unit
# a file, so that each file still compiles on its own.
configure() {  # configure DIR CC CXX SANITIZE [extra cmake args]
  local dir=$1 cc=$2 cxx=$3 san=$4
  shift 4
  local debug=-gline-tables-only
  [ "$cc" = gcc ] && debug=-g1
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 $debug -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 $debug -DNDEBUG" \
    -DOMNICCL_SANITIZE="$san" -DOMNICCL_BUILD_TESTS=ON -DOMNICCL_BUILD_EXAMPLES=ON -DCMAKE_UNITY_BUILD=ON \
    "${launcher[@]}" "$@" >/dev/null
}

run_asan() {
  local dir=$root/asan
  configure "$dir" clang clang++ address,undefined -DOMNICCL_FUZZ=ON
  local t=(core_test kernels_test store_test rendezvous_test handshake_test hello_retry_test net_close_test
           mesh_setup_test hardening_test abi_runtime_check idle_copy_test
           omniccl-run shm_link_test transport_registry_test errors_test api_test faults_test matrix_test)
  local e
  # Every example the examples label runs below (one per source file).
  for e in examples/c/*.c; do
    e=$(basename "$e" .c)
    t+=("example_c_$e")
  done
  for e in examples/cpp/*.cc; do t+=("example_cpp_$(basename "$e" .cc)"); done
  [ "$what" = asan ] || t+=("${fuzz_targets[@]/#/fuzz_}")
  echo "== asan+ubsan: building ${#t[@]} targets"
  cmake --build "$dir" -j"$jobs" --target "${t[@]}" >/dev/null
  echo "== asan+ubsan: unit, abi and examples suites, then the hardening suite"
  # Leak checking stays on; ranks are forked processes, each checked at exit.
  export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # (abi_symbols and abi_abidiff* check the release library's exports and
  # ABI, and the ABI check itself: the main build runs them. The quickstart
  # runs the README's build command, which here would only build
  # omniccl-bench once more; its all_reduce is example_c_all_reduce.)
  ctest --test-dir "$dir" -j2 --output-on-failure --timeout 600 -L 'unit|abi|examples' \
    -E '^(abi_(symbols|abidiff.*)|example_quickstart)$'
  ctest --test-dir "$dir" --output-on-failure --timeout 600 -R '^HardeningTest\.'
  # Bad input, the API's edges and faults (killed peers, aborts), each suite
  # one process (its ranks forked): about 1 minute, and 2 more to build.
  echo "== asan+ubsan: errors, api and faults suites"
  local s
  for s in errors_test api_test faults_test; do
    timeout 600 "$dir/tests/collectives/$s"
  done
  # The collectives matrix (tests/collectives/matrix_test.cc). All of it takes
  # ~6 min here (8 ranks over tcp alone ~40 s a job), so CI runs a subset
  # that keeps its coverage (~100 s, plus ~35 s to build): every job
  # covers every dtype x reduce op (premul_sum included) x size {0, 1, 7,
  # 3n+1, 1000} and all_reduce above the 32 KiB tuning switch; kept are 3
  # ranks (odd) and 4 (a power of two), shm and tcp, the tuned choice and
  # every algorithm set (each (collective, algorithm) pair once per rank
  # count and transport), the in-process (threads) mesh once, and the
  # >= 16 MiB buffers (large paths, shm's single-copy path) for 3 ranks with
  # every set and 4 ranks with set1 (recursive doubling/halving, bruck).
  # By hand: OMNICCL_SAN_MATRIX=full scripts/sanitize.sh asan runs all of it.
  local matrix='CollectiveMatrixSets.*:Ranks/CollectiveMatrix.*/n3_*:Ranks/CollectiveMatrix.*/n4_*'
  matrix+=':Threads/CollectiveMatrixThreads.*/n4_tcp_tuned:Ranks/CollectiveLarge.*/n3_*:Ranks/CollectiveLarge.*/n4_*_set1'
  [ "${OMNICCL_SAN_MATRIX:-}" = full ] && matrix='*'
  echo "== asan+ubsan: collectives matrix ($([ "$matrix" = '*' ] && echo full || echo subset))"
  local t0=$SECONDS
  timeout 900 "$dir/tests/collectives/matrix_test" --gtest_filter="$matrix" --gtest_brief=1
  echo "== asan+ubsan: collectives matrix done in $((SECONDS - t0)) s"
  unset ASAN_OPTIONS UBSAN_OPTIONS
}

run_fuzz() {
  local dir=$root/asan
  [ -x "$dir/tests/fuzz/fuzz_hello" ] || {
    configure "$dir" clang clang++ address,undefined -DOMNICCL_FUZZ=ON
    cmake --build "$dir" -j"$jobs" --target "${fuzz_targets[@]/#/fuzz_}" >/dev/null
  }
  local failed=0 t
  for t in "${fuzz_targets[@]}"; do
    local corpus=tests/fuzz/corpus/$t work
    work=$(mktemp -d)
    cp -r "$corpus"/. "$work"/ 2>/dev/null || true
    # New inputs go to a scratch copy; the checked-in corpus only seeds.
    if ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 OMNICCL_DEBUG=NONE \
        "$dir/tests/fuzz/fuzz_$t" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 \
        -max_len=4096 -print_final_stats=1 "$work" >"$work.log" 2>&1; then
      echo "fuzz_$t: ok, $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$work.log" | grep -o '[0-9]*$') runs in ${fuzz_seconds}s"
    else
      echo "fuzz_$t: FAILED"; tail -40 "$work.log"; failed=1
      mkdir -p "$root/fuzz-crashes"; cp crash-* leak-* timeout-* "$root/fuzz-crashes/" 2>/dev/null || true
    fi
    rm -rf "$work" "$work.log"
  done
  rm -f crash-* leak-* timeout-* 2>/dev/null || true
  return $failed
}

run_tsan() {
  local dir=$root/tsan
  configure "$dir" gcc g++ thread
  local t=(store_test handshake_test hello_retry_test hardening_test gpu_staging_test cuda_ipc_test
           cuda_ipc_registration_test fd_passing_test issuer_test
           reliability_test)
  echo "== tsan: building ${t[*]}"
  cmake --build "$dir" -j"$jobs" --target "${t[@]}" >/dev/null
  echo "== tsan: threaded and asynchronous tests"
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir "$dir" -j2 --output-on-failure --timeout 600 \
    -R '^(Issuer\.|TcpStore\.|Handshake\.|HelloRetry\.|HardeningTest\.(SecondThread|LongestTimeout|JobToken|AbortFromAnotherThread)|GpuStaging\.|CudaIpc\.|CudaIpcRegistration\.|IpcCache\.|FdPassing\.|TwoThreadsOnOneCommunicator\.)'
}

start=$(date +%s)
case $what in
  asan) run_asan ;;
  fuzz) run_fuzz ;;
  tsan) run_tsan ;;
  all) run_asan; run_fuzz; run_tsan ;;
  *) echo "usage: $0 [asan|tsan|fuzz|all] [BUILD_ROOT]" >&2; exit 2 ;;
esac
echo "== sanitizers ($what): done in $(( $(date +%s) - start )) s"
