#!/usr/bin/env bash
# Installs the CUDA compiler toolchain from PyPI into a private virtual
# environment and prints the path of its nvcc (the only line on stdout), for
# -DCMAKE_CUDA_COMPILER=... No GPU or driver is needed to compile.
#
# Usage: scripts/install-cuda-toolkit.sh [DIR]     (default: build/cuda-toolkit)
#
# The wheels (all under site-packages/nvidia/cu13/):
#   nvidia-cuda-nvcc     bin/nvcc, ptxas, fatbinary, nvlink, cudafe++, nvcc.profile
#   nvidia-nvvm          nvvm/bin/cicc, nvvm/libdevice (a dependency of nvidia-cuda-nvcc)
#   nvidia-cuda-crt      include/crt/*.h (host_config.h, ... that nvcc includes)
#   nvidia-cuda-runtime  include/cuda_runtime*.h, driver_types.h, cuda_fp16.h,
#                        cuda_bf16.h, cuda_fp8.h, ..., lib/libcudart_static.a,
#                        lib/libcudart.so.13, lib/libcudadevrt.a
#   nvidia-cuda-cccl     include/nv/target and include/cccl/{cuda,cub,thrust,nv}
#                        (CCCL, which cuda_fp16.h / cuda_bf16.h / cuda_fp8.h need)
# CCCL has its own version numbers on PyPI (13.<CCCL major>.<minor>.<patch>.<build>):
# CCCL 3.5 is the one that ships with CUDA 13.5.
#
# Idempotent: a DIR that already holds this version is reused.
# OMNICCL_CUDA_PIP_VERSION overrides the pinned version, OMNICCL_CUDA_CCCL_PIP_VERSION
# the CCCL one.
set -euo pipefail
dir=$(realpath -m "${1:-build/cuda-toolkit}")  # absolute: it ends up in CMake caches
version=${OMNICCL_CUDA_PIP_VERSION:-13.5.37}
cccl_version=${OMNICCL_CUDA_CCCL_PIP_VERSION:-13.3.5.0.6}
python=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

find_nvcc() { compgen -G "$dir/lib/python3*/site-packages/nvidia/cu13/bin/nvcc" | head -n1; }

stamp="$dir/.omniccl-cuda-$version-cccl-$cccl_version"
if [ -f "$stamp" ] && nvcc=$(find_nvcc) && [ -x "$nvcc" ]; then
  echo "$nvcc"
  exit 0
fi

rm -rf "$dir"
if ! "$python" -m venv "$dir" </dev/null >&2; then
  # Debian ships venv's ensurepip separately.
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing python3-venv" >&2
    rm -rf "$dir"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq </dev/null >&2
    apt-get install -y -qq python3-venv </dev/null >&2
    "$python" -m venv "$dir" </dev/null >&2
  else
    echo "install-cuda-toolkit.sh: '$python -m venv' failed; install python3-venv" >&2
    exit 1
  fi
fi
echo "== pip install CUDA $version toolkit wheels into $dir" >&2
"$dir/bin/python" -m pip install --quiet --only-binary=:all: \
  "nvidia-cuda-nvcc==$version" "nvidia-cuda-runtime==$version" "nvidia-cuda-crt==$version" \
  "nvidia-cuda-cccl==$cccl_version" </dev/null >&2
nvcc=$(find_nvcc) || { echo "install-cuda-toolkit.sh: no nvcc under $dir after pip install" >&2; exit 1; }
"$nvcc" --version >&2
touch "$stamp"
echo "$nvcc"
