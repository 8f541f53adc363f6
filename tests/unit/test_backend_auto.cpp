// backend: {type: auto}: the choice from a launcher's environment (engine/src/backend_auto.hpp),
// from fake environments, and what the evaluator makes of auto's parameters.
#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "backend_auto.hpp"
#include "config.hpp"
#include "support/expect_error.hpp"
#include "tally/registry.hpp"
#include "tally/sdk/error.hpp"

namespace {

using Vars = std::map<std::string, std::string>;

tally::EnvLookup fake(const Vars& vars) {
  return [&vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

tally::BackendChoice choose(const Vars& vars) { return tally::choose_backend(fake(vars)); }

// `f` throws a ConfigError whose message holds every one of `parts`.
void expect_config_error(const std::function<void()>& f, std::initializer_list<const char*> parts) {
  const std::string msg = tally::test::error_of<tally::ConfigError>(f);
  for (const char* part : parts) EXPECT_HAS(msg, part);
}

TEST(BackendAuto, NoLauncherIsNondist) {
  const auto c = choose({});
  EXPECT_EQ(c.type, "nondist");
  EXPECT_EQ(c.reason, "no launcher variables");
  // A batch script's own variables (sbatch, no srun step) are no launcher of this process.
  EXPECT_EQ(choose({{"SLURM_JOB_ID", "7"}, {"SLURM_NTASKS", "4"}, {"SLURM_PROCID", "0"}}).type,
            "nondist");
}

TEST(BackendAuto, RankAndWorldSizeByHandIsGloo) {
  // RANK and WORLD_SIZE without torchrun's signature are a launcher as every other part of tally
  // reads them (tally/launch.hpp): gloo, which meets at MASTER_ADDR or backend.rendezvous and
  // says so when neither is given (nondist would run each rank alone).
  const auto c = choose({{"RANK", "1"}, {"WORLD_SIZE", "4"}});
  EXPECT_EQ(c.type, "gloo");
  EXPECT_EQ(c.reason, "RANK=1, WORLD_SIZE=4 (torchrun's variables, set by hand)");
  EXPECT_EQ(choose({{"RANK", "0"}, {"WORLD_SIZE", "1"}}).type, "nondist");
}

TEST(BackendAuto, MpirunStartingTorchrunIsGloo) {
  // The worker is torchrun's (worker 3 of 8), not an MPI process of mpirun's 4.
  EXPECT_EQ(choose({{"OMPI_COMM_WORLD_RANK", "1"},
                    {"OMPI_COMM_WORLD_SIZE", "4"},
                    {"RANK", "3"},
                    {"WORLD_SIZE", "8"},
                    {"MASTER_ADDR", "node0"},
                    {"TORCHELASTIC_RUN_ID", "j"}})
                .type,
            "gloo");
}

TEST(BackendAuto, HydraUnderSlurmIsMpi) {
  // mpiexec.hydra in an allocation starts its proxies with srun: PMI numbers the ranks.
  const auto c = choose({{"SLURM_PROCID", "0"},
                         {"SLURM_NTASKS", "2"},
                         {"SLURM_STEP_ID", "0"},
                         {"PMI_RANK", "5"},
                         {"PMI_SIZE", "8"}});
  EXPECT_EQ(c.type, "mpi");
  EXPECT_EQ(c.reason, "PMI_RANK=5, PMI_SIZE=8 (PMI: MPICH's mpiexec)");
}

TEST(BackendAuto, LaunchersThatDisagreeAreAConfigError) {
  expect_config_error(
      [] {
        choose({{"OMPI_COMM_WORLD_RANK", "1"},
                {"OMPI_COMM_WORLD_SIZE", "4"},
                {"RANK", "3"},
                {"WORLD_SIZE", "8"}});
      },
      {"backend 'auto': two launchers disagree", "(mpirun)", "RANK=3, WORLD_SIZE=8"});
}

TEST(BackendAuto, MpirunIsMpi) {
  const auto c = choose({{"OMPI_COMM_WORLD_RANK", "1"},
                         {"OMPI_COMM_WORLD_SIZE", "4"},
                         {"PMIX_RANK", "1"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_EQ(c.type, "mpi");
  EXPECT_EQ(c.reason, "OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=4 (Open MPI's mpirun)");
}

TEST(BackendAuto, WorldOfOneIsNondist) {
  EXPECT_EQ(choose({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}}).type, "nondist");
  const auto t = choose(
      {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(t.type, "nondist");
  EXPECT_NE(t.reason.find("(torchrun); a world of one"), std::string::npos) << t.reason;
  EXPECT_EQ(choose({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_STEP_ID", "0"}}).type,
            "nondist");
  EXPECT_EQ(choose({{"PMI_RANK", "0"}, {"PMI_SIZE", "1"}}).type, "nondist");
}

TEST(BackendAuto, TorchrunIsGloo) {
  const auto c = choose({{"RANK", "2"},
                         {"WORLD_SIZE", "4"},
                         {"LOCAL_RANK", "0"},
                         {"MASTER_ADDR", "10.0.0.1"},
                         {"MASTER_PORT", "29500"},
                         {"TORCHELASTIC_RUN_ID", "none"}});
  EXPECT_EQ(c.type, "gloo");
  EXPECT_EQ(c.reason,
            "RANK=2, WORLD_SIZE=4, LOCAL_RANK=0, MASTER_ADDR=10.0.0.1, MASTER_PORT=29500 "
            "(torchrun)");
}

TEST(BackendAuto, TorchrunInsideSrunIsGloo) {
  // srun starting one torchrun per node: the workers are torchrun's.
  EXPECT_EQ(choose({{"SLURM_PROCID", "1"},
                    {"SLURM_NTASKS", "2"},
                    {"SLURM_STEP_ID", "0"},
                    {"RANK", "5"},
                    {"WORLD_SIZE", "8"},
                    {"MASTER_ADDR", "node1"}})
                .type,
            "gloo");
}

TEST(BackendAuto, SrunWithoutPmixIsGloo) {
  const auto c = choose({{"SLURM_PROCID", "3"},
                         {"SLURM_NTASKS", "7"},
                         {"SLURM_STEP_ID", "0"},
                         {"SLURM_JOB_ID", "12"},
                         {"SLURM_LOCALID", "3"}});
  EXPECT_EQ(c.type, "gloo");
  EXPECT_EQ(c.reason.rfind("SLURM_PROCID=3, SLURM_NTASKS=7, SLURM_STEP_ID=0 (srun without PMIx", 0),
            0u)
      << c.reason;
  // srun --mpi=pmi2: PMI-2, which Open MPI cannot join under srun: still gloo.
  EXPECT_EQ(choose({{"SLURM_PROCID", "0"},
                    {"SLURM_NTASKS", "2"},
                    {"SLURM_STEP_ID", "0"},
                    {"PMI_RANK", "0"},
                    {"PMI_SIZE", "2"}})
                .type,
            "gloo");
}

TEST(BackendAuto, SrunWithPmixIsMpi) {
  const auto c = choose({{"SLURM_PROCID", "1"},
                         {"SLURM_NTASKS", "3"},
                         {"SLURM_STEP_ID", "0"},
                         {"PMIX_RANK", "1"},
                         {"PMIX_NAMESPACE", "slurm.pmix.1.0"}});
  EXPECT_EQ(c.type, "mpi");
  EXPECT_EQ(c.reason,
            "PMIX_RANK=1, SLURM_PROCID=1, SLURM_NTASKS=3, SLURM_STEP_ID=0 (srun with PMIx)");
  // PMIx with no size anywhere: MPI knows it.
  EXPECT_EQ(choose({{"PMIX_RANK", "0"}}).type, "mpi");
}

TEST(BackendAuto, MpichHydraIsMpi) {
  const auto c = choose({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}});
  EXPECT_EQ(c.type, "mpi");
  EXPECT_EQ(c.reason, "PMI_RANK=0, PMI_SIZE=2 (PMI: MPICH's mpiexec)");
}

TEST(BackendAuto, NotAnIntegerNamesTheVariable) {
  expect_config_error(
      [] {
        choose({{"RANK", "0"}, {"WORLD_SIZE", "four"}, {"MASTER_ADDR", "h"}});
      },
      {"WORLD_SIZE", "integer", "'four'"});
  expect_config_error(
      [] {
        choose({{"OMPI_COMM_WORLD_SIZE", "2x"}});
      },
      {"OMPI_COMM_WORLD_SIZE", "'2x'"});
  expect_config_error(
      [] {
        choose({{"SLURM_PROCID", "0"}, {"SLURM_STEP_ID", "0"}, {"SLURM_NTASKS", ""}});
      },
      {"SLURM_NTASKS", "''"});
}

// auto's parameters, against the built-in backend plugins.
class AutoParams : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { registry_ = new tally::Registry(tally::Registry::load({})); }
  static void TearDownTestSuite() {
    delete registry_;
    registry_ = nullptr;
  }
  static tally::Located params(const std::string& yaml) {
    return tally::Config::parse("backend: {type: auto" + yaml + "}\nmetrics: []\n", "cfg.yaml", ".",
                                {})
        .backend_params;
  }
  static tally::Registry* registry_;
};
tally::Registry* AutoParams::registry_ = nullptr;

TEST_F(AutoParams, PassesOnWhatTheChosenBackendTakes) {
  const Vars mpirun{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
  if (registry_->find(tally::ComponentKind::Backend, "mpi") == nullptr)
    GTEST_SKIP() << "no mpi backend plugin in this build";
  const auto a = tally::resolve_auto_backend(*registry_, params(", timeout: 30, chunk_bytes: 64"),
                                             fake(mpirun));
  EXPECT_EQ(a.choice.type, "mpi");
  EXPECT_EQ(a.component->info->name, "mpi");
  ASSERT_NE(a.params.child("timeout"), nullptr);
  ASSERT_NE(a.params.child("chunk_bytes"), nullptr);
  EXPECT_TRUE(a.ignored.empty());
}

TEST_F(AutoParams, NondistLeavesOutWaits) {
  if (registry_->find(tally::ComponentKind::Backend, "mpi") == nullptr)
    GTEST_SKIP() << "no mpi backend plugin in this build (it declares timeout)";
  const auto a =
      tally::resolve_auto_backend(*registry_, params(", timeout: 30, chunk_bytes: 64"), fake({}));
  EXPECT_EQ(a.choice.type, "nondist");
  EXPECT_EQ(a.params.child("timeout"), nullptr);
  ASSERT_NE(a.params.child("chunk_bytes"), nullptr);
  EXPECT_EQ(a.ignored, std::vector<std::string>{"timeout"});
}

TEST_F(AutoParams, UnknownParameterIsNamed) {
  expect_config_error(
      [] { tally::resolve_auto_backend(*registry_, params(", timeuot: 30"), fake({})); },
      {"cfg.yaml:1:", "backend 'auto'", "unknown parameter 'timeuot'", "chunk_bytes"});
}

TEST_F(AutoParams, MissingChosenPluginSaysWhy) {
  if (registry_->find(tally::ComponentKind::Backend, "gloo") != nullptr)
    GTEST_SKIP() << "this build has a gloo backend plugin";
  const Vars torchrun{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}};
  expect_config_error(
      [&] { tally::resolve_auto_backend(*registry_, params(""), fake(torchrun)); },
      {"backend 'auto' chose gloo", "(torchrun)", "no plugin provides the gloo backend"});
}

}  // namespace
