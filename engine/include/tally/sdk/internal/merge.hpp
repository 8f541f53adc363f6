// Machinery, not API: how TypedMetric (tally/sdk/metric.hpp) walks a TALLY_STATE state's fields
// and merges one rank's state into the merge of the earlier ranks, field by field, by each
// field's declared reduction, with checked arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tally/sdk/error.hpp"
#include "tally/sdk/state.hpp"

namespace tally {

namespace internal {

template <class F>
using field_value_t = typename std::remove_cvref_t<F>::value_type;

template <class T>
struct scalar_of {
  using type = T;
};
template <class T>
requires requires { typename T::value_type; }
struct scalar_of<T> {
  using type = typename T::value_type;
};
/// T itself, or the element type of a vector T.
template <class T>
using scalar_of_t = typename scalar_of<T>::type;

template <class T>
concept Int64Vector = requires(T& v) {
  { v.data() } -> std::convertible_to<const std::int64_t*>;
  { v.size() } -> std::convertible_to<std::size_t>;
}
&&std::is_same_v<typename T::value_type, std::int64_t>;

/// A `sum` field the engine can reduce: int64 counts.
template <class F>
constexpr bool is_count_field() {
  using T = field_value_t<F>;
  return std::remove_cvref_t<F>::reduction == Reduction::sum &&
         (std::is_same_v<T, std::int64_t> || Int64Vector<T>);
}

template <class T>
std::span<const std::int64_t> counts_of(const T& v) {
  if constexpr (std::is_same_v<T, std::int64_t>)
    return std::span<const std::int64_t>(&v, 1);
  else
    return std::span<const std::int64_t>(v.data(), v.size());
}

/// Calls fn(field, index) for every field of `fields` (a tuple of tally::fields::Field).
template <class Tuple, class Fn>
void for_each_field(Tuple&& fields, Fn&& fn) {
  [&]<std::size_t... I>(std::index_sequence<I...>) { (fn(std::get<I>(fields), I), ...); }
  (std::make_index_sequence<std::tuple_size_v<std::remove_cvref_t<Tuple>>>{});
}

/// Calls fn(into_field, from_field, index) for every field of two states.
template <class S, class Fn>
void zip_fields(S& into, const S& from, Fn&& fn) {
  auto a = into.tally_fields();
  auto b = from.tally_fields();
  [&]<std::size_t... I>(std::index_sequence<I...>) { (fn(std::get<I>(a), std::get<I>(b), I), ...); }
  (std::make_index_sequence<std::tuple_size_v<decltype(a)>>{});
}

[[noreturn]] inline void corrupt(std::size_t rank, std::size_t field, const std::string& what) {
  throw RuntimeError("the state of rank " + std::to_string(rank) + " is corrupt (state field " +
                     std::to_string(field) + "): " + what);
}

template <class T>
void check_counts_of(const T& v, std::size_t rank, std::size_t field) {
  for (const std::int64_t c : counts_of(v))
    if (c < 0) corrupt(rank, field, "a count is negative (" + std::to_string(c) + ")");
}

/// into op= from, element-wise, for scalars or vectors; an empty vector takes the other's
/// elements (a rank that saw no data), otherwise the sizes must agree.
template <class T, class Op>
void elementwise(T& into, const T& from, std::size_t rank, std::size_t field, Op&& op) {
  if constexpr (std::is_arithmetic_v<T>) {
    op(into, from);
  } else {
    if (from.empty()) return;
    if (into.empty()) {
      into = from;
      return;
    }
    if (into.size() != from.size())
      corrupt(rank, field,
              std::to_string(from.size()) + " values where an earlier rank has " +
                  std::to_string(into.size()));
    for (std::size_t i = 0; i < into.size(); ++i) op(into[i], from[i]);
  }
}

/// Merges the value of one field of rank `rank` into `into` (the merge of the earlier ranks).
template <class F, class G>
void merge_field(F into, G from, std::size_t rank, std::size_t field) {
  using T = typename F::value_type;
  constexpr Reduction R = F::reduction;
  if constexpr (R == Reduction::sum) {
    static_assert(std::is_same_v<T, std::int64_t> || Int64Vector<T>,
                  "sum() is for int64 counts (std::int64_t or PackedVector<std::int64_t>); use "
                  "float_sum() for floating-point sums");
    check_counts_of(from.value, rank, field);
    elementwise(into.value, from.value, rank, field, [&](std::int64_t& a, std::int64_t b) {
      if (__builtin_add_overflow(a, b, &a)) corrupt(rank, field, "a count overflows");
    });
  } else if constexpr (R == Reduction::concat) {
    into.value.insert(into.value.end(), from.value.begin(), from.value.end());
  } else if constexpr (R == Reduction::min) {
    elementwise(into.value, from.value, rank, field, [](auto& a, const auto& b) {
      if (b < a) a = b;
    });
  } else if constexpr (R == Reduction::max) {
    elementwise(into.value, from.value, rank, field, [](auto& a, const auto& b) {
      if (a < b) a = b;
    });
  } else if constexpr (R == Reduction::first) {
    if (into.value == into.unset) into.value = from.value;
  } else if constexpr (R == Reduction::agree) {
    if (from.value == from.unset) return;
    if (into.value == into.unset)
      into.value = from.value;
    else if (!(into.value == from.value))
      throw InputError("rank " + std::to_string(rank) +
                       " disagrees with an earlier rank on a value every rank must share (state "
                       "field " +
                       std::to_string(field) + "): the ranks read inconsistent data");
  } else if constexpr (R == Reduction::float_sum) {
    static_assert(std::is_floating_point_v<scalar_of_t<T>>,
                  "float_sum() is for floating-point values");
    elementwise(into.value, from.value, rank, field, [](auto& a, const auto& b) { a += b; });
  } else {
    static_assert(R == Reduction::merge);
    into.value.merge(from.value);
  }
}

}  // namespace internal

}  // namespace tally
