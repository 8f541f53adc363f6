# The SDK test: install tally into a fresh prefix, build tests/sdk against it with
# find_package(tally) (the project sets no C++ standard), and run the plugin through the installed
# `tally run`.
#   cmake -DSOURCE_DIR=... -DBINARY_DIR=... -DWORK_DIR=... -DGENERATOR=... -P run_sdk_test.cmake
include("${CMAKE_CURRENT_LIST_DIR}/sdk_common.cmake")
install_tally()
build_against_install("${SOURCE_DIR}/tests/sdk" "${WORK_DIR}/build")
if(NOT EXISTS "${WORK_DIR}/build/libtally_example_error_rate.so")
  message(FATAL_ERROR "the plugin was not built as libtally_example_error_rate.so")
endif()

# The installed tally lists the plugin when pointed at it...
step("${prefix}/bin/tally" plugins --path "${WORK_DIR}/build")
if(NOT step_out MATCHES "metric ExampleErrorRate")
  message(FATAL_ERROR "tally plugins does not list ExampleErrorRate:\n${step_out}")
endif()

# ... and runs it, with its own built-in npy reader found beside the installed binary.
step(env -u TALLY_PLUGIN_PATH "${prefix}/bin/tally" run "${SOURCE_DIR}/tests/sdk/eval.yaml"
     "--set" "plugins.paths=[${WORK_DIR}/build]" -o "${WORK_DIR}/results.json")
message(STATUS "${step_out}")
file(READ "${WORK_DIR}/results.json" json)
# Expected values from numpy 2.x on the example data: e = argmax(preds, 1) != labels;
# e.sum() = 65 of 897, and np.bincount(labels[e], minlength=10) = [4,9,2,13,8,9,1,4,9,6]. The
# JSON holds the shortest text that round-trips 65/897.
if(NOT json MATCHES "\"error_rate\": 0\\.07246376811594203[,\n]")
  message(FATAL_ERROR "error_rate is not 65/897 = 0.07246376811594203:\n${json}")
endif()
string(JSON errors GET "${json}" results ExampleErrorRate errors_per_class)
string(REGEX REPLACE "[ \n]" "" errors "${errors}")
if(NOT errors STREQUAL "[4,9,2,13,8,9,1,4,9,6]")
  message(FATAL_ERROR "errors_per_class is ${errors}")
endif()
message(STATUS "sdk test: out-of-tree plugin built against ${prefix} and ran: error_rate 65/897")
