// The library API of a host program that runs MPI itself (tally/evaluator.hpp, tally/mpi.hpp),
// under mpirun on 1, 2, 3, 4 and 7 ranks of one host: evaluators on the host's own communicators
// (MPI_COMM_WORLD split in two halves, each evaluating its own data), the local rank, rank 0
// alone, and the typed object collectives on the evaluator's backend.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tally/evaluator.hpp"
#include "tally/mpi.hpp"
#include "tally/sdk/error.hpp"

namespace {

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

std::string probe_config() {
  return "plugins: {paths: ['" TALLY_TEST_PLUGIN_DIR
         "/testkit']}\nmetrics:\n  - type: SequenceProbe\n";
}

tally::Evaluator evaluator_on(MPI_Comm comm, tally::Value::Map params = {}) {
  tally::EvaluatorOptions options;
  options.backend = tally::mpi_backend(comm, std::move(params));
  return tally::Evaluator::from_yaml(probe_config(), std::move(options));
}

// The results as JSON, without SequenceProbe's per_rank (the one key that depends on the world
// size); `per_rank` gets it (one count per rank).
std::string without_per_rank(tally::Value metrics, std::size_t* per_rank = nullptr) {
  auto& probe = metrics.as_map().at(0).second.as_map();
  std::erase_if(probe, [&](const auto& kv) {
    if (kv.first != "per_rank") return false;
    if (per_rank != nullptr) *per_rank = kv.second.as_array().size();
    return true;
  });
  return metrics.to_json();
}

// Samples [begin, end) of the data set `seed`, in batches of `batch`: sample i holds i*7 + seed.
void add_samples(tally::Evaluator& ev, std::int64_t begin, std::int64_t end, std::int64_t seed,
                 std::int64_t batch) {
  for (std::int64_t b = begin; b < end; b += batch) {
    std::vector<std::int64_t> xs;
    for (std::int64_t i = b; i < end && i < b + batch; ++i) xs.push_back(7 * i + seed);
    tally::Batch bt;
    bt.set("x", tally::Tensor::from_vector(xs));
    ev.add(bt);
  }
}

// The results of the data set `seed` of `n` samples evaluated by this process alone.
std::string single_process_results(std::int64_t n, std::int64_t seed) {
  auto ev = tally::Evaluator::from_yaml("backend: {type: nondist}\n" + probe_config());
  add_samples(ev, 0, n, seed, 5);
  return without_per_rank(ev.compute().metrics);
}

TEST(MpiLibraryApi, EachHalfOfTheWorldEvaluatesOnItsOwnCommunicator) {
  const int rank = world_rank();
  const int size = world_size();
  const int color = rank < (size + 1) / 2 ? 0 : 1;  // 1 rank: one half only; 7: 4 and 3
  MPI_Comm half = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half), MPI_SUCCESS);
  int hrank = -1;
  int hsize = 0;
  MPI_Comm_rank(half, &hrank);
  MPI_Comm_size(half, &hsize);
  // Each half its own data set: other sizes, other values.
  const std::int64_t n = color == 0 ? 23 : 17;
  const std::int64_t seed = color == 0 ? 3 : 1000;
  std::string got;
  {
    auto ev = evaluator_on(half, {{"timeout", 120.0}});
    EXPECT_EQ(ev.backend_name(), "mpi");
    EXPECT_EQ(ev.rank(), hrank);
    EXPECT_EQ(ev.world_size(), hsize);
    EXPECT_EQ(ev.local_rank(), hrank);  // every rank on this one host
    add_samples(ev, n * hrank / hsize, n * (hrank + 1) / hsize, seed, 4);
    std::size_t ranks = 0;
    got = without_per_rank(ev.compute().metrics, &ranks);
    EXPECT_EQ(ranks, static_cast<std::size_t>(hsize));
  }
  EXPECT_EQ(got, single_process_results(n, seed)) << "half " << color << ", rank " << hrank;
  // The halves computed different results: the evaluations did not mix.
  if (size > 1) {
    EXPECT_NE(single_process_results(23, 3), single_process_results(17, 1000));
  }
  // The host's communicator outlives the backends made on it.
  int one = 1;
  int sum = 0;
  ASSERT_EQ(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, half), MPI_SUCCESS);
  EXPECT_EQ(sum, hsize);
  ASSERT_EQ(MPI_Comm_free(&half), MPI_SUCCESS);
}

TEST(MpiLibraryApi, TheHostMayFreeItsCommunicatorOnceTheBackendIsMade) {
  MPI_Comm mine = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &mine), MPI_SUCCESS);
  tally::EvaluatorOptions options;
  options.backend = tally::mpi_backend(mine);
  ASSERT_EQ(MPI_Comm_free(&mine), MPI_SUCCESS);
  auto ev = tally::Evaluator::from_yaml(probe_config(), std::move(options));
  const std::int64_t n = 31;
  add_samples(ev, n * ev.rank() / ev.world_size(), n * (ev.rank() + 1) / ev.world_size(), 5, 3);
  std::size_t ranks = 0;
  EXPECT_EQ(without_per_rank(ev.compute().metrics, &ranks), single_process_results(n, 5));
  EXPECT_EQ(ranks, static_cast<std::size_t>(world_size()));
}

TEST(MpiLibraryApi, LocalRankIsTheRankOnOneHost) {
  auto ev = evaluator_on(MPI_COMM_WORLD);
  EXPECT_EQ(ev.local_rank(), world_rank());
  // As the launcher numbers it.
  if (const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) {
    EXPECT_EQ(ev.local_rank(), std::atoi(v));
  }
  // On a communicator in reverse order, the local rank is the rank there, not the launcher's.
  MPI_Comm reversed = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, 0, world_size() - world_rank(), &reversed), MPI_SUCCESS);
  {
    auto rev = evaluator_on(reversed);
    EXPECT_EQ(rev.rank(), world_size() - 1 - world_rank());
    EXPECT_EQ(rev.local_rank(), rev.rank());
  }
  MPI_Comm_free(&reversed);
}

TEST(MpiLibraryApi, RankZeroOnlyRunsOnRankZeroAlone) {
  auto ev = evaluator_on(MPI_COMM_WORLD);
  int calls = 0;
  const bool ran = ev.rank_zero_only([&] { ++calls; });
  EXPECT_EQ(ran, ev.rank() == 0);
  const std::vector<int> all = ev.all_gather(calls);
  ASSERT_EQ(all.size(), static_cast<std::size_t>(ev.world_size()));
  for (int r = 0; r < ev.world_size(); ++r)
    EXPECT_EQ(all[static_cast<std::size_t>(r)], r == 0 ? 1 : 0) << "rank " << r;
  ev.barrier();
}

struct Stat {
  std::string name;
  std::vector<double> xs;
  std::map<std::string, std::int64_t> counts;
  MSGPACK_DEFINE(name, xs, counts)
};

Stat stat_of(int r) {
  Stat s;
  // Rank 0's name is empty, the others' up to a few KiB: many rounds of 1000 bytes.
  s.name = std::string(static_cast<std::size_t>(r) * 1500, static_cast<char>('a' + r % 26));
  for (int i = 0; i < r; ++i) s.xs.push_back(i + 0.25 * r);
  s.counts = {{"rank", r}, {"square", std::int64_t{r} * r}};
  return s;
}

void expect_stat(const Stat& s, int r) {
  const Stat want = stat_of(r);
  EXPECT_EQ(s.name, want.name) << "rank " << r;
  EXPECT_EQ(s.xs, want.xs) << "rank " << r;
  EXPECT_EQ(s.counts, want.counts) << "rank " << r;
}

TEST(MpiLibraryApi, TypedObjectCollectives) {
  // Small rounds: objects of several KiB go in many calls.
  auto ev = evaluator_on(MPI_COMM_WORLD, {{"chunk_bytes", 1000}});
  const int rank = ev.rank();
  const int size = ev.world_size();

  const std::vector<Stat> all = ev.all_gather(stat_of(rank));
  ASSERT_EQ(all.size(), static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) expect_stat(all[static_cast<std::size_t>(r)], r);

  const int root = size - 1;
  const std::vector<Stat> at_root = ev.gather(stat_of(rank), root);
  if (rank == root) {
    ASSERT_EQ(at_root.size(), static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) expect_stat(at_root[static_cast<std::size_t>(r)], r);
  } else {
    EXPECT_TRUE(at_root.empty());
  }

  const std::string from = ev.broadcast(
      rank == root ? std::string(5000, 'z') + "from the last rank" : std::string("not sent"), root);
  EXPECT_EQ(from, std::string(5000, 'z') + "from the last rank");
  const auto empty = ev.broadcast(std::vector<std::int64_t>{}, 0);
  EXPECT_TRUE(empty.empty());
  const auto pairs = ev.all_gather(std::make_pair(rank, std::string(rank == 1 ? "" : "x")));
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(pairs[static_cast<std::size_t>(r)].first, r);
    EXPECT_EQ(pairs[static_cast<std::size_t>(r)].second, r == 1 ? "" : "x");
  }
}

TEST(MpiLibraryApi, AnObjectOfAnotherTypeNamesItsRank) {
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks or more: one rank cannot disagree";
  auto ev = evaluator_on(MPI_COMM_WORLD);
  const int rank = ev.rank();
  // Odd ranks pass a string, even ranks a number: even ranks fail on rank 1's object, odd ranks
  // on rank 0's.
  const std::string want = rank % 2 == 0 ? "Evaluator::all_gather: rank 1's object"
                                         : "Evaluator::all_gather: rank 0's object";
  try {
    if (rank % 2 == 0)
      (void)ev.all_gather(std::int64_t{rank});
    else
      (void)ev.all_gather(std::string("rank ") + std::to_string(rank));
    ADD_FAILURE() << "no error";
  } catch (const tally::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("same type"), std::string::npos) << e.what();
  }
  // The collective itself completed: the evaluator goes on.
  ev.barrier();
  EXPECT_EQ(ev.all_gather(rank).size(), static_cast<std::size_t>(ev.world_size()));
}

TEST(MpiLibraryApi, ABadCommunicatorIsAConfigErrorNamingTheParameter) {
  for (const std::int64_t handle : {std::int64_t{1} << 20, std::int64_t{1} << 40}) {
    try {
      (void)tally::make_backend("mpi", {{"communicator", handle}});
      ADD_FAILURE() << "handle " << handle << " accepted";
    } catch (const tally::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("communicator"), std::string::npos) << e.what();
    }
  }
  try {
    (void)tally::mpi_backend(MPI_COMM_NULL);
    ADD_FAILURE() << "MPI_COMM_NULL accepted";
  } catch (const tally::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("MPI_COMM_NULL"), std::string::npos) << e.what();
  }
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) return 1;
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (finalized != 0) {
    std::fprintf(stderr, "test_mpi_library_api: a backend finalised the host's MPI\n");
    return 1;
  }
  MPI_Finalize();
  return failed;
}
