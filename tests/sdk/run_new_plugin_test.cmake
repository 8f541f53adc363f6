# `tally new-plugin`: the installed tally writes a skeleton, which builds against that install
# (no C++ standard set) and whose own CTest test passes: it runs the plugin on the skeleton's
# example config and checks the documented result.
#   cmake -DSOURCE_DIR=... -DBINARY_DIR=... -DWORK_DIR=... -DGENERATOR=... -P run_new_plugin_test.cmake
include("${CMAKE_CURRENT_LIST_DIR}/sdk_common.cmake")
install_tally()

set(skel "${WORK_DIR}/skeletons/my_mean")
step("${prefix}/bin/tally" new-plugin my_mean "${skel}")
foreach(f CMakeLists.txt my_mean.cpp eval.yaml data.jsonl README.md .gitignore)
  if(NOT EXISTS "${skel}/${f}")
    message(FATAL_ERROR "the skeleton lacks ${f}")
  endif()
endforeach()
build_against_install("${skel}" "${skel}/build")
step("${prefix}/bin/tally" plugins --path "${skel}/build")
if(NOT step_out MATCHES "metric MyMean")
  message(FATAL_ERROR "tally plugins does not list the skeleton's MyMean:\n${step_out}")
endif()
get_filename_component(cmake_bin "${CMAKE_COMMAND}" DIRECTORY)
find_program(ctest NAMES ctest HINTS "${cmake_bin}" REQUIRED)
step(env -u TALLY_PLUGIN_PATH "${ctest}" --test-dir "${skel}/build" --output-on-failure)
if(NOT step_out MATCHES "100% tests passed, 0 tests failed out of 1")
  message(FATAL_ERROR "the skeleton's test did not run and pass:\n${step_out}")
endif()
message(STATUS "new-plugin test: the skeleton built against ${prefix} and its test passed")
