// The sync protocol (engine/src/sync.*: sync::plan, sync::run) driven over an in-process world of
// W threads (tests/support/thread_backend.hpp), with a metric whose state uses every reduction
// of TALLY_STATE. Expected values: the single-rank result of the same metric on the same samples
// (same answer on any world size), and the protocol's contract: every rank returns the same
// Outcome or throws the same error.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/thread_backend.hpp"
#include "sync.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/metric.hpp"

namespace {

using tally::Batch;
using tally::Tensor;
using tally::Value;
using tally::testing::ThreadBackend;
using tally::testing::ThreadWorld;

/// An order-sensitive fold of values (h = h * 31 + x, mod 2^64), merged in rank order.
struct Fold {
  std::uint64_t hash = 0;
  std::uint64_t power = 1;  // 31^count
  void add(std::int64_t x) {
    hash = hash * 31 + static_cast<std::uint64_t>(x);
    power *= 31;
  }
  void merge(const Fold& later) {
    hash = hash * later.power + later.hash;
    power *= later.power;
  }
  TALLY_FIELDS(hash, power)
};

struct AllState {
  tally::PackedVector<std::int64_t> hist;  // x mod 4
  std::int64_t n = 0;
  tally::PackedVector<double> values;
  std::int64_t first_x = -1;
  std::int64_t width = 0;  // bytes per value of the field seen (every rank must agree)
  std::int64_t lo = std::numeric_limits<std::int64_t>::max();
  std::int64_t hi = std::numeric_limits<std::int64_t>::min();
  double half_sum = 0;  // exact here: halves of small integers
  Fold fold;
  TALLY_STATE(sum(hist), sum(n), concat(values), first(first_x, -1), agree(width, 0), min(lo),
              max(hi), float_sum(half_sum), merge(fold))
};

struct Knobs {
  bool reducible = true;
  bool fail_in_compute = false;
  std::int64_t corrupt = 0;  // != 0: the first count is overwritten with it after each batch
  std::int64_t width = 0;    // != 0: the width this rank says it saw
};

class AllReductions final : public tally::TypedMetric<AllState> {
 public:
  explicit AllReductions(Knobs k = {}) : k_(k) {}

 protected:
  AllState initial_state() const override {
    AllState s;
    s.hist.assign(4, 0);
    return s;
  }
  void update(AllState& s, const Batch& b) override {
    const Tensor& x = b.tensor("x");
    const auto* v = x.data_as<std::int64_t>();
    s.width = k_.width != 0 ? k_.width : static_cast<std::int64_t>(tally::dtype_size(x.dtype()));
    for (std::int64_t i = 0; i < x.size(0); ++i) {
      ++s.hist[static_cast<std::size_t>(v[i] % 4)];
      ++s.n;
      s.values.push_back(static_cast<double>(v[i]));
      if (s.first_x < 0) s.first_x = v[i];
      s.lo = std::min(s.lo, v[i]);
      s.hi = std::max(s.hi, v[i]);
      s.half_sum += 0.5 * static_cast<double>(v[i]);
      s.fold.add(v[i]);
    }
    if (k_.corrupt != 0) s.hist[0] = k_.corrupt;
  }
  Value compute(const AllState& all) const override {
    if (k_.fail_in_compute) throw tally::InputError("no samples the metric can use");
    Value out = Value::map();
    out.set("hist", Value(std::vector<std::int64_t>(all.hist.begin(), all.hist.end())));
    out.set("n", all.n);
    out.set("values", Value(std::vector<double>(all.values.begin(), all.values.end())));
    out.set("first", all.first_x);
    out.set("width", all.width);
    out.set("lo", all.lo);
    out.set("hi", all.hi);
    out.set("half_sum", all.half_sum);
    out.set("hash", static_cast<std::int64_t>(all.fold.hash >> 1));
    return out;
  }
  bool reducible() const override { return k_.reducible; }

 private:
  Knobs k_;
};

/// Only counts: nothing to gather.
struct CountsState {
  tally::PackedVector<std::int64_t> c;
  TALLY_STATE(sum(c))
};
class CountsOnly final : public tally::TypedMetric<CountsState> {
 protected:
  CountsState initial_state() const override {
    CountsState s;
    s.c.assign(3, 0);
    return s;
  }
  void update(CountsState& s, const Batch& b) override { s.c[0] += b.size(); }
  Value compute(const CountsState& all) const override { return Value(all.c[0]); }
};

Batch batch_of(std::int64_t begin, std::int64_t end) {
  std::vector<std::int64_t> xs;
  for (std::int64_t i = begin; i < end; ++i) xs.push_back(3 * i + 1);
  Batch b;
  b.set("x", Tensor::from_vector(xs));
  return b;
}

/// What one rank got from the sync: the results, or the error it threw.
struct RankResult {
  std::optional<std::string> results;  // Value::to_json()
  Value value;
  std::int64_t samples = -1;
  std::string error_type;  // "InputError", "RuntimeError", "other"
  std::string message;
};

/// Runs sync::run on every rank of a W-thread world; `setup(rank, request, metrics)` fills the
/// request (its metrics live in `metrics`).
using Setup =
    std::function<void(int, tally::sync::Request&, std::vector<std::unique_ptr<tally::Metric>>&)>;
std::vector<RankResult> run_sync(int world, bool native, const Setup& setup) {
  ThreadWorld w(world);
  std::vector<RankResult> out(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      ThreadBackend b(w, r, native);
      tally::Collectives c(b);
      std::vector<std::unique_ptr<tally::Metric>> metrics;
      tally::sync::Request req;
      setup(r, req, metrics);
      auto& mine = out[static_cast<std::size_t>(r)];
      try {
        const auto o = tally::sync::run(c, std::move(req));
        mine.results = o.results.to_json();
        mine.value = o.results;
        mine.samples = o.samples;
      } catch (const tally::InputError& e) {
        mine.error_type = "InputError";
        mine.message = e.what();
      } catch (const tally::RuntimeError& e) {
        mine.error_type = "RuntimeError";
        mine.message = e.what();
      } catch (const std::exception& e) {
        mine.error_type = "other";
        mine.message = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(w.violations.empty()) << w.violations.front();
  return out;
}

/// Contiguous shards of [0, n) over the ranks in rank order; rank `empty` reads nothing (the
/// others share the samples).
std::pair<std::int64_t, std::int64_t> shard(std::int64_t n, int world, int r, int empty = -1) {
  if (r == empty) return {0, 0};
  const std::int64_t k = world - (empty >= 0 ? 1 : 0);
  const std::int64_t i = r - (empty >= 0 && r > empty ? 1 : 0);
  return {n * i / k, n * (i + 1) / k};
}

Setup all_reductions(std::int64_t n, int world, int empty = -1, Knobs knobs = {}) {
  return [=](int r, tally::sync::Request& req, std::vector<std::unique_ptr<tally::Metric>>& ms) {
    ms.push_back(std::make_unique<AllReductions>(knobs));
    ms.push_back(std::make_unique<CountsOnly>());
    const auto [begin, end] = shard(n, world, r, empty);
    for (std::int64_t b = begin; b < end; b += 3) {
      const Batch batch = batch_of(b, std::min(end, b + 3));
      for (auto& m : ms) m->add(batch);
    }
    req.metrics = {{"all", ms[0].get()}, {"counts", ms[1].get()}};
    req.fingerprint = 7;
    req.samples = end - begin;
  };
}

void expect_every_rank_fails_alike(const std::vector<RankResult>& got, const std::string& type,
                                   const std::string& needle) {
  for (std::size_t r = 0; r < got.size(); ++r) {
    EXPECT_FALSE(got[r].results) << "rank " << r << " returned results";
    EXPECT_EQ(got[r].error_type, type) << "rank " << r << ": " << got[r].message;
    EXPECT_EQ(got[r].message, got[0].message) << "rank " << r;
    EXPECT_NE(got[r].message.find(needle), std::string::npos) << got[r].message;
  }
}

struct WorldCase {
  int world;
  bool native;
  int empty;  // a rank with no samples, or -1
};
void PrintTo(const WorldCase& c, std::ostream* os) {
  *os << c.world << " ranks, " << (c.native ? "native" : "fallback") << " primitives, empty rank "
      << c.empty;
}

class SyncAnyWorld : public ::testing::TestWithParam<WorldCase> {};

// Every rank gets the single-rank result, bit for bit: sums reduced, the rest gathered and
// merged in rank order (concat, first, agree, min, max, float_sum, merge), on worlds of 1-7
// ranks with uneven shards and an empty rank, over native and fallback primitives.
TEST_P(SyncAnyWorld, EveryRankGetsTheSingleRankResult) {
  const auto& c = GetParam();
  constexpr std::int64_t kN = 23;
  const auto one = run_sync(1, true, all_reductions(kN, 1));
  ASSERT_TRUE(one[0].results) << one[0].message;
  const auto got = run_sync(c.world, c.native, all_reductions(kN, c.world, c.empty));
  for (int r = 0; r < c.world; ++r) {
    const auto& g = got[static_cast<std::size_t>(r)];
    ASSERT_TRUE(g.results) << "rank " << r << ": " << g.message;
    EXPECT_EQ(*g.results, *one[0].results) << "rank " << r;
    EXPECT_EQ(g.samples, kN);
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, SyncAnyWorld,
                         ::testing::Values(WorldCase{2, true, -1}, WorldCase{3, true, 1},
                                           WorldCase{4, false, 0}, WorldCase{7, true, 6},
                                           WorldCase{7, false, 3}, WorldCase{3, false, -1}));

// The single-rank result above is itself checked against values computed by hand from the
// samples 3i + 1, i in [0, 23): the reference for every world.
TEST(SyncProtocol, SingleRankResultIsTheMathOfTheSamples) {
  const auto one = run_sync(1, true, all_reductions(23, 1));
  ASSERT_TRUE(one[0].results) << one[0].message;
  const Value& v = one[0].value;
  const auto& all = v.at("all");
  std::vector<std::int64_t> hist(4, 0);
  std::uint64_t hash = 0;
  double half = 0;
  for (std::int64_t i = 0; i < 23; ++i) {
    ++hist[static_cast<std::size_t>((3 * i + 1) % 4)];
    hash = hash * 31 + static_cast<std::uint64_t>(3 * i + 1);
    half += 0.5 * static_cast<double>(3 * i + 1);
  }
  EXPECT_EQ(all.at("hist"), Value(hist));
  EXPECT_EQ(all.at("n").as_int(), 23);
  EXPECT_EQ(all.at("values").size(), 23u);
  EXPECT_EQ(all.at("first").as_int(), 1);
  EXPECT_EQ(all.at("width").as_int(), 8);
  EXPECT_EQ(all.at("lo").as_int(), 1);
  EXPECT_EQ(all.at("hi").as_int(), 67);
  EXPECT_EQ(all.at("half_sum").as_double(), half);
  EXPECT_EQ(static_cast<std::uint64_t>(all.at("hash").as_int()), hash >> 1);
  EXPECT_EQ(v.at("counts").as_int(), 23);
}

// The plan: `sum` fields of fixed size are summed (their number in the header), the rest is
// gathered; a state of counts only gathers nothing; a metric that learns its sizes from the data
// (reducible() false) gathers everything; a world of one computes in place.
TEST(SyncProtocol, PlanSumsFixedCountsAndGathersTheRest) {
  AllReductions all;
  AllReductions learned(Knobs{.reducible = false});
  CountsOnly counts;
  const auto p = tally::sync::plan({{"a", &all}, {"b", &learned}, {"c", &counts}}, 3);
  EXPECT_FALSE(p.local);
  EXPECT_EQ(p.sizes, (std::vector<std::size_t>{5, 0, 3}));  // hist (4) + n; c (3)
  EXPECT_EQ(p.offsets, (std::vector<std::size_t>{0, 5, 5}));
  EXPECT_EQ(p.gathers, (std::vector<bool>{true, true, false}));
  EXPECT_EQ(p.counts, 8u);
  const auto one = tally::sync::plan({{"a", &all}}, 1);
  EXPECT_TRUE(one.local);
  EXPECT_EQ(one.counts, 0u);
}

// With reducible() false every field, counts too, is gathered and added in rank order: the same
// result.
TEST(SyncProtocol, GatheredCountsGiveTheSameResult) {
  const auto one = run_sync(1, true, all_reductions(23, 1));
  const auto got = run_sync(4, true, all_reductions(23, 4, 2, Knobs{.reducible = false}));
  for (const auto& g : got) {
    ASSERT_TRUE(g.results) << g.message;
    EXPECT_EQ(*g.results, *one[0].results);
  }
}

// A rank that failed before the sync (a bad file, say) fails every rank with its message,
// naming it and the other ranks that failed.
TEST(SyncProtocol, OneRanksFailureIsEveryRanks) {
  const auto base = all_reductions(23, 4);
  const auto got = run_sync(4, true, [&](int r, auto& req, auto& ms) {
    base(r, req, ms);
    if (r == 2) req.error = tally::Failure{2, "data.npy: truncated", {}};
    if (r == 3) req.error = tally::Failure{1, "out of memory", {}};
  });
  expect_every_rank_fails_alike(got, "InputError",
                                "rank 2: data.npy: truncated (ranks 3 failed too)");
}

// An error in compute() on rank 0 reaches every rank (the broadcast carries it), prefixed with
// the metric's label.
TEST(SyncProtocol, AnErrorInComputeReachesEveryRank) {
  const auto got = run_sync(3, false, all_reductions(23, 3, -1, Knobs{.fail_in_compute = true}));
  expect_every_rank_fails_alike(got, "InputError", "metric 'all': no samples the metric can use");
}

// A rank whose counts are corrupt (negative) fails on its own rank before the reduction, and
// every rank reports it.
TEST(SyncProtocol, NegativeCountsFailEveryRank) {
  const auto base = all_reductions(23, 3);
  const auto got = run_sync(3, true, [&](int r, auto& req, auto& ms) {
    if (r == 1) {
      ms.push_back(std::make_unique<AllReductions>(Knobs{.corrupt = -5}));
      ms.push_back(std::make_unique<CountsOnly>());
      for (auto& m : ms) m->add(batch_of(8, 15));
      req.metrics = {{"all", ms[0].get()}, {"counts", ms[1].get()}};
      req.fingerprint = 7;
      req.samples = 7;
    } else {
      base(r, req, ms);
    }
  });
  expect_every_rank_fails_alike(got, "RuntimeError", "rank 1: metric 'all': a count");
}

// A value every rank must share (agree) that two ranks set differently fails every rank.
TEST(SyncProtocol, RanksThatDisagreeOnASharedValueFailEveryRank) {
  const auto got = run_sync(3, true, [&](int r, auto& req, auto& ms) {
    ms.push_back(std::make_unique<AllReductions>(Knobs{.width = r == 1 ? 4 : 0}));
    ms[0]->add(batch_of(2 * r, 2 * r + 2));
    req.metrics = {{"all", ms[0].get()}};
    req.fingerprint = 7;
    req.samples = 2;
  });
  expect_every_rank_fails_alike(got, "InputError", "rank 1 disagrees with an earlier rank");
}

// Ranks configured differently (another metrics fingerprint) fail every rank at the header.
TEST(SyncProtocol, ADifferentConfigurationFailsEveryRank) {
  const auto base = all_reductions(23, 3);
  const auto got = run_sync(3, true, [&](int r, auto& req, auto& ms) {
    base(r, req, ms);
    if (r == 2) req.fingerprint = 8;
  });
  expect_every_rank_fails_alike(got, "InputError", "rank 2");
}

// A sampler's padding (3 ranks of 4 samples for a dataset of 11: rank 2's last sample is
// padding) is dropped only where every rank declared a padded sampler; otherwise every rank
// fails with a message naming the option.
TEST(SyncProtocol, PaddingIsDroppedOnlyWithAPaddedSampler) {
  for (const bool declared : {true, false}) {
    SCOPED_TRACE(declared);
    std::vector<int> dropped(3, -1);
    const auto got = run_sync(3, true, [&](int r, auto& req, auto& ms) {
      ms.push_back(std::make_unique<CountsOnly>());
      ms[0]->add(batch_of(4 * r, 4 * r + 3));  // three samples added, the fourth held back
      req.metrics = {{"counts", ms[0].get()}};
      req.fingerprint = 7;
      req.samples = 4;
      req.dataset_size = 11;
      req.padded_sampler = declared;
      Batch held = batch_of(4 * r + 3, 4 * r + 4);
      req.finish = [&dropped, r, m = ms[0].get(), held](bool drop) {
        dropped[static_cast<std::size_t>(r)] = drop ? 1 : 0;
        if (!drop) m->add(held);
      };
    });
    if (declared) {
      for (const auto& g : got) {
        ASSERT_TRUE(g.results) << g.message;
        EXPECT_EQ(*g.results, "{\"counts\":11}");
        EXPECT_EQ(g.samples, 11);
      }
      EXPECT_EQ(dropped, (std::vector<int>{0, 0, 1}));
    } else {
      expect_every_rank_fails_alike(got, "InputError", "EvaluatorOptions::padded_sampler");
    }
  }
}

}  // namespace
