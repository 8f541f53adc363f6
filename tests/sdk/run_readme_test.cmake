# The docs' plugin, verbatim: the ```cpp, ```cmake and ```yaml blocks of docs/plugins.md's section
# "Writing a metric plugin" are extracted here (so the page cannot drift from what builds),
# built against a freshly installed tally with no C++ standard set, listed by
# `tally plugins --path`, and run on the example data with `tally run`.
#   cmake -DSOURCE_DIR=... -DBINARY_DIR=... -DWORK_DIR=... -DGENERATOR=... -P run_readme_test.cmake
include("${CMAKE_CURRENT_LIST_DIR}/sdk_common.cmake")
install_tally()

file(READ "${SOURCE_DIR}/docs/plugins.md" readme)
string(FIND "${readme}" "\n## Writing a metric plugin\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "docs/plugins.md has no section '## Writing a metric plugin'")
endif()
math(EXPR at "${at} + 1")
string(SUBSTRING "${readme}" ${at} -1 section)
string(FIND "${section}" "\n## " end)
if(NOT end EQUAL -1)
  string(SUBSTRING "${section}" 0 ${end} section)
endif()

# The one fenced block of `lang` in the section, into `out`.
function(extract_block lang out)
  set(fence "\n```${lang}\n")
  string(FIND "${section}" "${fence}" begin)
  if(begin EQUAL -1)
    message(FATAL_ERROR "docs/plugins.md's plugin section has no ```${lang} block")
  endif()
  string(LENGTH "${fence}" fence_len)
  math(EXPR begin "${begin} + ${fence_len}")
  string(SUBSTRING "${section}" ${begin} -1 rest)
  string(FIND "${rest}" "\n```" stop)
  if(stop EQUAL -1)
    message(FATAL_ERROR "docs/plugins.md's ```${lang} block is not closed")
  endif()
  math(EXPR stop "${stop} + 1")  # keep the last line's newline
  string(SUBSTRING "${rest}" 0 ${stop} block)
  string(SUBSTRING "${rest}" ${stop} -1 after)
  string(FIND "${after}" "${fence}" again)
  if(NOT again EQUAL -1)
    message(FATAL_ERROR "docs/plugins.md's plugin section has two ```${lang} blocks: which one is it?")
  endif()
  set(${out} "${block}" PARENT_SCOPE)
endfunction()

extract_block(cpp code)
extract_block(cmake lists)
extract_block(yaml config)
# The source file is the one the CMakeLists.txt names.
if(NOT lists MATCHES "tally_add_plugin\\(([a-z0-9_]+) SOURCES ([^ )]+)\\)")
  message(FATAL_ERROR "docs/plugins.md's CMakeLists.txt has no tally_add_plugin(NAME SOURCES file):\n${lists}")
endif()
set(plugin "${CMAKE_MATCH_1}")
set(source "${CMAKE_MATCH_2}")
set(project "${WORK_DIR}/project")
file(WRITE "${project}/CMakeLists.txt" "${lists}")
file(WRITE "${project}/${source}" "${code}")
file(WRITE "${project}/eval.yaml" "${config}")
# The config reads preds.npy and labels.npy beside it: the example data of configs/examples.
file(COPY "${SOURCE_DIR}/configs/examples/data/preds.npy" "${SOURCE_DIR}/configs/examples/data/labels.npy"
     DESTINATION "${project}")

build_against_install("${project}" "${project}/build")
if(NOT EXISTS "${project}/build/libtally_${plugin}.so")
  message(FATAL_ERROR "the docs' plugin was not built as libtally_${plugin}.so")
endif()
step("${prefix}/bin/tally" plugins --path "${project}/build")
if(NOT step_out MATCHES "metric ErrorRate")
  message(FATAL_ERROR "tally plugins does not list the docs' ErrorRate:\n${step_out}")
endif()
step(env -u TALLY_PLUGIN_PATH "${prefix}/bin/tally" run "${project}/eval.yaml"
     "--set" "plugins.paths=[${project}/build]" -o "${WORK_DIR}/results.json")
file(READ "${WORK_DIR}/results.json" json)
# As tests/sdk (the same data, the same argmax with the first of tied scores): 65 wrong of 897,
# per true class [4,9,2,13,8,9,1,4,9,6] (numpy 2.x).
if(NOT json MATCHES "\"error_rate\": 0\\.07246376811594203[,\n]")
  message(FATAL_ERROR "error_rate is not 65/897 = 0.07246376811594203:\n${json}")
endif()
string(JSON errors GET "${json}" results ErrorRate errors_per_class)
string(REGEX REPLACE "[ \n]" "" errors "${errors}")
if(NOT errors STREQUAL "[4,9,2,13,8,9,1,4,9,6]")
  message(FATAL_ERROR "errors_per_class is ${errors}")
endif()
message(STATUS "readme test: docs/plugins.md's plugin built verbatim against ${prefix} and ran: 65/897")
