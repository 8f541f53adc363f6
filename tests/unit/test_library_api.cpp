// The library API for host programs on several ranks, in one process (tally/evaluator.hpp): the
// local rank from the launcher's variables where the backend does not know it, rank_zero_only,
// the typed object collectives on a world of one and on threads (tests/support/thread_backend),
// make_backend. The same under mpirun, on MPI communicators: tests/mpi/test_mpi_library_api.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/thread_backend.hpp"
#include "tally/evaluator.hpp"
#include "tally/sdk/error.hpp"

namespace {

std::string probe_config() {
  return "plugins: {paths: ['" TALLY_TEST_PLUGIN_DIR
         "/testkit']}\nmetrics:\n  - type: SequenceProbe\n";
}

// A backend that knows only its rank and world size (no LocalRank): local_rank() is not
// collective, so nothing else is called.
class RankOnly final : public tally::DistBackend {
 public:
  RankOnly(int rank, int world) : rank_(rank), world_(world) {}
  std::string name() const override { return "rank-only"; }
  bool is_initialized() const override { return true; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void barrier(const tally::CallOptions&) override { fail(); }
  std::size_t chunk_bytes() const override { return 1 << 20; }
  void all_gather_equal(const std::byte*, std::size_t, std::byte*,
                        const tally::CallOptions&) override {
    fail();
  }
  void broadcast(std::byte*, std::size_t, int, const tally::CallOptions&) override { fail(); }

 private:
  [[noreturn]] static void fail() { throw tally::RuntimeError("rank-only: no transport"); }
  int rank_;
  int world_;
};

// Sets the launcher variables for one test and restores the process's afterwards.
class LauncherEnv {
 public:
  explicit LauncherEnv(std::vector<std::pair<const char*, const char*>> vars) {
    for (const char* name : kAll) {
      const char* v = std::getenv(name);
      saved_.emplace_back(name, v == nullptr ? std::nullopt : std::optional<std::string>(v));
      ::unsetenv(name);
    }
    for (const auto& [k, v] : vars) ::setenv(k, v, 1);
  }
  ~LauncherEnv() {
    for (const auto& [k, v] : saved_) {
      if (v)
        ::setenv(k, v->c_str(), 1);
      else
        ::unsetenv(k);
    }
  }
  LauncherEnv(const LauncherEnv&) = delete;
  LauncherEnv& operator=(const LauncherEnv&) = delete;

 private:
  static constexpr const char* kAll[] = {"OMPI_COMM_WORLD_LOCAL_RANK",
                                         "OMPI_COMM_WORLD_RANK",
                                         "OMPI_COMM_WORLD_SIZE",
                                         "LOCAL_RANK",
                                         "RANK",
                                         "WORLD_SIZE",
                                         "SLURM_LOCALID",
                                         "SLURM_PROCID",
                                         "SLURM_NTASKS",
                                         "MPI_LOCALRANKID",
                                         "PMI_RANK",
                                         "PMI_SIZE",
                                         "PMIX_RANK",
                                         "SLURM_STEP_ID",
                                         "TORCHELASTIC_RUN_ID",
                                         "MASTER_ADDR"};
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

tally::Evaluator on_backend(std::shared_ptr<tally::DistBackend> b) {
  tally::EvaluatorOptions options;
  options.backend = std::move(b);
  return tally::Evaluator::from_yaml(probe_config(), std::move(options));
}

TEST(HostApi, LocalRankIsZeroInAWorldOfOne) {
  LauncherEnv env({{"LOCAL_RANK", "3"}, {"RANK", "5"}, {"WORLD_SIZE", "8"}});
  auto ev = tally::Evaluator::from_yaml("backend: {type: nondist}\n" + probe_config());
  EXPECT_EQ(ev.local_rank(), 0);
  tally::EvaluatorOptions validate;
  validate.validate_only = true;
  EXPECT_EQ(tally::Evaluator::from_yaml(probe_config(), std::move(validate)).local_rank(), 0);
}

TEST(HostApi, LocalRankComesFromTheLauncherWhoseRankIsTheBackends) {
  // torchrun's variables describe rank 2 of 4: they say nothing of Slurm's rank 0 of 1 beside.
  LauncherEnv env({{"LOCAL_RANK", "1"},
                   {"RANK", "2"},
                   {"WORLD_SIZE", "4"},
                   {"SLURM_LOCALID", "0"},
                   {"SLURM_PROCID", "0"},
                   {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(on_backend(std::make_shared<RankOnly>(2, 4)).local_rank(), 1);
  // Open MPI's first when they match too.
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  ::setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  EXPECT_EQ(on_backend(std::make_shared<RankOnly>(2, 4)).local_rank(), 0);
  // Slurm's describe rank 1 of 3 here (in an srun step: tally/launch.hpp).
  LauncherEnv slurm({{"SLURM_LOCALID", "1"},
                     {"SLURM_PROCID", "1"},
                     {"SLURM_NTASKS", "3"},
                     {"SLURM_STEP_ID", "0"}});
  EXPECT_EQ(on_backend(std::make_shared<RankOnly>(1, 3)).local_rank(), 1);
}

TEST(HostApi, LocalRankUnknownIsAnErrorSayingWhatWasRead) {
  {
    LauncherEnv none({});
    auto ev = on_backend(std::make_shared<RankOnly>(1, 2));
    try {
      (void)ev.local_rank();
      ADD_FAILURE() << "no error";
    } catch (const tally::RuntimeError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("rank 1 of 2"), std::string::npos) << m;
      EXPECT_NE(m.find("rank-only backend"), std::string::npos) << m;
      EXPECT_NE(m.find("found none of them"), std::string::npos) << m;
    }
  }
  // A launcher's world that is not the backend's (a host program's own communicator): not used.
  LauncherEnv other({{"LOCAL_RANK", "1"}, {"RANK", "1"}, {"WORLD_SIZE", "4"}});
  auto ev = on_backend(std::make_shared<RankOnly>(1, 2));
  try {
    (void)ev.local_rank();
    ADD_FAILURE() << "no error";
  } catch (const tally::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("found RANK=1, WORLD_SIZE=4, LOCAL_RANK=1 (torchrun)"),
              std::string::npos)
        << e.what();
  }
}

struct Record {
  std::string name;
  std::vector<std::int64_t> values;
  std::optional<double> score;
  MSGPACK_DEFINE(name, values, score)
};

TEST(HostApi, TypedCollectivesInAWorldOfOne) {
  auto ev = tally::Evaluator::from_yaml("backend: {type: nondist}\n" + probe_config());
  int calls = 0;
  EXPECT_TRUE(ev.rank_zero_only([&] { ++calls; }));
  EXPECT_EQ(calls, 1);
  const Record r{"only", {1, 2, 3}, 0.5};
  const auto all = ev.all_gather(r);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].name, "only");
  EXPECT_EQ(all[0].values, r.values);
  EXPECT_EQ(all[0].score, 0.5);
  EXPECT_EQ(ev.gather(std::string("x")), std::vector<std::string>{"x"});
  EXPECT_EQ(ev.broadcast(std::map<std::string, int>{{"a", 1}}),
            (std::map<std::string, int>{{"a", 1}}));
  // Without a backend (validate_only): a world of one all the same.
  tally::EvaluatorOptions validate;
  validate.validate_only = true;
  auto v = tally::Evaluator::from_yaml(probe_config(), std::move(validate));
  EXPECT_EQ(v.all_gather(7), std::vector<int>{7});
  EXPECT_EQ(v.broadcast(std::string("b")), "b");
  EXPECT_THROW((void)v.gather(1, 1), tally::ConfigError);
  EXPECT_THROW((void)v.collectives(), tally::ConfigError);
}

TEST(HostApi, TypedCollectivesOnThreeRanks) {
  constexpr int kWorld = 3;
  tally::testing::ThreadWorld world(kWorld);
  std::vector<std::string> failures(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto ev = on_backend(std::make_shared<tally::testing::ThreadBackend>(world, r, true));
        const Record mine{"rank " + std::to_string(r), std::vector<std::int64_t>(r, r),
                          r == 1 ? std::nullopt : std::optional<double>(r * 1.5)};
        const auto all = ev.all_gather(mine);
        const auto at_1 = ev.gather(mine, 1);
        const auto b = ev.broadcast(r == 2 ? std::string("from 2") : std::string(), 2);
        int calls = 0;
        ev.rank_zero_only([&] { ++calls; });
        const auto counted = ev.all_gather(calls);
        std::string& f = failures[static_cast<std::size_t>(r)];
        for (int k = 0; k < kWorld; ++k) {
          const auto& got = all[static_cast<std::size_t>(k)];
          if (got.name != "rank " + std::to_string(k) ||
              got.values != std::vector<std::int64_t>(k, k) ||
              got.score != (k == 1 ? std::nullopt : std::optional<double>(k * 1.5)))
            f += "all_gather: rank " + std::to_string(k) + " differs; ";
          if (counted[static_cast<std::size_t>(k)] != (k == 0 ? 1 : 0))
            f += "rank_zero_only ran on rank " + std::to_string(k) + "; ";
        }
        if (r == 1 ? at_1.size() != kWorld || at_1[2].name != "rank 2" : !at_1.empty())
          f += "gather to rank 1 wrong; ";
        if (b != "from 2") f += "broadcast got '" + b + "'; ";
        (void)ev.compute();  // the collectives left the evaluator in step (and its metric made)
      } catch (const std::exception& e) {
        failures[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r)
    EXPECT_EQ(failures[static_cast<std::size_t>(r)], "") << "rank " << r;
}

TEST(HostApi, AnObjectThatDoesNotUnpackNamesItsRank) {
  msgpack::sbuffer packed;
  msgpack::pack(packed, std::string("text"));
  try {
    (void)tally::detail::unpack_object<std::int64_t>(tally::detail::bytes_of(packed), 3,
                                                     "Evaluator::all_gather");
    ADD_FAILURE() << "no error";
  } catch (const tally::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("Evaluator::all_gather: rank 3's object (5 bytes)"),
              std::string::npos)
        << e.what();
  }
  // Truncated bytes, and bytes after the object.
  const std::string text(packed.data(), packed.size());
  const auto bytes = [](const std::string& s) { return std::as_bytes(std::span(s)); };
  EXPECT_THROW((void)tally::detail::unpack_object<std::string>(bytes(text.substr(0, 3)), 0, "x"),
               tally::RuntimeError);
  EXPECT_THROW((void)tally::detail::unpack_object<std::string>(bytes(text + text), 0, "x"),
               tally::RuntimeError);
  EXPECT_EQ(tally::detail::unpack_object<std::string>(bytes(text), 0, "x"), "text");
}

TEST(HostApi, MakeBackendChecksTheParameters) {
  EXPECT_EQ(tally::make_backend("nondist")->world_size(), 1);
  try {
    (void)tally::make_backend("nondist", {{"no_such", 1}});
    ADD_FAILURE() << "no error";
  } catch (const tally::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no_such"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)tally::make_backend("no-such-backend"), tally::ConfigError);
}

// save_state / load_state: a host program's checkpoint of this rank's accumulated state.
tally::Batch scores_batch(std::int64_t begin, std::int64_t end) {
  std::vector<double> scores;
  std::vector<std::int64_t> labels;
  for (std::int64_t i = begin; i < end; ++i) {
    for (int c = 0; c < 3; ++c) scores.push_back(static_cast<double>((i * 7 + c * 5) % 11));
    labels.push_back(i % 3);
  }
  tally::Batch b;
  b.set("pred_scores", tally::Tensor::from_vector(scores, {end - begin, 3}));
  b.set("gt_labels", tally::Tensor::from_vector(labels));
  return b;
}

constexpr const char* kStateConfig =
    "metrics: [{type: Accuracy, topk: [1, 2]}, {type: ConfusionMatrix, num_classes: 3}]";

TEST(HostApi, SavedStateResumesToTheSameResults) {
  auto whole = tally::Evaluator::from_yaml(kStateConfig);
  whole.add(scores_batch(0, 100));
  const tally::Results expected = whole.compute();

  auto first = tally::Evaluator::from_yaml(kStateConfig);
  first.add(scores_batch(0, 37));
  const std::string saved = first.save_state();
  auto second = tally::Evaluator::from_yaml(kStateConfig);
  second.load_state(saved);
  second.add(scores_batch(37, 100));
  const tally::Results got = second.compute();
  EXPECT_EQ(got.metrics, expected.metrics);
  EXPECT_EQ(got.run.samples, 100);
}

TEST(HostApi, LoadStateRefusesWhatIsNotThisEvaluatorsState) {
  auto a = tally::Evaluator::from_yaml(kStateConfig);
  a.add(scores_batch(0, 10));
  const std::string saved = a.save_state();
  auto other = tally::Evaluator::from_yaml(
      "metrics: [{type: Accuracy, topk: [1]}, {type: ConfusionMatrix, num_classes: 3}]");
  const auto message = [](auto&& f) {
    try {
      f();
    } catch (const tally::InputError& e) {
      return std::string(e.what());
    }
    return std::string("no InputError");
  };
  EXPECT_NE(message([&] { other.load_state(saved); }).find("other metrics"), std::string::npos);
  EXPECT_NE(message([&] { a.load_state("garbage"); }).find("not a saved evaluator state"),
            std::string::npos);
  EXPECT_NE(message([&] { a.load_state(saved.substr(0, saved.size() / 2)); }).find("load_state"),
            std::string::npos);
  // A refused state leaves the evaluator as it was.
  a.add(scores_batch(10, 20));
  EXPECT_EQ(a.compute().run.samples, 20);
  // A padded sampler's held sample is not in a state: saving then is refused.
  tally::EvaluatorOptions padded;
  padded.padded_sampler = true;
  auto p = tally::Evaluator::from_yaml(kStateConfig, std::move(padded));
  p.add(scores_batch(0, 5));
  EXPECT_THROW((void)p.save_state(), tally::ConfigError);
}

}  // namespace
