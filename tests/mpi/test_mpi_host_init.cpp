// A host program that initialises MPI itself, then makes mpi backends through the registry: the
// backends must use MPI as they find it, keep their traffic off the host's communicator, and
// leave MPI initialised (not finalised) when they go.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "config.hpp"
#include "registry.hpp"
#include "tally/collectives.hpp"
#include "tally/sdk/dist_backend.hpp"

using tally::DistBackend;
using tally::Value;

namespace {

std::shared_ptr<DistBackend> make_backend(const Value::Map& params) {
  static const tally::Registry registry = tally::Registry::load();
  const auto& c = registry.get(tally::ComponentKind::Backend, "mpi");
  return tally::Registry::make_backend(c, tally::make_params(*c.info, params, "backend"));
}

// A backend with the engine's collectives over it.
struct Mpi {
  explicit Mpi(const Value::Map& params) : backend(make_backend(params)), coll(*backend) {}
  tally::Collectives* operator->() { return &coll; }
  std::shared_ptr<DistBackend> backend;
  tally::Collectives coll;
};
std::unique_ptr<Mpi> make_mpi(const Value::Map& params = {}) {
  return std::make_unique<Mpi>(params);
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

TEST(MpiHostInit, BackendLeavesTheHostsMpiInitialised) {
  {
    auto b = make_mpi();
    EXPECT_EQ((*b)->rank(), world_rank());
    EXPECT_EQ((*b)->world_size(), world_size());
    const int mine = (*b)->rank() * 10;
    const auto got = (*b)->all_gather_object(std::as_bytes(std::span(&mine, 1)));
    for (int r = 0; r < (*b)->world_size(); ++r) {
      int v = -1;
      ASSERT_EQ(got[static_cast<std::size_t>(r)].size(), sizeof v);
      std::memcpy(&v, got[static_cast<std::size_t>(r)].data(), sizeof v);
      EXPECT_EQ(v, r * 10);
    }
  }
  int initialized = 0;
  int finalized = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  EXPECT_EQ(initialized, 1);
  EXPECT_EQ(finalized, 0);
  // The host's MPI still works.
  int one = 1;
  int sum = 0;
  ASSERT_EQ(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(sum, world_size());
}

TEST(MpiHostInit, BackendsComeAndGoOneAfterAnother) {
  for (int i = 0; i < 3; ++i) {
    auto b = make_mpi({{"chunk_bytes", 64}});
    const std::vector<std::byte> payload(1000, static_cast<std::byte>(i + 1));
    const auto got = (*b)->broadcast_object(payload, (*b)->world_size() - 1);
    EXPECT_EQ(std::vector<std::byte>(got.begin(), got.end()), payload);
  }
  int finalized = 1;
  MPI_Finalized(&finalized);
  EXPECT_EQ(finalized, 0);
}

TEST(MpiHostInit, HostCommunicatorIsUntouched) {
  MPI_Errhandler before = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &before);
  // A host message in flight on MPI_COMM_WORLD while the backend runs its collectives on its own
  // communicator: neither disturbs the other.
  const int rank = world_rank();
  const int size = world_size();
  const int payload = 1000 + rank;
  MPI_Request request = MPI_REQUEST_NULL;
  ASSERT_EQ(MPI_Isend(&payload, 1, MPI_INT, (rank + 1) % size, 7, MPI_COMM_WORLD, &request),
            MPI_SUCCESS);
  {
    auto b = make_mpi({{"chunk_bytes", 16}});
    const std::vector<std::byte> mine(100 + static_cast<std::size_t>(rank), std::byte{0x5a});
    const auto got = (*b)->all_gather_object(mine);
    for (int r = 0; r < size; ++r)
      EXPECT_EQ(got[static_cast<std::size_t>(r)].size(), 100u + static_cast<std::size_t>(r));
    (*b)->barrier();
  }
  int received = -1;
  ASSERT_EQ(MPI_Recv(&received, 1, MPI_INT, (rank + size - 1) % size, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE),
            MPI_SUCCESS);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  EXPECT_EQ(received, 1000 + (rank + size - 1) % size);
  MPI_Errhandler after = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &after);
  EXPECT_EQ(after, before) << "the backend changed the error handler of the host's MPI_COMM_WORLD";
  MPI_Errhandler_free(&before);
  MPI_Errhandler_free(&after);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return 1;
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (finalized != 0) {
    std::fprintf(stderr, "test_mpi_host_init: a backend finalised the host's MPI\n");
    return 1;
  }
  MPI_Finalize();
  return failed;
}
