// The gloo backend, loaded through the registry (as the tally CLI does), run as several processes
// with torchrun's variables (tests/support/launch_ranks.sh) on several world sizes: the same
// contract as the mpi backend (tests/mpi/test_mpi_backend.cpp). GLOO_TEST_RENDEZVOUS=<folder>
// makes every backend meet through Gloo's file store there instead of the TCP store.
//
// With GLOO_TEST_FAULT=<kind>:<rank> the program runs a fault instead of the tests: rank <rank>
// creates the backend, takes part in one all-gather, then exits (kind "exit") or kills itself
// (kind "kill"); every other rank then all-gathers under a 3 s deadline and must fail with a
// tally::RuntimeError naming itself, the call and the rank that went. Those ranks print
// "FAULT-OK <message>" and exit 0.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "config.hpp"
#include "registry.hpp"
#include "support/reduce_check.hpp"
#include "tally/collectives.hpp"
#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/error.hpp"

using tally::Collectives;
using tally::DistBackend;
using tally::Value;

#include "support/backend_contract.hpp"

namespace {

std::shared_ptr<DistBackend> make_gloo(Value::Map params = {}) {
  if (const char* dir = std::getenv("GLOO_TEST_RENDEZVOUS"))
    params.emplace_back("rendezvous", tally::Value(std::string(dir)));
  return make_registry_backend("gloo", params);
}
std::shared_ptr<DistBackend> contract_backend(const Value::Map& params) {
  return make_gloo(params);
}

TEST_P(BackendContract, RankAndWorldMatchTheLauncher) {
  Collectives& b = backend();
  EXPECT_EQ(b.backend().name(), "gloo");
  EXPECT_TRUE(b.backend().is_initialized());
  EXPECT_EQ(b.backend().chunk_bytes(), GetParam() ? kSmallChunk : std::size_t{1} << 30);
  // Gloo offers allgatherv, a rooted gather (point-to-point) and reduce; heartbeats of working
  // ranks (WorkAndWait) go through the TCP store, so only with one and several ranks.
  EXPECT_NE(tally::get_primitive<tally::VaryingAllGather>(b.backend()), nullptr);
  EXPECT_NE(tally::get_primitive<tally::RootedGather>(b.backend()), nullptr);
  EXPECT_NE(tally::get_primitive<tally::Reducer>(b.backend()), nullptr);
  const bool tcp_store = std::getenv("GLOO_TEST_RENDEZVOUS") == nullptr;
  EXPECT_EQ(tally::get_primitive<tally::WorkAndWait>(b.backend()) != nullptr,
            tcp_store && env_int("WORLD_SIZE", 1) > 1);
  EXPECT_EQ(b.world_size(), env_int("WORLD_SIZE", 1));
  EXPECT_EQ(b.rank(), env_int("RANK", 0));
  EXPECT_EQ(b.chunk_bytes(), GetParam() ? kSmallChunk : std::size_t{1} << 30);
}

TEST(GlooBackend, BarrierWaitsForTheSlowestRank) {
  Collectives& b = g_default->coll;
  if (b.world_size() == 1) {  // one rank: nothing to wait for, but the barrier must return
    b.barrier();
    return;
  }
  b.barrier();
  const auto start = std::chrono::steady_clock::now();
  if (b.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(400));
  b.barrier();
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(200))
      << "rank " << b.rank() << " left the barrier early";
}

// A call's own deadline (CallOptions::timeout) is Gloo's deadline for that call: a rank that
// works longer than it makes the others fail, naming themselves and the call.
TEST(GlooBackend, ACallsOwnDeadlineBoundsTheWait) {
  using namespace std::chrono_literals;
  Collectives& b = g_default->coll;
  if (b.world_size() == 1) GTEST_SKIP() << "needs two ranks";
  // Everyone is here; then the last rank is late by 3 s for a call with a 1 s deadline.
  b.barrier();
  ContractBackend late;  // its own backend: the failed one is unusable afterwards
  late->barrier();
  if (b.rank() == b.world_size() - 1) std::this_thread::sleep_for(3s);
  std::string m;
  try {
    late->all_gather_object({}, {"test: late rank", 1s});
  } catch (const tally::RuntimeError& e) {
    m = e.what();
  }
  if (b.rank() != b.world_size() - 1) {
    EXPECT_NE(m.find("gloo backend: rank " + std::to_string(b.rank()) + " of " +
                     std::to_string(b.world_size())),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("test: late rank"), std::string::npos) << m;
  }
  b.barrier();  // the default backend is untouched
}

TEST(GlooBackend, BadChunkSizesAreConfigErrors) {
  EXPECT_THROW(make_gloo({{"chunk_bytes", 0}}), tally::ConfigError);
  EXPECT_THROW(make_gloo({{"timeout", 0}}), tally::ConfigError);
  EXPECT_THROW(make_gloo({{"master_port", 70000}}), tally::ConfigError);
  const int world = (*g_default)->world_size();
  if (world > 1) {
    EXPECT_THROW(make_gloo({{"chunk_bytes", world - 1}}), tally::ConfigError);
  }
  // A failed construction leaves the backends that are alive usable.
  EXPECT_EQ((*g_default)->all_gather_object({}).size(), static_cast<std::size_t>(world));
}

TEST(GlooBackend, AThirdBackendComesAndGoes) {
  {
    ContractBackend extra({{"chunk_bytes", 64}});
    const Bytes mine = pattern(extra->rank(), 300);
    EXPECT_EQ(to_bytes(extra->all_gather_object(view(mine))[0]), pattern(0, 300));
  }
  EXPECT_TRUE(g_default->backend->is_initialized());
  EXPECT_EQ(to_bytes((*g_default)->broadcast_object(view(pattern(5, 10)), 0)), pattern(5, 10));
}

}  // namespace

namespace {

// GLOO_TEST_FAULT=<exit|kill>:<rank>: see the top of this file.
int run_fault(const std::string& spec) {
  const auto colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const int victim = std::atoi(spec.c_str() + colon + 1);
  auto backend = make_gloo({{"timeout", 3.0}});
  Collectives c(*backend);
  const Bytes mine = pattern(c.rank(), 100);
  (void)c.all_gather_object(view(mine), {"fault: before", std::chrono::milliseconds(0)});
  if (c.rank() == victim) {
    std::fflush(nullptr);
    if (kind == "kill") ::raise(SIGKILL);
    ::_exit(0);
  }
  try {
    for (int i = 0; i < 3; ++i) (void)c.all_gather_object(view(mine), {"fault: after"});
  } catch (const tally::RuntimeError& e) {
    std::fprintf(stderr, "FAULT-OK %s\n", e.what());
    return 0;
  }
  std::fprintf(stderr, "FAULT-MISSED rank %d: no error after rank %d went\n", c.rank(), victim);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* fault = std::getenv("GLOO_TEST_FAULT")) return run_fault(fault);
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new ContractBackends);  // gtest owns it
  return RUN_ALL_TESTS();
}
