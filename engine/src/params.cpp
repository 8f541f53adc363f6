#include "tally/sdk/params.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tally/sdk/error.hpp"

namespace tally {

const char* param_type_name(ParamType t) noexcept {
  switch (t) {
    case ParamType::Bool:
      return "bool";
    case ParamType::Int:
      return "int";
    case ParamType::Float:
      return "float";
    case ParamType::String:
      return "string";
    case ParamType::Path:
      return "path";
    case ParamType::IntList:
      return "int | list of int";
    case ParamType::FloatList:
      return "float | list of float";
    case ParamType::StringList:
      return "string | list of string";
    case ParamType::StringMap:
      return "map of string";
    case ParamType::PathMap:
      return "map of path";
    case ParamType::Any:
      return "any";
  }
  return "?";
}

void Params::fail(std::string_view name, std::string_view message) const {
  throw ConfigError(fmt::format("{}: parameter '{}' {}", owner_, name, message),
                    ErrorContext{.owner = owner_, .field = std::string(name)});
}

const Value& Params::get(std::string_view name) const {
  static const Value null;
  for (const auto& [k, v] : values_)
    if (k == name) return v;
  return null;
}

bool Params::has(std::string_view name) const { return !get(name).is_null(); }

namespace {
template <class F>
auto checked(const Params& p, std::string_view name, const char* want, F&& f) {
  const Value& v = p.get(name);
  try {
    return f(v);
  } catch (const ConfigError&) {
    p.fail(name, fmt::format("expects {}, found {}", want, v.is_null() ? "nothing" : v.to_json()));
  }
}
}  // namespace

bool Params::get_bool(std::string_view name) const {
  return checked(*this, name, "a boolean", [](const Value& v) { return v.as_bool(); });
}
std::int64_t Params::get_int(std::string_view name) const {
  return checked(*this, name, "an integer", [](const Value& v) { return v.as_int(); });
}
double Params::get_double(std::string_view name) const {
  return checked(*this, name, "a number", [](const Value& v) { return v.as_double(); });
}
std::string Params::get_string(std::string_view name) const {
  return checked(*this, name, "a string", [](const Value& v) { return v.as_string(); });
}
std::vector<std::int64_t> Params::get_int_list(std::string_view name) const {
  return checked(*this, name, "a list of integers", [](const Value& v) {
    std::vector<std::int64_t> out;
    if (!v.is_array()) return std::vector<std::int64_t>{v.as_int()};
    for (const auto& e : v.as_array()) out.push_back(e.as_int());
    return out;
  });
}
namespace {
std::int64_t checked_size(const Params& p, std::string_view name, std::int64_t value,
                          std::int64_t min, std::int64_t max, std::string_view why) {
  max = std::min(max, kMaxSize);
  if (value < min) p.fail(name, fmt::format("must be >= {}, got {}", min, value));
  if (value > max)
    p.fail(name, fmt::format("must be at most {}{}, got {}", max,
                             why.empty() ? "" : fmt::format(" ({})", why), value));
  return value;
}
}  // namespace

std::int64_t Params::get_size(std::string_view name, std::int64_t min, std::int64_t max,
                              std::string_view why) const {
  return checked_size(*this, name, get_int(name), min, max, why);
}
std::vector<std::int64_t> Params::get_size_list(std::string_view name, std::int64_t min,
                                                std::int64_t max, std::string_view why) const {
  auto out = get_int_list(name);
  for (const auto v : out) checked_size(*this, name, v, min, max, why);
  return out;
}

std::string bounds_text(const NumberBounds& b) {
  return fmt::format("{}{}, {}{}", b.lo_open ? '(' : '[', b.lo, b.hi, b.hi_open ? ')' : ']');
}

namespace {
/// "element 2 " before a message, or nothing.
std::string part_prefix(std::string_view where) {
  return where.empty() ? std::string() : std::string(where) + " ";
}
}  // namespace

double Params::check_number(std::string_view name, double value, const NumberBounds& bounds,
                            std::string_view where) const {
  if (!bounds.contains(value))
    fail(name, fmt::format("{}must be a number in {}, got {}", part_prefix(where),
                           bounds_text(bounds), value));
  return value;
}

void Params::check_range(std::string_view name, double lo, double hi, const NumberBounds& bounds,
                         std::string_view where, bool closed) const {
  const std::string part = part_prefix(where);
  check_number(name, lo, bounds, part + "lo");
  check_number(name, hi, bounds, part + "hi");
  if (closed ? !(lo <= hi) : !(lo < hi))
    fail(name, fmt::format("{}must be a range [lo, hi] with lo {} hi, got [{}, {}]", part,
                           closed ? "<=" : "<", lo, hi));
}

double Params::get_number(std::string_view name, const NumberBounds& bounds) const {
  return check_number(name, get_double(name), bounds);
}

std::vector<double> Params::get_number_list(std::string_view name, const NumberBounds& bounds,
                                            ListOrder order, std::size_t min_size,
                                            std::size_t max_size) const {
  std::vector<double> out = get_double_list(name);
  if (out.size() < min_size)
    fail(name, fmt::format("must hold at least {} number{}, got {}", min_size,
                           min_size == 1 ? "" : "s", out.size()));
  if (out.size() > max_size)
    fail(name, fmt::format("must hold at most {} numbers, got {}", max_size, out.size()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    check_number(name, out[i], bounds, fmt::format("element {}", i));
    if (i == 0 || order == ListOrder::Any) continue;
    const bool ok = order == ListOrder::Increasing ? out[i] > out[i - 1] : out[i] >= out[i - 1];
    if (!ok)
      fail(name, fmt::format("must be {}: element {} ({}) follows {}",
                             order == ListOrder::Increasing ? "strictly increasing"
                                                            : "in non-decreasing order",
                             i, out[i], out[i - 1]));
  }
  return out;
}

std::vector<std::optional<double>> Params::get_optional_double_list(std::string_view name) const {
  return checked(*this, name, "a list of numbers or nulls", [](const Value& v) {
    std::vector<std::optional<double>> out;
    if (!v.is_array()) {
      if (v.is_null()) return out;
      return std::vector<std::optional<double>>{v.as_double()};
    }
    for (const auto& e : v.as_array()) {
      if (e.is_null())
        out.emplace_back(std::nullopt);
      else
        out.emplace_back(e.as_double());
    }
    return out;
  });
}
std::vector<double> Params::get_double_list(std::string_view name) const {
  return checked(*this, name, "a list of numbers", [](const Value& v) {
    std::vector<double> out;
    if (!v.is_array()) return std::vector<double>{v.as_double()};
    for (const auto& e : v.as_array()) out.push_back(e.as_double());
    return out;
  });
}
std::vector<std::string> Params::get_string_list(std::string_view name) const {
  return checked(*this, name, "a list of strings", [](const Value& v) {
    std::vector<std::string> out;
    if (!v.is_array()) return std::vector<std::string>{v.as_string()};
    for (const auto& e : v.as_array()) out.push_back(e.as_string());
    return out;
  });
}
std::vector<std::pair<std::string, std::string>> Params::get_string_map(
    std::string_view name) const {
  return checked(*this, name, "a map of strings", [](const Value& v) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [k, e] : v.as_map()) out.emplace_back(k, e.as_string());
    return out;
  });
}

}  // namespace tally
