#!/usr/bin/env bash
# The one GPU check: on a machine with a GPU (its driver, Python, PyTorch and
# CuPy; no network needed), runs in at most 8 minutes (OMNICCL_GPU_CHECK_SECONDS)
# every GPU test and
# benchmark of OmniCCL and writes everything into one results folder:
#   machine.log        nvidia-smi, driver, CUDA, NCCL, PyTorch, CuPy, CPU, kernel
#   relocate.log       where the build was made, and whether its paths were rewritten
#   ctest-gpu.log      ctest -L gpu (the CUDA kernels against the CPU kernels bit
#                      for bit, collectives on CUDA tensors through the C ABI on
#                      the staged and the CUDA IPC paths, stream order, a dead peer)
#   python-build.log   the Python package for this machine's interpreter, built
#                      against the CUDA build's library (the extension only), where
#                      no omniccl package imports here and OMNICCL_PYTHONPATH is unset
#   pytest-gpu.log     the Python GPU tests: CuPy and PyTorch arrays, and the
#                      torch.distributed backend on CUDA tensors
#   example-cuda.log   examples/cuda/all_reduce.cu on 2 ranks
#   kernel-bench.log   omniccl-cuda-kernel-bench (kernels against cudaMemcpy)
#   bench-<path>-n<N>.csv  omniccl-bench --device cuda, every collective, 8 B -
#                      1 GiB (the staged path to 256 MiB), 2 and 4 ranks on the
#                      GPU(s), path = cuda_ipc or staged
#   nccl-n<N>.csv      NCCL through PyTorch on the same sizes (bench/nccl_torch.py;
#                      several ranks per GPU need NCCL >= 2.30), or why it did not run
#   sweep-slice.csv    the staged path on 2 ranks, all_reduce, broadcast and
#                      all_gather at 16 and 256 MiB, once per OMNICCL_STAGED_SLICE
#                      of 2-32 MiB (the value in the CSV's transport column)
#   sweep-gpu-reduce.csv  the staged all_reduce and reduce_scatter, 64 KiB - 16 MiB,
#                      reduced always on the GPU (OMNICCL_STAGED_GPU_REDUCE=0) and
#                      never: where the GPU starts to win is the setting's default
#   profile-staged.log the staged all_reduce of 8 B - 64 KiB on 2 ranks with
#                      OMNICCL_STAGED_PROFILE=1: where a small call's microseconds go
#                      (the copies put on the stream, the worker's wake-up, the
#                      inputs' copies, the host collective, the copies back)
#   summary.txt        one line per step: what ran, its exit status, its time
# Run it first on any GPU machine; see docs/performance for how results are read.
#
# Usage: scripts/gpu-check.sh [BUILD_DIR] [OUT_DIR]
#   BUILD_DIR  a CUDA build of this checkout (default build-cuda): made on a CPU
#              machine with scripts/install-cuda-toolkit.sh and
#              cmake -DOMNICCL_CUDA=ON, then brought along, whole or as the part
#              scripts/gpu-bundle.sh makes of it (its paths are rewritten to
#              this machine's: step relocate); if it is missing and nvcc is on
#              PATH (or in CUDACXX), it is built here first.
#   OUT_DIR    default gpu-results/<date>-<host>
# Each step is bounded (timeout); a failing step is recorded and the next runs.
# OMNICCL_GPU_CHECK_STEPS (a regular expression of step names) runs only those.
set -uo pipefail
cd "$(dirname "$0")/.."
build=$(realpath -m "${1:-build-cuda}")
out=${2:-gpu-results/$(date -u +%Y%m%d-%H%M%S)-$(hostname -s)}
mkdir -p "$out"
out=$(realpath "$out")
start=$SECONDS
py=${PYTHON:-python3}

budget=${OMNICCL_GPU_CHECK_SECONDS:-480}

# Which steps run: a regular expression of their names (OMNICCL_GPU_CHECK_STEPS,
# e.g. 'relocate|ctest-gpu' to run the tests again); all by default.
only=${OMNICCL_GPU_CHECK_STEPS:-.*}

# step NAME SECONDS COMMAND...: runs COMMAND with its output in $out/NAME.log,
# and a line in summary.txt; at most SECONDS, and never past the budget.
step() {
  local name=$1 limit=$2 t0=$SECONDS rc=0 left=$((budget - (SECONDS - start)))
  shift 2
  if [[ ! $name =~ ^($only)$ ]]; then
    echo "$name: skipped, not in OMNICCL_GPU_CHECK_STEPS" | tee -a "$out/summary.txt"
    return 0
  fi
  if ((left < 15)); then
    echo "$name: skipped, the ${budget} s budget is spent" | tee -a "$out/summary.txt"
    return 0
  fi
  ((limit > left)) && limit=$left
  echo "== $name"
  # A child bash, so that COMMAND may be one of the functions below.
  timeout --kill-after=10 "$limit" bash -c '"$@"' step "$@" >"$out/$name.log" 2>&1 </dev/null || rc=$?
  echo "$name: exit $rc after $((SECONDS - t0)) s$([ $rc = 124 ] && echo " (timed out after $limit s)")" |
    tee -a "$out/summary.txt"
  return 0
}

machine() {
  nvidia-smi || echo "no nvidia-smi"
  nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv || true
  nvidia-smi topo -m 2>/dev/null || true
  "$py" - <<'EOF' || true
import platform
print("python", platform.python_version())
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda,
          "nccl", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-")
except Exception as e:  # noqa: BLE001 - any reason is worth recording
    print("torch: not usable:", e)
try:
    import cupy
    print("cupy", cupy.__version__, "runtime", cupy.cuda.runtime.runtimeGetVersion())
except Exception as e:  # noqa: BLE001
    print("cupy: not usable:", e)
EOF
  lscpu | grep -E "Model name|^CPU\(s\)" || true
  uname -r
  git log -1 --format='commit %H %s' 2>/dev/null || true
}

build_here() {
  local nvcc=${CUDACXX:-$(command -v nvcc || true)}
  [ -n "$nvcc" ] || { echo "no CUDA build at $build and no nvcc here: bring a CUDA build"; return 1; }
  cmake -S . -B "$build" -DOMNICCL_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DOMNICCL_BUILD_TESTS=ON \
    -DOMNICCL_BUILD_EXAMPLES=ON -DCMAKE_BUILD_TYPE=Release && cmake --build "$build" -j"$(nproc)"
}

# relocate: a build brought from another machine (scripts/gpu-bundle.sh)
# names its folder and the checkout by the paths they had there: in its CTest
# files (the tests' programs and working folders) and its programs' RUNPATH.
# Where they differ here, the CTest files are rewritten to this machine's
# paths (LD_LIBRARY_PATH, set below, finds libomniccl.so.1).
relocate() {
  local cache=$build/CMakeCache.txt was_build was_src here
  [ -f "$cache" ] || { echo "no $cache: not a CMake build folder"; return 1; }
  was_build=$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$cache")
  was_src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$cache")
  here=$(pwd -P)
  echo "built in $was_build from $was_src; here $build from $here"
  if [ "$was_build" = "$build" ] && [ "$was_src" = "$here" ]; then
    echo "same paths: nothing to rewrite"
    return 0
  fi
  # Through placeholders, so that one path inside the other is rewritten once.
  find "$build" \( -name CTestTestfile.cmake -o -name '*_include.cmake' -o -name '*_tests.cmake' \) -print0 |
    xargs -0 -r sed -i -e "s#$was_build#@OMNICCL_BUILD@#g" -e "s#$was_src#@OMNICCL_SOURCE@#g" \
      -e "s#@OMNICCL_BUILD@#$build#g" -e "s#@OMNICCL_SOURCE@#$here#g"
  sed -i -e "s#^CMAKE_CACHEFILE_DIR:INTERNAL=.*#CMAKE_CACHEFILE_DIR:INTERNAL=$build#" \
    -e "s#^CMAKE_HOME_DIRECTORY:INTERNAL=.*#CMAKE_HOME_DIRECTORY:INTERNAL=$here#" "$cache"
  echo "rewrote the CTest files' paths to this machine's"
}

# bench PATH N MAXBYTES: omniccl-bench on CUDA buffers, every collective.
bench() {
  OMNICCL_DEVICE_TRANSPORT=$1 "$build/tools/omniccl-run" -n "$2" "$build/tools/omniccl-bench" --device cuda \
    --coll all --sizes "8,1K,64K,1M,16M,256M$( [ "$3" = 1G ] && echo ,1G)" -n auto -w auto -c 1 --csv \
    --transport "$1" -t 60
}

# sweep SETTING COLLS SIZES VALUE...: the staged path on 2 ranks, once per
# VALUE of SETTING, which the CSV's transport column names.
sweep() {
  local name=$1 colls=$2 sizes=$3 v
  shift 3
  for v in "$@"; do
    env "$name=$v" OMNICCL_DEVICE_TRANSPORT=staged "$build/tools/omniccl-run" -n 2 "$build/tools/omniccl-bench" \
      --device cuda --coll "$colls" --sizes "$sizes" -n auto -w auto -c 1 --csv --transport "staged/$name=$v" -t 60
  done
}

# profile_staged SIZE...: OMNICCL_STAGED_PROFILE=1 on the staged all_reduce,
# one run per size, so that each summary is that size's.
profile_staged() {
  local size
  for size in "$@"; do
    echo "# all_reduce of $size"
    OMNICCL_STAGED_PROFILE=1 OMNICCL_DEVICE_TRANSPORT=staged "$build/tools/omniccl-run" -n 2 \
      "$build/tools/omniccl-bench" --device cuda --coll all_reduce --sizes "$size" -n auto -w auto -c 1 -t 60
  done
}

# python_here: the Python package for this machine's interpreter, in
# $build/python-here (OMNICCL_PYTHONPATH): only the extension is compiled,
# against the CUDA build's libomniccl.so.1 (bindings/python, OMNICCL_LIBRARY),
# since the build may come from a machine with another Python.
python_here() {
  local dir=$build/python-here lib
  lib=$(realpath "$build/capi/libomniccl.so.1") || return 1
  "$py" -c "import pybind11" || { echo "no pybind11 for $py: cannot build the extension here"; return 1; }
  # Not -Werror: another compiler's new warnings must not stop the tests.
  cmake -S bindings/python -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DOMNICCL_LIBRARY="$lib" -DOMNICCL_PYTHON_WERROR=OFF \
    -DPython_EXECUTABLE="$(command -v "$py")" -Dpybind11_DIR="$("$py" -m pybind11 --cmakedir)" &&
    cmake --build "$dir/build" -j"$(nproc)" &&
    cmake --install "$dir/build" --prefix "$dir/site" --component python &&
    cp -r bindings/python/omniccl/. "$dir/site/omniccl/" &&
    PYTHONPATH="$dir/site" "$py" -c "import omniccl; print('omniccl', omniccl.__version__, omniccl.__file__)"
}

pytest_gpu() {
  PYTHONPATH=${OMNICCL_PYTHONPATH:-} "$py" -c "import omniccl" || {
    echo "SKIPPED: no omniccl Python package imports here (pip install ./bindings/python -C" \
      "cmake.define.OMNICCL_CUDA=ON -C cmake.define.CMAKE_CUDA_COMPILER=\$nvcc, or set OMNICCL_PYTHONPATH)"
    return 0
  }
  # The CuPy and PyTorch arrays (test_cuda.py) and the torch.distributed
  # backend on CUDA tensors (test_torch_backend.py), each skipped, saying why,
  # where its framework or the GPU is missing.
  # The ranks the tests start import the package from OMNICCL_PYTHONPATH too (conftest.py).
  PYTHONPATH=${OMNICCL_PYTHONPATH:-} "$py" -m pytest -q -rs -p no:cacheprovider -m gpu \
    bindings/python/tests/test_cuda.py bindings/python/tests/test_torch_backend.py
}

export build py
export -f machine build_here relocate python_here bench sweep profile_staged pytest_gpu
echo "gpu-check: results in $out"
step machine 60 machine
if [ ! -x "$build/tools/omniccl-bench" ]; then
  budget=$((budget + 420))  # building here is not part of the check's time
  step build 420 build_here
fi
step relocate 30 relocate
export LD_LIBRARY_PATH=$build/capi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ -z "${OMNICCL_PYTHONPATH:-}" ] && ! "$py" -c "import omniccl" 2>/dev/null; then
  budget=$((budget + 120))  # as the build: compiling is not part of the check's time
  step python-build 120 python_here
  grep -q "^python-build: exit 0" "$out/summary.txt" && export OMNICCL_PYTHONPATH=$build/python-here/site
fi
# -j: the kernel tests, a process each, share the GPU; the collectives' tests
# are RUN_SERIAL, so they still run alone.
step ctest-gpu 150 ctest --test-dir "$build" -L gpu -j 8 --output-on-failure --timeout 120
step pytest-gpu 90 pytest_gpu
step example-cuda 30 "$build/tools/omniccl-run" -n 2 "$build/examples/cuda/all_reduce_cuda"
step kernel-bench 45 "$build/tools/omniccl-cuda-kernel-bench"
for n in 2 4; do
  step "bench-cuda_ipc-n$n" 50 bench cuda_ipc "$n" 1G
  step "bench-staged-n$n" 40 bench staged "$n" 256M
  step "nccl-n$n" 45 "$py" bench/nccl_torch.py --ranks "$n"
  [ "$n" = 2 ] || continue
  step sweep-slice 60 sweep OMNICCL_STAGED_SLICE all_reduce,broadcast,all_gather 16M,256M \
    2097152 4194304 8388608 16777216 33554432
  step sweep-gpu-reduce 30 sweep OMNICCL_STAGED_GPU_REDUCE all_reduce,reduce_scatter 64K,256K,1M,4M,16M \
    0 1099511627776
  step profile-staged 20 profile_staged 8 1K 64K
done
for f in "$out"/bench-*.log "$out"/nccl-*.log "$out"/sweep-*.log; do
  [ -f "$f" ] && grep -E '^(omniccl|nccl),' "$f" >"${f%.log}.csv"
done
echo "gpu-check: done in $((SECONDS - start)) s; results in $out" | tee -a "$out/summary.txt"
