# OMNICCL_CUDA=AUTO|ON|OFF: whether kernels/cuda is built.
#   AUTO  build it when a CUDA compiler is found (CMAKE_CUDA_COMPILER, CUDACXX
#         or nvcc on PATH), otherwise build without CUDA and say so;
#   ON    a CUDA compiler is required (configure fails without one);
#   OFF   no CUDA.
# scripts/install-cuda-toolkit.sh installs nvcc from PyPI and prints the path
# to pass as -DCMAKE_CUDA_COMPILER. Sets OMNICCL_HAVE_CUDA.
#
# The CUDA runtime is linked statically (libcudart_static.a, as NCCL does):
# libomniccl.so then has no dependency on libcudart.so or libcuda.so, and the
# runtime opens the driver (libcuda.so.1) with dlopen at the first CUDA call.
# On a machine without a driver or GPU the library loads and CPU collectives
# run; CUDA calls report "no CUDA driver/GPU found".
set(OMNICCL_CUDA AUTO CACHE STRING "Build the CUDA kernels: AUTO, ON or OFF")
set_property(CACHE OMNICCL_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${OMNICCL_CUDA}" _occl_cuda)
if(NOT _occl_cuda MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "OMNICCL_CUDA must be AUTO, ON or OFF, not '${OMNICCL_CUDA}'")
endif()

set(OMNICCL_HAVE_CUDA OFF)
if(NOT _occl_cuda STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # sm_90 machine code plus compute_90 PTX that newer GPUs JIT-compile.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual" CACHE STRING "CUDA architectures")
    endif()
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc's C++20 flag yet (nvcc >= 12 has it).
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_EXTENSIONS OFF)
    set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
    # (Not find_package(CUDAToolkit): it wants libcudart.so, which the
    # wheels ship only as libcudart.so.13; static cudart is all we link.)
    set(OMNICCL_HAVE_CUDA ON)
    message(STATUS "OmniCCL CUDA: ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION} at ${CMAKE_CUDA_COMPILER}, "
                   "architectures ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(_occl_cuda STREQUAL "ON")
    message(FATAL_ERROR "OMNICCL_CUDA=ON but no CUDA compiler was found. Install one with "
                        "'scripts/install-cuda-toolkit.sh DIR' and pass the path it prints as "
                        "-DCMAKE_CUDA_COMPILER=..., or configure with -DOMNICCL_CUDA=OFF.")
  else()
    message(STATUS "OmniCCL CUDA: OFF (OMNICCL_CUDA=AUTO and no CUDA compiler found; "
                   "see scripts/install-cuda-toolkit.sh)")
  endif()
else()
  message(STATUS "OmniCCL CUDA: OFF (OMNICCL_CUDA=OFF)")
endif()
