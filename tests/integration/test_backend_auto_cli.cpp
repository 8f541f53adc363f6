// `tally run` with backend: {type: auto}: alone it takes nondist, under `mpirun -np N` it takes
// mpi (nondist for a world of one); it says which, once, on rank 0, and the results JSON names the
// backend used. srun and torchrun end to end: tests/launchers.
#include "integration/cli_fixture.hpp"

namespace fs = std::filesystem;
using namespace tally::test;

namespace {

// No launcher variable from the environment ctest runs in reaches the command.
const std::string kNoLauncher =
    "env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u PMI_SIZE -u PMI_RANK "
    "-u RANK -u WORLD_SIZE -u MASTER_ADDR -u SLURM_PROCID -u SLURM_STEP_ID -u SLURM_NTASKS ";

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

class BackendAutoCli : public CliTest {
 protected:
};

}  // namespace

TEST_F(BackendAutoCli, AloneItIsNondist) {
  const auto cfg = config();
  const auto single = run_single(cfg);
  const auto out = dir / "auto.json";
  // --quiet hides the tables only: the choice is a notice on stderr.
  const auto r = run_command(kNoLauncher + kTally + " run -q " + cfg.string() +
                             " --set backend.type=auto -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "tally: backend auto -> nondist (no launcher variables)\n");
  const auto j = read_json(out);
  EXPECT_EQ(j["results"], single["results"]);
  EXPECT_EQ(j["run"]["backend"], "nondist");
  EXPECT_EQ(j["run"]["world_size"], 1);
}

TEST_F(BackendAutoCli, ParametersNondistDoesNotTakeAreLeftOutAndSaid) {
  const auto r = run_command(kNoLauncher + kTally + " run -q " +
                             config(kMetricsYaml, "backend: {type: auto, timeout: 30}\n").string() +
                             " -o " + (dir / "o.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err,
            "tally: backend auto -> nondist (no launcher variables); nondist takes no timeout\n");
}

TEST_F(BackendAutoCli, UnknownParameterIsAConfigError) {
  const auto r = run_command(kNoLauncher + kTally + " run -q " +
                             config(kMetricsYaml, "backend: {type: auto, timeuot: 30}\n").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count(r.err, "\n"), 1u) << r.err;
  EXPECT_NE(r.err.find("tally: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("eval.yaml:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("backend 'auto': unknown parameter 'timeuot'"), std::string::npos) << r.err;
}

TEST_F(BackendAutoCli, TorchrunVariablesOfAWorldOfOneAreNondist) {
  const auto out = dir / "t.json";
  const auto r = run_command(kNoLauncher +
                             "RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 "
                             "MASTER_PORT=29500 " +
                             kTally + " run -q " + config().string() +
                             " --set backend.type=auto -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err,
            "tally: backend auto -> nondist (RANK=0, WORLD_SIZE=1, LOCAL_RANK=0, "
            "MASTER_ADDR=127.0.0.1, MASTER_PORT=29500 (torchrun); a world of one)\n");
  EXPECT_EQ(read_json(out)["run"]["backend"], "nondist");
}

TEST_F(BackendAutoCli, BadLauncherVariableIsNamed) {
  const auto r = run_command(kNoLauncher + "RANK=0 WORLD_SIZE=two MASTER_ADDR=h " + kTally +
                             " run -q " + config().string() + " --set backend.type=auto");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tally: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("WORLD_SIZE must be an integer, found 'two'"), std::string::npos) << r.err;
}

TEST_F(BackendAutoCli, LaunchersThatDisagreeAreAConfigErrorNamingBoth) {
  // mpirun's rank 1 of 4 beside RANK/WORLD_SIZE without torchrun's signature (tally/launch.hpp):
  // no order says which started this process.
  const std::string vars =
      kNoLauncher + "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=4 RANK=3 WORLD_SIZE=8 ";
  const auto r = run_command(vars + kTally + " run -q " + config().string() +
                             " --set backend.type=auto -o " + (dir / "a.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count(r.err, "\n"), 1u) << r.err;
  EXPECT_NE(r.err.find("backend 'auto': two launchers disagree on this process's place: "
                       "OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=4 (mpirun) but RANK=3, "
                       "WORLD_SIZE=8 (torchrun)"),
            std::string::npos)
      << r.err;
  // The default nondist backend is refused rather than run alone on every rank.
  const auto n = run_command(vars + kTally + " run -q " + config().string() + " -o " +
                             (dir / "n.json").string());
  EXPECT_EQ(n.exit_code, 2) << n.err;
  EXPECT_NE(n.err.find("started as one of 8 ranks by a launcher"), std::string::npos) << n.err;
  EXPECT_FALSE(fs::exists(dir / "n.json"));
}

TEST_F(BackendAutoCli, ABatchScriptsSlurmVariablesAreNoLauncher) {
  // sbatch (or salloc) running tally once: SLURM_NTASKS without an srun step (SLURM_STEP_ID).
  const auto r = run_command(kNoLauncher + "SLURM_JOB_ID=5 SLURM_NTASKS=4 SLURM_PROCID=0 " +
                             kTally + " run -q " + config().string() +
                             " --set backend.type=auto -o " + (dir / "b.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "tally: backend auto -> nondist (no launcher variables)\n");
}

#ifdef TALLY_MPIEXEC
TEST_F(BackendAutoCli, UnderMpirunItIsMpi) {
  const auto cfg = config();
  const auto single = run_single(cfg);
  for (int np : {1, 2, 3, 4, 7}) {
    SCOPED_TRACE(np);
    const auto out = dir / ("np" + std::to_string(np) + ".json");
    const auto r = run_command(mpirun(np) + kTally + " run -q " + cfg.string() +
                               " --set backend.type=auto -o " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string expected =
        np == 1 ? "tally: backend auto -> nondist (OMPI_COMM_WORLD_RANK=0, "
                  "OMPI_COMM_WORLD_SIZE=1 (Open MPI's mpirun); a world of one)\n"
                : "tally: backend auto -> mpi (OMPI_COMM_WORLD_RANK=0, OMPI_COMM_WORLD_SIZE=" +
                      std::to_string(np) + " (Open MPI's mpirun))\n";
    EXPECT_EQ(count(r.err, "tally: backend auto -> "), 1u) << r.err;  // rank 0 only
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    const auto j = read_json(out);
    EXPECT_EQ(j["results"], single["results"]);  // exact
    EXPECT_EQ(j["run"]["backend"], np == 1 ? "nondist" : "mpi");
    EXPECT_EQ(j["run"]["world_size"], np);
  }
}

TEST_F(BackendAutoCli, BadConfigOnOneMpirunRankFailsEveryRankOnce) {
  // Rank 1's config does not load (a --set only it gets): it has no backend yet, joins the
  // others through the mpi backend auto stands for under mpirun, and every rank fails with its
  // message, printed once.
  const auto cfg = config();
  const auto out = dir / "never.json";
  const std::string run =
      kTally + " run -q " + cfg.string() + " --set backend.type=auto -o " + out.string();
  const auto r = run_command(mpirun(1) + run + " : -np 1 " + run + " --set backend.bogus=1" +
                             " : -np 1 " + run);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count(r.err, "tally: error:"), 1u) << r.err;
  EXPECT_NE(r.err.find("tally: error: rank 1: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unknown parameter 'bogus'"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}
#endif
