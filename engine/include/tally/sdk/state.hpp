// State helpers for metrics. Large numeric state travels between ranks as raw little-endian bytes
// in one msgpack `bin` (docs/architecture.md, "The sync protocol"): unpacking is a memcpy, not a
// per-element decode. Small scalar state may use plain types (tally/sdk/internal/state_codec.hpp
// lists every type a field may have).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "tally/sdk/error.hpp"
#include "tally/sdk/internal/state_codec.hpp"

namespace tally {

/// A std::vector of trivially copyable numbers that packs as one msgpack `bin` (its elements'
/// little-endian bytes).
template <class T>
struct PackedVector : std::vector<T> {
  static_assert(std::endian::native == std::endian::little, "tally packs state little-endian");
  static_assert(std::is_trivially_copyable_v<T> && std::is_arithmetic_v<T>,
                "PackedVector holds plain numbers");
  using std::vector<T>::vector;
  PackedVector() = default;
  explicit PackedVector(std::vector<T> v) : std::vector<T>(std::move(v)) {}
};

// ---- state fields and how ranks merge them ------------------------------------------------------
//
// A metric's state names each field with its reduction in TALLY_STATE, and TypedMetric merges
// every rank's state (rank order = dataset order) before it calls compute() once:
//
//   struct State {
//     PackedVector<std::int64_t> hits;  // per-class counts
//     std::int64_t n = 0;
//     PackedVector<double> scores;      // per-sample values
//     TALLY_STATE(sum(hits), sum(n), concat(scores))
//   };
//
// The state is packed (checkpoints, and the fields that are gathered at a sync) as a msgpack array
// of its fields in this order, as MSGPACK_DEFINE(hits, n, scores) would pack it.

/// How the ranks' values of one state field combine into one.
enum class Reduction : std::uint8_t {
  sum,        // non-negative int64 counts (a scalar or element-wise), checked: exact on any world
  concat,     // a vector: every rank's elements, in rank order (per-sample values)
  min,        // element-wise minimum (a scalar or a vector)
  max,        // element-wise maximum
  first,      // the value of the first rank whose value is not `unset`
  agree,      // every rank that set a value (not `unset`) must have set the same one
  float_sum,  // floating-point sum in rank order: its bits depend on the world size
  merge,      // the field's own `void merge(const T& later)`, in rank order
};

namespace fields {

/// One field of a state and its reduction (T is const for a const state).
template <Reduction R, class T>
struct Field {
  static constexpr Reduction reduction = R;
  using value_type = std::remove_const_t<T>;
  T& value;
  value_type unset{};  // first and agree: the value of a rank that has not set it
};

template <class T>
constexpr Field<Reduction::sum, T> sum(T& v) noexcept {
  return {v};
}
template <class T>
constexpr Field<Reduction::concat, T> concat(T& v) noexcept {
  return {v};
}
template <class T>
constexpr Field<Reduction::min, T> min(T& v) noexcept {
  return {v};
}
template <class T>
constexpr Field<Reduction::max, T> max(T& v) noexcept {
  return {v};
}
template <class T, class U>
constexpr Field<Reduction::first, T> first(T& v, const U& unset) {
  return {v, static_cast<std::remove_const_t<T>>(unset)};
}
template <class T, class U>
constexpr Field<Reduction::agree, T> agree(T& v, const U& unset) {
  return {v, static_cast<std::remove_const_t<T>>(unset)};
}
template <class T>
constexpr Field<Reduction::float_sum, T> float_sum(T& v) noexcept {
  return {v};
}
template <class T>
constexpr Field<Reduction::merge, T> merge(T& v) noexcept {
  return {v};
}

}  // namespace fields

/// Declares a state's fields and their reductions (see above); use once, in the state struct.
#define TALLY_STATE(...)                                                       \
  auto tally_fields() {                                                        \
    using ::tally::fields::sum, ::tally::fields::concat, ::tally::fields::min, \
        ::tally::fields::max, ::tally::fields::first, ::tally::fields::agree,  \
        ::tally::fields::float_sum, ::tally::fields::merge;                    \
    return std::tuple{__VA_ARGS__};                                            \
  }                                                                            \
  auto tally_fields() const {                                                  \
    using ::tally::fields::sum, ::tally::fields::concat, ::tally::fields::min, \
        ::tally::fields::max, ::tally::fields::first, ::tally::fields::agree,  \
        ::tally::fields::float_sum, ::tally::fields::merge;                    \
    return std::tuple{__VA_ARGS__};                                            \
  }

/// Makes a type of the plugin's own usable as a state field (a `merge` field, an element of a
/// concat vector): its members are written as one array, in this order, and read back with every
/// type checked. Use once, in the type: `TALLY_FIELDS(count, sum, hash)`.
#define TALLY_FIELDS(...)                               \
  void tally_pack(::tally::StateWriter& out) const {    \
    ::tally::internal::write_members(out, __VA_ARGS__); \
  }                                                     \
  void tally_unpack(::tally::StateReader& in) { ::tally::internal::read_members(in, __VA_ARGS__); }

/// A state declared with TALLY_STATE.
template <class S>
concept DeclaredState = requires(S& s, const S& c) {
  s.tally_fields();
  c.tally_fields();
};

}  // namespace tally
