// Writers for results: the terminal table and the results JSON (written atomically); the reader
// of a results JSON (tally compare, baselines).
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "file_io.hpp"  // write_file_atomic
#include "tally/evaluator.hpp"

namespace tally {

/// An aligned, readable table of every metric's results.
std::string format_table(const Results& results);

/// A results JSON file back as Results (metrics, and the run info it records: types, plugins).
/// InputError naming the file when it cannot be read, is not JSON, or has no "results" object.
Results read_results_json(const std::filesystem::path& path);

/// JSON -> Value: integers stay integers, null stays null (a NaN result was written as null).
Value value_from_json(const nlohmann::ordered_json& j);

/// ConfigError when `path` cannot be written (its folder is missing, say), checked before a run
/// so that a long evaluation does not end with nowhere to put its results.
void check_writable(const std::filesystem::path& path);

}  // namespace tally
