// Reading a results JSON (tally/reports.hpp: read_results_json), and the JSON -> Value
// conversion it uses.
#pragma once

#include <cstddef>

#include <nlohmann/json.hpp>

#include "tally/reports.hpp"
#include "tally/value.hpp"

namespace tally {

/// How deep a results JSON (or baseline) may nest: exit 2 past it, never a stack overflow.
inline constexpr std::size_t kMaxJsonDepth = 64;

/// JSON -> Value: integers stay integers, null stays null (a NaN result was written as null).
Value value_from_json(const nlohmann::ordered_json& j);

}  // namespace tally
