// A JSON-like value: null, bool, integer, float, string, array, or map with ordered keys.
// Used for plugin parameters (after the config is checked against the plugin's schema) and for
// metric results. It travels between ranks as msgpack (tally/value_msgpack.hpp: not part of the
// plugin SDK).
#pragma once

#include <bit>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tally/sdk/export.hpp"

namespace tally {

class TALLY_API Value {
 public:
  using Array = std::vector<Value>;
  /// Keys keep their insertion order (results print in the order a metric produced them).
  using Map = std::vector<std::pair<std::string, Value>>;

  enum class Kind { Null, Bool, Int, Float, String, Array, Map };

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(std::int64_t{i}) {}
  Value(long i) : v_(std::int64_t{i}) {}
  Value(long long i) : v_(static_cast<std::int64_t>(i)) {}
  Value(unsigned i) : v_(std::int64_t{i}) {}
  Value(double d) : v_(d) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(Array a) : v_(std::move(a)) {}
  Value(Map m) : v_(std::move(m)) {}
  template <class T>
  requires(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) Value(const std::vector<T>& xs)
      : v_(Array(xs.begin(), xs.end())) {}

  static Value array() { return Value(Array{}); }
  static Value map() { return Value(Map{}); }

  Kind kind() const noexcept { return static_cast<Kind>(v_.index()); }
  bool is_null() const noexcept { return kind() == Kind::Null; }
  bool is_bool() const noexcept { return kind() == Kind::Bool; }
  bool is_int() const noexcept { return kind() == Kind::Int; }
  bool is_float() const noexcept { return kind() == Kind::Float; }
  bool is_number() const noexcept { return is_int() || is_float(); }
  bool is_string() const noexcept { return kind() == Kind::String; }
  bool is_array() const noexcept { return kind() == Kind::Array; }
  bool is_map() const noexcept { return kind() == Kind::Map; }

  bool as_bool() const;
  std::int64_t as_int() const;
  /// An integer or a float, as double.
  double as_double() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Map& as_map() const;
  Map& as_map();

  /// Map access: the value under `key`, or nullptr.
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  /// Map access that throws when the key is missing.
  const Value& at(std::string_view key) const;
  /// Map insert-or-assign (keeps the position of an existing key).
  Value& set(std::string key, Value v);
  /// Array append.
  Value& push_back(Value v);
  std::size_t size() const;

  /// Compact JSON text (NaN and infinities written as null), for messages and fingerprints.
  std::string to_json() const;
  static const char* kind_name(Kind k) noexcept;

  friend bool operator==(const Value& a, const Value& b) { return a.v_ == b.v_; }

 private:
  std::variant<std::monostate, bool, std::int64_t, double, std::string, Array, Map> v_;
};

}  // namespace tally
