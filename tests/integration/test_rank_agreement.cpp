// Ranks that disagree, or fail before the run, under real `mpirun` ranks (issue 16, items 1-3).
// - Ranks must agree on the data (sample count, each field's dtype and per-sample shape) before
//   any shard is read: a rank that reads other data fails every rank with exit 2, naming it.
// - An error on one rank at any stage before the first collective (its --set, its plugin path,
//   its config file, a metric it cannot build, a data file it cannot open) reaches every rank at
//   once, printed once, naming the rank: nobody waits for backend.timeout.
// - backend.timeout bounds waiting for a dead or stuck peer, not for rank 0 computing.
// Each case is an MPMD job: one `tally run` command line per rank.
#include <chrono>
#include <numeric>

#include "integration/cli_fixture.hpp"
#include "support/file_checks.hpp"

namespace fs = std::filesystem;
using namespace tally::test;

namespace {

const std::string kTestkit = std::string(TALLY_TEST_PLUGIN_DIR) + "/testkit";

class RankAgreementTest : public CliTest {
 protected:
  struct Timed {
    ProcessResult r;
    double seconds;
  };

  /// `extra[r]`: the arguments only rank r adds to `tally run CONFIG -o OUT`.
  Timed run_mpmd(const fs::path& cfg, const std::vector<std::string>& extra) {
    std::string cmd = mpirun(1);
    for (std::size_t r = 0; r < extra.size(); ++r) {
      if (r > 0) cmd += " : -np 1 ";
      cmd += kTally + " run " + cfg.string() + " -o " + out().string() + " " + extra[r];
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto res = run_command(cmd);
    return {std::move(res),
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  }
  fs::path out() const { return dir / "out.json"; }

  /// testkit's SequenceProbe with `probe` (its parameters) over x = 0..59 in batches of 4, on the
  /// mpi backend with `timeout`: on 3 ranks, rank r reads [20r, 20r + 20).
  fs::path probe_config(const std::string& probe, double timeout) {
    std::vector<std::int64_t> x(60);
    std::iota(x.begin(), x.end(), 0);
    write_npy(dir / "x.npy", x);
    const auto cfg = dir / "probe.yaml";
    write_text(cfg,
               "data:\n  type: npy\n  batch_size: 4\n  fields: {x: x.npy}\n"
               "metrics:\n  - type: SequenceProbe\n    " +
                   probe + "\nplugins:\n  paths: [" + kTestkit +
                   "]\nbackend:\n  type: mpi\n  timeout: " + std::to_string(timeout) + "\n");
    return cfg;
  }

  /// The config of CliTest on the mpi backend with a long timeout: a test that waits for it
  /// instead of failing at once takes over a minute, and fails its time check.
  fs::path mpi_config() { return config(kMetricsYaml, "backend:\n  type: mpi\n  timeout: 120\n"); }

  /// Exit 2 well before the timeout, one error line (rank 0's) containing each of `parts`, and
  /// no results file.
  void expect_one_error(const Timed& t, const std::vector<std::string>& parts) {
    EXPECT_EQ(t.r.exit_code, 2) << t.r.err;
    EXPECT_LT(t.seconds, 60.0) << "the ranks waited for backend.timeout: " << t.r.err;
    for (const auto& p : parts)
      EXPECT_NE(t.r.err.find(p), std::string::npos) << p << "\n" << t.r.err;
    EXPECT_NE(t.r.err.find("tally: error:"), std::string::npos) << t.r.err;
    EXPECT_EQ(t.r.err.find("tally: error:"), t.r.err.rfind("tally: error:"))
        << "printed more than once:\n"
        << t.r.err;
    EXPECT_FALSE(fs::exists(out()));
  }
};

}  // namespace

TEST_F(RankAgreementTest, ARankThatReadsADatasetOfAnotherLengthFailsEveryRankBeforeReading) {
  const auto other = make_dataset(60, 5);
  write_npy(dir / "scores60.npy", other.scores, {other.n, other.c});
  write_npy(dir / "labels60.npy", other.labels);
  const std::string sixty =
      "--set data.fields.pred_scores=scores60.npy --set data.fields.gt_labels=labels60.npy";
  // Rank 1 of 3 (the middle of the data), then rank 0 itself (the reference is rank 0's).
  expect_one_error(run_mpmd(mpi_config(), {"", sixty, ""}),
                   {"rank 1 reads a dataset of 60 samples, rank 0 reads 50", "nothing was read"});
  expect_one_error(run_mpmd(mpi_config(), {sixty, "", ""}),
                   {"ranks 1, 2 read a dataset of 50 samples, rank 0 reads 60"});
}

TEST_F(RankAgreementTest, ARankThatReadsFieldsOfAnotherShapeOrDtypeFailsEveryRankBeforeReading) {
  const auto six = make_dataset(50, 6);  // 6 score columns instead of 5
  write_npy(dir / "scores6.npy", six.scores, {six.n, six.c});
  expect_one_error(run_mpmd(mpi_config(), {"", "", "--set data.fields.pred_scores=scores6.npy"}),
                   {"rank 2 reads data of another layout than rank 0",
                    "rank 2: {pred_scores: f32 (6,); gt_labels: i64 ()}",
                    "rank 0: {pred_scores: f32 (5,); gt_labels: i64 ()}"});
  const auto five = make_dataset(50, 5);
  std::vector<double> wide(five.scores.begin(), five.scores.end());  // float64 scores
  write_npy(dir / "scores64.npy", wide, {five.n, five.c});
  expect_one_error(run_mpmd(mpi_config(), {"", "--set data.fields.pred_scores=scores64.npy"}),
                   {"rank 1 reads data of another layout than rank 0", "pred_scores: f64 (5,)"});
}

TEST_F(RankAgreementTest, AnErrorOnOneRankBeforeTheRunReachesEveryRankAtOnce) {
  const auto cfg = mpi_config();
  struct Case {
    std::string what, args, expect;
  };
  const std::vector<Case> cases = {
      // Before the rank has a backend: its config does not load (it joins the others to fail).
      {"a bad --set", "--set data.batch_size=many", "batch_size"},
      {"an unknown key", "--set data.bogus=1", "bogus"},
      {"a plugin folder it lacks", "--set plugins.paths=[/nonexistent/plugins]",
       "/nonexistent/plugins"},
      {"a bad backend parameter", "--set backend.chunk_bytes=0", "chunk_bytes"},
      // After it has one: a metric it cannot make, a data file it cannot open.
      {"a metric parameter", "--set metrics.0.topk=[0]", "topk"},
      {"a missing data file", "--set data.fields.gt_labels=absent.npy", "absent.npy"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    for (const int bad : {1, 2}) {
      SCOPED_TRACE("rank " + std::to_string(bad));
      std::vector<std::string> extra(3);
      extra[static_cast<std::size_t>(bad)] = c.args;
      expect_one_error(run_mpmd(cfg, extra), {"rank " + std::to_string(bad) + ": ", c.expect});
    }
  }
}

TEST_F(RankAgreementTest, AConfigFileMissingOnOneRankStopsEveryRankNamingIt) {
  // The rank cannot read its config at all, so it cannot know which backend to join: it prints
  // its own error naming itself and exits, and mpirun stops the others. Not a wait for the timeout.
  const auto cfg = mpi_config();
  std::string cmd = mpirun(1) + kTally + " run " + cfg.string() + " -o " + out().string() +
                    " : -np 1 " + kTally + " run " + (dir / "absent.yaml").string() + " -o " +
                    out().string();
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_command(cmd);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_LT(seconds, 60.0) << r.err;
  EXPECT_NE(r.err.find("tally: error: rank 1: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("absent.yaml"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out()));
}

TEST_F(RankAgreementTest, RankZeroComputingLongerThanTheTimeoutIsAliveNotHung) {
  // backend.timeout 1 s; rank 0 computes for 3 s: the others take its heartbeats and wait.
  const auto cfg = probe_config("compute_sleep: 3", 1);
  for (const int np : {2, 3}) {
    SCOPED_TRACE(np);
    const auto r =
        run_command(mpirun(np) + kTally + " run -q " + cfg.string() + " -o " + out().string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = read_json(out());
    EXPECT_EQ(j["results"]["SequenceProbe"]["count"], 60);
    EXPECT_EQ(j["results"]["SequenceProbe"]["sum"], 60 * 59 / 2);
    fs::remove(out());
  }
}

TEST_F(RankAgreementTest, ARankReadingLongerThanTheTimeoutIsWaitedForWhileItReadsBatches) {
  // backend.timeout 2 s; rank 2 of 3 reads 5 batches of 0.6 s each (3 s in all): it is slow but
  // moving, so the others, done at once, take its heartbeats and wait for it.
  const auto cfg = probe_config("batch_sleep: 0.6\n    slow_from: 40", 2);
  const auto r =
      run_command(mpirun(3) + kTally + " run -q " + cfg.string() + " -o " + out().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = read_json(out());
  EXPECT_EQ(j["results"]["SequenceProbe"]["count"], 60);
  EXPECT_EQ(j["results"]["SequenceProbe"]["per_rank"], nlohmann::json::parse("[20, 20, 20]"));
}

TEST_F(RankAgreementTest, ACommandLineErrorIsPrintedOnceNamingTheRankThatMadeIt) {
  // On rank 1 only: its message, naming it. On every rank: one message, rank 0's.
  const auto cfg = mpi_config();
  auto t = run_mpmd(cfg, {"", "--bogus-flag", ""});
  expect_one_error(t, {"rank 1: ", "--bogus-flag"});
  t = run_mpmd(cfg, {"--bogus-flag", "--bogus-flag", "--bogus-flag"});
  expect_one_error(t, {"--bogus-flag"});
  EXPECT_EQ(t.r.err.find("rank "), std::string::npos) << t.r.err;
}

TEST_F(RankAgreementTest, TheNondistBackendUnderALauncherOfSeveralRanksIsRefused) {
  // Every rank would evaluate the whole dataset alone and write the same outputs.
  const auto r =
      run_command(mpirun(3) + kTally + " run -q " + config().string() + " -o " + out().string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("started as one of 3 ranks by a launcher, but the backend is nondist"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("tally: error:"), r.err.rfind("tally: error:")) << r.err;
  EXPECT_FALSE(fs::exists(out()));
}

TEST_F(RankAgreementTest, ARankThatNeverStartsTheMpiBackendDoesNotLeaveTheOthersWaiting) {
  // Rank 1 runs another command and never starts MPI: rank 0 gives up after the start-up
  // deadline (the larger of backend.timeout and backend.start_timeout) at the latest.
  const auto cfg =
      config(kMetricsYaml, "backend:\n  type: mpi\n  timeout: 3\n  start_timeout: 5\n");
  for (const std::string& other : {"validate " + cfg.string()}) {
    SCOPED_TRACE(other);
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = run_command(mpirun(1) + kTally + " run -q " + cfg.string() + " -o " +
                               out().string() + " : -np 1 " + kTally + " " + other);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(r.exit_code, 0) << r.err;
    // Either rank 0 gives up naming what it waited for ("starting MPI ..."), or mpirun, seeing
    // rank 1 exit without starting MPI, stops the job first: which comes first is timing.
    EXPECT_LT(seconds, 90.0) << r.err;
    EXPECT_FALSE(fs::exists(out()));
  }
}

// Issue 32, item 11: every setting that changes what the ranks do together (the records and
// intervals collectives, the paired tests, checkpoints, the backend's deadlines) or what is
// written (every output path, the regression check) is compared in the start exchange. A rank
// that gives another one, or gives one that rank 0 lacks, or lacks one that rank 0 gives, fails
// every rank at once with exit 2, naming that rank, the setting and both values; nothing is
// written (before, rank 0 wrote its results and the job waited for backend.timeout).
TEST_F(RankAgreementTest, ASettingThatDiffersOnOneRankFailsEveryRankAtStartNamingItAndTheRank) {
  const auto plain = mpi_config();
  const auto base = dir / "base.json";
  ASSERT_EQ(
      tally("run -q " + config(kMetricsYaml, "", "single.yaml").string() + " -o " + base.string())
          .exit_code,
      0);
  fs::copy_file(base, dir / "other.json");
  const auto regression = config(
      kMetricsYaml,
      "backend:\n  type: mpi\n  timeout: 120\nregression:\n  baseline: " + base.string() + "\n",
      "regression.yaml");
  const auto checkpointed = config(kMetricsYaml,
                                   "backend:\n  type: mpi\n  timeout: 120\ncheckpoint:\n  dir: " +
                                       (dir / "ckpt").string() + "\n  every_n_batches: 2\n",
                                   "ckpt.yaml");
  const auto rec = (dir / "r.rec").string();
  const auto md = (dir / "r.md").string();
  struct Case {
    fs::path cfg;
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {plain, "--set output.records=" + rec,
       "output.records is '" + rec + "', rank 0's is not set"},
      {plain, "--set intervals.resamples=50",
       "intervals is 'confidence 0.95, resamples 50, seed 0, method percentile', rank 0's is not "
       "set"},
      {plain, "--markdown " + md, "--markdown is '" + md + "', rank 0's is not set"},
      {plain, "--set backend.timeout=60", "backend.timeout is '60', rank 0's is '120'"},
      {plain, "--set backend.chunk_bytes=64", "backend.chunk_bytes is 64, rank 0's is "},
      {regression, "--set regression.rtol=0.5", "regression.rtol is '0.5', rank 0's is not set"},
      {regression, "--set regression.baseline=other.json",
       "regression.baseline is '" + (dir / "other.json").string() + "', rank 0's is '" +
           base.string() + "'"},
      {regression, "--update-baseline", "--update-baseline is 'given', rank 0's is not set"},
      {checkpointed, "--set checkpoint.every_n_batches=3",
       "checkpoint.every_n_batches is '3', rank 0's is '2'"},
  };
  int bad = 1;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    std::vector<std::string> extra(3);
    extra[static_cast<std::size_t>(bad)] = c.args;
    expect_one_error(run_mpmd(c.cfg, extra),
                     {"start failed: rank " + std::to_string(bad) + "'s " + c.expect,
                      "nothing was read or written"});
    for (const auto& p : {rec, md}) EXPECT_FALSE(fs::exists(p)) << p;
    EXPECT_FALSE(fs::exists(dir / "ckpt") && !fs::is_empty(dir / "ckpt"));
    EXPECT_TRUE(temporaries(dir.path).empty());
    bad = 3 - bad;
  }
  // Given on rank 0 alone: the first other rank is named, and the others that differ.
  expect_one_error(run_mpmd(plain, {"--set output.records=" + rec, "", ""}),
                   {"start failed: rank 1's output.records is not set, rank 0's is '" + rec + "'",
                    "(ranks 1, 2 differ from rank 0)"});
  EXPECT_FALSE(fs::exists(rec));
}
