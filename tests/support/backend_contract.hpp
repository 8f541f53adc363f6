// The contract every dist backend meets through the engine's Collectives, as GoogleTest cases
// shared by the backends' own test programs (tests/mpi/test_mpi_backend.cpp under mpiexec,
// tests/gloo/test_gloo_backend.cpp under tests/support/launch_ranks.sh): objects of different
// sizes in rank order, empty objects, rounds of a small chunk, the rooted gather, broadcast from
// every source, fixed records, reductions to every root, and buffer reuse. Each case runs on two
// backends (GetParam(): the default chunk, or kSmallChunk bytes, which forces rounds).
//
// The including program defines `std::shared_ptr<tally::DistBackend> contract_backend(const
// tally::Value::Map& params)` (its backend made with those parameters; make_registry_backend
// helps) in the anonymous namespace, and adds ContractBackends as a global test environment in
// main(): the two backends then live for the whole program (g_default, g_small).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "config.hpp"
#include "registry.hpp"
#include "support/reduce_check.hpp"
#include "tally/collectives.hpp"
#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/value.hpp"

namespace {

using Bytes = std::vector<std::byte>;

Bytes pattern(int rank, std::size_t n) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::byte>((rank * 131 + i * 7 + i / 251) & 0xff);
  return b;
}
Bytes to_bytes(std::span<const std::byte> s) { return Bytes(s.begin(), s.end()); }
std::span<const std::byte> view(const Bytes& b) { return {b.data(), b.size()}; }

// Sizes that differ by rank, with empty objects on every third rank.
std::size_t size_of_rank(int r, std::size_t scale) { return r % 3 == 1 ? 0 : (r + 1) * scale + r; }

// The chunk of the second backend: small enough to force rounds.
constexpr std::size_t kSmallChunk = 4096;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : fallback;
}

const tally::Registry& registry() {
  static const tally::Registry r = tally::Registry::load();
  return r;
}

// Backend `type` of the built-in plugins, its parameters checked as a config's.
std::shared_ptr<tally::DistBackend> make_registry_backend(const char* type,
                                                          const tally::Value::Map& params) {
  const auto& c = registry().get(tally::ComponentKind::Backend, type);
  return tally::Registry::make_backend(c, tally::make_params(*c.info, params, "backend"));
}

std::shared_ptr<tally::DistBackend> contract_backend(const tally::Value::Map& params);

// A backend with the engine's collectives over it.
struct ContractBackend {
  explicit ContractBackend(const tally::Value::Map& params = {})
      : backend(contract_backend(params)), coll(*backend) {}
  tally::Collectives* operator->() { return &coll; }
  std::shared_ptr<tally::DistBackend> backend;
  tally::Collectives coll;
};
std::unique_ptr<ContractBackend> g_default;  // 1 GiB chunks
std::unique_ptr<ContractBackend> g_small;    // kSmallChunk

class ContractBackends : public ::testing::Environment {
 public:
  void SetUp() override {
    g_default = std::make_unique<ContractBackend>();
    g_small = std::make_unique<ContractBackend>(
        tally::Value::Map{{"chunk_bytes", static_cast<int>(kSmallChunk)}});
  }
  void TearDown() override {
    g_default.reset();
    g_small.reset();
  }
};

tally::Collectives& contract_collectives(bool small_chunk) {
  return small_chunk ? g_small->coll : g_default->coll;
}

class BackendContract : public ::testing::TestWithParam<bool> {
 protected:
  tally::Collectives& backend() { return contract_collectives(GetParam()); }
};

TEST_P(BackendContract, AllGatherObjectOfDifferentSizesInRankOrder) {
  Collectives& b = backend();
  for (std::size_t scale : {1u, 100u, 3000u}) {
    const Bytes mine = pattern(b.rank(), size_of_rank(b.rank(), scale));
    const auto got = b.all_gather_object(view(mine));
    ASSERT_EQ(got.size(), static_cast<std::size_t>(b.world_size()));
    for (int r = 0; r < b.world_size(); ++r) {
      EXPECT_EQ(to_bytes(got[static_cast<std::size_t>(r)]), pattern(r, size_of_rank(r, scale)))
          << "rank " << b.rank() << " sees rank " << r << "'s object wrong (scale " << scale << ")";
    }
  }
}

TEST_P(BackendContract, AllObjectsEmpty) {
  const auto got = backend().all_gather_object({});
  ASSERT_EQ(got.size(), static_cast<std::size_t>(backend().world_size()));
  for (const auto& o : got.objects) EXPECT_TRUE(o.empty());
}

TEST_P(BackendContract, LargeObjectOnOneRankGoesInRounds) {
  Collectives& b = backend();
  // 200 KB on the last rank against 4 KiB chunks: about 50 * world rounds on the small backend.
  const int big = b.world_size() - 1;
  const std::size_t big_size = 200 * 1000 + 7;
  const Bytes mine = pattern(b.rank(), b.rank() == big ? big_size : size_of_rank(b.rank(), 10));
  const auto got = b.all_gather_object(view(mine));
  ASSERT_EQ(got.size(), static_cast<std::size_t>(b.world_size()));
  for (int r = 0; r < b.world_size(); ++r) {
    const std::size_t n = r == big ? big_size : size_of_rank(r, 10);
    EXPECT_EQ(to_bytes(got[static_cast<std::size_t>(r)]), pattern(r, n)) << "rank " << r;
  }
}

// The rooted gather to each root in turn, one object larger than the small chunk (rounds).
TEST_P(BackendContract, GatherObjectReachesOnlyTheRoot) {
  Collectives& b = backend();
  const auto n_of = [](int r) { return r == 1 ? 20 * 1000 + 3 : size_of_rank(r, 100); };
  for (int root = b.world_size() - 1; root >= 0; --root) {
    const Bytes mine = pattern(b.rank() + 7, n_of(b.rank()));
    const auto got = b.gather_object(view(mine), root);
    if (b.rank() != root) {
      EXPECT_EQ(got.size(), 0u);
      continue;
    }
    ASSERT_EQ(got.size(), static_cast<std::size_t>(b.world_size()));
    for (int r = 0; r < b.world_size(); ++r)
      EXPECT_EQ(to_bytes(got[static_cast<std::size_t>(r)]), pattern(r + 7, n_of(r)))
          << "root " << root << " sees rank " << r << "'s object wrong";
  }
}

TEST_P(BackendContract, BroadcastObjectFromEverySource) {
  Collectives& b = backend();
  for (int src = b.world_size() - 1; src >= 0; --src) {
    const Bytes sent = pattern(src + 40, 10000 + static_cast<std::size_t>(src));
    const Bytes arg = b.rank() == src ? sent : pattern(99, 3);  // ignored off the source
    EXPECT_EQ(to_bytes(b.broadcast_object(view(arg), src)), sent) << "from rank " << src;
  }
  EXPECT_TRUE(b.broadcast_object({}, b.world_size() - 1).empty());
}

TEST_P(BackendContract, AllGatherFixed) {
  Collectives& b = backend();
  const Bytes record = pattern(b.rank(), 24);
  Bytes out(24 * static_cast<std::size_t>(b.world_size()));
  b.all_gather_fixed(view(record), out);
  for (int r = 0; r < b.world_size(); ++r)
    EXPECT_EQ(Bytes(out.begin() + r * 24, out.begin() + (r + 1) * 24), pattern(r, 24))
        << "rank " << r;
}

// Reduce on int64 to every root; 5000 values go in rounds on the small-chunk backend.
TEST_P(BackendContract, ReduceSumMinMaxToEveryRoot) {
  Collectives& b = backend();
  for (const std::size_t n : {std::size_t{1}, std::size_t{5000}})
    for (int root = b.world_size() - 1; root >= 0; --root)
      for (const auto op : {tally::ReduceOp::sum, tally::ReduceOp::min, tally::ReduceOp::max})
        tally::test::check_reduce(b, n, op, root);
}

TEST_P(BackendContract, ReceiveBufferIsReused) {
  Collectives& b = backend();
  const Bytes mine = pattern(b.rank(), 5000);
  const std::byte* first = b.all_gather_object(view(mine))[0].data();
  const auto again = b.all_gather_object(view(mine));
  EXPECT_EQ(again[0].data(), first);
  EXPECT_EQ(to_bytes(again[0]), pattern(0, 5000));
}

INSTANTIATE_TEST_SUITE_P(Chunks, BackendContract, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "small_chunks" : "default_chunks"; });

}  // namespace
