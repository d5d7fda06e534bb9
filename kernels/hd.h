// OMNICCL_HD marks small inline functions that the CPU kernels and the CUDA
// kernels share (kernels/cpu/ops.h, half.h, fp8.h): host-only under a C++
// compiler, host and device under nvcc. Sharing one definition is what makes
// GPU results equal to CPU results bit for bit.
#pragma once

#if defined(__CUDACC__)
#define OMNICCL_HD __host__ __device__ __forceinline__
#else
#define OMNICCL_HD inline
#endif
