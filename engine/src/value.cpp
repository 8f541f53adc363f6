#include "tally/sdk/value.hpp"

#include <cmath>

#include <fmt/format.h>

#include "tally/sdk/error.hpp"

namespace tally {

namespace {
[[noreturn]] void wrong_kind(Value::Kind have, const char* want) {
  throw ConfigError(fmt::format("expected {}, found {}", want, Value::kind_name(have)));
}

void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void append_json(std::string& out, const Value& v) {
  using K = Value::Kind;
  switch (v.kind()) {
    case K::Null:
      out += "null";
      break;
    case K::Bool:
      out += v.as_bool() ? "true" : "false";
      break;
    case K::Int:
      out += fmt::format("{}", v.as_int());
      break;
    case K::Float: {
      const double d = v.as_double();
      // Shortest representation that round-trips; JSON has no NaN or infinity.
      out += std::isfinite(d) ? fmt::format("{}", d) : "null";
      break;
    }
    case K::String:
      append_json_string(out, v.as_string());
      break;
    case K::Array: {
      out += '[';
      bool first = true;
      for (const auto& e : v.as_array()) {
        if (!first) out += ',';
        first = false;
        append_json(out, e);
      }
      out += ']';
      break;
    }
    case K::Map: {
      out += '{';
      bool first = true;
      for (const auto& [k, e] : v.as_map()) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, k);
        out += ':';
        append_json(out, e);
      }
      out += '}';
      break;
    }
  }
}
}  // namespace

const char* Value::kind_name(Kind k) noexcept {
  switch (k) {
    case Kind::Null:
      return "null";
    case Kind::Bool:
      return "a boolean";
    case Kind::Int:
      return "an integer";
    case Kind::Float:
      return "a number";
    case Kind::String:
      return "a string";
    case Kind::Array:
      return "a list";
    case Kind::Map:
      return "a map";
  }
  return "?";
}

bool Value::as_bool() const {
  if (!is_bool()) wrong_kind(kind(), "a boolean");
  return std::get<bool>(v_);
}
std::int64_t Value::as_int() const {
  if (!is_int()) wrong_kind(kind(), "an integer");
  return std::get<std::int64_t>(v_);
}
double Value::as_double() const {
  if (is_int()) return static_cast<double>(std::get<std::int64_t>(v_));
  if (!is_float()) wrong_kind(kind(), "a number");
  return std::get<double>(v_);
}
const std::string& Value::as_string() const {
  if (!is_string()) wrong_kind(kind(), "a string");
  return std::get<std::string>(v_);
}
const Value::Array& Value::as_array() const {
  if (!is_array()) wrong_kind(kind(), "a list");
  return std::get<Array>(v_);
}
Value::Array& Value::as_array() {
  if (!is_array()) wrong_kind(kind(), "a list");
  return std::get<Array>(v_);
}
const Value::Map& Value::as_map() const {
  if (!is_map()) wrong_kind(kind(), "a map");
  return std::get<Map>(v_);
}
Value::Map& Value::as_map() {
  if (!is_map()) wrong_kind(kind(), "a map");
  return std::get<Map>(v_);
}

const Value* Value::find(std::string_view key) const {
  if (!is_map()) return nullptr;
  for (const auto& [k, v] : std::get<Map>(v_))
    if (k == key) return &v;
  return nullptr;
}
Value* Value::find(std::string_view key) {
  if (!is_map()) return nullptr;
  for (auto& [k, v] : std::get<Map>(v_))
    if (k == key) return &v;
  return nullptr;
}
const Value& Value::at(std::string_view key) const {
  if (const Value* v = find(key)) return *v;
  throw Error(fmt::format("no key '{}' in {}", key, to_json()));
}
Value& Value::set(std::string key, Value v) {
  if (is_null()) v_ = Map{};
  if (Value* existing = find(key)) {
    *existing = std::move(v);
    return *existing;
  }
  auto& m = as_map();
  m.emplace_back(std::move(key), std::move(v));
  return m.back().second;
}
Value& Value::push_back(Value v) {
  if (is_null()) v_ = Array{};
  auto& a = as_array();
  a.push_back(std::move(v));
  return a.back();
}
std::size_t Value::size() const {
  if (is_array()) return std::get<Array>(v_).size();
  if (is_map()) return std::get<Map>(v_).size();
  return 0;
}

std::string Value::to_json() const {
  std::string out;
  append_json(out, *this);
  return out;
}

}  // namespace tally
