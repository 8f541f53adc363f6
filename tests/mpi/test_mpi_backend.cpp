// The mpi backend, loaded through the registry into a process that does not link MPI (as the
// tally CLI does), run under mpiexec on several world sizes. The backend initialises MPI; the
// program checks at the end that the last backend finalised it.
#include <dlfcn.h>
#include <gtest/gtest.h>

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

// Two live backends for the whole program (backend_contract.hpp); MPI_Finalize must wait for the
// last of them.
std::shared_ptr<DistBackend> make_mpi(const Value::Map& params = {}) {
  return make_registry_backend("mpi", params);
}
std::shared_ptr<DistBackend> contract_backend(const Value::Map& params) { return make_mpi(params); }

TEST_P(BackendContract, RankAndWorldMatchTheLauncher) {
  Collectives& b = backend();
  EXPECT_EQ(b.backend().name(), "mpi");
  EXPECT_TRUE(b.backend().is_initialized());
  EXPECT_EQ(b.backend().chunk_bytes(), GetParam() ? kSmallChunk : std::size_t{1} << 30);
  // MPI has every optional primitive: Allgatherv, Gatherv, Reduce, heartbeats.
  EXPECT_NE(tally::get_primitive<tally::VaryingAllGather>(b.backend()), nullptr);
  EXPECT_NE(tally::get_primitive<tally::RootedGather>(b.backend()), nullptr);
  EXPECT_NE(tally::get_primitive<tally::Reducer>(b.backend()), nullptr);
  EXPECT_NE(tally::get_primitive<tally::WorkAndWait>(b.backend()), nullptr);
  EXPECT_EQ(b.world_size(), env_int("OMPI_COMM_WORLD_SIZE", 1));
  EXPECT_EQ(b.rank(), env_int("OMPI_COMM_WORLD_RANK", 0));
  EXPECT_EQ(b.chunk_bytes(), GetParam() ? kSmallChunk : std::size_t{1} << 30);
}

TEST(MpiBackend, BarrierWaitsForTheSlowestRank) {
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

// A call's own deadline (CallOptions::timeout) bounds the wait for a silent rank, not for a
// working one: rank 0 computes for 3 times the deadline while its heartbeats (every deadline / 4)
// keep the others waiting; every rank reads its shard for 3 times the deadline, moving.
TEST(MpiBackend, WorkLongerThanTheCallsDeadlineIsWaitedForWhileItShowsLife) {
  using namespace std::chrono_literals;
  Collectives& b = g_default->coll;
  int runs = 0;
  b.run_on_root(0,
                [&] {
                  ++runs;
                  std::this_thread::sleep_for(900ms);
                },
                {"test: rank 0 working", 300ms});
  EXPECT_EQ(runs, b.rank() == 0 ? 1 : 0);
  std::atomic<std::uint64_t> progress{0};
  b.run_on_every_rank(
      [&] {
        for (int i = 0; i < 18; ++i) {
          std::this_thread::sleep_for(50ms);
          ++progress;
        }
      },
      progress, {"test: every rank reading", 300ms});
  EXPECT_EQ(progress.load(), 18u);
  EXPECT_EQ(b.all_gather_object({}, {"after", 300ms}).size(),
            static_cast<std::size_t>(b.world_size()));
}

TEST(MpiBackend, BadChunkSizesAreConfigErrors) {
  EXPECT_THROW(make_mpi({{"chunk_bytes", 0}}), tally::ConfigError);
  EXPECT_THROW(make_mpi({{"chunk_bytes", Value(std::int64_t{1} << 31)}}), tally::ConfigError);
  const int world = (*g_default)->world_size();
  if (world > 1) {
    EXPECT_THROW(make_mpi({{"chunk_bytes", world - 1}}), tally::ConfigError);
  }
  // A failed construction leaves MPI usable for the backends that are alive.
  EXPECT_EQ((*g_default)->all_gather_object({}).size(), static_cast<std::size_t>(world));
}

TEST(MpiBackend, AThirdBackendComesAndGoesWithoutFinalisingMpi) {
  {
    ContractBackend extra({{"chunk_bytes", 64}});
    const Bytes mine = pattern(extra->rank(), 300);
    EXPECT_EQ(to_bytes(extra->all_gather_object(view(mine))[0]), pattern(0, 300));
  }
  EXPECT_TRUE(g_default->backend->is_initialized());
  EXPECT_EQ(to_bytes((*g_default)->broadcast_object(view(pattern(5, 10)), 0)), pattern(5, 10));
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new ContractBackends);  // gtest owns it
  const int failed = RUN_ALL_TESTS();
  // The backends are gone (the environment's TearDown): the one that initialised MPI must have
  // finalised it. This program does not link MPI; libmpi came in with the plugin, which made it
  // global so that Open MPI's components find its symbols.
  using Query = int (*)(int*);
  auto finalized_fn = reinterpret_cast<Query>(dlsym(RTLD_DEFAULT, "MPI_Finalized"));
  if (finalized_fn == nullptr) {
    std::fprintf(stderr, "test_mpi_backend: libmpi is not in the global symbol scope\n");
    return 1;
  }
  int finalized = 0;
  finalized_fn(&finalized);
  if (finalized == 0) {
    std::fprintf(stderr, "test_mpi_backend: MPI is not finalised after the last backend is gone\n");
    return 1;
  }
  return failed;
}
