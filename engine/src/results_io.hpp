// Writers for results: the terminal table and the results JSON (written atomically); the reader
// of a results JSON (tally compare, baselines).
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "file_io.hpp"  // write_file_atomic, OutputSet, check_writable
#include "tally/evaluator.hpp"

namespace tally {

/// An aligned, readable table of every metric's results.
std::string format_table(const Results& results);

/// How deep a results JSON (or baseline) may nest: exit 2 past it, never a stack overflow.
inline constexpr std::size_t kMaxJsonDepth = 64;

/// A results JSON file back as Results (metrics, and the run info it records: types, plugins).
/// InputError naming the file when it cannot be read, is not JSON, or has no "results" object.
Results read_results_json(const std::filesystem::path& path);

/// JSON -> Value: integers stay integers, null stays null (a NaN result was written as null).
Value value_from_json(const nlohmann::ordered_json& j);

}  // namespace tally
