// The nccl backend plugin in one process (a world of one), loaded through the registry as the
// tally CLI loads it, and the CLI with `backend: {type: nccl}`.
//
// Runs everywhere: the parameter and environment checks (config errors come before any device is
// touched) and the message of a run without a CUDA device (CUDA_VISIBLE_DEVICES is emptied, so it
// holds on a GPU machine too). Needs a CUDA device: the collectives, which skip without one.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config.hpp"
#include "integration/cli_fixture.hpp"
#include "registry.hpp"
#include "support/expect_error.hpp"
#include "support/with_collectives.hpp"
#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/error.hpp"

namespace fs = std::filesystem;
using tally::DistBackend;
using tally::Value;

namespace {

using Bytes = std::vector<std::byte>;

const char* const kLauncherVars[] = {"OMPI_COMM_WORLD_RANK",
                                     "OMPI_COMM_WORLD_SIZE",
                                     "OMPI_COMM_WORLD_LOCAL_RANK",
                                     "RANK",
                                     "WORLD_SIZE",
                                     "LOCAL_RANK",
                                     "SLURM_PROCID",
                                     "SLURM_NTASKS",
                                     "SLURM_LOCALID",
                                     "PMI_RANK",
                                     "PMI_SIZE",
                                     "PMIX_RANK",
                                     "MPI_LOCALRANKID",
                                     "TORCHELASTIC_RUN_ID",
                                     "SLURM_JOB_ID",
                                     "PMIX_NAMESPACE",
                                     "MASTER_ADDR",
                                     "MASTER_PORT",
                                     "SLURM_STEP_NODELIST",
                                     "TORCHELASTIC_USE_AGENT_STORE"};

// The test runs as a world of one, whatever launched it.
class CleanLauncherEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    for (const char* v : kLauncherVars) unsetenv(v);
  }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new CleanLauncherEnv);

// Sets variables for one scope.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::map<std::string, std::string> vars) {
    for (const auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
      setenv(k.c_str(), v.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : saved_) {
      if (v)
        setenv(k.c_str(), v->c_str(), 1);
      else
        unsetenv(k.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

const tally::Registry& registry() {
  static const tally::Registry r = tally::Registry::load();
  return r;
}

tally::test::WithCollectives make_nccl(const Value::Map& params = {}) {
  const auto& c = registry().get(tally::ComponentKind::Backend, "nccl");
  return tally::test::WithCollectives(
      tally::Registry::make_backend(c, tally::make_params(*c.info, params, "backend 'nccl'")));
}

using tally::test::error_of;

// Why there is no usable device, or "" when there is one.
std::string no_device_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    return std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  if (n < 1) return "cudaGetDeviceCount returned 0";
  return {};
}

#define SKIP_WITHOUT_GPU()                                       \
  do {                                                           \
    const std::string why = no_device_reason();                  \
    if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why; \
  } while (0)

Bytes pattern(int rank, std::size_t n) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::byte>((rank * 131 + i * 7 + i / 251) & 0xff);
  return b;
}
Bytes to_bytes(std::span<const std::byte> s) { return Bytes(s.begin(), s.end()); }

// A port nothing listens on now.
int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (s >= 0 && ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (s >= 0) ::close(s);
  return port;
}

int line_count(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace

// ---- parameters and environment: config errors, before any device is touched -------------------

TEST(NcclBackendConfig, TheComponentIsRegisteredWithItsParameters) {
  const auto* c = registry().find(tally::ComponentKind::Backend, "nccl");
  ASSERT_NE(c, nullptr);
  std::vector<std::string> names;
  for (const auto& p : c->info->params) names.push_back(p.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"chunk_bytes", "timeout", "rendezvous", "master_addr",
                                      "master_port", "store_bind", "store_secret_file", "device"}));
  const auto params = tally::make_params(*c->info, {}, "backend 'nccl'");
  EXPECT_EQ(params.get_int("chunk_bytes"), std::int64_t{256} << 20);
  EXPECT_EQ(params.get_double("timeout"), 600.0);
  EXPECT_FALSE(params.has("rendezvous"));
  EXPECT_FALSE(params.has("device"));
  EXPECT_FALSE(params.has("master_addr"));
  EXPECT_FALSE(params.has("master_port"));
}

TEST(NcclBackendConfig, BadParametersAreConfigErrors) {
  EXPECT_HAS(error_of<tally::ConfigError>([] {
               make_nccl({{"timeout", 0}});
             }),
             "parameter 'timeout' must be a positive number of seconds");
  EXPECT_HAS(error_of<tally::ConfigError>([] { make_nccl({{"timeout", -1.5}}); }), "'timeout'");
  EXPECT_HAS(error_of<tally::ConfigError>([] {
               make_nccl({{"chunk_bytes", 0}});
             }),
             "parameter 'chunk_bytes' must be at least 1");
}

TEST(NcclBackendConfig, LauncherEnvironmentErrorsNameTheVariables) {
  {
    const ScopedEnv env(std::map<std::string, std::string>{{"RANK", "1"}});
    EXPECT_HAS(error_of<tally::ConfigError>([] { make_nccl(); }),
               "nccl backend: RANK is set but WORLD_SIZE is not");
  }
  {
    const ScopedEnv env(std::map<std::string, std::string>{
        {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}});
    const std::string m = error_of<tally::ConfigError>([] { make_nccl(); });
    EXPECT_HAS(m, "RANK=0, WORLD_SIZE=2, LOCAL_RANK=0 (torchrun) says 2 processes");
    EXPECT_HAS(m, "set backend.rendezvous");
    EXPECT_HAS(m, "set MASTER_ADDR and MASTER_PORT");
  }
}

// The TCP store's address is checked before any device is touched.
TEST(NcclBackendConfig, AnIncompleteOrBadStoreAddressIsAConfigError) {
  EXPECT_HAS(error_of<tally::ConfigError>([] {
               make_nccl({{"master_addr", "127.0.0.1"}, {"master_port", 70000}});
             }),
             "nccl backend: backend.master_port must be a port in 1..65535, got 70000");
  EXPECT_HAS(error_of<tally::ConfigError>([] {
               make_nccl({{"master_port", 29500}});
             }),
             "backend.master_port is set but backend.master_addr is not, and MASTER_ADDR is not "
             "set");
  const ScopedEnv env(std::map<std::string, std::string>{{"RANK", "1"},
                                                         {"WORLD_SIZE", "2"},
                                                         {"LOCAL_RANK", "1"},
                                                         {"MASTER_ADDR", "127.0.0.1"},
                                                         {"MASTER_PORT", "nope"}});
  EXPECT_HAS(error_of<tally::ConfigError>([] { make_nccl(); }), "MASTER_PORT");
}

// ---- the CLI
// --------------------------------------------------------------------------------------

using NcclCli = tally::test::CliTest;

TEST_F(NcclCli, WithoutACudaDeviceTheRunFailsWithOneLine) {
  const auto cfg = config(tally::test::kMetricsYaml, "backend:\n  type: nccl\n");
  // An empty CUDA_VISIBLE_DEVICES hides every GPU: the same path on any machine.
  const auto r = tally::test::run_command("env CUDA_VISIBLE_DEVICES= " + tally::test::kTally +
                                          " run " + cfg.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(line_count(r.err), 1) << r.err;
  EXPECT_HAS(r.err, "tally: error: nccl backend: rank 0 of 1: no CUDA device found: ");
  EXPECT_HAS(r.err, "cudaGetDeviceCount");
  EXPECT_HAS(r.err, "CUDA_VISIBLE_DEVICES=''");
}

TEST_F(NcclCli, AnIncompleteLauncherEnvironmentIsAConfigError) {
  const auto cfg = config(tally::test::kMetricsYaml, "backend:\n  type: nccl\n");
  const auto r =
      tally::test::run_command("env WORLD_SIZE=2 " + tally::test::kTally + " run " + cfg.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(line_count(r.err), 1) << r.err;
  EXPECT_HAS(r.err, "nccl backend: WORLD_SIZE is set but RANK is not");
}

TEST_F(NcclCli, OnOneGpuTheResultsAreThoseOfNondist) {
  SKIP_WITHOUT_GPU();
  const auto nondist = dir / "nondist.json";
  const auto nccl = dir / "nccl.json";
  auto r = tally("run -q " + config().string() + " -o " + nondist.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = tally("run -q " +
            config(tally::test::kMetricsYaml, "backend:\n  type: nccl\n", "nccl.yaml").string() +
            " -o " + nccl.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto a = read_json(nondist);
  const auto b = read_json(nccl);
  EXPECT_EQ(a["results"], b["results"]);
  EXPECT_EQ(b["run"]["backend"], "nccl");
  EXPECT_EQ(b["run"]["world_size"], 1);
}

// ---- a world of one on a GPU
// ----------------------------------------------------------------------

TEST(NcclBackend, IsAWorldOfOne) {
  SKIP_WITHOUT_GPU();
  const auto b = make_nccl();
  EXPECT_EQ(b.backend->name(), "nccl");
  EXPECT_TRUE(b.backend->is_initialized());
  EXPECT_EQ(b->rank(), 0);
  EXPECT_EQ(b->world_size(), 1);
  EXPECT_EQ(b->chunk_bytes(), std::size_t{256} << 20);
  b->barrier();
}

TEST(NcclBackend, AllGatherAndBroadcastObjectsOfEverySize) {
  SKIP_WITHOUT_GPU();
  for (const std::int64_t chunk : {std::int64_t{256} << 20, std::int64_t{1000}}) {
    const auto b = make_nccl({{"chunk_bytes", Value(static_cast<long long>(chunk))}});
    for (const std::size_t n :
         {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{999}, std::size_t{1000},
          std::size_t{1001}, std::size_t{4096}, std::size_t{3} << 20}) {
      const Bytes obj = pattern(0, n);
      const auto got = b->all_gather_object(obj);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(to_bytes(got[0]), obj) << "all_gather_object, " << n << " bytes, chunk " << chunk;
      EXPECT_EQ(to_bytes(b->broadcast_object(obj, 0)), obj)
          << "broadcast_object, " << n << " bytes";
    }
  }
}

TEST(NcclBackend, AResultPassedBackIsSafe) {
  SKIP_WITHOUT_GPU();
  const auto b = make_nccl();
  const Bytes obj = pattern(3, 5000);
  auto view = b->all_gather_object(obj)[0];
  for (int i = 0; i < 5; ++i)
    view = b->all_gather_object(view)[0];  // a view into the receive buffer
  EXPECT_EQ(to_bytes(view), obj);
  auto bview = b->broadcast_object(obj, 0);
  bview = b->broadcast_object(bview, 0);
  EXPECT_EQ(to_bytes(bview), obj);
}

TEST(NcclBackend, ABadSourceRankIsARuntimeError) {
  SKIP_WITHOUT_GPU();
  const auto b = make_nccl();
  EXPECT_HAS(error_of<tally::RuntimeError>([&] { b->broadcast_object({}, 1); }),
             "source rank 1 is outside [0, 1)");
}

TEST(NcclBackend, DeviceParameter) {
  SKIP_WITHOUT_GPU();
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  const auto b = make_nccl({{"device", count - 1}});
  EXPECT_EQ(to_bytes(b->all_gather_object(pattern(0, 100))[0]), pattern(0, 100));
  EXPECT_HAS(error_of<tally::ConfigError>([&] {
               make_nccl({{"device", count}});
             }),
             "backend.device is " + std::to_string(count));
}

TEST(NcclBackend, ARendezvousFileServesAWorldOfOneAndIsRemoved) {
  SKIP_WITHOUT_GPU();
  tally::test::TempDir dir;
  const auto file = dir / "nccl.id";
  const auto b = make_nccl({{"rendezvous", file.string()}});
  EXPECT_FALSE(fs::exists(file)) << "rank 0 removes the file once every rank has joined";
  EXPECT_EQ(to_bytes(b->all_gather_object(pattern(0, 10))[0]), pattern(0, 10));
}

// The TCP store asked for in the config serves a world of one (rank 0 serves it and reads its
// own id back); the rooted gather is offered and gathers on one rank.
TEST(NcclBackend, ATcpStoreServesAWorldOfOneAndTheRootedGatherWorks) {
  SKIP_WITHOUT_GPU();
  const auto b = make_nccl({{"master_addr", "127.0.0.1"}, {"master_port", free_port()}});
  ASSERT_NE(tally::get_primitive<tally::RootedGather>(*b.backend), nullptr);
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{5000}}) {
    const auto got = b->gather_object(pattern(0, n), 0);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(to_bytes(got[0]), pattern(0, n));
  }
}

TEST(NcclBackend, SeveralBackendsLiveTogether) {
  SKIP_WITHOUT_GPU();
  const auto a = make_nccl();
  const auto b = make_nccl({{"chunk_bytes", 64}});
  EXPECT_EQ(to_bytes(a->all_gather_object(pattern(0, 300))[0]), pattern(0, 300));
  EXPECT_EQ(to_bytes(b->all_gather_object(pattern(1, 300))[0]), pattern(1, 300));
}
