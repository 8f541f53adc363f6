// Reading a results JSON (tally/reports/reports.hpp: read_results_json), and the JSON -> Value
// conversion it uses.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tally/reports/reports.hpp"
#include "tally/sdk/value.hpp"

namespace tally {

/// How deep a results JSON (or baseline) may nest: exit 2 past it, never a stack overflow.
inline constexpr std::size_t kMaxJsonDepth = 64;
/// How many values (numbers, nulls, strings, arrays, maps) a results JSON may hold: exit 2 past
/// it. Memory is then bounded whatever the bytes: the text (at most kResultsMaxBytes) and at most
/// 72 bytes a value (a map entry), twice that while the largest array grows.
inline constexpr std::size_t kMaxJsonValues = std::size_t{1} << 24;

/// The JSON text of a results file (named `path` in messages) as a Value, nesting bounded by
/// kMaxJsonDepth and the count of values by `max_values`: InputError naming the place past them,
/// or for text that is not JSON. read_results_json's parser (with kMaxJsonValues).
Value parse_results_text(const std::string& text, const std::filesystem::path& path,
                         std::size_t max_values);

/// JSON -> Value: integers stay integers, null stays null (a NaN result was written as null).
Value value_from_json(const nlohmann::ordered_json& j);

}  // namespace tally
