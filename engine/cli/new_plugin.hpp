// `tally new-plugin NAME DIR`: writes the skeleton of an out-of-tree metric plugin.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace tally::cli {

/// The metric type of plugin `name` (snake_case to CamelCase: "my_mean" -> "MyMean").
std::string plugin_metric_type(std::string_view name);

/// Writes a buildable plugin skeleton into `dir`: CMakeLists.txt (find_package(tally),
/// tally_add_plugin, a CTest test), NAME.cpp (a working metric), eval.yaml and data.jsonl (the
/// example the test runs), README.md and .gitignore. ConfigError (exit 2) when `name` is not
/// [a-z][a-z0-9_]* of at most 64 characters, or when `dir` exists and is not an empty folder;
/// nothing is written then. The files are written into a temporary folder beside `dir`, which is
/// renamed to `dir` at the end, so `dir` never holds half a skeleton.
void write_plugin_skeleton(const std::string& name, const std::filesystem::path& dir);

}  // namespace tally::cli
