# Shared by the SDK tests (run_*.cmake, cmake -P): each installs the tally build tree into a fresh
# prefix under WORK_DIR and builds an out-of-tree project against it, as a plugin author does.
#   -DSOURCE_DIR=<tally source> -DBINARY_DIR=<tally build> -DWORK_DIR=<scratch> -DGENERATOR=<gen>

# Runs a command; the test fails with its output when it exits non-zero. Its stdout: step_out.
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(step_out "${out}" PARENT_SCOPE)
endfunction()

# Installs tally into ${WORK_DIR}/prefix (WORK_DIR emptied first); sets `prefix`.
macro(install_tally)
  file(REMOVE_RECURSE "${WORK_DIR}")
  set(prefix "${WORK_DIR}/prefix")
  step(${CMAKE_COMMAND} --install "${BINARY_DIR}" --prefix "${prefix}")
  foreach(f bin/tally include/tally/sdk.hpp lib/cmake/tally/tallyConfig.cmake
            lib/tally/plugins/libtally_npy.so)
    if(NOT EXISTS "${prefix}/${f}")
      message(FATAL_ERROR "the install lacks ${f}")
    endif()
  endforeach()
endmacro()

# Configures and builds the project in `src` against the install, into `build`, with warnings as
# errors. The project must not set a C++ standard, and it must still compile as C++20: the
# exported tally targets carry cxx_std_20 (g++ 12 alone compiles C++17).
function(build_against_install src build)
  file(GLOB_RECURSE lists "${src}/CMakeLists.txt")
  foreach(f IN LISTS lists)
    file(READ "${f}" text)
    string(REGEX REPLACE "#[^\n]*" "" text "${text}")  # comments may say what the code does not
    if(text MATCHES "CMAKE_CXX_STANDARD|cxx_std_")
      message(FATAL_ERROR "${f} sets a C++ standard: the test proves the SDK carries it")
    endif()
  endforeach()
  step(${CMAKE_COMMAND} -S "${src}" -B "${build}" -G "${GENERATOR}" "-DCMAKE_PREFIX_PATH=${prefix}"
       "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Wpedantic -Werror" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
  step(${CMAKE_COMMAND} --build "${build}")
  file(READ "${build}/compile_commands.json" commands)
  if(NOT commands MATCHES "-std=(c|gnu)\\+\\+20")
    message(FATAL_ERROR "the plugin was not compiled as C++20:\n${commands}")
  endif()
endfunction()
