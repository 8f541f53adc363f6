// tally under real `mpirun` ranks: results on 1, 2, 3, 4 and 7 ranks (uneven shards, empty ranks)
// equal the single-process results exactly; failures on one rank fail every rank with one message;
// a rank with another metrics configuration is named; the library API drops sampler padding.
#include <fmt/format.h>

#include "integration/cli_fixture.hpp"

namespace fs = std::filesystem;
using namespace tally::test;

namespace {

const std::string kApp = TALLY_LIBRARY_APP;
const std::string kTestkit = std::string(TALLY_TEST_PLUGIN_DIR) + "/testkit";

class MpiTest : public CliTest {
 protected:
  nlohmann::json run_ranks(int np, const fs::path& cfg, const std::string& extra = "") {
    const auto out = dir / ("np" + std::to_string(np) + ".json");
    const auto r = run_command(mpirun(np) + kTally + " run -q " + cfg.string() +
                               " --set backend.type=mpi " + extra + " -o " + out.string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return read_json(out);
  }
};

}  // namespace

TEST_F(MpiTest, AnyWorldSizeGivesTheSingleProcessResults) {
  const auto cfg = config();
  const auto single = run_single(cfg);
  for (int np : {1, 2, 3, 4, 7}) {
    SCOPED_TRACE(np);
    const auto j = run_ranks(np, cfg);
    EXPECT_EQ(j["results"], single["results"]);  // exact: every double bit for bit
    EXPECT_EQ(j["run"]["world_size"], np);
    EXPECT_EQ(j["run"]["samples"], 50);
    EXPECT_EQ(j["run"]["backend"], "mpi");
  }
}

TEST_F(MpiTest, RanksWithNoSamplesTakePart) {
  write_data(make_dataset(5, 5));  // 7 ranks, 5 samples: two ranks read nothing
  const auto cfg = config();
  const auto single = run_single(cfg);
  EXPECT_EQ(run_ranks(7, cfg)["results"], single["results"]);
  EXPECT_EQ(run_ranks(4, cfg, "--set data.batch_size=1")["results"], single["results"]);
}

TEST_F(MpiTest, ChunkedCollectivesGiveTheSameResults) {
  // 64-byte rounds: every state payload and the results broadcast go in many pieces.
  const auto cfg = config();
  const auto single = run_single(cfg);
  EXPECT_EQ(run_ranks(3, cfg, "--set backend.chunk_bytes=64")["results"], single["results"]);
}

TEST_F(MpiTest, ExampleConfigOnThreeRanks) {
  const std::string example =
      std::string(TALLY_SOURCE_DIR) + "/configs/examples/classification.yaml";
  EXPECT_EQ(run_ranks(3, example)["results"], run_single(example)["results"]);
}

TEST_F(MpiTest, BadDataOnOneRankFailsEveryRankWithOneMessage) {
  auto d = make_dataset(50, 5);
  d.labels[45] = 17;  // in the last rank's shard of 3
  write_npy(dir / "labels.npy", d.labels);
  const auto out = dir / "never.json";
  const auto r = run_command(mpirun(3) + kTally + " run " + config().string() +
                             " --set backend.type=mpi -o " + out.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tally: error: rank 2: metric 'Accuracy'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gt_labels"), std::string::npos) << r.err;
  // Printed once (by rank 0), not once per rank.
  EXPECT_EQ(r.err.find("tally: error:"), r.err.rfind("tally: error:")) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

// Issue 32, item 17: a bad sample is named by its index in the dataset, whichever rank reads
// it (the metrics number the samples of their own shard; on 3 ranks of 900, rank 1 reads
// [300, 600) and row 500 is its sample 200), printed once.
TEST_F(MpiTest, ABadSampleIsNamedByItsIndexInTheDataset) {
  const auto good = make_dataset(900, 5);
  struct Case {
    std::int64_t row;
    bool nan;  // a NaN score instead of a label out of range
    int rank;
  };
  for (const Case c : {Case{500, false, 1}, Case{300, false, 1}, Case{899, true, 2},
                       Case{7, false, 0}, Case{650, true, 2}}) {
    SCOPED_TRACE(c.row);
    auto d = good;
    if (c.nan)
      d.scores[static_cast<std::size_t>(c.row * d.c + 3)] = std::nanf("");
    else
      d.labels[static_cast<std::size_t>(c.row)] = 9;
    write_data(d);
    const auto r = run_command(mpirun(3) + kTally + " run -q " + config().string() +
                               " --set backend.type=mpi --set data.batch_size=64");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    const std::string prefix = fmt::format("tally: error: rank {}: metric 'Accuracy': ", c.rank);
    EXPECT_EQ(r.err.find(prefix), 0u) << r.err;
    const std::string named =
        c.nan ? fmt::format("field 'pred_scores' sample {}: ", c.row)
              : fmt::format("field 'gt_labels' sample {}: class id 9 is outside [0, 5)", c.row);
    EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("tally: error:"), r.err.rfind("tally: error:")) << r.err;
  }
}

TEST_F(MpiTest, MissingFileOnEveryRankIsOneMessage) {
  const auto r = run_command(mpirun(2) + kTally + " run " + config().string() +
                             " --set backend.type=mpi --set data.fields.gt_labels=absent.npy");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("absent.npy"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("tally: error:"), r.err.rfind("tally: error:")) << r.err;
}

TEST_F(MpiTest, DifferentMetricsConfigurationIsNamedNotAHang) {
  const auto cfg = config().string();
  // MPMD: rank 0 and rank 1 run different top-k lists.
  const auto r =
      run_command(mpirun(1) + kTally + " run " + cfg + " --set backend.type=mpi : -np 1 " + kTally +
                  " run " + cfg + " --set backend.type=mpi --set metrics.0.topk=[1,3]");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("rank 1 has a different metrics configuration from rank 0"),
            std::string::npos)
      << r.err;
}

// States of counts (testkit's CountProbe, ConfusionMatrix, SingleLabelMetric with num_classes;
// Accuracy and ConfusionMatrix in the test above) are summed to rank 0 with MPI_Reduce: compute()
// gets one state whatever the world size, while SequenceProbe's state is still gathered, one per
// rank. Expected: the single-process run (bins of the labels of make_dataset(50, 5) mod 3).
TEST_F(MpiTest, CountStatesAreReducedNotGathered) {
  const auto cfg = config(R"(metrics:
  - type: CountProbe
    bins: 3
    inputs: {x: gt_labels}
  - type: SequenceProbe
    inputs: {x: gt_labels}
  - type: ConfusionMatrix
    num_classes: 5
  - type: SingleLabelMetric
    num_classes: 5
    average: none
)",
                          "plugins:\n  paths: [" + kTestkit + "]\n");
  const auto single = run_single(cfg);
  ASSERT_EQ(single["results"]["CountProbe"]["n"], 50);
  for (int np : {2, 3, 7}) {
    SCOPED_TRACE(np);
    for (const std::string extra : {"", "--set backend.chunk_bytes=64"}) {
      const auto j = run_ranks(np, cfg, extra);
      EXPECT_EQ(j["results"]["CountProbe"], single["results"]["CountProbe"]) << extra;
      EXPECT_EQ(j["results"]["SequenceProbe"]["per_rank"].size(), static_cast<std::size_t>(np));
      EXPECT_EQ(j["results"]["ConfusionMatrix"], single["results"]["ConfusionMatrix"]) << extra;
      EXPECT_EQ(j["results"]["SingleLabelMetric"], single["results"]["SingleLabelMetric"]) << extra;
    }
  }
}

// A rank whose counts cannot be summed exactly (a corrupt restored state, say) fails every rank
// with one message naming the rank and the metric; nothing is written.
TEST_F(MpiTest, CountsThatCannotBeSummedExactlyAreNamed) {
  for (const auto& [corrupt, says] : std::vector<std::pair<std::string, std::string>>{
           {"-5", "a count of its state is negative (-5): the state is corrupt"},
           {"2305843009213693952", "this rank's counts add up to 2^62 / 2 ranks or more"}}) {
    const auto cfg = config("metrics:\n  - type: CountProbe\n    corrupt: " + corrupt +
                                "\n    inputs: {x: gt_labels}\n",
                            "plugins:\n  paths: [" + kTestkit + "]\n");
    const auto out = dir / "never.json";
    const auto r = run_command(mpirun(2) + kTally + " run " + cfg.string() +
                               " --set backend.type=mpi -o " + out.string());
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("tally: error: rank 0: metric 'CountProbe': " + says), std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("tally: error:"), r.err.rfind("tally: error:")) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
}

// A plugin whose number of counts differs by rank is caught by the sync header before any rank
// reduces: a message on every rank, not a hang or a garbled sum.
TEST_F(MpiTest, ADifferentNumberOfCountsIsNamedNotAHang) {
  const auto cfg =
      config("metrics:\n  - type: CountProbe\n    bins_by_rank: true\n    inputs: {x: gt_labels}\n",
             "plugins:\n  paths: [" + kTestkit + "]\n");
  const auto r =
      run_command(mpirun(3) + kTally + " run " + cfg.string() + " --set backend.type=mpi");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("sync failed: ranks 1, 2 would reduce 6 counts to rank 0, rank 0 would "
                       "reduce 5"),
            std::string::npos)
      << r.err;
}

TEST(LibraryApi, BlocksOnAnyWorldSizeEqualOneProcess) {
  const auto single = run_command(kApp + " " + kTestkit + " 23 nondist blocks");
  ASSERT_EQ(single.exit_code, 0) << single.err;
  auto want = nlohmann::json::parse(single.out)["results"];
  EXPECT_EQ(want["SequenceProbe"]["count"], 23);
  want["SequenceProbe"].erase("per_rank");  // the only key that depends on the world size
  for (int np : {1, 2, 3, 4, 7}) {
    const auto r = run_command(mpirun(np) + kApp + " " + kTestkit + " 23 mpi blocks 2");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto got = nlohmann::json::parse(r.out)["results"];
    EXPECT_EQ(got["SequenceProbe"]["per_rank"].size(), static_cast<std::size_t>(np));
    got["SequenceProbe"].erase("per_rank");
    EXPECT_EQ(got, want) << np;
  }
}

TEST(LibraryApi, ComputeWithDatasetSizeDropsSamplerPadding) {
  // Sample i holds 7i + 3: the sum over a dataset of 10 is 7*45 + 30 = 345.
  for (int np : {3, 4, 7}) {
    // PyTorch's DistributedSampler pads 10 samples to 12 (3 and 4 ranks) or 14 (7 ranks).
    const auto r = run_command(mpirun(np) + kApp + " " + kTestkit + " 10 mpi torch");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["results"]["SequenceProbe"]["count"], 10) << np;
    EXPECT_EQ(j["results"]["SequenceProbe"]["sum"], 345) << np;
    EXPECT_EQ(j["run"]["samples"], 10) << np;
  }
}
