// A JSON-like value: null, bool, integer, float, string, array, or map with ordered keys.
// Used for plugin parameters (after the config is checked against the plugin's schema) and for
// metric results. It travels between ranks as msgpack (see the adaptor at the end of this file).
#pragma once

#include <bit>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <msgpack.hpp>

#include "tally/export.hpp"

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

// msgpack: null, bool, int, float64, str, array and map (string keys, order kept).
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {

  template <>
  struct pack<tally::Value> {
    template <class Stream>
    packer<Stream>& operator()(packer<Stream>& o, const tally::Value& v) const {
      using K = tally::Value::Kind;
      switch (v.kind()) {
        case K::Null:
          o.pack_nil();
          break;
        case K::Bool:
          o.pack(v.as_bool());
          break;
        case K::Int:
          o.pack(v.as_int());
          break;
        case K::Float: {
          // Always float64: msgpack-cxx's pack_double() writes integral doubles (1.0, -0.0) as
          // integers, which would turn a result of 1.0 into the integer 1 after the broadcast.
          const auto bits = std::bit_cast<uint64_t>(v.as_double());
          char buf[9];
          buf[0] = static_cast<char>(0xcbu);
          for (int i = 0; i < 8; ++i) buf[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
          o.pack_bin_body(buf, 9);  // appends the bytes as they are (no header of its own)
          break;
        }
        case K::String:
          o.pack(v.as_string());
          break;
        case K::Array:
          o.pack_array(static_cast<uint32_t>(v.as_array().size()));
          for (const auto& e : v.as_array()) o.pack(e);
          break;
        case K::Map:
          o.pack_map(static_cast<uint32_t>(v.as_map().size()));
          for (const auto& [k, e] : v.as_map()) {
            o.pack(k);
            o.pack(e);
          }
          break;
      }
      return o;
    }
  };

  template <>
  struct convert<tally::Value> {
    const msgpack::object& operator()(const msgpack::object& o, tally::Value& v) const {
      switch (o.type) {
        case type::NIL:
          v = tally::Value();
          break;
        case type::BOOLEAN:
          v = tally::Value(o.via.boolean);
          break;
        case type::POSITIVE_INTEGER:
          if (o.via.u64 > static_cast<uint64_t>(INT64_MAX)) throw msgpack::type_error();
          v = tally::Value(static_cast<long long>(o.via.u64));
          break;
        case type::NEGATIVE_INTEGER:
          v = tally::Value(static_cast<long long>(o.via.i64));
          break;
        case type::FLOAT32:
        case type::FLOAT64:
          v = tally::Value(o.via.f64);
          break;
        case type::STR:
          v = tally::Value(std::string(o.via.str.ptr, o.via.str.size));
          break;
        case type::ARRAY: {
          tally::Value::Array a;
          a.reserve(o.via.array.size);
          for (uint32_t i = 0; i < o.via.array.size; ++i)
            a.push_back(o.via.array.ptr[i].as<tally::Value>());
          v = tally::Value(std::move(a));
          break;
        }
        case type::MAP: {
          tally::Value::Map m;
          m.reserve(o.via.map.size);
          for (uint32_t i = 0; i < o.via.map.size; ++i) {
            const auto& kv = o.via.map.ptr[i];
            if (kv.key.type != type::STR) throw msgpack::type_error();
            m.emplace_back(std::string(kv.key.via.str.ptr, kv.key.via.str.size),
                           kv.val.as<tally::Value>());
          }
          v = tally::Value(std::move(m));
          break;
        }
        default:
          throw msgpack::type_error();
      }
      return o;
    }
  };

  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE
}  // namespace msgpack
