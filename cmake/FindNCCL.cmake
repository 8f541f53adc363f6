# FindNCCL: the NVIDIA Collective Communications Library (nccl.h and libnccl.so).
#
# Searched in, in order: NCCL_ROOT / NCCL_HOME (variables or environment), the CUDA toolkit's
# folders (CUDAToolkit_INCLUDE_DIRS, CUDAToolkit_LIBRARY_DIR, CUDAToolkit_LIBRARY_ROOT), then
# /usr/local/cuda and the system folders.
#
# Defines
#   NCCL_FOUND, NCCL_INCLUDE_DIR, NCCL_LIBRARY, NCCL_VERSION (from nccl.h: NCCL_MAJOR.MINOR.PATCH)
#   NCCL::headers  an interface target: the include folder only (for code that dlopens libnccl)
#   NCCL::NCCL     the library itself, with its include folder
include_guard(GLOBAL)

set(_nccl_roots ${NCCL_ROOT} $ENV{NCCL_ROOT} ${NCCL_HOME} $ENV{NCCL_HOME})
set(_nccl_include_hints ${CUDAToolkit_INCLUDE_DIRS})
set(_nccl_library_hints ${CUDAToolkit_LIBRARY_DIR})
if(CUDAToolkit_LIBRARY_ROOT)
  list(APPEND _nccl_include_hints "${CUDAToolkit_LIBRARY_ROOT}/include")
  list(APPEND _nccl_library_hints "${CUDAToolkit_LIBRARY_ROOT}/lib64" "${CUDAToolkit_LIBRARY_ROOT}/lib")
endif()

find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${_nccl_roots} ${_nccl_include_hints}
  PATHS /usr/local/cuda /usr/local /usr
  PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2
  HINTS ${_nccl_roots} ${_nccl_library_hints}
  PATHS /usr/local/cuda /usr/local /usr
  PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu targets/x86_64-linux/lib)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_version_lines
       REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${_part} +([0-9]+)" _match "${_nccl_version_lines}")
    set(_nccl_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  if(NOT _nccl_MAJOR STREQUAL "")
    set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
  endif()
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
  VERSION_VAR NCCL_VERSION)
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)

if(NCCL_FOUND)
  if(NOT TARGET NCCL::headers)
    add_library(NCCL::headers INTERFACE IMPORTED)
    set_target_properties(NCCL::headers PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  endif()
  if(NOT TARGET NCCL::NCCL)
    add_library(NCCL::NCCL UNKNOWN IMPORTED)
    set_target_properties(NCCL::NCCL PROPERTIES
      IMPORTED_LOCATION "${NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  endif()
endif()
unset(_nccl_roots)
unset(_nccl_include_hints)
unset(_nccl_library_hints)
