// Checkpoint and resume (docs/checkpoint.md) with the real `tally` binary, real plugins and real
// `mpirun` ranks: a run killed with SIGKILL mid-way (testkit's SequenceProbe, kill_on) and then
// resumed with --resume gives exactly the "results" of an uninterrupted run, bit for bit; a
// corrupt, incomplete or mismatched checkpoint is refused (exit 2, one line naming the file and
// what was expected and found) or skipped as the docs say.
//
// The metrics are real ones with float results (Accuracy, SingleLabelMetric from the
// classification plugin; RegressionMSE, whose state holds float sums) next to SequenceProbe,
// whose order-sensitive hash proves that every sample was read once, in order. With once_file,
// the kill fires only the first time, so the resumed run uses the very same config.
#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "integration/cli_fixture.hpp"

namespace fs = std::filesystem;
using namespace tally::test;

namespace {

const std::string kTestkit = std::string(TALLY_TEST_PLUGIN_DIR) + "/testkit";
constexpr std::int64_t kSamples = 60;

class CheckpointTest : public ::testing::Test {
 protected:
  TempDir dir;

  void SetUp() override {
    const auto d = make_dataset(kSamples, 5);
    write_npy(dir / "scores.npy", d.scores, {d.n, d.c});
    write_npy(dir / "labels.npy", d.labels);
    std::vector<std::int64_t> x(kSamples);
    std::iota(x.begin(), x.end(), 0);
    write_npy(dir / "x.npy", x);
    std::mt19937 gen(11);
    std::normal_distribution<double> noise(0.0, 1.0);
    std::vector<double> target, pred;
    for (std::int64_t i = 0; i < kSamples; ++i) {
      target.push_back(noise(gen) * 10.0);
      pred.push_back(target.back() + noise(gen));
    }
    write_npy(dir / "target.npy", target);
    write_npy(dir / "pred.npy", pred);
  }

  /// Batches of 4 over 60 samples; on 3 ranks, rank r reads x in [20r, 20r + 20).
  fs::path config(const std::string& probe, std::int64_t every = 2,
                  const std::string& backend = "nondist", const std::string& name = "eval.yaml") {
    const auto p = dir / name;
    write_text(p,
               "data:\n  type: npy\n  batch_size: 4\n  fields:\n    x: x.npy\n"
               "    pred_scores: scores.npy\n    gt_labels: labels.npy\n"
               "    pred: pred.npy\n    target: target.npy\n"
               "metrics:\n"
               "  - type: Accuracy\n    topk: [1, 2]\n"
               "  - type: SingleLabelMetric\n"
               "  - type: RegressionMSE\n"
               "  - type: SequenceProbe\n    once_file: fired\n    " +
                   probe + "\nplugins:\n  paths: [" + kTestkit + "]\nbackend:\n  type: " + backend +
                   "\ncheckpoint:\n  dir: ckpt\n  every_n_batches: " + std::to_string(every) +
                   "\n");
    return p;
  }

  ProcessResult run(const fs::path& cfg, const std::string& args, int np = 0) {
    return run_command((np > 0 ? mpirun(np) : std::string()) + kTally + " run " + cfg.string() +
                       " -q " + args);
  }

  /// The "results" of a run that writes `out`, which must succeed.
  nlohmann::json results(const fs::path& cfg, const std::string& out, const std::string& args = "",
                         int np = 0) {
    const auto r = run(cfg, "-o " + (dir / out).string() + " " + args, np);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (!fs::exists(dir / out)) return {};
    return nlohmann::json::parse(read_file(dir / out)).at("results");
  }

  /// The results of an uninterrupted run of `cfg`: no checkpoint section, the fault disarmed.
  nlohmann::json reference(const fs::path& cfg, int np = 0) {
    write_text(dir / "fired", "disarmed\n");
    auto r = results(cfg, "reference.json", "--set checkpoint=null", np);
    fs::remove(dir / "fired");
    return r;
  }

  /// The step folders in ckpt/, by name; `complete`: only those with metadata.
  std::vector<std::string> steps(bool complete = false) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir / "ckpt", ec))
      if (!complete || fs::exists(e.path() / "metadata.json"))
        out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  static void expect_same(const nlohmann::json& got, const nlohmann::json& want) {
    ASSERT_FALSE(want.is_null());
    EXPECT_EQ(got, want);
    // Bit for bit: the shortest round-trip text of every number is the same.
    EXPECT_EQ(got.dump(), want.dump());
  }

  static std::size_t lines(const std::string& text) {
    return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  }

  static void flip_byte(const fs::path& p) {
    std::string bytes = read_file(p);
    ASSERT_GT(bytes.size(), 10u);
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x20);
    write_text(p, bytes);
  }

  /// A finished nondist run with checkpoints every 2 batches: 15 batches, the last round finds
  /// the shard done; step-0000000014 and step-0000000016 are kept.
  fs::path finished_run() {
    const auto cfg = config("kill_on: -1");
    const auto r = run(cfg, "-o " + (dir / "first.json").string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(steps(true), (std::vector<std::string>{"step-0000000014", "step-0000000016"}));
    return cfg;
  }
};

}  // namespace

TEST_F(CheckpointTest, KilledRunResumesToTheSameResultsBitForBit) {
  const auto cfg = config("kill_on: 30");  // sample 30 is in batch 8
  const auto want = reference(cfg);

  const auto killed = run(cfg, "-o " + (dir / "out.json").string());
  EXPECT_NE(killed.exit_code, 0) << killed.err;
  EXPECT_FALSE(fs::exists(dir / "out.json"));
  EXPECT_TRUE(fs::exists(dir / "fired"));
  // Checkpoints after 2, 4 and 6 batches were completed; only the last two are kept; the kill
  // came before any shard of step 8 was written.
  EXPECT_EQ(steps(), (std::vector<std::string>{"step-0000000004", "step-0000000006"}));

  const auto resumed = run(cfg, "--resume -o " + (dir / "out.json").string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(lines(resumed.err), 1u) << resumed.err;
  EXPECT_NE(resumed.err.find("tally: checkpoint: resuming from " +
                             (dir / "ckpt" / "step-0000000006").string() +
                             " (step 6: 24 of 60 samples read)"),
            std::string::npos)
      << resumed.err;
  const auto got = nlohmann::json::parse(read_file(dir / "out.json"));
  expect_same(got.at("results"), want);
  EXPECT_EQ(got.at("results").at("SequenceProbe").at("count"), kSamples);
  EXPECT_EQ(got.at("run").at("samples"), kSamples);
}

TEST_F(CheckpointTest, KilledMpiRankResumesToTheSameResultsBitForBit) {
#ifndef TALLY_MPIEXEC
  FAIL() << "mpirun was not found when the tests were configured";
#else
  // Rank 1 of 3 reads x in [20, 40): sample 30 is in its third batch; a checkpoint after every
  // batch.
  const auto cfg = config("kill_on: 30", 1, "mpi");
  const auto want = reference(cfg, 3);
  const auto nondist = reference(config("kill_on: 30", 1, "nondist", "nondist.yaml"));
  for (const char* key : {"Accuracy", "SingleLabelMetric", "RegressionMSE"})
    EXPECT_EQ(want.at(key), nondist.at(key)) << key << ": the result depends on the world size";

  const auto killed = run(cfg, "-o " + (dir / "out.json").string(), 3);
  EXPECT_NE(killed.exit_code, 0) << killed.err;
  EXPECT_FALSE(fs::exists(dir / "out.json"));
  EXPECT_TRUE(fs::exists(dir / "fired"));
  // Which checkpoints completed depends on when mpirun stopped the other ranks: at least the
  // first (rank 1 read two batches before the kill), at most two are kept.
  const auto complete = steps(true);
  EXPECT_GE(complete.size(), 1u);
  EXPECT_LE(complete.size(), 2u);

  const auto resumed = run(cfg, "--resume -o " + (dir / "out.json").string(), 3);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("tally: checkpoint: resuming from " +
                             (dir / "ckpt" / complete.back()).string()),
            std::string::npos)
      << resumed.err;
  const auto got = nlohmann::json::parse(read_file(dir / "out.json"));
  expect_same(got.at("results"), want);
  EXPECT_EQ(got.at("results").at("SequenceProbe").at("per_rank"),
            nlohmann::json::array({20, 20, 20}));
  EXPECT_EQ(got.at("run").at("world_size"), 3);
#endif
}

TEST_F(CheckpointTest, ResumingAFinishedRunGivesTheSameResults) {
  const auto cfg = finished_run();
  const auto want = reference(cfg);
  const auto first = nlohmann::json::parse(read_file(dir / "first.json")).at("results");
  expect_same(first, want);
  // Settings outside the config fingerprint (checkpoint, output) may change between runs.
  const auto again =
      results(cfg, "again.json", "--resume --set checkpoint.every_n_batches=3 --set output=null");
  expect_same(again, want);
}

TEST_F(CheckpointTest, ResumeWithoutACheckpointStartsFromTheBeginningAndSaysSo) {
  const auto cfg = config("kill_on: -1");
  const auto want = reference(cfg);
  const auto r = run(cfg, "--resume -o " + (dir / "out.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "tally: checkpoint: no complete checkpoint in " + (dir / "ckpt").string() +
                       ": starting from the beginning\n");
  expect_same(nlohmann::json::parse(read_file(dir / "out.json")).at("results"), want);
}

TEST_F(CheckpointTest, AFreshRunReplacesTheCheckpointsOfAnEarlierRun) {
  const auto cfg = finished_run();
  const auto r = run(cfg, "-o " + (dir / "out.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("tally: checkpoint: starting over: removed 2 checkpoints of an earlier run "
                       "from " +
                       (dir / "ckpt").string()),
            std::string::npos)
      << r.err;
  EXPECT_EQ(steps(true), (std::vector<std::string>{"step-0000000014", "step-0000000016"}));
}

TEST_F(CheckpointTest, CorruptShardIsRefusedNamingTheFileAndTheChecksum) {
  const auto cfg = finished_run();
  const auto shard = dir / "ckpt" / "step-0000000016" / "shard-00000.bin";
  flip_byte(shard);
  const auto r = run(cfg, "--resume -o " + (dir / "out.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("tally: error: checkpoint shard " + shard.string() + ": crc32 expected "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("(metadata.json), found "), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out.json"));
  // Nothing was removed: the user may still repair or remove the checkpoint.
  EXPECT_EQ(steps(true), (std::vector<std::string>{"step-0000000014", "step-0000000016"}));
}

TEST_F(CheckpointTest, TruncatedOrMissingShardIsRefused) {
  const auto cfg = finished_run();
  const auto shard = dir / "ckpt" / "step-0000000016" / "shard-00000.bin";
  const auto bytes = read_file(shard);
  write_text(shard, bytes.substr(0, bytes.size() - 3));
  auto r = run(cfg, "--resume");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("checkpoint shard " + shard.string() + ": size expected " +
                       std::to_string(bytes.size()) + " bytes (metadata.json), found " +
                       std::to_string(bytes.size() - 3)),
            std::string::npos)
      << r.err;

  fs::remove(shard);
  r = run(cfg, "--resume");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("shard " + shard.string() + " expected (the metadata lists it), found none"),
            std::string::npos)
      << r.err;
}

TEST_F(CheckpointTest, CorruptMetadataIsRefused) {
  const auto cfg = finished_run();
  const auto meta = dir / "ckpt" / "step-0000000016" / "metadata.json";
  std::string text = read_file(meta);
  const auto at = text.find("\"step\": 16");
  ASSERT_NE(at, std::string::npos) << text;
  text[at + 9] = '7';  // still valid JSON: only the metadata checksum tells
  write_text(meta, text);
  const auto r = run(cfg, "--resume");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(
      r.err.find("checkpoint file " + meta.string() + " is corrupt: metadata_crc32 expected "),
      std::string::npos)
      << r.err;

  write_text(meta, "{\"format\": \"tally-checkpoint\", ");  // cut short
  const auto cut = run(cfg, "--resume");
  EXPECT_EQ(cut.exit_code, 2) << cut.err;
  EXPECT_NE(cut.err.find("checkpoint file " + meta.string() + " is corrupt: not valid JSON"),
            std::string::npos)
      << cut.err;
}

TEST_F(CheckpointTest, CheckpointWithoutMetadataIsSkippedForThePreviousOne) {
  const auto cfg = finished_run();
  const auto want = reference(cfg);
  fs::remove(dir / "ckpt" / "step-0000000016" / "metadata.json");
  auto r = run(cfg, "--resume -o " + (dir / "out.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "tally: checkpoint: resuming from " +
                       (dir / "ckpt" / "step-0000000014").string() +
                       " (step 14: 56 of 60 samples read); ignoring step-0000000016: no "
                       "metadata.json (the run stopped while writing it)\n");
  expect_same(nlohmann::json::parse(read_file(dir / "out.json")).at("results"), want);

  // No complete checkpoint left at all: start over, and say so.
  for (const auto& s : steps()) fs::remove(dir / "ckpt" / s / "metadata.json");
  r = run(cfg, "--resume -o " + (dir / "out2.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("tally: checkpoint: no complete checkpoint in " + (dir / "ckpt").string() +
                       "; ignoring "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(": starting from the beginning"), std::string::npos) << r.err;
  expect_same(nlohmann::json::parse(read_file(dir / "out2.json")).at("results"), want);
}

TEST_F(CheckpointTest, ConfigMismatchIsRefused) {
  const auto cfg = finished_run();
  const auto meta = (dir / "ckpt" / "step-0000000016" / "metadata.json").string();
  const auto expect_refused = [&](const ProcessResult& r) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    // One line from tally (under mpirun, Open MPI adds its own report).
    EXPECT_EQ(r.err.find("tally: "), r.err.rfind("tally: ")) << r.err;
    EXPECT_NE(r.err.find("tally: error: checkpoint " + meta + ": config fingerprint expected "),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("the data, metrics or backend type changed since it was written"),
              std::string::npos)
        << r.err;
  };
  for (const std::string set :
       {"metrics.0.topk=[1]", "metrics.2.multioutput=raw_values", "data.batch_size=5",
        "data.fields.x=pred.npy", "metrics.3.name=probe"}) {
    SCOPED_TRACE(set);
    expect_refused(run(cfg, "--resume --set " + set));
  }
#ifdef TALLY_MPIEXEC
  // Another backend type on as many ranks (one).
  expect_refused(run(cfg, "--resume --set backend.type=mpi", 1));
#endif
  // The checkpoint is still there, and still good.
  EXPECT_EQ(run(cfg, "--resume").exit_code, 0);
}

TEST_F(CheckpointTest, WorldSizeMismatchIsRefused) {
#ifndef TALLY_MPIEXEC
  FAIL() << "mpirun was not found when the tests were configured";
#else
  const auto cfg = config("kill_on: -1", 2, "mpi");
  const auto first = run(cfg, "", 3);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto complete = steps(true);
  ASSERT_FALSE(complete.empty());
  const auto meta = (dir / "ckpt" / complete.back() / "metadata.json").string();
  for (const int np : {2, 4}) {
    SCOPED_TRACE(np);
    const auto r = run(cfg, "--resume", np);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("tally: error: checkpoint " + meta + ": world size expected " +
                         std::to_string(np) + " (this run), found 3"),
              std::string::npos)
        << r.err;
    // Printed once, by rank 0.
    EXPECT_EQ(r.err.find("tally: error:"), r.err.rfind("tally: error:")) << r.err;
  }
  const auto single = run(cfg, "--resume", 1);
  EXPECT_EQ(single.exit_code, 2) << single.err;
  EXPECT_NE(single.err.find("world size expected 1 (this run), found 3"), std::string::npos)
      << single.err;
#endif
}

TEST_F(CheckpointTest, CheckpointSectionIsValidated) {
  const auto base = config("kill_on: -1");
  const std::string text = read_file(base);
  struct Case {
    std::string section, message;
  };
  const auto head = text.substr(0, text.find("checkpoint:"));
  const auto line = std::to_string(lines(head) + 1);  // the line of "checkpoint:"
  const auto next = std::to_string(lines(head) + 3);  // two lines below it
  const std::vector<Case> cases = {
      {"checkpoint:\n  dir: ckpt\n  every_n_batches: 0\n",
       "eval.yaml:" + next +
           ":20: checkpoint.every_n_batches expects an integer >= 1, found an "
           "integer 0"},
      {"checkpoint:\n  dir: ckpt\n  every_n_batches: -3\n",
       "checkpoint.every_n_batches expects an integer >= 1, found an integer -3"},
      {"checkpoint:\n  dir: ckpt\n  every_n_batches: two\n",
       "checkpoint.every_n_batches expects an integer >= 1, found 'two'"},
      {"checkpoint:\n  dir: ckpt\n  every_n_batches: 1.5\n",
       "checkpoint.every_n_batches expects an integer >= 1, found a number 1.5"},
      {"checkpoint:\n  dir: ckpt\n  every: 2\n",
       "eval.yaml:" + next + ":3: unknown key 'checkpoint.every' (expected dir, every_n_batches)"},
      {"checkpoint:\n  every_n_batches: 2\n", "checkpoint: missing 'dir'"},
      {"checkpoint:\n  dir: ckpt\n", "checkpoint: missing 'every_n_batches'"},
      {"checkpoint:\n  dir: [a, b]\n  every_n_batches: 2\n",
       "checkpoint.dir expects a folder name, found a list"},
      {"checkpoint: ckpt\n", "eval.yaml:" + line + ":13: checkpoint expects a map, found 'ckpt'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.section);
    write_text(dir / "eval.yaml", head + c.section);
    const auto r = run(dir / "eval.yaml", "");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    const auto v = run_command(kTally + " validate " + (dir / "eval.yaml").string());
    EXPECT_EQ(v.exit_code, 2) << v.err;
  }
  // The same through --set.
  const auto r = run(config("kill_on: -1"), "--set checkpoint.every_n_batches=0");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--set checkpoint.every_n_batches: checkpoint.every_n_batches expects an "
                       "integer >= 1, found an integer 0"),
            std::string::npos)
      << r.err;
}

TEST_F(CheckpointTest, ResumeWithoutACheckpointSectionIsAnError) {
  const auto cfg = config("kill_on: -1");
  const auto r = run(cfg, "--resume --set checkpoint=null");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, "tally: error: --resume: " + cfg.string() +
                       " has no 'checkpoint:' section (checkpoint: {dir: DIR, every_n_batches: "
                       "N}), so there is no checkpoint to resume from\n");
}

// Every metric can be checkpointed (Metric::save and restore are part of the one interface); a
// plugin whose restore() cannot read what its save() wrote fails the resume with exit 2, naming
// the shard and the metric, before anything is read again.
TEST_F(CheckpointTest, MetricThatCannotReadItsSavedStateFailsTheResume) {
  const auto cfg = config("kill_on: -1");
  std::string text = read_file(cfg);
  text.insert(text.find("  - type: SequenceProbe"), "  - type: HostileState\n    lie: restore\n");
  write_text(cfg, text);
  const auto first = run(cfg, "");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto r = run(cfg, "--resume");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("metric 'HostileState' cannot read its saved state"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("checkpoint shard"), std::string::npos) << r.err;
}
