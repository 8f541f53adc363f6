// Metric: the one interface every metric plugin implements, and TypedMetric, the base class a
// metric is written with. A metric writes only its math:
//
//   struct State {
//     tally::PackedVector<std::int64_t> hits;  // per-class counts
//     std::int64_t n = 0;
//     tally::PackedVector<double> scores;      // per-sample values
//     TALLY_STATE(sum(hits), sum(n), concat(scores))
//   };
//   class MyMetric : public tally::TypedMetric<State> {
//     void update(State& s, const tally::Batch& b) override { ... }
//     tally::Value compute(const State& all) const override { ... }
//   };
//
// Each rank calls update() on its own shard. At a sync, each field travels by its reduction
// (TALLY_STATE, tally/state.hpp): the int64 counts of `sum` fields are summed to rank 0 with
// DistBackend::reduce (MPI_Reduce, ncclReduce) when their sizes are fixed by the parameters, and
// every other field is gathered to rank 0 and merged there in rank order (= dataset order), with
// checked arithmetic. compute() then runs once, on rank 0, on the merged state; in a world of one
// it gets the local state itself (no copy). Checkpoints (docs/checkpoint.md) save the whole state
// and load it back (save/restore).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <msgpack.hpp>

#include "tally/batch.hpp"
#include "tally/error.hpp"
#include "tally/export.hpp"
#include "tally/state.hpp"
#include "tally/value.hpp"

namespace tally {

using Packer = msgpack::packer<msgpack::sbuffer>;

/// A named input of a metric (the batch field it reads). The config's `inputs:` maps it to a
/// data field of another name.
struct InputSpec {
  std::string name;
  std::string doc;
  bool required = true;
};

/// The interface between the engine and a metric (plugin ABI). Metrics derive from TypedMetric,
/// which implements all of it from the metric's State; the engine calls, at a sync of W ranks:
/// summed_size() and write_sums() (the counts it sums to rank 0), pack_gathered() (the rest, sent
/// to rank 0), and on rank 0 compute_synced(); in a world of one, compute_local().
class TALLY_API Metric {
 public:
  virtual ~Metric();

  /// Accumulates one batch into the local state. Throws InputError for bad data.
  virtual void add(const Batch& batch) = 0;
  /// Clears the local state.
  virtual void reset() = 0;

  /// How many int64 counts this metric sums across ranks: a function of its parameters only, so
  /// the same on every rank (the sync header checks it).
  virtual std::size_t summed_size() const = 0;
  /// The local counts, summed_size() of them, each >= 0.
  virtual void write_sums(std::span<std::int64_t> out) const = 0;
  /// Whether any of the state is gathered to rank 0 (what is not summed).
  virtual bool gathers() const = 0;
  /// Writes the gathered part of the local state as one msgpack object.
  virtual void pack_gathered(Packer& out) const = 0;
  /// Rank 0: the results from every rank's gathered part (rank order; empty when gathers() is
  /// false) and the summed counts. Returns a map of result keys to numbers, arrays or maps.
  virtual Value compute_synced(std::span<const msgpack::object> gathered,
                               std::span<const std::int64_t> sums) const = 0;
  /// A world of one: the results from the local state, which it leaves as it was.
  virtual Value compute_local() = 0;

  /// Checkpoints: the whole local state as one msgpack object ...
  virtual void save(Packer& out) const = 0;
  /// ... and back: replaces the local state with what save() wrote (on this rank, in an earlier
  /// process). Throws msgpack::type_error or RuntimeError when it cannot read it.
  virtual void restore(const msgpack::object& saved) = 0;
};

namespace detail {

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

}  // namespace detail

/// The base class of metrics: State is a struct declared with TALLY_STATE (tally/state.hpp).
template <class State>
class TypedMetric : public Metric {
  static_assert(DeclaredState<State>,
                "a TypedMetric's State declares its fields with TALLY_STATE(...)");

 public:
  void add(const Batch& batch) final { update(state(), batch); }
  void reset() final { state_ = initial_state(); }

  std::size_t summed_size() const final {
    if (!reducible()) return 0;
    const State layout = initial_state();
    std::size_t n = 0;
    detail::for_each_field(layout.tally_fields(), [&](const auto& f, std::size_t) {
      if constexpr (detail::is_count_field<decltype(f)>()) n += detail::counts_of(f.value).size();
    });
    return n;
  }

  void write_sums(std::span<std::int64_t> out) const final {
    if (!reducible()) return;
    const State layout = initial_state();
    std::size_t at = 0;
    // The sizes are those of the initial state, field by field (zip_fields pairs them).
    detail::zip_fields(state(), layout, [&](const auto& mine, const auto& fixed, std::size_t i) {
      if constexpr (detail::is_count_field<decltype(mine)>()) {
        const auto v = detail::counts_of(mine.value);
        const std::size_t want = detail::counts_of(fixed.value).size();
        if (v.size() != want || at + v.size() > out.size())
          throw RuntimeError("state field " + std::to_string(i) + " holds " +
                             std::to_string(v.size()) + " counts, its initial state " +
                             std::to_string(want) + ": it cannot be summed across ranks");
        std::copy(v.begin(), v.end(), out.begin() + static_cast<std::ptrdiff_t>(at));
        at += v.size();
      }
    });
    if (at != out.size())
      throw RuntimeError(std::to_string(at) + " counts where " + std::to_string(out.size()) +
                         " were expected");
  }

  bool gathers() const final {
    bool any = false;
    detail::for_each_field(state().tally_fields(), [&](const auto& f, std::size_t) {
      if (!summed(f)) any = true;
    });
    return any;
  }

  void pack_gathered(Packer& out) const final {
    std::uint32_t n = 0;
    const auto fields = state().tally_fields();
    detail::for_each_field(fields, [&](const auto& f, std::size_t) { n += summed(f) ? 0 : 1; });
    out.pack_array(n);
    detail::for_each_field(fields, [&](const auto& f, std::size_t) {
      if (!summed(f)) out.pack(f.value);
    });
  }

  Value compute_synced(std::span<const msgpack::object> gathered,
                       std::span<const std::int64_t> sums) const final {
    State merged = initial_state();
    for (std::size_t r = 0; r < gathered.size(); ++r) {
      if (r == 0) {
        unpack_gathered(gathered[0], merged, 0);
        check_gathered(merged, 0);
        continue;
      }
      State theirs = initial_state();
      unpack_gathered(gathered[r], theirs, r);
      check_gathered(theirs, r);
      // The values every rank must share first: a rank that read other data (another number
      // of classes, say) is an input error, before its counts of another size meet ours.
      detail::zip_fields(merged, theirs, [&](auto into, auto from, std::size_t i) {
        if constexpr (decltype(into)::reduction == Reduction::agree)
          detail::merge_field(into, from, r, i);
      });
      detail::zip_fields(merged, theirs, [&](auto into, auto from, std::size_t i) {
        if constexpr (decltype(into)::reduction != Reduction::agree)
          if (!summed(into)) detail::merge_field(into, from, r, i);
      });
    }
    // The summed counts into the `sum` fields the engine reduced.
    std::size_t at = 0;
    detail::for_each_field(merged.tally_fields(), [&](auto f, std::size_t i) {
      if constexpr (detail::is_count_field<decltype(f)>()) {
        if (!summed(f)) return;
        std::span<std::int64_t> v;
        if constexpr (std::is_same_v<typename decltype(f)::value_type, std::int64_t>)
          v = std::span<std::int64_t>(&f.value, 1);
        else
          v = std::span<std::int64_t>(f.value.data(), f.value.size());
        if (at + v.size() > sums.size())
          throw RuntimeError(std::to_string(sums.size()) +
                             " summed counts, fewer than the state holds (state field " +
                             std::to_string(i) + ")");
        std::copy_n(sums.begin() + static_cast<std::ptrdiff_t>(at), v.size(), v.begin());
        at += v.size();
      }
    });
    if (at != sums.size())
      throw RuntimeError(std::to_string(sums.size()) + " summed counts, the state holds " +
                         std::to_string(at));
    check_total(merged, gathered.size() == 0 ? 0 : gathered.size() - 1);
    return compute(merged);
  }

  Value compute_local() final {
    check_total(state(), 0);
    return compute(state());
  }

  void save(Packer& out) const final {
    const auto fields = state().tally_fields();
    out.pack_array(static_cast<std::uint32_t>(std::tuple_size_v<decltype(fields)>));
    detail::for_each_field(fields, [&](const auto& f, std::size_t) { out.pack(f.value); });
  }

  void restore(const msgpack::object& saved) final {
    State s = initial_state();
    auto fields = s.tally_fields();
    constexpr auto n = std::tuple_size_v<decltype(fields)>;
    if (saved.type != msgpack::type::ARRAY || saved.via.array.size != n)
      throw msgpack::type_error();
    detail::for_each_field(
        fields, [&](auto& f, std::size_t i) { saved.via.array.ptr[i].convert(f.value); });
    check_restored(s);
    state_ = std::move(s);
  }

 protected:
  /// The empty state (called lazily, so it may depend on parameters set in the constructor).
  virtual State initial_state() const { return State{}; }
  /// Accumulates one batch into `state`.
  virtual void update(State& state, const Batch& batch) = 0;
  /// The results from the state of every rank, merged (rank 0 only; in a world of one, the local
  /// state).
  virtual Value compute(const State& merged) const = 0;
  /// Whether the sizes of this configuration's `sum` fields are fixed by its parameters (those of
  /// initial_state()), so that the engine can sum them across ranks in place. A metric that
  /// learns its number of classes from the data returns false without num_classes: its counts are
  /// gathered and added in rank order then (an empty vector takes the other rank's size).
  virtual bool reducible() const { return true; }
  /// Rank 0, at a sync of several ranks: checks the gathered part of one rank's state before it
  /// is merged, where fields must fit together within a rank (per-prediction arrays of one
  /// length, say: merged, a rank with too many and one with too few could look whole). Its
  /// `sum` fields that the engine summed hold their initial values here. Throws RuntimeError
  /// for a state no rank can have sent. The default checks nothing.
  virtual void check_rank(const State& gathered, std::size_t rank) const {
    (void)gathered;
    (void)rank;
  }

  State& state() const {
    if (!state_) state_ = initial_state();
    return *state_;
  }

 private:
  /// Whether field `f` is one the engine sums (rather than gathers).
  template <class F>
  bool summed(const F&) const {
    if constexpr (detail::is_count_field<F>())
      return reducible();
    else
      return false;
  }

  void check_gathered(const State& s, std::size_t rank) const {
    try {
      check_rank(s, rank);
    } catch (const Error& e) {
      throw RuntimeError("the state of rank " + std::to_string(rank) + " is corrupt: " + e.what());
    }
  }

  void unpack_gathered(const msgpack::object& o, State& into, std::size_t rank) const {
    auto fields = into.tally_fields();
    std::uint32_t n = 0;
    detail::for_each_field(fields, [&](const auto& f, std::size_t) { n += summed(f) ? 0 : 1; });
    if (o.type != msgpack::type::ARRAY || o.via.array.size != n)
      throw RuntimeError("the state of rank " + std::to_string(rank) +
                         " is corrupt: not an array "
                         "of " +
                         std::to_string(n) + " state fields");
    std::uint32_t k = 0;
    detail::for_each_field(fields, [&](auto& f, std::size_t i) {
      if (summed(f)) return;
      try {
        o.via.array.ptr[k++].convert(f.value);
      } catch (const msgpack::type_error&) {
        detail::corrupt(rank, i, "it does not hold the type this metric packs");
      }
      if constexpr (detail::is_count_field<decltype(f)>())
        detail::check_counts_of(f.value, rank, i);
    });
  }

  /// The merged counts of every `sum` field together stay under 2^62, so that any sum of some of
  /// them (a row of a confusion matrix, tp + fp), and the sum of two such sums, is exact.
  static void check_total(const State& s, std::size_t last_rank) {
    check_counts(s, [&](std::size_t field, const std::string& what) {
      detail::corrupt(last_rank, field, what);
    });
  }

  /// Calls fail(field, what) for the first negative count, or where the counts reach 2^62.
  template <class Fail>
  static void check_counts(const State& s, Fail&& fail) {
    std::int64_t total = 0;
    detail::for_each_field(s.tally_fields(), [&](const auto& f, std::size_t i) {
      if constexpr (detail::is_count_field<decltype(f)>()) {
        for (const std::int64_t c : detail::counts_of(f.value)) {
          if (c < 0) fail(i, "a count is negative (" + std::to_string(c) + ")");
          if (__builtin_add_overflow(total, c, &total) || total >= (std::int64_t{1} << 62))
            fail(i, "the counts sum to 2^62 or more");
        }
      }
    });
  }

  /// A restored state must be one this metric could have saved (a checkpoint or a host program's
  /// state that passed its checksum may still be of another tally or be forged): counts >= 0
  /// summing under 2^62, `sum` fields of the sizes this configuration fixes (when reducible()),
  /// and what check_rank() checks of a rank's state. RuntimeError naming the field otherwise.
  void check_restored(const State& s) const {
    const auto fail = [](std::size_t field, const std::string& what) {
      throw RuntimeError("the saved state is corrupt (state field " + std::to_string(field) +
                         "): " + what);
    };
    if (reducible()) {
      const State layout = initial_state();
      detail::zip_fields<const State>(
          s, layout, [&](const auto& mine, const auto& fixed, std::size_t i) {
            if constexpr (detail::is_count_field<decltype(mine)>()) {
              const auto have = detail::counts_of(mine.value).size();
              const auto want = detail::counts_of(fixed.value).size();
              if (have != want)
                fail(i, std::to_string(have) + " counts where this metric's parameters make " +
                            std::to_string(want));
            }
          });
    }
    check_counts(s, fail);
    check_rank(s, 0);
  }

  mutable std::optional<State> state_;
};

}  // namespace tally
