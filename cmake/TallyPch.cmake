# Precompiled headers for the tally tree (not installed: out-of-tree plugins build without them).
#
# The standard headers every plugin includes through the SDK (and for the tests gtest, msgpack-c
# and fmt) are parsed once per kind and reused by every target of that kind. The SDK headers
# themselves include no msgpack or Boost header (ABI 7). Two kinds, because a
# PCH is only valid for targets compiled with the same flags:
#   sdk  - plugins (MODULE libraries with hidden symbols),
#   test - GoogleTest executables (adds gtest and fmt).
# -DTALLY_PCH=OFF builds without them (each header is then parsed in every file, as a user's
# plugin build does).
option(TALLY_PCH "Precompile the standard headers (plugins) and gtest, msgpack and fmt (tests) once" ON)

set(_tally_pch_std <algorithm> <array> <cmath> <cstdint> <cstring> <functional> <limits> <map>
                   <memory> <optional> <span> <string> <string_view> <type_traits> <utility>
                   <variant> <vector>)

# The PCH owner is a target of the same kind as its users (GCC refuses a PCH built with -fPIC in
# a -fPIE compile): an OBJECT library for plugins, an executable (gtest_main's) for tests.
function(_tally_pch_target name kind)
  set(src ${CMAKE_BINARY_DIR}/${name}.cpp)
  if(NOT EXISTS ${src})
    file(WRITE ${src} "// Empty: ${name} only owns a precompiled header (cmake/TallyPch.cmake).\n")
  endif()
  if(kind STREQUAL "test")
    add_executable(${name} ${src})
  else()
    add_library(${name} OBJECT ${src})
  endif()
endfunction()

# tally_use_pch(TARGET KIND): TARGET reuses the precompiled header of KIND (sdk or test).
function(tally_use_pch target kind)
  if(NOT TALLY_PCH OR NOT PROJECT_NAME STREQUAL "tally")
    return()
  endif()
  set(pch tally_pch_${kind})
  if(NOT TARGET ${pch})
    _tally_pch_target(${pch} ${kind})
    if(kind STREQUAL "sdk")
      set_target_properties(${pch} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
      target_link_libraries(${pch} PRIVATE tally_sdk tally_warnings)
      target_precompile_headers(${pch} PRIVATE ${_tally_pch_std})
    elseif(kind STREQUAL "test")
      target_link_libraries(${pch} PRIVATE tally_test_support)
      target_precompile_headers(${pch} PRIVATE <gtest/gtest.h> <msgpack.hpp> <fmt/format.h> <filesystem> <fstream> ${_tally_pch_std})
    else()
      message(FATAL_ERROR "tally_use_pch(${target} ${kind}): kind must be sdk or test")
    endif()
  endif()
  target_precompile_headers(${target} REUSE_FROM ${pch})
endfunction()
