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
#include <regex>
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

  /// Batches of 4 over 60 samples (on 3 ranks, rank r reads x in [20r, 20r + 20)): Accuracy,
  /// SingleLabelMetric, RegressionMSE, then `probes` (YAML list entries), on `backend`.
  fs::path write_config(const std::string& name, const std::string& probes,
                        const std::string& backend, std::int64_t every) {
    const auto p = dir / name;
    write_text(p,
               "data:\n  type: npy\n  batch_size: 4\n  fields:\n    x: x.npy\n"
               "    pred_scores: scores.npy\n    gt_labels: labels.npy\n"
               "    pred: pred.npy\n    target: target.npy\n"
               "metrics:\n"
               "  - type: Accuracy\n    topk: [1, 2]\n"
               "  - type: SingleLabelMetric\n"
               "  - type: RegressionMSE\n" +
                   probes + "plugins:\n  paths: [" + kTestkit + "]\nbackend:\n  type: " + backend +
                   "\ncheckpoint:\n  dir: ckpt\n  every_n_batches: " + std::to_string(every) +
                   "\n");
    return p;
  }

  /// One SequenceProbe with `probe` (its fault) and once_file: fired.
  fs::path config(const std::string& probe, std::int64_t every = 2,
                  const std::string& backend = "nondist", const std::string& name = "eval.yaml") {
    return write_config(name, "  - type: SequenceProbe\n    once_file: fired\n    " + probe + "\n",
                        backend, every);
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

// Resume at another world size (docs/checkpoint.md "Resume on another number of ranks"): a run
// on N ranks killed with SIGKILL resumes on M, its saved states folded in and the samples not yet
// read planned anew over the M ranks, to the "results" of an uninterrupted run bit for bit.
// SequenceProbe's order-sensitive hash proves that every sample was folded once, in dataset
// order; only its per_rank (the ranks' sample counts, a record of how the data was split) depends
// on the world size.
class ReshardTest : public CheckpointTest {
 protected:
  /// Probes A (kill_on `a`, once_file fired_a) and B (kill_on `b`, once_file fired_b); a
  /// checkpoint after every batch of 4; batches from sample 36 on sleep 0.1 s on their rank.
  fs::path reshard_config(std::int64_t a, std::int64_t b) {
    return write_config("reshard.yaml",
                        "  - type: SequenceProbe\n    name: A\n    once_file: fired_a\n"
                        "    kill_on: " +
                            std::to_string(a) +
                            "\n    slow_from: 36\n    batch_sleep: 0.1\n"
                            "  - type: SequenceProbe\n    name: B\n    once_file: fired_b\n"
                            "    kill_on: " +
                            std::to_string(b) + "\n",
                        "mpi", 1);
  }

  /// The uninterrupted results on one process (both probes disarmed), without per_rank.
  nlohmann::json single_process(const fs::path& cfg) {
    write_text(dir / "fired_a", "disarmed\n");
    write_text(dir / "fired_b", "disarmed\n");
    auto r = results(cfg, "reference.json", "--set checkpoint=null --set backend.type=nondist");
    fs::remove(dir / "fired_a");
    fs::remove(dir / "fired_b");
    return without_per_rank(r);
  }

  static nlohmann::json without_per_rank(nlohmann::json r) {
    for (const char* probe : {"A", "B"})
      if (r.contains(probe)) r[probe].erase("per_rank");
    return r;
  }

  /// A run on `np` ranks that a probe kills: no results, and at least one complete checkpoint.
  void killed(const fs::path& cfg, int np, const std::string& args, const char* fired) {
    const auto r = run(cfg, args + " -o " + (dir / "out.json").string(), np);
    EXPECT_NE(r.exit_code, 0) << r.err;
    EXPECT_FALSE(fs::exists(dir / "out.json"));
    EXPECT_TRUE(fs::exists(dir / fired)) << "the probe did not fire on " << np << " ranks";
    EXPECT_FALSE(steps(true).empty()) << "no checkpoint completed before the kill";
  }

  /// --resume on `np` ranks, which must finish: its results, without per_rank. Rank 0's
  /// progress bar (--progress on a pipe) must end at its total: the samples of its part of the
  /// plan, which resharding changes (the states it folds count), not its reader's block.
  nlohmann::json resumed(const fs::path& cfg, int np, int written_by) {
    const auto r = run(cfg, "--resume --progress -o " + (dir / "out.json").string(), np);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const std::regex bar(R"(\] +(\d+)%  (\d+)/(\d+) samples)");
    std::smatch last;
    for (auto it = std::sregex_iterator(r.err.begin(), r.err.end(), bar);
         it != std::sregex_iterator(); ++it)
      last = *it;
    EXPECT_FALSE(last.empty()) << "no progress bar: " << r.err;
    if (!last.empty()) {
      EXPECT_EQ(last[1], "100") << r.err;
      EXPECT_EQ(last[2], last[3]) << r.err;
    }
    if (written_by != np) {
      EXPECT_NE(r.err.find("written by " + std::to_string(written_by) +
                           (written_by == 1 ? " rank" : " ranks") +
                           ", its samples planned anew over " + std::to_string(np) + ")"),
                std::string::npos)
          << r.err;
    }
    if (!fs::exists(dir / "out.json")) return {};
    const auto got = nlohmann::json::parse(read_file(dir / "out.json"));
    EXPECT_EQ(got.at("run").at("world_size"), np);
    EXPECT_EQ(got.at("run").at("samples"), kSamples);
    fs::remove(dir / "out.json");
    return without_per_rank(got.at("results"));
  }
};

TEST_F(ReshardTest, AKilledRunResumesOnAnotherNumberOfRanksBitForBit) {
#ifndef TALLY_MPIEXEC
  FAIL() << "mpirun was not found when the tests were configured";
#else
  for (const auto& [from, to] : std::vector<std::pair<int, int> >{{4, 2}, {2, 4}, {3, 7}, {7, 1}}) {
    SCOPED_TRACE(std::to_string(from) + " -> " + std::to_string(to) + " ranks");
    fs::remove_all(dir / "ckpt");
    // Rank 1 of `from` dies in its third batch: two rounds of checkpoints came before it.
    // Its third batch of 4 begins 8 samples into its block, which begins at 60 / from.
    const std::int64_t kill = kSamples / from + 8;
    const auto cfg = reshard_config(kill, -1);
    const auto want = single_process(cfg);
    ASSERT_EQ(want.at("A").at("count"), kSamples);
    killed(cfg, from, "", "fired_a");
    expect_same(resumed(cfg, to, from), want);
    fs::remove(dir / "fired_a");
  }
#endif
}

// A chain of resumes: 3 ranks killed, resumed on 2 and killed again (its checkpoints then carry
// saved states that a rank has not folded in yet: they come after samples it still has to read),
// resumed on 4 to the end, and the finished run's last checkpoint recomputed on 1 rank.
TEST_F(ReshardTest, AChainOfResumesOnChangingWorldSizesGivesTheSameResults) {
#ifndef TALLY_MPIEXEC
  FAIL() << "mpirun was not found when the tests were configured";
#else
  const auto cfg = reshard_config(29, 50);
  const auto want = single_process(cfg);
  write_text(dir / "fired_b", "disarmed\n");  // B fires in the second run only
  killed(cfg, 3, "", "fired_a");
  fs::remove(dir / "fired_b");
  killed(cfg, 2, "--resume", "fired_b");
  // Run 2's checkpoint holds pending saved states (rank 0's shard carries run 1's rank 1 state).
  const auto last = steps(true).back();
  const auto meta = nlohmann::json::parse(read_file(dir / "ckpt" / last / "metadata.json"));
  EXPECT_EQ(meta.at("world_size"), 2);
  std::size_t pending_states = 0;
  for (const auto& shard : meta.at("shards"))
    for (const auto& p : shard.at("pending")) pending_states += p.contains("state") ? 1 : 0;
  EXPECT_GE(pending_states, 1u) << meta.dump(2);
  expect_same(resumed(cfg, 4, 2), want);
  expect_same(resumed(cfg, 1, 4), want);
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
