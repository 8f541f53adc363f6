# Builds the CUDA parts of tally -- the nccl backend, the metric kernels, tests/gpu and these
# benchmarks -- in a tree whose CMakeLists.txt files do not (yet) add them, without editing them:
#
#   cmake -S . -B build-gpu -G Ninja -DCMAKE_PROJECT_tally_INCLUDE=$PWD/bench/gpu/integrate.cmake
#
# CMake includes this file right after project(tally); it runs cmake/TallyCuda.cmake (detection
# only) and defers the rest to the end of the top-level CMakeLists.txt, when the engine, the
# plugins and the test support exist. CMake forbids add_subdirectory() there, so the folders'
# CMakeLists.txt are include()d instead (they name their files by CMAKE_CURRENT_LIST_DIR, so both
# ways work). Each one is skipped when the tree already adds it, so the file stays harmless once
# the integration lines are in (bench/gpu/run.sh uses it either way).
include("${CMAKE_CURRENT_LIST_DIR}/../../cmake/TallyCuda.cmake")

function(_tally_gpu_integrate)
  get_filename_component(root "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../.." ABSOLUTE)
  if(TALLY_NCCL_BACKEND AND NOT TARGET tally_plugin_nccl)
    include("${root}/backends/nccl/CMakeLists.txt")
  endif()
  if(TALLY_CUDA_KERNELS AND TARGET tally_plugin_classification AND NOT TARGET tally_classification_cuda)
    include("${root}/plugins/classification/cuda/CMakeLists.txt")
  endif()
  if(TALLY_BUILD_TESTS AND TARGET tally_test_support AND NOT TARGET test_nccl_bootstrap
     AND EXISTS "${root}/tests/gpu/CMakeLists.txt")
    include("${root}/tests/gpu/CMakeLists.txt")
  endif()
  if(NOT TARGET tally_gpu_bench AND EXISTS "${root}/bench/gpu/CMakeLists.txt")
    include("${root}/bench/gpu/CMakeLists.txt")
  endif()
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _tally_gpu_integrate)
