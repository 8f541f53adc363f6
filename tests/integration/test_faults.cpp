// Faults in distributed runs, under real `mpirun` ranks: a rank that is killed (SIGKILL), that
// crashes (exits at once, skipping every cleanup) or that hangs makes every rank stop, within a
// bounded time, with a message naming the failed rank; the results file is not written; and no
// process of the run is left behind. The faults come from testkit's SequenceProbe (kill_on,
// exit_on, hang_on: the rank that reads that sample value misbehaves). An exception in a metric
// on one rank is covered by test_mpi (BadDataOnOneRankFailsEveryRankWithOneMessage).
#include <chrono>
#include <numeric>

#include "integration/cli_fixture.hpp"

namespace fs = std::filesystem;
using namespace tally::test;

namespace {

const std::string kTestkit = std::string(TALLY_TEST_PLUGIN_DIR) + "/testkit";

class FaultTest : public ::testing::Test {
 protected:
  TempDir dir;

  /// 60 samples x = 0..59 in batches of 4; on 3 ranks, rank r reads [20r, 20r + 20).
  fs::path config(const std::string& probe, double timeout = 60) {
    std::vector<std::int64_t> x(60);
    std::iota(x.begin(), x.end(), 0);
    write_npy(dir / "x.npy", x);
    const auto p = dir / "faults.yaml";
    write_text(p,
               "data:\n  type: npy\n  batch_size: 4\n  fields: {x: x.npy}\n"
               "metrics:\n  - type: SequenceProbe\n    " +
                   probe + "\nplugins:\n  paths: [" + kTestkit +
                   "]\nbackend:\n  type: mpi\n  timeout: " + std::to_string(timeout) + "\n");
    return p;
  }

  struct Timed {
    ProcessResult r;
    double seconds;
  };
  Timed run(const fs::path& cfg, int np = 3) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run_command(mpirun(np) + kTally + " run " + cfg.string() + " -o " +
                         (dir / "out.json").string());
    return {std::move(r),
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  }

  /// No process of this run (they all name the config path) is left.
  void expect_no_process_left(const fs::path& cfg) {
    // "[f]" keeps pgrep from matching the shell that runs it.
    const auto pattern = (cfg.parent_path() / ("[f]" + cfg.filename().string().substr(1))).string();
    const auto r = run_command("pgrep -f '" + pattern + "' || true");
    EXPECT_EQ(r.out, "") << "processes left behind: " << r.out;
  }
};

}  // namespace

TEST_F(FaultTest, AKilledRankStopsEveryRank) {
#ifndef TALLY_MPIEXEC
  FAIL() << "mpirun was not found when the tests were configured";
#else
  const auto cfg = config("kill_on: 30");  // rank 1 of 3
  const auto t = run(cfg);
  EXPECT_NE(t.r.exit_code, 0) << t.r.err;
  EXPECT_LT(t.seconds, 30.0) << "the run took " << t.seconds << " s";
  const auto all = t.r.out + t.r.err;
  EXPECT_NE(all.find("rank 1"), std::string::npos) << all;
  EXPECT_NE(all.find("signal 9"), std::string::npos) << all;
  EXPECT_FALSE(fs::exists(dir / "out.json"));
  expect_no_process_left(cfg);
#endif
}

TEST_F(FaultTest, ACrashedRankStopsEveryRank) {
#ifndef TALLY_MPIEXEC
  FAIL() << "mpirun was not found when the tests were configured";
#else
  const auto cfg = config("exit_on: 45");  // rank 2 of 3 exits with code 7
  const auto t = run(cfg);
  EXPECT_NE(t.r.exit_code, 0) << t.r.err;
  EXPECT_LT(t.seconds, 30.0) << "the run took " << t.seconds << " s";
  const auto all = t.r.out + t.r.err;
  // Open MPI names the process ([[job,vpid],2] or "rank 2") and its exit code.
  EXPECT_TRUE(all.find("rank 2") != std::string::npos || all.find(",2]") != std::string::npos)
      << all;
  EXPECT_NE(all.find("7"), std::string::npos) << all;
  EXPECT_FALSE(fs::exists(dir / "out.json"));
  expect_no_process_left(cfg);
#endif
}

TEST_F(FaultTest, AHungRankMakesTheOthersTimeOut) {
#ifndef TALLY_MPIEXEC
  FAIL() << "mpirun was not found when the tests were configured";
#else
  for (const int hung : {0, 1}) {
    SCOPED_TRACE("hung rank " + std::to_string(hung));
    // The hung rank sleeps for an hour in add(); the others wait for it after reading their own
    // shards until backend.timeout (2 s) passes without a heartbeat from it.
    const auto cfg = config("hang_on: " + std::to_string(20 * hung + 5), 2.0);
    const auto t = run(cfg);
    EXPECT_NE(t.r.exit_code, 0) << t.r.err;
    EXPECT_LT(t.seconds, 2.0 + 28.0) << "the run took " << t.seconds << " s";
    const int waiter = hung == 0 ? 1 : 0;
    // It stops reading batches, so it falls silent; the others wait for its heartbeats.
    // The message names the engine's collective and its purpose, then the MPI call.
    EXPECT_NE(t.r.err.find("mpi backend: rank " + std::to_string(waiter) +
                           " of 3: run_on_every_rank (reading the shards): MPI_Recv of a "
                           "heartbeat from rank " +
                           std::to_string(hung) + " (still reading)"),
              std::string::npos)
        << t.r.err;
    EXPECT_NE(t.r.err.find("did not complete within 2 s (backend.timeout)"), std::string::npos)
        << t.r.err;
    // Reported once: the other waiting rank gives up 3 s later, after mpirun has stopped it.
    EXPECT_EQ(t.r.err.find("tally: error:"), t.r.err.rfind("tally: error:")) << t.r.err;
    EXPECT_FALSE(fs::exists(dir / "out.json"));
    expect_no_process_left(cfg);
  }
#endif
}

TEST_F(FaultTest, TheTimeoutMustBePositive) {
  const auto cfg = config("fail_on: -1", -1.0);
  const auto r = run_command(kTally + " run " + cfg.string() + " --set backend.type=mpi -o " +
                             (dir / "out.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("timeout"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("must be a positive number of seconds"), std::string::npos) << r.err;
}
