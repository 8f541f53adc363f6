// The launcher's environment (engine/include/tally/launch.hpp): the one table of launchers and
// its precedence, from fake environments. The variables each launcher sets are from its
// documentation: torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_RUN_ID), Open MPI's mpirun (OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK, PMIX_RANK),
// MPICH's hydra (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID), srun (SLURM_PROCID, SLURM_NTASKS,
// SLURM_LOCALID, SLURM_STEP_ID, SLURM_JOB_ID; PMIX_RANK with --mpi=pmix, PMI_RANK/PMI_SIZE with
// --mpi=pmi2).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "support/expect_error.hpp"
#include "tally/launch.hpp"
#include "tally/sdk/error.hpp"

namespace {

using tally::launch::GetEnv;
using tally::launch::LaunchEnv;
using tally::test::error_of;
using Vars = std::map<std::string, std::string>;

GetEnv env_of(Vars vars) {
  auto shared = std::make_shared<Vars>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

LaunchEnv read(const Vars& vars) { return tally::launch::read(env_of(vars), "x: "); }

std::string err(const Vars& vars) {
  return error_of<tally::ConfigError>([&] { read(vars); });
}

const Vars kSrunStep{{"SLURM_PROCID", "3"},  {"SLURM_NTASKS", "4"},   {"SLURM_LOCALID", "1"},
                     {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_ID", "991"}, {"SLURM_NODEID", "1"}};

Vars with(Vars a, const Vars& b) {
  for (const auto& [k, v] : b) a[k] = v;
  return a;
}

}  // namespace

// ---- each launcher alone

TEST(LaunchEnv, NoLauncherIsAWorldOfOne) {
  const LaunchEnv e = read({});
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.world_size, 1);
  EXPECT_FALSE(e.local_rank.has_value());
  EXPECT_TRUE(e.source.empty());
  EXPECT_TRUE(e.launcher.empty());
  EXPECT_FALSE(e.under_mpi);
  EXPECT_TRUE(e.job_id.empty());
  EXPECT_EQ(tally::launch::launcher_world_size(env_of({})), 1);
  EXPECT_EQ(tally::launch::launcher_rank(env_of({})), -1);
}

TEST(LaunchEnv, Torchrun) {
  const LaunchEnv e = read({{"RANK", "5"},
                            {"WORLD_SIZE", "8"},
                            {"LOCAL_RANK", "1"},
                            {"MASTER_ADDR", "node1"},
                            {"TORCHELASTIC_RUN_ID", "abc"}});
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.source, "RANK=5, WORLD_SIZE=8, LOCAL_RANK=1 (torchrun)");
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_FALSE(e.under_mpi);
  EXPECT_EQ(e.job_id, "torchrun:abc");
}

TEST(LaunchEnv, RankAndWorldSizeByHand) {
  // The env:// convention without torchrun: a launcher of its own ("env"), local rank optional.
  const LaunchEnv e = read({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(e.launcher, "env");
  EXPECT_EQ(e.world_size, 2);
  EXPECT_FALSE(e.local_rank.has_value());
  EXPECT_EQ(e.source, "RANK=0, WORLD_SIZE=2 (torchrun)");  // gloo's messages quote it so
}

TEST(LaunchEnv, OpenMpi) {
  const LaunchEnv e = read({{"OMPI_COMM_WORLD_RANK", "1"},
                            {"OMPI_COMM_WORLD_SIZE", "2"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                            {"PMIX_RANK", "1"},
                            {"OMPI_MCA_ess_base_jobid", "77"}});
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 2);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.launcher, "mpirun");
  EXPECT_HAS(e.source, "(mpirun)");
  EXPECT_EQ(e.agreeing, std::vector<std::string>{"PMIx"});
  EXPECT_TRUE(e.under_mpi);
  EXPECT_EQ(e.job_id, "ompi:77");
}

TEST(LaunchEnv, MpichHydra) {
  const LaunchEnv e = read({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "0"}});
  EXPECT_EQ(e.launcher, "PMI");
  EXPECT_TRUE(e.under_mpi);
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.world_size, 3);
  EXPECT_EQ(e.local_rank, 0);
}

TEST(LaunchEnv, PmixAloneGivesARankButNoSize) {
  const LaunchEnv e = read({{"PMIX_RANK", "2"}, {"PMIX_NAMESPACE", "prterun-1"}});
  EXPECT_EQ(e.launcher, "PMIx");
  EXPECT_TRUE(e.under_mpi);
  EXPECT_EQ(e.rank, 2);
  EXPECT_FALSE(e.size_known());
  EXPECT_EQ(e.job_id, "pmix:prterun-1");
  EXPECT_EQ(tally::launch::launcher_world_size(env_of({{"PMIX_RANK", "2"}})), 1);
  EXPECT_EQ(tally::launch::launcher_rank(env_of({{"PMIX_RANK", "2"}})), 2);
}

TEST(LaunchEnv, SrunStep) {
  const LaunchEnv e = read(kSrunStep);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.launcher, "srun");
  EXPECT_HAS(e.source, "(Slurm)");
  EXPECT_TRUE(e.srun_step);
  EXPECT_FALSE(e.under_mpi);
  EXPECT_EQ(e.job_id, "slurm:991.0");
}

TEST(LaunchEnv, SlurmWithoutAStepIsNoLauncher) {
  // An sbatch script (or an salloc shell) that runs tally once: SLURM_NTASKS counts the tasks
  // srun would start, not this process; the batch step even sets SLURM_PROCID=0.
  const Vars batch{
      {"SLURM_JOB_ID", "7"}, {"SLURM_NTASKS", "4"}, {"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"}};
  const LaunchEnv e = read(batch);
  EXPECT_TRUE(e.launcher.empty());
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.job_id, "slurm:7");
  EXPECT_EQ(tally::launch::launcher_world_size(env_of(batch)), 1);
  // Nor is a lone SLURM_NTASKS incomplete there: it is not a launcher's at all.
  EXPECT_TRUE(read({{"SLURM_NTASKS", "2"}}).launcher.empty());
}

// ---- several launchers: nesting and stray variables

TEST(LaunchEnv, SrunWithPmixTakesTheLocalRankFromSlurm) {
  const LaunchEnv e =
      read(with(kSrunStep, {{"PMIX_RANK", "3"}, {"PMIX_NAMESPACE", "slurm.pmix.991.0"}}));
  EXPECT_EQ(e.launcher, "PMIx");
  EXPECT_EQ(e.world_size, 4);  // PMIx gives none: srun's, which agrees
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.agreeing, std::vector<std::string>{"srun"});
  EXPECT_TRUE(e.under_mpi);
  EXPECT_TRUE(e.srun_step);
}

TEST(LaunchEnv, SrunWithPmi2) {
  const LaunchEnv e = read(with(kSrunStep, {{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}}));
  EXPECT_EQ(e.launcher, "PMI");
  EXPECT_TRUE(e.srun_step);
  EXPECT_EQ(e.local_rank, 1);
}

TEST(LaunchEnv, MpirunUnderSlurmIsMpirun) {
  // mpirun in an allocation starts its daemons with srun: SLURM_* number the daemons (one step
  // of 2 nodes), OMPI_* the ranks. mpirun is inside srun: its variables win, no conflict.
  const LaunchEnv e = read({{"OMPI_COMM_WORLD_RANK", "5"},
                            {"OMPI_COMM_WORLD_SIZE", "8"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                            {"SLURM_PROCID", "1"},
                            {"SLURM_NTASKS", "2"},
                            {"SLURM_LOCALID", "0"},
                            {"SLURM_STEP_ID", "0"},
                            {"SLURM_JOB_ID", "12"}});
  EXPECT_EQ(e.launcher, "mpirun");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_TRUE(e.agreeing.empty());
  EXPECT_FALSE(e.srun_step);
  // Hydra under Slurm likewise.
  EXPECT_EQ(read(with(kSrunStep, {{"PMI_RANK", "6"}, {"PMI_SIZE", "16"}})).rank, 6);
}

TEST(LaunchEnv, MpirunStartingTorchrunIsTorchrunsWorker) {
  // mpirun starts one torchrun per node; each starts 2 workers. A worker inherits mpirun's
  // variables (its agent's place: rank 1 of 4) and has torchrun's own (worker 3 of 8).
  const LaunchEnv e = read({{"OMPI_COMM_WORLD_RANK", "1"},
                            {"OMPI_COMM_WORLD_SIZE", "4"},
                            {"PMIX_RANK", "1"},
                            {"RANK", "3"},
                            {"WORLD_SIZE", "8"},
                            {"LOCAL_RANK", "1"},
                            {"MASTER_ADDR", "node0"},
                            {"TORCHELASTIC_RUN_ID", "job"}});
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_FALSE(e.under_mpi);  // the worker is no MPI process: auto must not pick mpi
}

TEST(LaunchEnv, SrunStartingTorchrunIsTorchrunsWorker) {
  const LaunchEnv e = read(with(
      kSrunStep, {{"RANK", "7"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "3"}, {"MASTER_ADDR", "n"}}));
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 7);
  EXPECT_EQ(e.world_size, 16);
  EXPECT_EQ(e.local_rank, 3);
  EXPECT_EQ(e.job_id, "slurm:991.0");
}

TEST(LaunchEnv, AStrayRankUnderSrunIsIgnored) {
  // A RANK left in the environment (no WORLD_SIZE): srun's step is the launcher.
  for (const char* stray : {"RANK", "WORLD_SIZE", "LOCAL_RANK"}) {
    const LaunchEnv e = read(with(kSrunStep, {{stray, "0"}}));
    EXPECT_EQ(e.launcher, "srun") << stray;
    EXPECT_EQ(e.rank, 3) << stray;
    EXPECT_EQ(e.world_size, 4) << stray;
  }
  // Under mpirun too, and a stray incomplete PMI beside.
  const LaunchEnv m = read({{"OMPI_COMM_WORLD_RANK", "1"},
                            {"OMPI_COMM_WORLD_SIZE", "2"},
                            {"RANK", "0"},
                            {"PMI_RANK", "0"}});
  EXPECT_EQ(m.launcher, "mpirun");
  EXPECT_EQ(m.rank, 1);
}

TEST(LaunchEnv, RankAndWorldSizeThatAgreeAreAWrappers) {
  // A wrapper under srun that sets RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS.
  const LaunchEnv e = read(with(kSrunStep, {{"RANK", "3"}, {"WORLD_SIZE", "4"}}));
  EXPECT_EQ(e.launcher, "srun");
  EXPECT_EQ(e.agreeing, std::vector<std::string>{"env"});
  const LaunchEnv m = read({{"OMPI_COMM_WORLD_RANK", "1"},
                            {"OMPI_COMM_WORLD_SIZE", "2"},
                            {"RANK", "1"},
                            {"WORLD_SIZE", "2"},
                            {"LOCAL_RANK", "0"}});
  EXPECT_EQ(m.launcher, "mpirun");
  EXPECT_EQ(m.local_rank, 0);  // mpirun gives none here: the wrapper's
}

// ---- conflicts

TEST(LaunchEnv, RankAndWorldSizeThatDisagreeAreAConflict) {
  // Without torchrun's signature nothing says whether RANK and WORLD_SIZE are a wrapper's for
  // this process or an outer shell's left over: both named, no guess.
  std::string m = err({{"OMPI_COMM_WORLD_RANK", "1"},
                       {"OMPI_COMM_WORLD_SIZE", "4"},
                       {"RANK", "3"},
                       {"WORLD_SIZE", "8"}});
  EXPECT_HAS(m, "x: two launchers disagree on this process's place");
  EXPECT_HAS(m, "OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=4 (mpirun)");
  EXPECT_HAS(m, "RANK=3, WORLD_SIZE=8 (torchrun) (without TORCHELASTIC_RUN_ID or MASTER_ADDR");
  EXPECT_HAS(m, "unset the variables");
  // mpirun in a shell that had exported RANK=0 WORLD_SIZE=1.
  EXPECT_HAS(err({{"OMPI_COMM_WORLD_RANK", "1"},
                  {"OMPI_COMM_WORLD_SIZE", "2"},
                  {"RANK", "0"},
                  {"WORLD_SIZE", "1"}}),
             "two launchers disagree");
  EXPECT_HAS(err(with(kSrunStep, {{"RANK", "0"}, {"WORLD_SIZE", "4"}})),
             "SLURM_PROCID=3, SLURM_NTASKS=4, SLURM_LOCALID=1 (Slurm) but RANK=0, WORLD_SIZE=4");
  // The non-throwing readers: no rank, and the larger world (the error paths join the others
  // or refuse a world-of-one backend rather than run alone).
  const GetEnv conflict =
      env_of({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"RANK", "1"}, {"WORLD_SIZE", "3"}});
  EXPECT_EQ(tally::launch::launcher_world_size(conflict), 3);
  EXPECT_EQ(tally::launch::launcher_rank(conflict), -1);
  // A wrong value alone: none.
  EXPECT_EQ(tally::launch::launcher_world_size(env_of({{"RANK", "0"}, {"WORLD_SIZE", "x"}})), 1);
  EXPECT_EQ(tally::launch::launcher_world_size(env_of({{"RANK", "0"}})), 1);
}

TEST(LaunchEnv, TwoMpiLaunchersThatDisagreeAreAConflict) {
  EXPECT_HAS(err({{"OMPI_COMM_WORLD_RANK", "1"},
                  {"OMPI_COMM_WORLD_SIZE", "4"},
                  {"PMI_RANK", "0"},
                  {"PMI_SIZE", "4"}}),
             "OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=4 (mpirun) but PMI_RANK=0, PMI_SIZE=4 "
             "(MPICH/Intel MPI)");
  EXPECT_HAS(
      err({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"PMIX_RANK", "2"}}),
      "but PMIX_RANK=2 (PMIx)");
}

// ---- wrong values

TEST(LaunchEnv, IncompleteLauncherAloneIsAConfigError) {
  std::string m = err({{"RANK", "1"}});
  EXPECT_HAS(m, "x: RANK is set but WORLD_SIZE is not");
  EXPECT_HAS(m, "LOCAL_RANK");
  EXPECT_HAS(err({{"WORLD_SIZE", "2"}}), "WORLD_SIZE is set but RANK is not");
  EXPECT_HAS(err(with(kSrunStep, {{"SLURM_PROCID", ""}})), "SLURM_PROCID");
  Vars no_procid = kSrunStep;
  no_procid.erase("SLURM_PROCID");
  EXPECT_HAS(err(no_procid), "SLURM_NTASKS is set but SLURM_PROCID is not");
  EXPECT_HAS(err({{"OMPI_COMM_WORLD_SIZE", "2"}}),
             "OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not");
  // An incomplete one whose value is no integer says that first.
  EXPECT_HAS(err({{"OMPI_COMM_WORLD_SIZE", "2x"}}),
             "OMPI_COMM_WORLD_SIZE must be an integer, found '2x'");
}

TEST(LaunchEnv, ValuesOutOfRangeOrNotIntegersAreConfigErrors) {
  EXPECT_HAS(err({{"RANK", "one"}, {"WORLD_SIZE", "2"}}),
             "x: the launcher variable RANK must be an integer, found 'one'");
  EXPECT_HAS(err({{"RANK", "1x"}, {"WORLD_SIZE", "2"}}), "RANK must be an integer, found '1x'");
  EXPECT_HAS(err({{"RANK", ""}, {"WORLD_SIZE", "2"}}), "RANK must be an integer, found ''");
  EXPECT_HAS(err({{"RANK", " 1"}, {"WORLD_SIZE", "2"}}), "found ' 1'");
  EXPECT_HAS(err({{"RANK", "99999999999"}, {"WORLD_SIZE", "2"}}), "must be an integer");
  EXPECT_HAS(err({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), "RANK=2 is outside [0, WORLD_SIZE=2)");
  EXPECT_HAS(err({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}), "RANK=-1 is outside [0, WORLD_SIZE=2)");
  EXPECT_HAS(err({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), "WORLD_SIZE=0 must be at least 1");
  EXPECT_HAS(err({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}}),
             "LOCAL_RANK=2 is outside [0, WORLD_SIZE=2)");
  EXPECT_HAS(err({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "x"}}),
             "OMPI_COMM_WORLD_SIZE must be an integer, found 'x'");
  EXPECT_HAS(err({{"PMIX_RANK", "-3"}}), "PMIX_RANK=-3 is negative");
  EXPECT_HAS(err(with(kSrunStep, {{"SLURM_NTASKS", "four"}})), "SLURM_NTASKS must be an integer");
  // A job id on several lines is one line.
  EXPECT_EQ(read({{"TORCHELASTIC_RUN_ID", "a\nb"}}).job_id, "torchrun:a b");
}
