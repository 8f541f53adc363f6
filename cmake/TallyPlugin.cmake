# tally_add_plugin(NAME SOURCES src... [LINK_LIBRARIES lib...] [OUTPUT_DIRECTORY dir] [NO_INSTALL]
#                  [NO_UNITY])
#
# Builds libtally_<NAME>.so, a plugin the tally registry discovers: a MODULE library with hidden
# symbols but for its one entry (TALLY_PLUGIN in tally/sdk/plugin.hpp). In the tally source tree the
# plugin lands in the built-in plugin folder and is installed with tally; out of tree (after
# find_package(tally)) it lands in the build folder or OUTPUT_DIRECTORY. In the tree, with
# TALLY_UNITY_BUILD on, its C++ sources compile as unity batches unless NO_UNITY is given (files
# that reuse file-local names such as kType in anonymous namespaces).
function(tally_add_plugin NAME)
  cmake_parse_arguments(ARG "NO_INSTALL;NO_UNITY" "OUTPUT_DIRECTORY" "SOURCES;LINK_LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "tally_add_plugin(${NAME}): SOURCES is required")
  endif()
  set(target tally_plugin_${NAME})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME "tally_${NAME}"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(PROJECT_NAME STREQUAL "tally")
    # In the tally tree: the project's warning flags too.
    target_link_libraries(${target} PRIVATE tally_sdk tally_warnings ${ARG_LINK_LIBRARIES})
    if(COMMAND tally_use_pch)
      tally_use_pch(${target} sdk)
    endif()
    if(TALLY_UNITY_BUILD AND NOT ARG_NO_UNITY)
      set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 16)
    endif()
  else()
    target_link_libraries(${target} PRIVATE tally::sdk ${ARG_LINK_LIBRARIES})
  endif()
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  elseif(DEFINED TALLY_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${TALLY_PLUGIN_OUTPUT_DIR}")
  endif()
  if(DEFINED TALLY_PLUGIN_SUBDIR AND PROJECT_NAME STREQUAL "tally" AND NOT ARG_NO_INSTALL)
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN/../..")
    install(TARGETS ${target} LIBRARY DESTINATION ${TALLY_PLUGIN_SUBDIR})
    if(NOT TARGET tally_all_plugins)
      add_custom_target(tally_all_plugins)
    endif()
    add_dependencies(tally_all_plugins ${target})
  endif()
endfunction()
