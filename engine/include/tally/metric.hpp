// Metric: the interface every metric plugin implements, and TypedMetric, the helper most metrics
// use. Each rank calls add() on its own shard; at sync the engine packs every rank's state, and
// rank 0 calls compute_packed() with the states of all ranks in rank order (= dataset order). In
// a world of one a TypedMetric computes from its local state directly (LocalComputeMetric); a
// state made of counts is summed to rank 0 instead of gathered (ReducibleMetric).
//
// With TypedMetric a metric declares its local state as a struct with MSGPACK_DEFINE and writes
// only update(state, batch) and compute(states):
//
//   struct State {
//     tally::PackedVector<std::int64_t> hits;
//     std::int64_t n = 0;
//     MSGPACK_DEFINE(hits, n)
//     auto sums() { return std::tie(hits, n); }  // optional: all counts, summed across ranks
//   };
//   class MyMetric : public tally::TypedMetric<State> {
//     void update(State& s, const tally::Batch& b) override { ... }
//     tally::Value compute(const std::vector<State>& per_rank) const override { ... }
//   };
//
// Checkpoints (docs/checkpoint.md) save each rank's packed state and load it back into a fresh
// metric through RestorableMetric, which TypedMetric implements: a TypedMetric keeps everything it
// accumulates in its State, so unpacking the State it packed restores it exactly. A metric that
// derives from Metric directly may also derive from RestorableMetric; one that does not cannot be
// checkpointed (the engine says so before a checkpointed run starts).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
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

class TALLY_API Metric {
 public:
  virtual ~Metric();

  /// Accumulates one batch into the local state. Throws InputError for bad data.
  virtual void add(const Batch& batch) = 0;
  /// Writes the local state as one msgpack object.
  virtual void pack(Packer& out) const = 0;
  /// Rank 0: the results from every rank's packed state, in rank order. Returns a map of result
  /// keys (mmeval's names) to numbers, arrays or maps.
  virtual Value compute_packed(std::span<const msgpack::object> states) const = 0;
  /// Clears the local state.
  virtual void reset() = 0;
};

/// Optional interface of a metric whose local state can be loaded back from what its pack()
/// wrote (checkpoint and resume). The engine finds it with dynamic_cast, so Metric's layout, and
/// the plugin ABI, stay as they were: a plugin built before this interface existed still loads,
/// and only checkpointing refuses its metrics.
class TALLY_API RestorableMetric {
 public:
  virtual ~RestorableMetric();
  /// Replaces the local state with `packed`, an object this metric's own pack() wrote (on this
  /// rank, in an earlier process). Throws msgpack::type_error when it cannot read it. Bins in
  /// `packed` may point into a buffer freed after the call: copy what you keep.
  virtual void restore(const msgpack::object& packed) = 0;
};

/// Optional interface of a metric that computes its results from its own local state without
/// packing it: the engine calls compute_local() instead of pack() + compute_packed() in a world of
/// one, which saves two copies of a large state (the packed bytes and the unpacked state).
/// Found with dynamic_cast like RestorableMetric: the plugin ABI is unchanged, and a metric
/// without it is packed and unpacked as before.
class TALLY_API LocalComputeMetric {
 public:
  virtual ~LocalComputeMetric();
  /// The results compute_packed() would give from this metric's packed state alone. Leaves the
  /// local state as it was (also when it throws).
  virtual Value compute_local() = 0;
};

/// Optional interface of a metric whose state is non-negative int64 counts of a fixed number that
/// add up across ranks (a confusion matrix, hit counts). At sync the engine sums every rank's
/// counts to rank 0 with DistBackend::reduce (MPI_Reduce) instead of gathering every rank's
/// state: rank 0 holds one state's worth of counts whatever the world size, and each rank sends
/// its counts once. Integer sums are exact, so the results do not depend on the world size.
/// Found with dynamic_cast like RestorableMetric: Metric's layout is unchanged.
class TALLY_API ReducibleMetric {
 public:
  virtual ~ReducibleMetric();
  /// How many counts: a function of the metric's parameters only, so the same on every rank (the
  /// sync header checks it); 0 when this configuration's state is not such counts (it is packed
  /// and gathered then).
  virtual std::size_t reduced_size() const = 0;
  /// Writes the local counts, reduced_size() of them.
  virtual void reduced_counts(std::span<std::int64_t> out) const = 0;
  /// Rank 0: the results compute_packed() would give from every rank's packed state, from the
  /// counts summed over the ranks.
  virtual Value compute_reduced(std::span<const std::int64_t> sums) const = 0;
};

/// A State whose members are all counts that add up across ranks names them in sums(), and its
/// TypedMetric is then a ReducibleMetric:
///
///   struct State { PackedVector<std::int64_t> hits; std::int64_t n = 0; MSGPACK_DEFINE(hits, n)
///                  auto sums() { return std::tie(hits, n); } };
///
/// The sizes of the PackedVectors are those of initial_state(); they must not change in update().
template <class S>
concept SummedState = requires(S& s) {
  s.sums();
};

namespace detail {
template <class S, class Fn>
void for_each_sum(S& s, Fn&& fn) {
  std::apply(
      [&](auto&... field) {
        const auto one = [&](auto& f) {
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(f)>, std::int64_t>)
            fn(std::span<std::int64_t>(&f, 1));
          else
            fn(std::span<std::int64_t>(f.data(), f.size()));
        };
        (one(field), ...);
      },
      s.sums());
}
}  // namespace detail

template <class State>
class TypedMetric : public Metric,
                    public RestorableMetric,
                    public LocalComputeMetric,
                    public ReducibleMetric {
 public:
  void add(const Batch& batch) final { update(state(), batch); }
  void pack(Packer& out) const final { out.pack(state()); }
  Value compute_packed(std::span<const msgpack::object> packed) const final {
    std::vector<State> states;
    states.reserve(packed.size());
    for (const auto& o : packed) {
      State s = initial_state();
      o.convert(s);
      states.push_back(std::move(s));
    }
    return compute(states);
  }
  Value compute_local() final {
    // compute() reads the states by const reference: lend it the local state, moved (no copy),
    // and take it back whatever happens.
    std::vector<State> one;
    one.push_back(std::move(state()));
    struct GiveBack {
      std::vector<State>& from;
      std::optional<State>& to;
      ~GiveBack() { to = std::move(from.front()); }
    } give_back{one, state_};
    return compute(one);
  }
  std::size_t reduced_size() const final {
    if constexpr (SummedState<State>) {
      if (!reducible()) return 0;
      State layout = initial_state();
      std::size_t n = 0;
      detail::for_each_sum(layout, [&](std::span<std::int64_t> v) { n += v.size(); });
      return n;
    } else {
      return 0;
    }
  }
  void reduced_counts(std::span<std::int64_t> out) const final {
    if constexpr (SummedState<State>) {
      State layout = initial_state();
      std::vector<std::size_t> sizes;
      detail::for_each_sum(layout, [&](std::span<std::int64_t> v) { sizes.push_back(v.size()); });
      std::size_t at = 0;
      std::size_t field = 0;
      detail::for_each_sum(state(), [&](std::span<std::int64_t> v) {
        if (v.size() != sizes[field] || at + v.size() > out.size())
          throw RuntimeError("count array " + std::to_string(field) + " holds " +
                             std::to_string(v.size()) + " counts, its initial state " +
                             std::to_string(sizes[field]) + ": it cannot be reduced");
        std::copy(v.begin(), v.end(), out.begin() + static_cast<std::ptrdiff_t>(at));
        at += v.size();
        ++field;
      });
      if (at != out.size())
        throw RuntimeError(std::to_string(at) + " counts where " + std::to_string(out.size()) +
                           " were expected");
    } else {
      throw RuntimeError("this metric's state is not counts: it cannot be reduced");
    }
  }
  Value compute_reduced(std::span<const std::int64_t> sums) const final {
    if constexpr (SummedState<State>) {
      std::vector<State> one;
      one.push_back(initial_state());
      std::size_t at = 0;
      detail::for_each_sum(one.front(), [&](std::span<std::int64_t> v) {
        if (at + v.size() > sums.size())
          throw RuntimeError(std::to_string(sums.size()) +
                             " summed counts, fewer than the state holds");
        std::copy_n(sums.begin() + static_cast<std::ptrdiff_t>(at), v.size(), v.begin());
        at += v.size();
      });
      if (at != sums.size())
        throw RuntimeError(std::to_string(sums.size()) + " summed counts, the state holds " +
                           std::to_string(at));
      return compute(one);
    } else {
      throw RuntimeError("this metric's state is not counts: it cannot be reduced");
    }
  }
  void reset() final { state_ = initial_state(); }
  void restore(const msgpack::object& packed) final {
    State s = initial_state();
    packed.convert(s);
    state_ = std::move(s);
  }

 protected:
  /// The empty state (called lazily, so it may depend on parameters set in the constructor).
  virtual State initial_state() const { return State{}; }
  virtual void update(State& state, const Batch& batch) = 0;
  /// `states` holds one state per rank, in rank order; for a ReducibleMetric, rank 0 may instead
  /// pass one state holding the sums of every rank's counts.
  virtual Value compute(const std::vector<State>& states) const = 0;
  /// For a SummedState: whether this configuration's counts have a fixed size (a metric that
  /// learns its number of classes from the data returns false without num_classes, and is
  /// gathered).
  virtual bool reducible() const { return true; }

  State& state() const {
    if (!state_) state_ = initial_state();
    return *state_;
  }

 private:
  mutable std::optional<State> state_;
};

}  // namespace tally
