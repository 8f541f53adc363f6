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
// (TALLY_STATE, tally/sdk/state.hpp): the int64 counts of `sum` fields are summed to rank 0 with
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
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/bytes.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/export.hpp"
#include "tally/sdk/internal/merge.hpp"
#include "tally/sdk/internal/state_codec.hpp"
#include "tally/sdk/state.hpp"
#include "tally/sdk/value.hpp"

namespace tally {

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
/// Gathered states decoded once (Metric::decode_gathered) for many Metric::compute_weighted calls:
/// the bootstrap's resamples weigh the same units' states differently each time. Owned by the
/// host; only the metric that made it reads it.
class TALLY_API DecodedStates {
 public:
  virtual ~DecodedStates();
};

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
  /// Writes the gathered part of the local state: the bytes of one msgpack value.
  virtual void pack_gathered(ByteSink& out) const = 0;
  /// Rank 0: the results from every rank's gathered part (rank order; empty when gathers() is
  /// false) and the summed counts. Returns a map of result keys to numbers, arrays or maps.
  virtual Value compute_synced(std::span<const Bytes> gathered,
                               std::span<const std::int64_t> sums) const = 0;
  /// `gathered` decoded once, for compute_weighted(): what a bootstrap replays many times (the
  /// default keeps the bytes, and compute_weighted decodes them each time).
  virtual std::unique_ptr<DecodedStates> decode_gathered(std::span<const Bytes> gathered) const;
  /// compute_synced() of the decoded states with state u repeated weights[u] times, in order
  /// (weights: one per state). The same results, bit for bit, as compute_synced of the bytes
  /// repeated so; const and safe to call from several threads on one DecodedStates.
  virtual Value compute_weighted(const DecodedStates& decoded,
                                 std::span<const std::uint32_t> weights,
                                 std::span<const std::int64_t> sums) const;
  /// A world of one: the results from the local state, which it leaves as it was.
  virtual Value compute_local() = 0;

  /// Checkpoints: the whole local state, the bytes of one msgpack value ...
  virtual void save(ByteSink& out) const = 0;
  /// ... and back: replaces the local state with what save() wrote (on this rank, in an earlier
  /// process). Throws StateFormatError when the bytes are not such a state, RuntimeError when
  /// they read but no run of this metric could have saved them.
  virtual void restore(Bytes saved) = 0;
  /// Merges a state save() wrote into the local one, as if its samples came after the local
  /// ones (each field by its reduction): how a checkpoint of N ranks resumes on M. Throws as
  /// restore() does, and InputError where the two disagree on a value every rank must share.
  virtual void merge_saved(Bytes saved) = 0;
};

/// The base class of metrics: State is a struct declared with TALLY_STATE (tally/sdk/state.hpp).
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
    internal::for_each_field(layout.tally_fields(), [&](const auto& f, std::size_t) {
      if constexpr (internal::is_count_field<decltype(f)>())
        n += internal::counts_of(f.value).size();
    });
    return n;
  }

  void write_sums(std::span<std::int64_t> out) const final {
    if (!reducible()) return;
    const State layout = initial_state();
    std::size_t at = 0;
    // The sizes are those of the initial state, field by field (zip_fields pairs them).
    internal::zip_fields(state(), layout, [&](const auto& mine, const auto& fixed, std::size_t i) {
      if constexpr (internal::is_count_field<decltype(mine)>()) {
        const auto v = internal::counts_of(mine.value);
        const std::size_t want = internal::counts_of(fixed.value).size();
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
    internal::for_each_field(state().tally_fields(), [&](const auto& f, std::size_t) {
      if (!summed(f)) any = true;
    });
    return any;
  }

  void pack_gathered(ByteSink& out) const final {
    StateWriter w(out);
    std::size_t n = 0;
    const auto fields = state().tally_fields();
    internal::for_each_field(fields, [&](const auto& f, std::size_t) { n += summed(f) ? 0 : 1; });
    w.array(n);
    internal::for_each_field(fields, [&](const auto& f, std::size_t) {
      if (!summed(f)) internal::write(w, f.value);
    });
  }

  Value compute_synced(std::span<const Bytes> gathered,
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
      merge_into(merged, theirs, r, /*all_fields=*/false);
    }
    fill_sums(merged, sums);
    check_total(merged, gathered.size() == 0 ? 0 : gathered.size() - 1);
    return compute(merged);
  }

  std::unique_ptr<DecodedStates> decode_gathered(std::span<const Bytes> gathered) const final {
    auto d = std::make_unique<Decoded>();
    d->states.reserve(gathered.size());
    for (std::size_t r = 0; r < gathered.size(); ++r) {
      State s = initial_state();
      unpack_gathered(gathered[r], s, r);
      check_gathered(s, r);
      d->states.push_back(std::move(s));
    }
    return d;
  }

  Value compute_weighted(const DecodedStates& decoded, std::span<const std::uint32_t> weights,
                         std::span<const std::int64_t> sums) const final {
    const auto* d = dynamic_cast<const Decoded*>(&decoded);
    if (d == nullptr || weights.size() != d->states.size())
      throw RuntimeError("compute_weighted: not the states this metric decoded, or " +
                         std::to_string(weights.size()) + " weights for them");
    State merged = initial_state();
    std::size_t r = 0;  // the position the state would have had in compute_synced's list
    for (std::size_t u = 0; u < weights.size(); ++u)
      for (std::uint32_t k = 0; k < weights[u]; ++k, ++r) {
        if (r == 0)
          merged = d->states[u];
        else
          merge_into(merged, d->states[u], r, /*all_fields=*/false);
      }
    fill_sums(merged, sums);
    check_total(merged, r == 0 ? 0 : r - 1);
    return compute(merged);
  }

  Value compute_local() final {
    check_total(state(), 0);
    return compute(state());
  }

  void save(ByteSink& out) const final {
    StateWriter w(out);
    const auto fields = state().tally_fields();
    w.array(std::tuple_size_v<decltype(fields)>);
    internal::for_each_field(fields,
                             [&](const auto& f, std::size_t) { internal::write(w, f.value); });
  }

  void restore(Bytes saved) final { state_ = read_saved(saved); }

  void merge_saved(Bytes saved) final {
    State later = read_saved(saved);
    merge_into(state(), later, 1, /*all_fields=*/true);
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
    if constexpr (internal::is_count_field<F>())
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

  struct Decoded final : DecodedStates {
    std::vector<State> states;
  };

  // The summed counts into the `sum` fields the engine reduced.
  void fill_sums(State& merged, std::span<const std::int64_t> sums) const {
    std::size_t at = 0;
    internal::for_each_field(merged.tally_fields(), [&](auto f, std::size_t i) {
      if constexpr (internal::is_count_field<decltype(f)>()) {
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
  }

  void unpack_gathered(Bytes bytes, State& into, std::size_t rank) const {
    auto fields = into.tally_fields();
    std::uint32_t n = 0;
    internal::for_each_field(fields, [&](const auto& f, std::size_t) { n += summed(f) ? 0 : 1; });
    std::size_t at = 0;
    try {
      StateReader r(bytes);
      if (r.peek() != StateReader::Kind::Array || r.array() != n)
        throw RuntimeError("the state of rank " + std::to_string(rank) +
                           " is corrupt: not an array of " + std::to_string(n) + " state fields");
      internal::for_each_field(fields, [&](auto& f, std::size_t i) {
        if (summed(f)) return;
        at = i;
        internal::read(r, f.value);
        if constexpr (internal::is_count_field<decltype(f)>())
          internal::check_counts_of(f.value, rank, i);
      });
    } catch (const StateFormatError&) {
      internal::corrupt(rank, at, "it does not hold the type this metric packs");
    }
  }

  /// The state save() wrote, checked as restore() requires.
  State read_saved(Bytes saved) const {
    State s = initial_state();
    auto fields = s.tally_fields();
    constexpr auto n = std::tuple_size_v<decltype(fields)>;
    StateReader r(saved);
    if (r.peek() != StateReader::Kind::Array || r.array() != n)
      StateReader::fail("not an array of " + std::to_string(n) + " state fields");
    internal::for_each_field(fields, [&](auto& f, std::size_t) { internal::read(r, f.value); });
    check_restored(s);
    return s;
  }

  /// Merges `from` (rank `rank`'s state, or a later part of the data) into `into`: the values
  /// every rank must share first (a rank that read other data, another number of classes say,
  /// is an input error before its counts of another size meet ours), then the rest; the `sum`
  /// fields the engine reduces only when `all_fields`.
  void merge_into(State& into, const State& from, std::size_t rank, bool all_fields) const {
    internal::zip_fields(into, from, [&](auto a, auto b, std::size_t i) {
      if constexpr (decltype(a)::reduction == Reduction::agree)
        internal::merge_field(a, b, rank, i);
    });
    internal::zip_fields(into, from, [&](auto a, auto b, std::size_t i) {
      if constexpr (decltype(a)::reduction != Reduction::agree)
        if (all_fields || !summed(a)) internal::merge_field(a, b, rank, i);
    });
  }

  /// The merged counts of every `sum` field together stay under 2^62, so that any sum of some of
  /// them (a row of a confusion matrix, tp + fp), and the sum of two such sums, is exact.
  static void check_total(const State& s, std::size_t last_rank) {
    check_counts(s, [&](std::size_t field, const std::string& what) {
      internal::corrupt(last_rank, field, what);
    });
  }

  /// Calls fail(field, what) for the first negative count, or where the counts reach 2^62.
  template <class Fail>
  static void check_counts(const State& s, Fail&& fail) {
    std::int64_t total = 0;
    internal::for_each_field(s.tally_fields(), [&](const auto& f, std::size_t i) {
      if constexpr (internal::is_count_field<decltype(f)>()) {
        for (const std::int64_t c : internal::counts_of(f.value)) {
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
      internal::zip_fields<const State>(
          s, layout, [&](const auto& mine, const auto& fixed, std::size_t i) {
            if constexpr (internal::is_count_field<decltype(mine)>()) {
              const auto have = internal::counts_of(mine.value).size();
              const auto want = internal::counts_of(fixed.value).size();
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
