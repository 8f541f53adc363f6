# CUDA and NCCL detection for tally: the nccl backend (backends/nccl) and the CUDA kernels of the
# classification metrics (plugins/classification/cuda). Include it from the top-level
# CMakeLists.txt after find_package(MPI); it only detects and sets variables, it adds no target:
#
#   TALLY_WITH_CUDA      option (default ON); set to OFF in this configure when the toolkit is
#                        missing, so everything else builds without CUDA
#   TALLY_CUDA_FOUND     the CUDA toolkit (headers, CUDA::cudart_static) was found
#   TALLY_CUDA_KERNELS   nvcc works and the CUDA language is enabled: the metric kernels build
#   TALLY_NCCL_BACKEND   CUDA and NCCL >= 2.14 were found: the nccl backend builds
#
# CMAKE_CUDA_ARCHITECTURES defaults to "80-real;90": SASS for A100 (sm_80) and H100/H200 (sm_90),
# plus compute_90 PTX that newer GPUs JIT-compile. Override it on the command line, e.g.
# -DCMAKE_CUDA_ARCHITECTURES=native or "80;86;89;90".
include_guard(GLOBAL)

option(TALLY_WITH_CUDA "Build the nccl backend and the CUDA kernels of the metrics (needs the CUDA toolkit; NCCL for the backend)" ON)

set(TALLY_CUDA_FOUND OFF)
set(TALLY_CUDA_KERNELS OFF)
set(TALLY_NCCL_BACKEND OFF)
set(TALLY_NCCL_MIN_VERSION 2.14)  # non-blocking communicators (config.blocking = 0), ncclCommFinalize

if(NOT TALLY_WITH_CUDA)
  message(STATUS "tally: TALLY_WITH_CUDA is OFF: no nccl backend, no CUDA metric kernels")
  return()
endif()

# The toolkit in its usual place is found without help; CUDAToolkit_ROOT or CUDACXX point
# elsewhere.
if(NOT DEFINED CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)
if(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::cudart_static)
  message(WARNING "tally: CUDA toolkit not found (set CUDAToolkit_ROOT to its folder): the nccl backend "
                  "and the CUDA metric kernels are not built; everything else is. -DTALLY_WITH_CUDA=OFF "
                  "silences this.")
  set(TALLY_WITH_CUDA OFF)
  return()
endif()
set(TALLY_CUDA_FOUND ON)

# ---- nvcc: the metric kernels ---------------------------------------------------------------
include(CheckLanguage)
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND CUDAToolkit_NVCC_EXECUTABLE)
  set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}")
endif()
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80-real;90" CACHE STRING
        "GPU architectures of the tally kernels (80: A100, 90: H100/H200)")
  endif()
  if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
    set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}" CACHE FILEPATH "The host compiler of nvcc")
  endif()
  enable_language(CUDA)
  set(TALLY_CUDA_KERNELS ON)
  message(STATUS "tally: CUDA ${CUDAToolkit_VERSION}: metric kernels for architectures ${CMAKE_CUDA_ARCHITECTURES}")
else()
  message(WARNING "tally: the CUDA toolkit has no working nvcc: the CUDA metric kernels are not built "
                  "(metrics refuse CUDA tensors)")
endif()

# ---- NCCL: the nccl backend -----------------------------------------------------------------
list(APPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")
list(REMOVE_DUPLICATES CMAKE_MODULE_PATH)
find_package(NCCL QUIET)
if(NOT NCCL_FOUND)
  message(WARNING "tally: NCCL not found (looked for nccl.h and libnccl.so under NCCL_ROOT, the CUDA "
                  "toolkit and /usr/local/cuda): the nccl backend is not built")
elseif(NCCL_VERSION AND NCCL_VERSION VERSION_LESS TALLY_NCCL_MIN_VERSION)
  message(WARNING "tally: NCCL ${NCCL_VERSION} at ${NCCL_INCLUDE_DIR} is older than ${TALLY_NCCL_MIN_VERSION} "
                  "(non-blocking communicators): the nccl backend is not built")
else()
  set(TALLY_NCCL_BACKEND ON)
  message(STATUS "tally: NCCL ${NCCL_VERSION} (${NCCL_LIBRARY}): the nccl backend is built")
endif()
