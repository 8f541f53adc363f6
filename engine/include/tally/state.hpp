// State helpers for metrics. Large numeric state travels between ranks as raw little-endian bytes
// in one msgpack `bin` (DESIGN.md, "The sync protocol"): unpacking is a memcpy, not a per-element
// decode. Small scalar state may use plain msgpack types.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <msgpack.hpp>

#include "tally/error.hpp"

namespace tally {

/// A std::vector of trivially copyable numbers that packs as one msgpack `bin`.
template <class T>
struct PackedVector : std::vector<T> {
  static_assert(std::is_trivially_copyable_v<T> && std::is_arithmetic_v<T>,
                "PackedVector holds plain numbers");
  using std::vector<T>::vector;
  PackedVector() = default;
  explicit PackedVector(std::vector<T> v) : std::vector<T>(std::move(v)) {}
};

/// Merging integer counts from the ranks' states (rank 0, in compute). The states were packed by
/// the same metric on other ranks, but arrive as bytes: a corrupt or hostile payload must end in
/// an error, never in signed overflow (undefined behaviour) or in an index out of range. These
/// throw RuntimeError("<owner>: the state of rank R is corrupt: ...").
[[noreturn]] inline void corrupt_state(const std::string& owner, std::size_t rank,
                                       const std::string& what) {
  throw RuntimeError(owner + ": the state of rank " + std::to_string(rank) +
                     " is corrupt: " + what);
}

/// a * b elements for two sizes read from a state (samples x columns, say): RuntimeError when
/// either is negative or the product overflows, never signed overflow.
inline std::size_t state_cells(std::int64_t a, std::int64_t b, const std::string& owner,
                               std::size_t rank) {
  std::int64_t cells = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &cells))
    corrupt_state(owner, rank,
                  "sizes " + std::to_string(a) + " x " + std::to_string(b) + " are not a size");
  return static_cast<std::size_t>(cells);
}

/// into += v, checked.
inline void add_count(std::int64_t& into, std::int64_t v, const std::string& owner,
                      std::size_t rank) {
  if (__builtin_add_overflow(into, v, &into)) corrupt_state(owner, rank, "a count overflows");
}

/// into[i] += from[i] for every i, checked; the sizes must agree.
inline void add_counts(std::span<std::int64_t> into, std::span<const std::int64_t> from,
                       const std::string& owner, std::size_t rank) {
  if (into.size() != from.size())
    corrupt_state(owner, rank,
                  std::to_string(from.size()) + " counts where " + std::to_string(into.size()) +
                      " were expected");
  bool overflow = false;
  for (std::size_t i = 0; i < into.size(); ++i)
    overflow |= __builtin_add_overflow(into[i], from[i], &into[i]);
  if (overflow) corrupt_state(owner, rank, "a count overflows");
}

/// Checks merged counts (after every rank's were added, `rank` being the last): each is >= 0 and
/// all of them together sum to less than 2^62, so that any sum of some of them (a row of a
/// confusion matrix, tp + fp), and the sum of two such sums, is exact and cannot overflow. Real
/// counts are nowhere near: 2^62 is 4.6e18.
inline void check_counts(std::initializer_list<std::span<const std::int64_t>> groups,
                         const std::string& owner, std::size_t rank) {
  std::int64_t total = 0;
  for (const auto& g : groups)
    for (const std::int64_t c : g) {
      if (c < 0) corrupt_state(owner, rank, "a count is negative (" + std::to_string(c) + ")");
      if (__builtin_add_overflow(total, c, &total) || total >= (std::int64_t{1} << 62))
        corrupt_state(owner, rank, "the counts sum to 2^62 or more");
    }
}

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

/// A state declared with TALLY_STATE.
template <class S>
concept DeclaredState = requires(S& s, const S& c) {
  s.tally_fields();
  c.tally_fields();
};

}  // namespace tally

namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {

  template <class T>
  struct pack<tally::PackedVector<T>> {
    template <class Stream>
    packer<Stream>& operator()(packer<Stream>& o, const tally::PackedVector<T>& v) const {
      static_assert(std::endian::native == std::endian::little, "tally packs state little-endian");
      const auto bytes = v.size() * sizeof(T);
      if (bytes > UINT32_MAX) throw msgpack::container_size_overflow("PackedVector over 4 GiB");
      o.pack_bin(static_cast<uint32_t>(bytes));
      o.pack_bin_body(reinterpret_cast<const char*>(v.data()), static_cast<uint32_t>(bytes));
      return o;
    }
  };

  template <class T>
  struct convert<tally::PackedVector<T>> {
    const msgpack::object& operator()(const msgpack::object& o, tally::PackedVector<T>& v) const {
      // A length that is not a whole number of elements is a corrupt payload, not a truncation.
      if (o.type != type::BIN || o.via.bin.size % sizeof(T) != 0) throw msgpack::type_error();
      v.resize(o.via.bin.size / sizeof(T));
      if (o.via.bin.size != 0) std::memcpy(v.data(), o.via.bin.ptr, o.via.bin.size);
      return o;
    }
  };

  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE
}  // namespace msgpack
