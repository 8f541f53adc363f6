// The engine's object collectives (tally::Collectives: size exchange, varying gather, padding,
// rounds, buffer reuse, the fallbacks for optional primitives) on the real nondist plugin, and on
// an in-process world of W threads whose transport checks every primitive call against the
// contracts in dist_backend.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "config.hpp"
#include "registry.hpp"
#include "support/reduce_check.hpp"
#include "support/thread_backend.hpp"
#include "sync.hpp"
#include "tally/collectives.hpp"
#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/error.hpp"

#include <fmt/format.h>

using tally::CallOptions;
using tally::Collectives;
using tally::DistBackend;
using tally::Value;

namespace {

using Bytes = std::vector<std::byte>;

// `n` bytes that differ by rank and by position, so a misplaced byte shows.
Bytes pattern(int rank, std::size_t n) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::byte>((rank * 131 + i * 7 + i / 251) & 0xff);
  return b;
}

Bytes to_bytes(std::span<const std::byte> s) { return Bytes(s.begin(), s.end()); }

std::span<const std::byte> view(const Bytes& b) { return {b.data(), b.size()}; }

// ---- the nondist plugin, through the registry
// -----------------------------------------------------

std::shared_ptr<DistBackend> make_nondist(Value::Map params = {}) {
  static const tally::Registry registry = tally::Registry::load();
  const auto& c = registry.get(tally::ComponentKind::Backend, "nondist");
  return tally::Registry::make_backend(c, tally::make_params(*c.info, params, "backend"));
}

// A nondist backend with the engine's collectives over it.
struct Nondist {
  explicit Nondist(Value::Map params = {})
      : backend(make_nondist(std::move(params))), coll(*backend) {}
  Collectives* operator->() { return &coll; }
  std::shared_ptr<DistBackend> backend;
  Collectives coll;
};

TEST(NondistBackend, IsAWorldOfOne) {
  Nondist b;
  EXPECT_EQ(b.backend->name(), "nondist");
  EXPECT_TRUE(b.backend->is_initialized());
  EXPECT_EQ(b->rank(), 0);
  EXPECT_EQ(b->world_size(), 1);
  EXPECT_EQ(b.backend->chunk_bytes(), std::size_t{1} << 30);
  EXPECT_EQ(b->chunk_bytes(), std::size_t{1} << 30);
  b->barrier();
  // It offers the varying all-gather (one copy) and nothing else.
  EXPECT_NE(tally::get_primitive<tally::VaryingAllGather>(*b.backend), nullptr);
  EXPECT_EQ(tally::get_primitive<tally::RootedGather>(*b.backend), nullptr);
  EXPECT_EQ(tally::get_primitive<tally::Reducer>(*b.backend), nullptr);
  EXPECT_EQ(tally::get_primitive<tally::WorkAndWait>(*b.backend), nullptr);
  EXPECT_EQ(b.backend->find_primitive("tally.no_such_primitive/1"), nullptr);
}

TEST(NondistBackend, AllGatherObjectReturnsTheObject) {
  Nondist b;
  const Bytes obj = pattern(0, 1000);
  const auto got = b->all_gather_object(view(obj));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(to_bytes(got[0]), obj);
}

TEST(NondistBackend, EmptyObjects) {
  Nondist b;
  const auto got = b->all_gather_object({});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].empty());
  EXPECT_TRUE(b->broadcast_object({}, 0).empty());
}

TEST(NondistBackend, ChunkedPathsWithATinyChunk) {
  Nondist b({{"chunk_bytes", 3}});
  EXPECT_EQ(b->chunk_bytes(), 3u);
  for (std::size_t n : {0u, 1u, 2u, 3u, 4u, 7u, 1000u, 4099u}) {
    const Bytes obj = pattern(0, n);
    EXPECT_EQ(to_bytes(b->all_gather_object(view(obj))[0]), obj) << n << " bytes";
    EXPECT_EQ(to_bytes(b->broadcast_object(view(obj), 0)), obj) << n << " bytes";
  }
}

TEST(NondistBackend, AllGatherFixed) {
  Nondist b({{"chunk_bytes", 5}});
  const Bytes record = pattern(0, 24);
  Bytes out(24);
  b->all_gather_fixed(view(record), out);
  EXPECT_EQ(out, record);
  Bytes wrong(23);
  EXPECT_THROW(b->all_gather_fixed(view(record), wrong), tally::RuntimeError);
}

TEST(NondistBackend, BuffersAreReusedAcrossCalls) {
  Nondist b;
  const Bytes big = pattern(0, 1 << 20);
  const Bytes small = pattern(1, 100);
  const std::byte* first = b->all_gather_object(view(big))[0].data();
  // A smaller object and then an object of the same size land in the same buffer.
  EXPECT_EQ(b->all_gather_object(view(small))[0].data(), first);
  const auto again = b->all_gather_object(view(big));
  EXPECT_EQ(again[0].data(), first);
  EXPECT_EQ(to_bytes(again[0]), big);
  EXPECT_EQ(b->broadcast_object(view(small), 0).data(), first);
}

TEST(NondistBackend, AViewFromThePreviousCollectiveCanBePassedBackIn) {
  Nondist b({{"chunk_bytes", 16}});
  const Bytes obj = pattern(3, 500);
  const auto first = b->all_gather_object(view(obj));
  // Both arguments live in the backend's receive buffer, which the next call overwrites.
  EXPECT_EQ(to_bytes(b->all_gather_object(first[0].subspan(10))[0]),
            Bytes(obj.begin() + 10, obj.end()));
  const auto gathered = b->all_gather_object(view(obj));
  EXPECT_EQ(to_bytes(b->broadcast_object(gathered[0], 0)), obj);
}

TEST(NondistBackend, RejectsBadChunkSizesAndSources) {
  Nondist b({{"chunk_bytes", 100}});
  EXPECT_THROW(b->set_chunk_bytes(0), tally::ConfigError);
  EXPECT_THROW(b->set_chunk_bytes(101), tally::ConfigError);  // more than the backend moves
  EXPECT_NO_THROW(b->set_chunk_bytes(100));
  EXPECT_THROW(make_nondist({{"chunk_bytes", 0}}), tally::ConfigError);
  EXPECT_THROW(make_nondist({{"chunk_bytes", -5}}), tally::ConfigError);
  EXPECT_THROW(b->broadcast_object({}, 1), tally::RuntimeError);
  EXPECT_THROW(b->broadcast_object({}, -1), tally::RuntimeError);
  EXPECT_THROW(b->gather_object({}, 1), tally::RuntimeError);
  EXPECT_THROW(b->run_on_root(1, [] {}), tally::RuntimeError);
}

// ---- a world of W threads
// ---------------------------------------------------------------------------

// The in-process world of W threads (tests/support/thread_backend.hpp), shared with the sync
// protocol's tests.
using tally::testing::run_world;
using tally::testing::ThreadBackend;
using tally::testing::ThreadWorld;

struct WorldCase {
  int world;
  bool native_varying;
  std::size_t chunk;
};

void PrintTo(const WorldCase& c, std::ostream* os) {
  *os << c.world << " ranks, " << (c.native_varying ? "native" : "padded")
      << " varying gather, chunk " << c.chunk;
}

class ThreadWorldTest : public ::testing::TestWithParam<WorldCase> {};

// Object sizes per rank: empty ones, one large one, and uneven ones.
std::size_t object_size(int rank, int round) {
  static const std::size_t sizes[] = {0, 1, 17, 1000, 0, 4096, 3, 250, 77};
  return sizes[static_cast<std::size_t>(rank * 3 + round) % std::size(sizes)] +
         (rank == 2 ? 5000 : 0);
}

TEST_P(ThreadWorldTest, AllGatherObjectInRankOrder) {
  const auto [w, native, chunk] = GetParam();
  ThreadWorld world(w);
  run_world(world, native, chunk, [&](Collectives& b) {
    for (int round = 0; round < 3; ++round) {
      const Bytes mine = pattern(b.rank() + 10 * round, object_size(b.rank(), round));
      const auto got = b.all_gather_object(view(mine));
      EXPECT_EQ(got.size(), static_cast<std::size_t>(w));
      for (int r = 0; r < w && r < static_cast<int>(got.size()); ++r) {
        EXPECT_EQ(to_bytes(got[static_cast<std::size_t>(r)]),
                  pattern(r + 10 * round, object_size(r, round)))
            << "rank " << b.rank() << " sees rank " << r << "'s object wrong, round " << round;
      }
    }
    const auto empty = b.all_gather_object({});
    EXPECT_EQ(empty.size(), static_cast<std::size_t>(w));
    for (const auto& o : empty.objects) EXPECT_TRUE(o.empty());
  });
  EXPECT_TRUE(world.violations.empty()) << world.violations.front();
  EXPECT_LE(world.max_call_bytes, chunk);
}

TEST_P(ThreadWorldTest, GatherObjectReachesOnlyTheRootInRankOrder) {
  const auto [w, native, chunk] = GetParam();
  ThreadWorld world(w);
  run_world(world, native, chunk, [&](Collectives& b) {
    for (int root = 0; root < w; ++root) {
      for (int round = 0; round < 2; ++round) {
        const Bytes mine = pattern(b.rank() + 10 * round, object_size(b.rank(), round));
        const auto got = b.gather_object(view(mine), root);
        if (b.rank() != root) {
          EXPECT_EQ(got.size(), 0u) << "rank " << b.rank() << " is not the root " << root;
          continue;
        }
        EXPECT_EQ(got.size(), static_cast<std::size_t>(w));
        for (int r = 0; r < w && r < static_cast<int>(got.size()); ++r) {
          EXPECT_EQ(to_bytes(got[static_cast<std::size_t>(r)]),
                    pattern(r + 10 * round, object_size(r, round)))
              << "root " << root << " sees rank " << r << "'s object wrong, round " << round;
        }
      }
      const auto empty = b.gather_object({}, root);
      EXPECT_EQ(empty.size(), b.rank() == root ? static_cast<std::size_t>(w) : 0u);
      for (const auto& o : empty.objects) EXPECT_TRUE(o.empty());
    }
    if (b.rank() == 0) {
      EXPECT_THROW(b.gather_object({}, w), tally::RuntimeError);
      EXPECT_THROW(b.gather_object({}, -1), tally::RuntimeError);
    }
  });
  EXPECT_TRUE(world.violations.empty()) << world.violations.front();
  EXPECT_LE(world.max_call_bytes, chunk);
}

TEST_P(ThreadWorldTest, BroadcastObjectFromEveryRank) {
  const auto [w, native, chunk] = GetParam();
  ThreadWorld world(w);
  run_world(world, native, chunk, [&](Collectives& b) {
    for (int src = 0; src < w; ++src) {
      const Bytes sent = pattern(src, object_size(src, 1));
      // Other ranks pass a different object, which is ignored.
      const Bytes arg = b.rank() == src ? sent : pattern(99, 5);
      EXPECT_EQ(to_bytes(b.broadcast_object(view(arg), src)), sent) << "src " << src;
    }
    b.barrier();
  });
  EXPECT_TRUE(world.violations.empty()) << world.violations.front();
  EXPECT_LE(world.max_call_bytes, chunk);
}

TEST_P(ThreadWorldTest, AllGatherFixed) {
  const auto [w, native, chunk] = GetParam();
  ThreadWorld world(w);
  run_world(world, native, chunk, [&](Collectives& b) {
    const Bytes record = pattern(b.rank(), 40);
    Bytes out(40 * static_cast<std::size_t>(w));
    b.all_gather_fixed(view(record), out);
    for (int r = 0; r < w; ++r) {
      EXPECT_EQ(Bytes(out.begin() + r * 40, out.begin() + (r + 1) * 40), pattern(r, 40));
    }
  });
  EXPECT_TRUE(world.violations.empty()) << world.violations.front();
}

// The backend's reduction (native) or the engine's fallback (a rooted gather, combined at the
// root), to every root, in rounds when the chunk is small; values that differ by rank and
// position, negative ones included.
TEST_P(ThreadWorldTest, ReduceSumMinMaxToEveryRoot) {
  const auto [w, native, chunk] = GetParam();
  ThreadWorld world(w);
  run_world(world, native, chunk, [&](Collectives& b) {
    for (const std::size_t n : {std::size_t{1}, std::size_t{5}, std::size_t{1001}})
      for (int root = 0; root < w; ++root)
        for (const auto op : {tally::ReduceOp::sum, tally::ReduceOp::min, tally::ReduceOp::max})
          tally::test::check_reduce(b, n, op, root);
    std::vector<std::int64_t> none;
    b.reduce(none, tally::ReduceOp::sum, 0);  // nothing to move: no call
    if (b.rank() == 0) {
      std::vector<std::int64_t> one{1};
      EXPECT_THROW(b.reduce(one, tally::ReduceOp::sum, w), tally::RuntimeError);
      EXPECT_THROW(b.reduce(one, tally::ReduceOp::sum, -1), tally::RuntimeError);
    }
  });
  EXPECT_TRUE(world.violations.empty()) << world.violations.front();
  EXPECT_LE(world.max_call_bytes, chunk);
}

INSTANTIATE_TEST_SUITE_P(Worlds, ThreadWorldTest,
                         ::testing::Values(WorldCase{1, true, 1 << 30}, WorldCase{2, true, 1 << 30},
                                           WorldCase{3, true, 1 << 30}, WorldCase{4, true, 1 << 30},
                                           WorldCase{7, true, 1 << 30}, WorldCase{2, true, 64},
                                           WorldCase{3, true, 10}, WorldCase{7, true, 7},
                                           WorldCase{4, true, 1000}, WorldCase{1, false, 1 << 30},
                                           WorldCase{3, false, 1 << 30},
                                           WorldCase{7, false, 1 << 30}, WorldCase{2, false, 64},
                                           WorldCase{3, false, 10}, WorldCase{7, false, 7},
                                           WorldCase{4, false, 1000}),
                         [](const auto& test) {
                           const WorldCase& c = test.param;
                           return "w" + std::to_string(c.world) +
                                  (c.native_varying ? "_native" : "_padded") + "_chunk" +
                                  std::to_string(c.chunk);
                         });

TEST(ThreadWorld, RoundsMoveOneSliceOfEveryObjectPerCall) {
  // 3 ranks, objects of 100, 40 and 35 bytes, chunk 30: 10 bytes per rank per round, so 10
  // rounds (the largest object), plus one call for the sizes (3 * 8 = 24 bytes <= 30).
  ThreadWorld world(3);
  const std::size_t sizes[] = {100, 40, 35};
  run_world(world, true, 30, [&](Collectives& b) {
    const Bytes mine = pattern(b.rank(), sizes[b.rank()]);
    const auto got = b.all_gather_object(view(mine));
    for (int r = 0; r < 3; ++r)
      EXPECT_EQ(to_bytes(got[static_cast<std::size_t>(r)]), pattern(r, sizes[r]));
  });
  EXPECT_TRUE(world.violations.empty()) << world.violations.front();
  EXPECT_EQ(world.calls, 11u);
  EXPECT_EQ(world.max_call_bytes, 30u);
}

// Every primitive call of a collective carries the collective's name with the caller's purpose,
// and the caller's deadline, whichever route (native or fallback) it takes.
TEST(ThreadWorld, EveryPrimitiveCallCarriesTheCollectivesNameAndDeadline) {
  using namespace std::chrono_literals;
  for (const bool native : {true, false}) {
    SCOPED_TRACE(native ? "native" : "fallbacks");
    ThreadWorld world(3);
    std::atomic<std::uint64_t> progress{0};
    run_world(world, native, 40, [&](Collectives& b) {
      const Bytes mine = pattern(b.rank(), 100);
      b.all_gather_object(view(mine), {"sync payload", 1500ms});
      b.gather_object(view(mine), 1, {"states", 2500ms});
      b.broadcast_object(view(mine), 2, {"results", 3500ms});
      std::vector<std::int64_t> counts(9, b.rank());
      b.reduce(counts, tally::ReduceOp::sum, 0, {"counts", 4500ms});
      b.run_on_root(0, [] {}, {"computing", 5500ms});
      b.run_on_every_rank([] {}, progress, {"reading", 6500ms});
      b.all_gather_object(view(mine));  // no purpose, the backend's deadline
      b.barrier({"done", 7500ms});
    });
    EXPECT_TRUE(world.violations.empty()) << world.violations.front();
    const std::vector<std::pair<std::string, std::chrono::milliseconds>> want = {
        {"all_gather_object (sync payload)", 1500ms},
        {"gather_object (states)", 2500ms},
        {"broadcast_object (results)", 3500ms},
        {"reduce (counts)", 4500ms},
        {"run_on_root (computing)", 5500ms},
        {"run_on_every_rank (reading)", 6500ms},
        {"all_gather_object", 0ms}};
    std::set<std::string> seen;
    for (std::size_t i = 0; i < world.names.size(); ++i) {
      seen.insert(world.names[i]);
      const auto it = std::find_if(want.begin(), want.end(),
                                   [&](const auto& w) { return w.first == world.names[i]; });
      ASSERT_NE(it, want.end()) << "a primitive call named '" << world.names[i] << "'";
      EXPECT_EQ(world.timeouts[i], it->second) << world.names[i];
    }
    for (const auto& [name, timeout] : want) {
      // The engine runs the work itself where the backend has no WorkAndWait: no primitive call.
      if (!native && name.starts_with("run_on_")) continue;
      EXPECT_EQ(seen.count(name), 1u) << "no primitive call named '" << name << "'";
    }
  }
}

// run_on_root and run_on_every_rank: the work runs where it is due, exactly once, through the
// backend's WorkAndWait or the engine's fallback; an exception is rethrown on its own rank only.
TEST(ThreadWorld, WorkRunsWhereItIsDueAndItsErrorStaysOnItsRank) {
  for (const bool native : {true, false}) {
    SCOPED_TRACE(native ? "native" : "fallbacks");
    for (const int w : {1, 2, 4}) {
      ThreadWorld world(w);
      std::atomic<int> root_runs{0};
      std::atomic<int> every_runs{0};
      std::vector<int> threw(static_cast<std::size_t>(w), 0);
      std::atomic<std::uint64_t> progress{0};
      run_world(world, native, 1 << 20, [&](Collectives& b) {
        b.run_on_root(w - 1, [&] {
          EXPECT_EQ(b.rank(), w - 1);
          ++root_runs;
        });
        try {
          b.run_on_root(0, [&] { throw tally::RuntimeError("rank 0 failed while computing"); });
        } catch (const tally::RuntimeError& e) {
          EXPECT_STREQ(e.what(), "rank 0 failed while computing");
          threw[static_cast<std::size_t>(b.rank())] = 1;
        }
        b.run_on_every_rank([&] { ++every_runs; }, progress);
        // After the work: every rank is still in step (an all-gather succeeds).
        const auto got = b.all_gather_object(view(pattern(b.rank(), 3)));
        EXPECT_EQ(got.size(), static_cast<std::size_t>(w));
      });
      EXPECT_TRUE(world.violations.empty()) << world.violations.front();
      EXPECT_EQ(root_runs.load(), 1) << w << " ranks";
      EXPECT_EQ(every_runs.load(), w) << w << " ranks";
      for (int r = 0; r < w; ++r) EXPECT_EQ(threw[static_cast<std::size_t>(r)], r == 0 ? 1 : 0);
    }
  }
}

// The engine asks only for the primitives of this ABI; a backend that offers an interface under an
// id the engine does not know, or none at all, is used through the required primitives alone.
TEST(ThreadWorld, OfferPrimitivesAnswersOnlyTheIdsItIsGiven) {
  ThreadWorld world(1);
  ThreadBackend native(world, 0, true);
  ThreadBackend bare(world, 0, false);
  EXPECT_EQ(tally::get_primitive<tally::VaryingAllGather>(native),
            static_cast<tally::VaryingAllGather*>(&native));
  EXPECT_EQ(tally::get_primitive<tally::RootedGather>(native),
            static_cast<tally::RootedGather*>(&native));
  EXPECT_EQ(tally::get_primitive<tally::Reducer>(native), static_cast<tally::Reducer*>(&native));
  EXPECT_EQ(tally::get_primitive<tally::WorkAndWait>(native),
            static_cast<tally::WorkAndWait*>(&native));
  EXPECT_EQ(native.find_primitive("tally.all_gather_varying/2"), nullptr);
  EXPECT_EQ(native.find_primitive(""), nullptr);
  EXPECT_EQ(tally::get_primitive<tally::Reducer>(bare), nullptr);
}

TEST(ThreadWorld, UnchunkedGatherIsTwoCalls) {
  ThreadWorld world(4);
  run_world(world, true, 1 << 30, [&](Collectives& b) {
    const Bytes mine = pattern(b.rank(), 1000 * static_cast<std::size_t>(b.rank()));
    b.all_gather_object(view(mine));
  });
  EXPECT_EQ(world.calls, 2u);  // sizes, then every byte in one varying gather
}

TEST(ThreadWorld, PaddedGatherStaysWithinTheChunkWhenOneRankHoldsEverything) {
  // sum(counts) <= chunk, but padding every rank to the largest would not be: the default
  // all_gather_varying must split its padded gather.
  ThreadWorld world(4);
  run_world(world, false, 100, [&](Collectives& b) {
    const Bytes mine = pattern(b.rank(), b.rank() == 1 ? 90 : 0);
    const auto got = b.all_gather_object(view(mine));
    EXPECT_EQ(to_bytes(got[1]), pattern(1, 90));
    EXPECT_TRUE(got[0].empty() && got[2].empty() && got[3].empty());
  });
  EXPECT_TRUE(world.violations.empty()) << world.violations.front();
  EXPECT_LE(world.max_call_bytes, 100u);
}

TEST(ThreadWorld, ChunkSmallerThanTheWorldIsRejected) {
  ThreadWorld world(1);
  ThreadBackend b(world, 0, true);
  Collectives c(b);
  ThreadWorld four(4);
  ThreadBackend b4(four, 0, true);
  Collectives c4(b4);
  EXPECT_NO_THROW(c.set_chunk_bytes(1));
  EXPECT_THROW(c4.set_chunk_bytes(3), tally::ConfigError);
  EXPECT_NO_THROW(c4.set_chunk_bytes(4));
  // A backend whose own chunk is smaller than its world: refused when the engine takes it over.
  ThreadBackend small(four, 0, true, 3);
  EXPECT_THROW(Collectives{small}, tally::ConfigError);
}

}  // namespace

// ---- the start exchange (tally::sync::exchange_start): every rank reaches the same verdict
// ----------

namespace {

// Runs the start exchange on a W-thread world where `edit(rank, record)` shapes each rank's
// record; returns every rank's verdict ("" for none, else "CODE: message").
std::vector<std::string> start_verdicts(
    int w, const std::function<void(int, tally::sync::StartRecord&)>& edit) {
  ThreadWorld world(w);
  std::vector<std::string> verdicts(static_cast<std::size_t>(w));
  run_world(world, true, 1 << 30, [&](Collectives& b) {
    tally::sync::StartRecord rec;
    rec.header.protocol = tally::kProtocolVersion;
    rec.header.fingerprint = 42;
    rec.header.total_samples = 50;
    rec.layout = "x: int64 ()";
    rec.header.layout_fingerprint = tally::sync::fingerprint(rec.layout);
    edit(b.rank(), rec);
    const auto v = tally::sync::exchange_start(b, rec);
    verdicts[static_cast<std::size_t>(b.rank())] =
        v ? std::to_string(v->exit_code) + ": " + v->message : "";
  });
  EXPECT_TRUE(world.violations.empty()) << world.violations.front();
  for (const auto& v : verdicts) EXPECT_EQ(v, verdicts.front()) << "ranks disagree";
  return verdicts;
}

}  // namespace

TEST(StartExchange, EveryRankAgreesOrEveryRankFailsAlike) {
  for (const int w : {1, 2, 3, 4, 7}) {
    SCOPED_TRACE(w);
    EXPECT_EQ(start_verdicts(w, [](int, tally::sync::StartRecord&) {}).front(), "");
    if (w == 1) continue;
    const int last = w - 1;
    // One rank failed while setting up: its message, naming it, with its exit code.
    EXPECT_EQ(start_verdicts(w,
                             [&](int r, tally::sync::StartRecord& rec) {
                               if (r != last) return;
                               rec.header.status = 2;
                               rec.message = "eval.yaml:3:5: unknown key 'bogus'";
                             })
                  .front(),
              fmt::format("2: rank {}: eval.yaml:3:5: unknown key 'bogus'", last));
    // Every rank failed alike: one message, no rank.
    EXPECT_EQ(start_verdicts(w,
                             [](int, tally::sync::StartRecord& rec) {
                               rec.header.status = 2;
                               rec.message = "cannot read config 'x.yaml'";
                             })
                  .front(),
              "2: cannot read config 'x.yaml'");
    // Another dataset size, another layout, another metrics configuration on the last rank.
    EXPECT_EQ(start_verdicts(w,
                             [&](int r, tally::sync::StartRecord& rec) {
                               if (r == last) rec.header.total_samples = 60;
                             })
                  .front()
                  .substr(0, 60),
              fmt::format("2: start failed: rank {} reads a dataset of 60 samples, rank 0", last)
                  .substr(0, 60));
    const auto layout = start_verdicts(w, [&](int r, tally::sync::StartRecord& rec) {
      if (r != last) return;
      rec.layout = "x: float32 ()";
      rec.header.layout_fingerprint = tally::sync::fingerprint(rec.layout);
    });
    EXPECT_NE(layout.front().find(
                  fmt::format("rank {}: {{x: float32 ()}}, rank 0: {{x: int64 ()}}", last)),
              std::string::npos)
        << layout.front();
    const auto metrics = start_verdicts(w, [&](int r, tally::sync::StartRecord& rec) {
      if (r == last) rec.header.fingerprint = 43;
    });
    EXPECT_NE(metrics.front().find("a different metrics configuration"), std::string::npos)
        << metrics.front();
    // A failure wins over a disagreement (a failed rank's data says nothing).
    EXPECT_EQ(start_verdicts(w,
                             [&](int r, tally::sync::StartRecord& rec) {
                               if (r == 0) rec.header.total_samples = 7;
                               if (r == last) {
                                 rec.header.status = 1;
                                 rec.message = "boom";
                               }
                             })
                  .front(),
              fmt::format("1: rank {}: boom", last));
  }
}

// Issue 32, item 11: the settings every rank must give alike (Config::agreed_settings and the
// caller's own) are part of the start exchange: one that differs, is missing or is extra on a
// rank is exit 2 on every rank, naming the first rank that differs, the setting and both values;
// the same settings in the same order are no verdict at all.
TEST(StartExchange, SettingsThatDifferOnARankAreNamedWithBothValues) {
  using Settings = std::vector<std::pair<std::string, std::string>>;
  const Settings common = {{"backend.type", "mpi"},
                           {"output.json", "out.json"},
                           {"regression.baseline", "/data/base.json"},
                           {"regression.alpha", "0.05"}};
  const auto with = [&](const std::function<void(int, Settings&)>& edit) {
    return start_verdicts(3,
                          [&](int r, tally::sync::StartRecord& rec) {
                            rec.settings = common;
                            edit(r, rec.settings);
                          })
        .front();
  };
  EXPECT_EQ(with([](int, Settings&) {}), "");
  struct Case {
    std::function<void(int, Settings&)> edit;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {[](int r, Settings& s) {
         if (r == 2) s[3].second = "0.01";
       },
       "2: start failed: rank 2's regression.alpha is '0.01', rank 0's is '0.05': "},
      {[](int r, Settings& s) {
         if (r == 1) s.emplace_back("output.records", "r.rec");
       },
       "2: start failed: rank 1's output.records is 'r.rec', rank 0's is not set: "},
      {[](int r, Settings& s) {
         if (r == 0) s.emplace_back("--update-baseline", "given");
       },
       "2: start failed: rank 1's --update-baseline is not set, rank 0's is 'given' (ranks 1, 2 "
       "differ from rank 0): "},
      {[](int r, Settings& s) {
         if (r > 0) s.erase(s.begin() + 1);
       },
       "2: start failed: rank 1's output.json is not set, rank 0's is 'out.json' (ranks 1, 2 "
       "differ from rank 0): "},
      // A value that is longer than a message should hold is cut; an empty one is still set.
      {[](int r, Settings& s) {
         if (r == 1) s[2].second = std::string(500, 'x');
       },
       "2: start failed: rank 1's regression.baseline is '" + std::string(160, 'x') +
           "...', rank 0's is '/data/base.json': "},
      {[](int r, Settings& s) {
         if (r == 2) s[1].second.clear();
       },
       "2: start failed: rank 2's output.json is '', rank 0's is 'out.json': "},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    const auto v = with(cases[i].edit);
    EXPECT_EQ(v.substr(0, cases[i].expect.size()), cases[i].expect) << v;
    EXPECT_NE(v.find("nothing was read or written"), std::string::npos) << v;
  }
  // A failure wins over settings that differ (a failed rank's settings say nothing).
  EXPECT_EQ(start_verdicts(3,
                           [&](int r, tally::sync::StartRecord& rec) {
                             rec.settings = common;
                             if (r == 1) rec.settings.clear();
                             if (r == 2) {
                               rec.header.status = 2;
                               rec.message = "bad --set";
                             }
                           })
                .front(),
            "2: rank 2: bad --set");
}

// The chunk size splits every collective into transport calls, the start record's own: a rank
// with another backend.chunk_bytes is found first, in calls every chunk can carry, and every rank
// goes on with the smallest, so the calls stay in step (before: MPI_ERR_TRUNCATE on one rank and
// the others waiting for backend.timeout).
TEST(StartExchange, AChunkSizeThatDiffersOnARankIsNamedAndTheCallsStayInStep) {
  for (const int w : {2, 3, 7}) {
    for (const int bad : {0, w - 1}) {
      for (const std::size_t chunk : {std::size_t{64}, static_cast<std::size_t>(w)}) {
        SCOPED_TRACE(fmt::format("world {}, rank {} with chunk {}", w, bad, chunk));
        ThreadWorld world(w);
        std::vector<std::string> verdicts(static_cast<std::size_t>(w));
        run_world(world, true, 1 << 20, [&](Collectives& b) {
          if (b.rank() == bad) b.set_chunk_bytes(chunk);
          tally::sync::StartRecord rec;
          rec.header.protocol = tally::kProtocolVersion;
          const auto v = tally::sync::exchange_start(b, rec);
          verdicts[static_cast<std::size_t>(b.rank())] =
              v ? std::to_string(v->exit_code) + ": " + v->message : "";
          EXPECT_EQ(b.chunk_bytes(), chunk);  // the smallest, on every rank
          // A later collective in rounds of that chunk: the same calls on every rank.
          std::vector<std::byte> mine(100, std::byte{7});
          EXPECT_EQ(b.all_gather_object(std::as_bytes(std::span(mine)), {"after"}).size(),
                    static_cast<std::size_t>(w));
        });
        EXPECT_TRUE(world.violations.empty()) << world.violations.front();
        const int named = bad == 0 ? 1 : bad;
        const std::string expect = fmt::format(
            "2: start failed: rank {}'s backend.chunk_bytes is {}, rank 0's is {}: ", named,
            bad == 0 ? 1 << 20 : chunk, bad == 0 ? chunk : std::size_t{1} << 20);
        for (const auto& v : verdicts) EXPECT_EQ(v.substr(0, expect.size()), expect) << v;
      }
    }
  }
}
