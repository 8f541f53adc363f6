// The nccl backend across processes, under `mpirun -np N` (registered with N = 2): loaded through
// the registry into a process that does not link MPI, bootstrapped once through MPI (the backend
// initialises and finalises it), once through a rendezvous file and once through a TCP store
// asked for in the config (backend.master_addr/master_port: rank 0 serves it); all_gather_object,
// gather_object (the rooted gather: grouped ncclSend/ncclRecv) and broadcast_object of objects
// that differ in size by rank, in one call and in rounds; reduce.
//
// NCCL needs one GPU per rank: with fewer visible devices than ranks every rank skips, saying so.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "config.hpp"
#include "registry.hpp"
#include "support/reduce_check.hpp"
#include "support/with_collectives.hpp"
#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/error.hpp"

using tally::DistBackend;
using tally::Value;

namespace {

using Bytes = std::vector<std::byte>;

Bytes pattern(int rank, std::size_t n) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::byte>((rank * 131 + i * 7 + i / 251) & 0xff);
  return b;
}
Bytes to_bytes(std::span<const std::byte> s) { return Bytes(s.begin(), s.end()); }

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : fallback;
}

// Why this job cannot run NCCL here, or "".
std::string no_device_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  const int local = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
  if (n < local)
    return "this node runs " + std::to_string(local) + " ranks but sees " + std::to_string(n) +
           " CUDA device(s); NCCL needs one per rank";
  return {};
}

const tally::Registry& registry() {
  static const tally::Registry r = tally::Registry::load();
  return r;
}

tally::test::WithCollectives make_nccl(const Value::Map& params) {
  const auto& c = registry().get(tally::ComponentKind::Backend, "nccl");
  return tally::test::WithCollectives(
      tally::Registry::make_backend(c, tally::make_params(*c.info, params, "backend 'nccl'")));
}

// Sizes that differ by rank, with an empty object on every third rank.
std::size_t size_of_rank(int r, std::size_t scale) { return r % 3 == 1 ? 0 : (r + 1) * scale + r; }

// Live for the whole program (MPI is finalised when the last backend that initialised it goes):
// one bootstrapped through MPI with the default chunk, one through MPI with a tiny chunk (rounds),
// and one through a rendezvous file.
tally::test::WithCollectives g_mpi, g_small, g_file, g_store;

class Backends : public ::testing::Environment {
 public:
  void TearDown() override {
    g_store = {};
    g_file = {};
    g_small = {};
    g_mpi = {};
  }
};
const auto* const kBackends = ::testing::AddGlobalTestEnvironment(new Backends);

enum class Kind { Mpi, SmallChunk, File, Store };

class NcclMpiTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    const std::string why = no_device_reason();
    if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why;
    if (!g_mpi) g_mpi = make_nccl({});
    if (!g_small) g_small = make_nccl({{"chunk_bytes", 4096}});
    if (!g_file) {
      // The same path on every rank of this job: mpirun is every rank's parent on one node.
      const std::string path = "/tmp/tally-test-nccl-" + std::to_string(::getppid()) + ".id";
      g_file = make_nccl({{"rendezvous", path}, {"timeout", 60.0}});
    }
    if (!g_store) {
      // The same port on every rank of this job: mpirun is every rank's parent.
      const int port = 20000 + static_cast<int>(::getppid() % 20000);
      g_store = make_nccl({{"master_addr", "127.0.0.1"}, {"master_port", port}, {"timeout", 60.0}});
    }
  }
  tally::Collectives& backend() {
    switch (GetParam()) {
      case Kind::Mpi:
        return *g_mpi;
      case Kind::SmallChunk:
        return *g_small;
      case Kind::File:
        return *g_file;
      case Kind::Store:
        return *g_store;
    }
    return *g_mpi;
  }
};

TEST_P(NcclMpiTest, RankAndWorldMatchTheLauncher) {
  EXPECT_EQ(backend().world_size(), env_int("OMPI_COMM_WORLD_SIZE", 1));
  EXPECT_EQ(backend().rank(), env_int("OMPI_COMM_WORLD_RANK", 0));
  EXPECT_TRUE(backend().backend().is_initialized());
  backend().barrier();
}

TEST_P(NcclMpiTest, AllGatherObjectsOfDifferentSizes) {
  tally::Collectives& b = backend();
  for (const std::size_t scale : {std::size_t{1}, std::size_t{1000}, std::size_t{100000}}) {
    const Bytes mine = pattern(b.rank(), size_of_rank(b.rank(), scale));
    const auto got = b.all_gather_object(mine);
    ASSERT_EQ(got.size(), static_cast<std::size_t>(b.world_size()));
    for (int r = 0; r < b.world_size(); ++r)
      EXPECT_EQ(to_bytes(got[static_cast<std::size_t>(r)]), pattern(r, size_of_rank(r, scale)))
          << "rank " << r << ", scale " << scale;
  }
}

// The rooted gather to every root: the root gets every object in rank order, the others nothing.
TEST_P(NcclMpiTest, GatherObjectsOfDifferentSizesToEveryRoot) {
  tally::Collectives& b = backend();
  ASSERT_NE(tally::get_primitive<tally::RootedGather>(b.backend()), nullptr);
  for (const std::size_t scale : {std::size_t{1}, std::size_t{1000}, std::size_t{100000}}) {
    for (int root = 0; root < b.world_size(); ++root) {
      const Bytes mine = pattern(b.rank(), size_of_rank(b.rank(), scale));
      const auto got = b.gather_object(mine, root);
      if (b.rank() != root) {
        EXPECT_EQ(got.size(), 0u);
        continue;
      }
      ASSERT_EQ(got.size(), static_cast<std::size_t>(b.world_size()));
      for (int r = 0; r < b.world_size(); ++r)
        EXPECT_EQ(to_bytes(got[static_cast<std::size_t>(r)]), pattern(r, size_of_rank(r, scale)))
            << "rank " << r << ", root " << root << ", scale " << scale;
    }
  }
  // Only the root has bytes: nothing crosses the wire.
  for (int root = 0; root < b.world_size(); ++root) {
    const auto got = b.gather_object(b.rank() == root ? pattern(root, 10) : Bytes{}, root);
    if (b.rank() == root) {
      EXPECT_EQ(to_bytes(got[static_cast<std::size_t>(root)]), pattern(root, 10));
    }
  }
}

TEST_P(NcclMpiTest, BroadcastObjectFromEveryRank) {
  tally::Collectives& b = backend();
  for (int src = 0; src < b.world_size(); ++src) {
    const Bytes obj = pattern(src, 10000 + static_cast<std::size_t>(src));
    const Bytes arg = b.rank() == src ? obj : Bytes{};
    EXPECT_EQ(to_bytes(b.broadcast_object(arg, src)), obj) << "from rank " << src;
  }
}

// ncclReduce on int64 to every root (the sync's reduction of states of counts); 5000 values go
// in rounds on the small-chunk backend.
TEST_P(NcclMpiTest, ReduceSumMinMaxToEveryRoot) {
  tally::Collectives& b = backend();
  for (const std::size_t n : {std::size_t{1}, std::size_t{5000}})
    for (int root = b.world_size() - 1; root >= 0; --root)
      for (const auto op : {tally::ReduceOp::sum, tally::ReduceOp::min, tally::ReduceOp::max})
        tally::test::check_reduce(b, n, op, root);
}

TEST_P(NcclMpiTest, ManySyncsReuseTheBuffers) {
  tally::Collectives& b = backend();
  for (int i = 0; i < 50; ++i) {
    const Bytes mine = pattern(b.rank() + i, 100 + static_cast<std::size_t>(i * 37));
    const auto got = b.all_gather_object(mine);
    EXPECT_EQ(to_bytes(got[static_cast<std::size_t>(b.rank())]), mine);
  }
}

INSTANTIATE_TEST_SUITE_P(Bootstraps, NcclMpiTest,
                         ::testing::Values(Kind::Mpi, Kind::SmallChunk, Kind::File, Kind::Store),
                         [](const auto& p) {
                           switch (p.param) {
                             case Kind::Mpi:
                               return std::string("Mpi");
                             case Kind::SmallChunk:
                               return std::string("MpiSmallChunk");
                             case Kind::File:
                               return std::string("RendezvousFile");
                             case Kind::Store:
                               return std::string("TcpStore");
                           }
                           return std::string("?");
                         });

}  // namespace
