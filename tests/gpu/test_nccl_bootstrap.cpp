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
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "nccl_support.hpp"
#include "support/expect_error.hpp"
#include "support/process.hpp"
#include "tally/error.hpp"

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

TEST(LaunchEnv, NoLauncherIsAWorldOfOne) {
  const LaunchEnv e = read_launch_env(env_of({}));
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.world_size, 1);
  EXPECT_FALSE(e.local_rank.has_value());
  EXPECT_TRUE(e.source.empty());
  EXPECT_FALSE(e.under_mpi);
  EXPECT_TRUE(e.job_id.empty());
}

TEST(LaunchEnv, Torchrun) {
  const LaunchEnv e = read_launch_env(env_of(
      {{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"TORCHELASTIC_RUN_ID", "abc"}}));
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.source, "RANK=5, WORLD_SIZE=8, LOCAL_RANK=1 (torchrun)");
  EXPECT_FALSE(e.under_mpi);
  EXPECT_EQ(e.job_id, "torchrun:abc");
}

TEST(LaunchEnv, Slurm) {
  const LaunchEnv e = read_launch_env(env_of({{"SLURM_PROCID", "3"},
                                              {"SLURM_NTASKS", "4"},
                                              {"SLURM_LOCALID", "3"},
                                              {"SLURM_JOB_ID", "991"},
                                              {"SLURM_STEP_ID", "2"}}));
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 3);
  EXPECT_HAS(e.source, "(Slurm)");
  EXPECT_EQ(e.job_id, "slurm:991.2");
}

TEST(LaunchEnv, OpenMpiWinsAndMarksAnMpiLauncher) {
  // mpirun inside a Slurm allocation with torchrun-style variables left over: mpirun's win.
  const LaunchEnv e = read_launch_env(env_of({{"OMPI_COMM_WORLD_RANK", "1"},
                                              {"OMPI_COMM_WORLD_SIZE", "2"},
                                              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                              {"RANK", "0"},
                                              {"WORLD_SIZE", "1"},
                                              {"SLURM_PROCID", "0"},
                                              {"SLURM_NTASKS", "1"}}));
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 2);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_HAS(e.source, "(mpirun)");
  EXPECT_TRUE(e.under_mpi);
}

TEST(LaunchEnv, MpiLaunchersAreRecognised) {
  EXPECT_TRUE(read_launch_env(env_of({{"PMIX_RANK", "0"}})).under_mpi);
  const LaunchEnv e =
      read_launch_env(env_of({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "0"}}));
  EXPECT_TRUE(e.under_mpi);
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.world_size, 3);
  EXPECT_EQ(e.local_rank, 0);
}

TEST(LaunchEnv, LocalRankIsOptional) {
  const LaunchEnv e = read_launch_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  EXPECT_FALSE(e.local_rank.has_value());
  EXPECT_EQ(e.source, "RANK=0, WORLD_SIZE=2 (torchrun)");
}

TEST(LaunchEnv, MissingOrInconsistentVariablesAreConfigErrors) {
  const auto err = [](std::map<std::string, std::string> vars) {
    return error_of<tally::ConfigError>([&] { read_launch_env(env_of(vars)); });
  };
  std::string m = err({{"RANK", "1"}});
  EXPECT_HAS(m, "nccl backend: RANK is set but WORLD_SIZE is not");
  EXPECT_HAS(m, "LOCAL_RANK");
  EXPECT_HAS(err({{"WORLD_SIZE", "2"}}), "WORLD_SIZE is set but RANK is not");
  EXPECT_HAS(err({{"SLURM_NTASKS", "2"}}), "SLURM_NTASKS is set but SLURM_PROCID is not");
  EXPECT_HAS(err({{"RANK", "one"}, {"WORLD_SIZE", "2"}}), "RANK='one' is not an integer");
  EXPECT_HAS(err({{"RANK", "1x"}, {"WORLD_SIZE", "2"}}), "RANK='1x' is not an integer");
  EXPECT_HAS(err({{"RANK", ""}, {"WORLD_SIZE", "2"}}), "RANK='' is not an integer");
  EXPECT_HAS(err({{"RANK", "99999999999"}, {"WORLD_SIZE", "2"}}), "is not an integer");
  EXPECT_HAS(err({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), "RANK=2 is outside [0, WORLD_SIZE=2)");
  EXPECT_HAS(err({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}), "RANK=-1 is outside [0, WORLD_SIZE=2)");
  EXPECT_HAS(err({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), "WORLD_SIZE=0 must be at least 1");
  EXPECT_HAS(err({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}}),
             "LOCAL_RANK=2 is outside [0, WORLD_SIZE=2)");
  EXPECT_HAS(err({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "x"}}),
             "OMPI_COMM_WORLD_SIZE='x' is not an integer");
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
