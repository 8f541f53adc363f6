// The nccl backend's pieces that need no GPU (backends/nccl/nccl_support.hpp): the launcher's
// environment, the choice of bootstrap and device, the rendezvous file exchanged between real
// processes (fork) with fake ids, and the growth of the staging buffers. Runs on any machine.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "nccl_support.hpp"
#include "support/expect_error.hpp"
#include "support/process.hpp"
#include "tally/sdk/error.hpp"

namespace fs = std::filesystem;
using namespace tally_nccl;

namespace {

// A fake environment.
GetEnv env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

using tally::test::error_of;

std::vector<std::byte> fake_id(std::uint32_t seed, std::size_t n = 128) {
  std::mt19937 gen(seed);
  std::vector<std::byte> id(n);
  for (auto& b : id) b = static_cast<std::byte>(gen() & 0xff);
  return id;
}

}  // namespace

// ---- the launcher's environment
// ------------------------------------------------------------------
// The table and its precedence are tally/launch.hpp's (tests/unit/test_launch_env.cpp); here only
// that the nccl backend's messages carry its prefix.

TEST(LaunchEnv, NcclMessagesSayNccl) {
  EXPECT_EQ(read_launch_env(env_of({{"RANK", "5"}, {"WORLD_SIZE", "8"}})).rank, 5);
  EXPECT_HAS(error_of<tally::ConfigError>([] {
               read_launch_env(env_of({{"RANK", "1"}}));
             }),
             "nccl backend: RANK is set but WORLD_SIZE is not");
}

// ---- bootstrap and device
// ------------------------------------------------------------------------

TEST(Bootstrap, Choice) {
  LaunchEnv alone;
  EXPECT_EQ(choose_bootstrap(alone, false, true), BootstrapKind::Alone);
  EXPECT_EQ(choose_bootstrap(alone, true, true), BootstrapKind::File);

  LaunchEnv mpi;
  mpi.under_mpi = true;
  mpi.world_size = 4;
  mpi.source = "OMPI_COMM_WORLD_RANK=0, OMPI_COMM_WORLD_SIZE=4 (mpirun)";
  EXPECT_EQ(choose_bootstrap(mpi, false, true), BootstrapKind::Mpi);
  EXPECT_EQ(choose_bootstrap(mpi, true, true), BootstrapKind::File);  // the file wins when given
  std::string m = error_of<tally::ConfigError>([&] { choose_bootstrap(mpi, false, false); });
  EXPECT_HAS(m, "says 4 processes");
  EXPECT_HAS(m, "set backend.rendezvous");
  EXPECT_HAS(m, "built without MPI");

  LaunchEnv torchrun;
  torchrun.world_size = 2;
  torchrun.source = "RANK=0, WORLD_SIZE=2, LOCAL_RANK=0 (torchrun)";
  m = error_of<tally::ConfigError>([&] { choose_bootstrap(torchrun, false, true); });
  EXPECT_HAS(m, "nccl backend: RANK=0, WORLD_SIZE=2, LOCAL_RANK=0 (torchrun) says 2 processes");
  EXPECT_HAS(m, "or launch with mpirun");
  EXPECT_EQ(choose_bootstrap(torchrun, true, false), BootstrapKind::File);
}

// The precedence documented in nccl_support.hpp: the file, an explicitly configured store, MPI
// under mpirun, alone for a world of one, a store the environment names.
TEST(Bootstrap, TheTcpStoreBesideMpiAndTheFile) {
  using S = StoreSource;
  LaunchEnv torchrun;
  torchrun.world_size = 4;
  torchrun.rank = 2;
  torchrun.source = "RANK=2, WORLD_SIZE=4, LOCAL_RANK=2 (torchrun)";
  EXPECT_EQ(choose_bootstrap(torchrun, false, true, S::Environment), BootstrapKind::Store);
  EXPECT_EQ(choose_bootstrap(torchrun, false, false, S::Environment), BootstrapKind::Store);
  EXPECT_EQ(choose_bootstrap(torchrun, false, true, S::Config), BootstrapKind::Store);
  EXPECT_EQ(choose_bootstrap(torchrun, true, true, S::Environment), BootstrapKind::File);
  EXPECT_EQ(choose_bootstrap(torchrun, true, true, S::Config), BootstrapKind::File);

  // Under mpirun MPI wins over MASTER_ADDR/MASTER_PORT left in the environment, not over a store
  // asked for in the config; built without MPI, the environment's store serves.
  LaunchEnv mpi;
  mpi.under_mpi = true;
  mpi.world_size = 3;
  mpi.source = "OMPI_COMM_WORLD_RANK=0, OMPI_COMM_WORLD_SIZE=3 (mpirun)";
  EXPECT_EQ(choose_bootstrap(mpi, false, true, S::Environment), BootstrapKind::Mpi);
  EXPECT_EQ(choose_bootstrap(mpi, false, true, S::Config), BootstrapKind::Store);
  EXPECT_EQ(choose_bootstrap(mpi, false, false, S::Environment), BootstrapKind::Store);
  EXPECT_EQ(choose_bootstrap(mpi, true, true, S::Config), BootstrapKind::File);

  // A world of one needs no store unless the config asks for it.
  LaunchEnv one;
  one.source = "RANK=0, WORLD_SIZE=1, LOCAL_RANK=0 (torchrun)";
  EXPECT_EQ(choose_bootstrap(one, false, true, S::Environment), BootstrapKind::Alone);
  EXPECT_EQ(choose_bootstrap(one, false, true, S::Config), BootstrapKind::Store);
  LaunchEnv mpi_one;
  mpi_one.under_mpi = true;
  EXPECT_EQ(choose_bootstrap(mpi_one, false, true, S::Environment), BootstrapKind::Mpi);

  // No way at all: the message names every way.
  const std::string m =
      error_of<tally::ConfigError>([&] { choose_bootstrap(torchrun, false, true, S::None); });
  EXPECT_HAS(m, "nccl backend: RANK=2, WORLD_SIZE=4, LOCAL_RANK=2 (torchrun) says 4 processes");
  EXPECT_HAS(m,
             "set MASTER_ADDR and MASTER_PORT (or backend.master_addr and "
             "backend.master_port)");
  EXPECT_HAS(m, "backend.rendezvous");
  EXPECT_STREQ(bootstrap_name(BootstrapKind::Store), "tcp store");
}

TEST(Bootstrap, TheEnvironmentNamesAStoreOnlyByItsVariables) {
  EXPECT_FALSE(store_in_env(env_of({})));
  EXPECT_FALSE(store_in_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}})));
  EXPECT_TRUE(store_in_env(env_of({{"MASTER_ADDR", "10.0.0.1"}})));
  EXPECT_TRUE(store_in_env(env_of({{"MASTER_PORT", "not a port"}})));  // looked at, not parsed
  EXPECT_TRUE(store_in_env(env_of({{"SLURM_STEP_NODELIST", "node[1-2]"}})));
}

TEST(StoreAddress, TorchrunsVariables) {
  const auto env = env_of({{"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "29511"}});
  const auto a0 = store_address(env, 0, std::nullopt, std::nullopt);
  EXPECT_EQ(a0.host, "10.1.2.3");
  EXPECT_EQ(a0.port, 29511);
  EXPECT_TRUE(a0.host_here);
  EXPECT_HAS(a0.source, "MASTER_ADDR=10.1.2.3");
  EXPECT_FALSE(store_address(env, 1, std::nullopt, std::nullopt).host_here);
  // torchrun's agent hosts the store: rank 0 is a client too.
  const auto agent = env_of({{"MASTER_ADDR", "10.1.2.3"},
                             {"MASTER_PORT", "29511"},
                             {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  EXPECT_FALSE(store_address(agent, 0, std::nullopt, std::nullopt).host_here);
  // A malformed port names the variable.
  EXPECT_HAS(error_of<tally::ConfigError>([] {
               store_address(env_of({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}), 0,
                             std::nullopt, std::nullopt);
             }),
             "MASTER_PORT");
  EXPECT_HAS(error_of<tally::ConfigError>(
                 [] { store_address(env_of({}), 0, std::nullopt, std::nullopt); }),
             "no TCP store to bootstrap through: set MASTER_ADDR and MASTER_PORT");
}

TEST(StoreAddress, TheConfigOverridesTheEnvironment) {
  const auto env = env_of({{"MASTER_ADDR", "10.1.2.3"},
                           {"MASTER_PORT", "29511"},
                           {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  // Both given: rank 0 hosts this store (it is not the agent's).
  auto a = store_address(env, 0, std::string("node7"), 4242);
  EXPECT_EQ(a.host, "node7");
  EXPECT_EQ(a.port, 4242);
  EXPECT_TRUE(a.host_here);
  EXPECT_EQ(a.source, "backend.master_addr=node7, backend.master_port=4242");
  // Only the port: the host from MASTER_ADDR.
  a = store_address(env, 3, std::nullopt, 4243);
  EXPECT_EQ(a.host, "10.1.2.3");
  EXPECT_EQ(a.port, 4243);
  EXPECT_FALSE(a.host_here);
  EXPECT_EQ(a.source, "MASTER_ADDR=10.1.2.3, backend.master_port=4243");
  // The agent's own address, given again in the config: still the agent's store.
  a = store_address(env, 0, std::string("10.1.2.3"), 29511);
  EXPECT_FALSE(a.host_here);
  EXPECT_HAS(a.source, "torchrun's agent store");
  // Only the host: the port from MASTER_PORT.
  a = store_address(env_of({{"MASTER_PORT", "1234"}}), 0, std::string("::1"), std::nullopt);
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.port, 1234);
  EXPECT_TRUE(a.host_here);

  for (const std::int64_t bad : {0, -1, 65536, 100000})
    EXPECT_HAS(
        error_of<tally::ConfigError>([&] { store_address(env, 0, std::string("h"), bad); }),
        "nccl backend: backend.master_port must be a port in 1..65535, got " + std::to_string(bad));
  EXPECT_HAS(error_of<tally::ConfigError>([] { store_address(env_of({}), 0, std::nullopt, 4000); }),
             "backend.master_port is set but backend.master_addr is not, and MASTER_ADDR is not "
             "set");
  EXPECT_HAS(error_of<tally::ConfigError>(
                 [] { store_address(env_of({}), 0, std::string("h"), std::nullopt); }),
             "backend.master_addr is set but backend.master_port is not, and MASTER_PORT is not "
             "set");
  EXPECT_HAS(error_of<tally::ConfigError>([] {
               store_address(env_of({{"MASTER_PORT", "x1"}}), 0, std::string("h"), std::nullopt);
             }),
             "MASTER_PORT='x1' is not a port in 1..65535");
  EXPECT_HAS(
      error_of<tally::ConfigError>([] { store_address(env_of({}), 0, std::string(""), 4000); }),
      "backend.master_addr is empty");
}

TEST(StoreIdRecord, RoundTripAndForeignBytes) {
  StoreIdRecord r;
  r.status = 0;
  r.world_size = 7;
  r.id = fake_id(9);
  const auto bytes = encode_store_id(r);
  const auto back = decode_store_id(bytes);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->status, 0);
  EXPECT_EQ(back->world_size, 7);
  EXPECT_EQ(back->id, r.id);

  StoreIdRecord failed;
  failed.status = 3;
  failed.world_size = 2;
  const auto f = decode_store_id(encode_store_id(failed));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->status, 3);
  EXPECT_TRUE(f->id.empty());

  EXPECT_FALSE(decode_store_id({}).has_value());
  const std::string foreign = "hello, this is not tally's";
  EXPECT_FALSE(decode_store_id(std::as_bytes(std::span(foreign))).has_value());
  auto cut = bytes;
  cut.pop_back();
  EXPECT_FALSE(decode_store_id(cut).has_value());  // the size it says is not the size it has
  EXPECT_EQ(store_id_key("tally/3/"), "tally/3/nccl/id");
}

TEST(Bootstrap, DeviceIsTheLocalRankModuloTheDevices) {
  LaunchEnv e;
  e.world_size = 16;
  e.local_rank = 5;
  EXPECT_EQ(choose_device(std::nullopt, e, 8), 5);
  EXPECT_EQ(choose_device(std::nullopt, e, 4), 1);
  EXPECT_EQ(choose_device(std::nullopt, e, 1), 0);
  EXPECT_EQ(choose_device(2, e, 4), 2);  // backend.device overrides

  LaunchEnv alone;
  EXPECT_EQ(choose_device(std::nullopt, alone, 8), 0);

  std::string m = error_of<tally::ConfigError>([&] { choose_device(4, e, 4); });
  EXPECT_HAS(m, "backend.device is 4, but this process sees 4 CUDA devices (0 to 3)");
  EXPECT_HAS(error_of<tally::ConfigError>([&] { choose_device(-1, e, 1); }),
             "sees 1 CUDA device (0 to 0)");

  LaunchEnv no_local;
  no_local.world_size = 2;
  no_local.source = "RANK=0, WORLD_SIZE=2 (torchrun)";
  m = error_of<tally::ConfigError>([&] { choose_device(std::nullopt, no_local, 2); });
  EXPECT_HAS(m, "RANK=0, WORLD_SIZE=2 (torchrun) gives no local rank");
  EXPECT_HAS(m, "set backend.device");
  EXPECT_EQ(choose_device(1, no_local, 2), 1);
}

// ---- the rendezvous record
// -----------------------------------------------------------------------

TEST(Rendezvous, RecordRoundTrip) {
  const auto id = fake_id(1);
  const std::string text = encode_rendezvous(id, 4, "slurm:7.0");
  const RendezvousRecord r = decode_rendezvous(text);
  ASSERT_TRUE(r.valid);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.job_id, "slurm:7.0");
  EXPECT_EQ(r.id, id);
  // A job id never breaks the record's lines.
  EXPECT_EQ(decode_rendezvous(encode_rendezvous(id, 1, "a\nb")).job_id, "a b");
  EXPECT_TRUE(decode_rendezvous(encode_rendezvous(id, 1, "")).valid);
}

TEST(Rendezvous, IncompleteOrForeignTextIsNotARecord) {
  const std::string text = encode_rendezvous(fake_id(2), 2, "j");
  EXPECT_FALSE(decode_rendezvous("").valid);
  EXPECT_FALSE(decode_rendezvous("hello\n").valid);
  EXPECT_FALSE(decode_rendezvous(text.substr(0, text.size() - 4)).valid);  // no "end"
  std::string bad_hex = text;
  bad_hex.replace(bad_hex.find("id=") + 3, 2, "zz");
  EXPECT_FALSE(decode_rendezvous(bad_hex).valid);
  std::string bad_world = text;
  bad_world.replace(bad_world.find("world_size=") + 11, 1, "0");
  EXPECT_FALSE(decode_rendezvous(bad_world).valid);
}

// ---- the rendezvous file between processes
// -------------------------------------------------------

namespace {

// Runs `reader` in a child process; returns what it wrote to the pipe and its exit code.
struct Child {
  pid_t pid = -1;
  int fd = -1;
};

Child spawn(const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    int code = 0;
    try {
      out = body();
    } catch (const std::exception& e) {
      out = std::string("error: ") + e.what();
      code = 3;
    }
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::close(fds[1]);
    ::_exit(code);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

std::pair<std::string, int> join(const Child& c) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(c.fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(c.fd);
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)};
}

std::string as_text(const std::vector<std::byte>& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

}  // namespace

TEST(RendezvousFile, ReaderStartedFirstGetsTheIdOnceRankZeroPublishes) {
  tally::test::TempDir dir;
  const fs::path file = dir / "nccl.id";
  const auto id = fake_id(3);
  const Child reader = spawn([&] {
    return as_text(wait_for_rendezvous(file, id.size(), 2, "job-1", 1, std::chrono::seconds(20)));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  publish_rendezvous(file, id, 2, "job-1");
  const auto [out, code] = join(reader);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out, as_text(id));
  // No temporary file is left beside it.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
  remove_rendezvous(file);
  EXPECT_FALSE(fs::exists(file));
}

TEST(RendezvousFile, SeveralReadersAndAPublisherInChildProcesses) {
  tally::test::TempDir dir;
  const fs::path file = dir / "nccl.id";
  const auto id = fake_id(4);
  std::vector<Child> readers;
  for (int r = 1; r < 4; ++r)
    readers.push_back(spawn([&, r] {
      return as_text(wait_for_rendezvous(file, id.size(), 4, "", r, std::chrono::seconds(20)));
    }));
  const Child writer = spawn([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    publish_rendezvous(file, id, 4, "");
    return std::string("published");
  });
  EXPECT_EQ(join(writer).first, "published");
  for (const auto& c : readers) {
    const auto [out, code] = join(c);
    EXPECT_EQ(code, 0) << out;
    EXPECT_EQ(out, as_text(id));
  }
}

TEST(RendezvousFile, ARecordOfAnotherJobIsWaitedPast) {
  tally::test::TempDir dir;
  const fs::path file = dir / "nccl.id";
  publish_rendezvous(file, fake_id(5), 2, "slurm:1.0");  // left by an earlier job
  const auto id = fake_id(6);
  const Child reader = spawn([&] {
    return as_text(
        wait_for_rendezvous(file, id.size(), 2, "slurm:2.0", 1, std::chrono::seconds(20)));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  publish_rendezvous(file, id, 2, "slurm:2.0");  // replaces it atomically
  const auto [out, code] = join(reader);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out, as_text(id));
}

TEST(RendezvousFile, AStaleRecordOfAnotherWorldSizeIsWaitedPastWithoutJobIds) {
  tally::test::TempDir dir;
  const fs::path file = dir / "nccl.id";
  publish_rendezvous(file, fake_id(7), 8, "");
  const auto id = fake_id(8);
  const Child reader = spawn([&] {
    return as_text(wait_for_rendezvous(file, id.size(), 2, "", 1, std::chrono::seconds(20)));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  publish_rendezvous(file, id, 2, "");
  EXPECT_EQ(join(reader).first, as_text(id));
}

TEST(RendezvousFile, SameJobWithAnotherWorldSizeIsAConfigError) {
  tally::test::TempDir dir;
  const fs::path file = dir / "nccl.id";
  publish_rendezvous(file, fake_id(9), 3, "torchrun:x");
  const std::string m = error_of<tally::ConfigError>(
      [&] { wait_for_rendezvous(file, 128, 2, "torchrun:x", 1, std::chrono::seconds(5)); });
  EXPECT_HAS(m, "rank 1: rank 0 published a world size of 3");
  EXPECT_HAS(m, "this rank has a world size of 2");
}

TEST(RendezvousFile, TimeoutSaysWhatWasAwaitedAndWhatWasFound) {
  tally::test::TempDir dir;
  const fs::path file = dir / "nccl.id";
  const auto start = std::chrono::steady_clock::now();
  std::string m = error_of<tally::RuntimeError>(
      [&] { wait_for_rendezvous(file, 128, 4, "", 3, std::chrono::milliseconds(300)); });
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(300));
  EXPECT_LT(waited, std::chrono::seconds(5));
  EXPECT_HAS(m, "nccl backend: rank 3 of 4: timed out after");
  EXPECT_HAS(m, "waiting for rank 0 to publish the NCCL id in " + file.string());
  EXPECT_HAS(m, "the file does not exist");

  publish_rendezvous(file, fake_id(10), 4, "old-job");
  m = error_of<tally::RuntimeError>(
      [&] { wait_for_rendezvous(file, 128, 4, "new-job", 3, std::chrono::milliseconds(100)); });
  EXPECT_HAS(m, "it holds the record of another job (job 'old-job', world size 4)");

  tally::test::write_text(file, "not a rendezvous file\n");
  m = error_of<tally::RuntimeError>(
      [&] { wait_for_rendezvous(file, 128, 4, "", 3, std::chrono::milliseconds(100)); });
  EXPECT_HAS(m, "it is not a complete tally rendezvous record");
}

TEST(RendezvousFile, AnUnwritablePathIsAConfigErrorNamingIt) {
  const std::string m = error_of<tally::ConfigError>(
      [&] { publish_rendezvous("/nonexistent-tally-dir/nccl.id", fake_id(11), 2, ""); });
  EXPECT_HAS(
      m, "cannot write the rendezvous file /nonexistent-tally-dir/nccl.id (backend.rendezvous)");
}

// ---- staging buffers ----------------------------------------------------------------------------

TEST(Staging, GrowsGeometricallyWithinTheLimit) {
  constexpr std::size_t kLimit = 1000;
  EXPECT_EQ(grown_capacity(0, 10, kLimit), 10u);
  EXPECT_EQ(grown_capacity(10, 10, kLimit), 10u);  // fits: unchanged
  EXPECT_EQ(grown_capacity(10, 11, kLimit), 20u);  // at least double
  EXPECT_EQ(grown_capacity(10, 300, kLimit), 300u);
  EXPECT_EQ(grown_capacity(600, 601, kLimit), kLimit);  // doubling stops at the limit
  EXPECT_EQ(grown_capacity(900, 1500, kLimit), 1500u);  // a need above the limit is met exactly
  EXPECT_EQ(grown_capacity(SIZE_MAX / 2 + 1, SIZE_MAX / 2 + 2, SIZE_MAX), SIZE_MAX);
  // A run of growing payloads reallocates O(log) times.
  std::size_t cap = 0;
  int reallocations = 0;
  for (std::size_t need = 1; need <= (std::size_t{1} << 20); need += need / 7 + 1) {
    const std::size_t next = grown_capacity(cap, need, std::size_t{1} << 30);
    reallocations += next != cap;
    cap = next;
  }
  EXPECT_LE(reallocations, 22);
}
