// A Value as nlohmann JSON (NaN and infinities as null): the results JSON (libtally,
// Results::to_json) and the reports (tally_reports) write values alike. Header-only: each library
// compiles its own copy and neither exports it.
#pragma once

#include <cmath>

#include <nlohmann/json.hpp>

#include "tally/sdk/value.hpp"

namespace tally::detail {

inline nlohmann::ordered_json value_to_json(const Value& v) {
  using K = Value::Kind;
  switch (v.kind()) {
    case K::Null:
      return nullptr;
    case K::Bool:
      return v.as_bool();
    case K::Int:
      return v.as_int();
    case K::Float: {
      const double d = v.as_double();
      if (!std::isfinite(d)) return nullptr;
      return d;
    }
    case K::String:
      return v.as_string();
    case K::Array: {
      auto a = nlohmann::ordered_json::array();
      for (const auto& e : v.as_array()) a.push_back(value_to_json(e));
      return a;
    }
    case K::Map: {
      auto m = nlohmann::ordered_json::object();
      for (const auto& [k, e] : v.as_map()) m[k] = value_to_json(e);
      return m;
    }
  }
  return nullptr;
}

}  // namespace tally::detail
