// The nccl backend's own code (backends/nccl/nccl_backend.cpp, compiled into this test) on an
// emulated device: the CUDA runtime is fake_cudart.cpp (host memory as device memory) and the
// libnccl.so.2 it opens is fake_nccl.cpp, a world of one that answers like a non-blocking
// communicator and injects faults on request. Runs on machines without a GPU and checks what a
// GPU machine cannot easily provoke: the polling of non-blocking calls, collective and bootstrap
// timeouts, asynchronous errors, the abort and the state after it; and the object collectives
// through the staging buffers at every size and chunk. Also run under `mpirun -np 1`, where the
// backend bootstraps through MPI.
//
// Across processes (NcclEmulatedRanks.*): the fake also emulates a world of several processes
// (messages in files, see fake_nccl.cpp), so this executable starts itself N times as the ranks
// of a torchrun-like job (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, MASTER_PORT=<a
// free port>): the backend bootstraps through the TCP store (rank 0 serves it and sets the id,
// the others get it), and every rank checks the rooted gather (grouped ncclSend/ncclRecv), the
// other collectives and an Evaluator's sync over the backend, whose results must equal the
// single-process run's.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "config.hpp"
#include "support/expect_error.hpp"
#include "support/process.hpp"
#include "support/reduce_check.hpp"
#include "support/with_collectives.hpp"
#include "tally/evaluator.hpp"
#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/plugin.hpp"

// The plugin entry of nccl_backend.cpp, compiled into this executable (TALLY_PLUGIN).
extern "C" const tally::PluginManifest* tally_plugin() noexcept;

using tally::DistBackend;
using tally::Value;

namespace {

using Bytes = std::vector<std::byte>;

const tally::ComponentInfo& nccl_info() {
  static const tally::PluginManifest* m = tally_plugin();
  return m->components.at(0);
}

tally::test::WithCollectives make_nccl(const Value::Map& params = {}) {
  const auto& info = nccl_info();
  return tally::test::WithCollectives(
      info.make_backend(tally::make_params(info, params, "backend 'nccl'")));
}

using tally::test::error_of;

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

Bytes pattern(int rank, std::size_t n) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::byte>((rank * 131 + i * 7 + i / 251) & 0xff);
  return b;
}
Bytes to_bytes(std::span<const std::byte> s) { return Bytes(s.begin(), s.end()); }

// The backend must open the fake libnccl.so.2. Loaded first by its path, it answers the
// backend's dlopen("libnccl.so.2"): the dynamic loader matches the name with the SONAME of a
// library already loaded.
class FakeNcclFirst : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_NE(dlopen(TALLY_FAKE_NCCL, RTLD_NOW | RTLD_GLOBAL), nullptr) << dlerror();
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib, nullptr) << dlerror();
    ASSERT_NE(dlsym(lib, "tally_fake_nccl"), nullptr) << "libnccl.so.2 is the real NCCL";
  }
};
const auto* const kFakeNccl = ::testing::AddGlobalTestEnvironment(new FakeNcclFirst);

// Under mpirun the backends bootstrap through MPI, which the first one initialises and the last
// one to go finalises; MPI cannot be initialised again after that (as with the mpi backend). One
// backend lives for the whole run so that the tests can make theirs one after another.
tally::test::WithCollectives g_keeper;
class KeepMpi : public ::testing::Environment {
 public:
  void SetUp() override {
    if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) g_keeper = make_nccl();
  }
  void TearDown() override { g_keeper = {}; }
};
const auto* const kKeepMpi = ::testing::AddGlobalTestEnvironment(new KeepMpi);

}  // namespace

TEST(NcclEmulated, CollectivesAtEverySizeAndChunk) {
  for (const long long chunk : {256ll << 20, 1000ll, 1ll}) {
    const auto b = make_nccl({{"chunk_bytes", Value(chunk)}});
    EXPECT_EQ(b.backend->name(), "nccl");
    EXPECT_TRUE(b.backend->is_initialized());
    EXPECT_EQ(b.backend->chunk_bytes(), static_cast<std::size_t>(chunk));
    // NCCL has a reduction and a rooted gather; varying all-gathers are the engine's padded
    // fallback.
    EXPECT_NE(tally::get_primitive<tally::Reducer>(*b.backend), nullptr);
    EXPECT_NE(tally::get_primitive<tally::RootedGather>(*b.backend), nullptr);
    EXPECT_EQ(tally::get_primitive<tally::VaryingAllGather>(*b.backend), nullptr);
    EXPECT_EQ(b->world_size(), 1);
    EXPECT_EQ(b->rank(), 0);
    EXPECT_EQ(b->chunk_bytes(), static_cast<std::size_t>(chunk));
    // Growing and shrinking payloads: the staging buffers grow and are reused.
    for (const std::size_t n :
         {std::size_t{0}, std::size_t{1}, std::size_t{999}, std::size_t{1000}, std::size_t{1001},
          std::size_t{70000}, std::size_t{3}, std::size_t{1} << 20}) {
      if (chunk == 1 && n > 70000) continue;  // a byte a call: enough
      const Bytes obj = pattern(0, n);
      const auto got = b->all_gather_object(obj);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(to_bytes(got[0]), obj) << n << " bytes, chunk " << chunk;
      EXPECT_EQ(to_bytes(b->broadcast_object(obj, 0)), obj) << n << " bytes, chunk " << chunk;
      const auto gathered = b->gather_object(obj, 0);  // the root's own bytes: host to host
      ASSERT_EQ(gathered.size(), 1u);
      EXPECT_EQ(to_bytes(gathered[0]), obj) << n << " bytes, chunk " << chunk;
    }
    b->barrier();
  }
}

// ncclReduce on int64 in place, in rounds when the chunk is small (a world of one: the values
// come back as they were, through the staging buffers and the fake's ncclReduce).
TEST(NcclEmulated, ReduceInRounds) {
  for (const long long chunk : {256ll << 20, 1000ll, 1ll}) {
    const auto b = make_nccl({{"chunk_bytes", Value(chunk)}});
    for (const std::size_t n :
         {std::size_t{1}, std::size_t{124}, std::size_t{125}, std::size_t{3001}}) {
      std::vector<std::int64_t> values(n);
      for (std::size_t i = 0; i < n; ++i)
        values[i] = static_cast<std::int64_t>(i * 2654435761u) - (std::int64_t{1} << 40);
      for (const auto op : {tally::ReduceOp::sum, tally::ReduceOp::min, tally::ReduceOp::max}) {
        auto got = values;
        b->reduce(got, op, 0);
        EXPECT_EQ(got, values) << n << " values, chunk " << chunk;
      }
    }
  }
}

TEST(NcclEmulated, AResultPassedBackIsSafe) {
  const auto b = make_nccl({{"chunk_bytes", 100}});
  const Bytes obj = pattern(5, 777);
  auto v = b->all_gather_object(obj)[0];
  for (int i = 0; i < 3; ++i) v = b->all_gather_object(v)[0];
  EXPECT_EQ(to_bytes(v), obj);
  auto w = b->broadcast_object(obj, 0);
  w = b->broadcast_object(w, 0);
  EXPECT_EQ(to_bytes(w), obj);
}

TEST(NcclEmulated, ARendezvousFileServesAWorldOfOneAndIsRemoved) {
  tally::test::TempDir dir;
  const auto file = dir / "id";
  const auto b = make_nccl({{"rendezvous", file.string()}});
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_EQ(to_bytes(b->all_gather_object(pattern(1, 10))[0]), pattern(1, 10));
}

TEST(NcclEmulated, ACollectiveThatNeverEndsTimesOutAndAbortsTheCommunicator) {
  const auto b = make_nccl({{"timeout", 0.2}});
  EXPECT_EQ(to_bytes(b->all_gather_object(pattern(0, 10))[0]), pattern(0, 10));
  std::string m;
  {
    const ScopedEnv hang("TALLY_FAKE_CUDA_STREAM_HANG", "1");
    m = error_of<tally::RuntimeError>([&] { b->all_gather_object(pattern(0, 10)); });
  }
  // The size exchange is the first collective of all_gather_object: 8 bytes a rank.
  EXPECT_HAS(
      m,
      "nccl backend: rank 0 of 1 (cuda:0): all_gather_object: ncclAllGather of 8 bytes a rank "
      "timed out after 0.2 s (backend.timeout); the communicator was aborted");
  EXPECT_HAS(m, "every rank must reach the same collective");
  EXPECT_FALSE(b.backend->is_initialized());
  m = error_of<tally::RuntimeError>([&] { b->broadcast_object(pattern(0, 10), 0); });
  EXPECT_HAS(
      m,
      "the communicator was aborted after an earlier error: all_gather_object: ncclAllGather "
      "of 8 bytes a rank timed out");
  EXPECT_THROW(b->barrier(), tally::RuntimeError);
}

// The engine's per-call deadline (CallOptions::timeout) replaces backend.timeout for that call,
// and the message names the engine's collective and its purpose.
TEST(NcclEmulated, ACallsOwnDeadlineBoundsItAndTheMessageNamesTheCollective) {
  using namespace std::chrono_literals;
  for (const auto& [purpose, deadline] :
       {std::pair{"sync payload", 150ms}, std::pair{"results", 250ms}}) {
    const auto b = make_nccl({{"timeout", 600.0}});
    std::string m;
    {
      const ScopedEnv hang("TALLY_FAKE_CUDA_STREAM_HANG", "1");
      m = error_of<tally::RuntimeError>([&] {
        b->all_gather_object(pattern(0, 10), {purpose, deadline});
      });
    }
    EXPECT_HAS(m, fmt::format("all_gather_object ({}): ncclAllGather of 8 bytes a rank timed out "
                              "after {} s (this call's deadline)",
                              purpose, deadline.count() / 1000.0));
  }
}

TEST(NcclEmulated, AnAsynchronousErrorIsARuntimeErrorNamingTheCollective) {
  const auto b = make_nccl();
  std::string m;
  {
    const ScopedEnv err("TALLY_FAKE_NCCL_ASYNC_ERROR", "1");
    m = error_of<tally::RuntimeError>([&] { b->broadcast_object(pattern(0, 100), 0); });
  }
  EXPECT_HAS(
      m,
      "nccl backend: rank 0 of 1 (cuda:0): broadcast_object: ncclBroadcast of 8 bytes from rank 0 "
      "failed: "
      "remote process exited or there was a network error: fake NCCL: injected remote error");
  EXPECT_FALSE(b.backend->is_initialized());
  EXPECT_THROW(b->all_gather_object(pattern(0, 1)), tally::RuntimeError);
}

TEST(NcclEmulated, ACommunicatorThatNeverInitialisesTimesOut) {
  const ScopedEnv hang("TALLY_FAKE_NCCL_INIT_HANG", "1");
  const std::string m = error_of<tally::RuntimeError>([] { make_nccl({{"timeout", 0.3}}); });
  EXPECT_HAS(
      m, "nccl backend: rank 0 of 1 (cuda:0): ncclCommInitRankConfig (world size 1, bootstrap: ");
  EXPECT_HAS(m,
             "timed out after 0.3 s (backend.timeout); the communicator was aborted; did every "
             "rank start?");
}

TEST(NcclEmulated, ADeviceOutsideTheVisibleOnesIsAConfigError) {
  EXPECT_HAS(error_of<tally::ConfigError>([] {
               make_nccl({{"device", 1}});
             }),
             "backend.device is 1, but this process sees 1 CUDA device (0 to 0)");
}

// ---- a world of several processes, bootstrapped through the TCP store --------------------------

namespace {

namespace fs = std::filesystem;

// What a launcher may have set in this process: the ranks started below get a clean job.
const char* const kJobVars[] = {"OMPI_COMM_WORLD_RANK",
                                "OMPI_COMM_WORLD_SIZE",
                                "OMPI_COMM_WORLD_LOCAL_RANK",
                                "PMI_RANK",
                                "PMI_SIZE",
                                "PMIX_RANK",
                                "MPI_LOCALRANKID",
                                "RANK",
                                "WORLD_SIZE",
                                "LOCAL_RANK",
                                "SLURM_PROCID",
                                "SLURM_NTASKS",
                                "SLURM_LOCALID",
                                "SLURM_JOB_ID",
                                "SLURM_STEP_ID",
                                "SLURM_STEP_NODELIST",
                                "PMIX_NAMESPACE",
                                "TORCHELASTIC_RUN_ID",
                                "TORCHELASTIC_USE_AGENT_STORE",
                                "MASTER_ADDR",
                                "MASTER_PORT",
                                "TMPDIR"};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : fallback;
}

std::uint16_t free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (s >= 0) ::close(s);
    return 0;
  }
  ::close(s);
  return ntohs(a.sin_port);
}

struct RankRun {
  int rank = 0;
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Where a rank runs: a command it is started through (`netns.sh exec NAME K`: on host K of a
// multi-host test bed; none: here), and its local rank there.
struct Placement {
  std::vector<std::string> prefix;
  int local_rank = 0;
};

// Starts this executable once for each of `ranks` (of a job of `world`), as torchrun would with
// its store at `master_addr`:`port`, running the test NcclEmulatedRank.DISABLED_OneRankOfAJob
// with TALLY_TEST_NCCL_SCENARIO=`scenario`; their output goes to `dir`, which is also their TMPDIR
// (the fake's message folders: every host of a test bed shares the file system). `place` says
// where each rank runs (default: here, local rank = rank). Waits for every one. A rank still
// running after 300 s is killed and reported (the test's timeouts are far shorter: only a hang
// gets there).
std::vector<RankRun> run_job(const std::vector<int>& ranks, int world, std::uint16_t port,
                             const std::string& scenario, const fs::path& dir,
                             const std::string& master_addr = "127.0.0.1",
                             const std::function<Placement(int)>& place = {}) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    if (std::find(std::begin(kJobVars), std::end(kJobVars), name) == std::end(kJobVars))
      env.push_back(kv);
  }
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  std::vector<RankRun> runs;
  std::vector<pid_t> pids;
  for (const int rank : ranks) {
    const Placement where = place ? place(rank) : Placement{{}, rank};
    std::vector<std::string> vars = env;
    vars.push_back("RANK=" + std::to_string(rank));
    vars.push_back("WORLD_SIZE=" + std::to_string(world));
    vars.push_back("LOCAL_RANK=" + std::to_string(where.local_rank));
    vars.push_back("MASTER_ADDR=" + master_addr);
    vars.push_back("MASTER_PORT=" + std::to_string(port));
    // A store other hosts reach guards itself with a secret every rank has (docs/gloo.md); on
    // loopback rank 0 makes one.
    if (master_addr != "127.0.0.1")
      vars.push_back("TALLY_STORE_SECRET=emulated-" + std::to_string(::getpid()));
    vars.push_back("TMPDIR=" + dir.string());
    vars.push_back("TALLY_TEST_NCCL_SCENARIO=" + scenario);
    vars.push_back("TALLY_TEST_NCCL_OUT=" + dir.string());
    std::vector<char*> envp;
    for (auto& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = where.prefix;
    args.push_back(exe);
    args.push_back("--gtest_also_run_disabled_tests");
    args.push_back("--gtest_filter=NcclEmulatedRank.DISABLED_OneRankOfAJob");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string out = (dir / fmt::format("rank-{}.out", rank)).string();
    const std::string err = (dir / fmt::format("rank-{}.err", rank)).string();
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, args[0].c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    EXPECT_EQ(rc, 0) << "posix_spawn " << args[0];
    pids.push_back(rc == 0 ? pid : -1);
    runs.push_back(RankRun{rank, -1, {}, {}});
  }
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  std::size_t left = std::count_if(pids.begin(), pids.end(), [](pid_t p) { return p > 0; });
  while (left > 0) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] <= 0) continue;
      int status = 0;
      const pid_t w = ::waitpid(pids[i], &status, WNOHANG);
      if (w == pids[i]) {
        runs[i].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pids[i] = -1;
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > guard) {
      for (std::size_t i = 0; i < pids.size(); ++i) {
        if (pids[i] <= 0) continue;
        ::kill(pids[i], SIGKILL);
        ::waitpid(pids[i], nullptr, 0);
        runs[i].err = "killed: still running after 300 s\n";
        pids[i] = -1;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (auto& r : runs) {
    r.out = tally::test::read_file(dir / fmt::format("rank-{}.out", r.rank));
    r.err += tally::test::read_file(dir / fmt::format("rank-{}.err", r.rank));
  }
  for (auto& r : runs) {
    // A rank whose own test passed, then whose exit LeakSanitizer's tracer crashed (a sanitizer
    // flake, tests/support/process.hpp): its work is done; the job is not run again (the other
    // ranks' state is gone), the rank counts as passed and says so.
    if (r.exit_code != 0 && tally::test::lsan_tracer_crashed(r.err) &&
        r.out.find("[  PASSED  ] 1 test") != std::string::npos &&
        r.out.find("[  FAILED  ]") == std::string::npos) {
      std::fprintf(stderr,
                   "note: rank %d passed, then LeakSanitizer's tracer crashed at its exit (a "
                   "sanitizer flake, not a leak report); counted as passed\n",
                   r.rank);
      r.exit_code = 0;
    }
  }
  return runs;
}

std::string hex_of(const char* p, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i)
    out += fmt::format("{:02x}", static_cast<unsigned char>(p[i]));
  return out;
}

long fake_counter(const char* name) {
  const auto* c = static_cast<const std::atomic<long>*>(dlsym(RTLD_DEFAULT, name));
  return c != nullptr ? c->load() : -1;
}

// Sizes that differ by rank, with an empty object on every third rank.
std::size_t size_of_rank(int r, std::size_t scale) {
  return r % 3 == 1 ? 0 : (static_cast<std::size_t>(r) + 1) * scale + static_cast<std::size_t>(r);
}

// gather_object to every root, at every scale: the root gets every object in rank order, the
// others nothing; the engine uses the backend's rooted gather (point-to-point calls, not an
// all-gather: the fake counts them).
void check_gather_objects(const tally::test::WithCollectives& b,
                          std::initializer_list<std::size_t> scales) {
  const int rank = b->rank();
  const int world = b->world_size();
  for (const std::size_t scale : scales) {
    for (int root = 0; root < world; ++root) {
      const long sends = fake_counter("tally_fake_nccl_sends");
      const long recvs = fake_counter("tally_fake_nccl_recvs");
      const Bytes mine = pattern(rank, size_of_rank(rank, scale));
      const auto got = b->gather_object(mine, root);
      bool others = false;
      for (int r = 0; r < world; ++r) others = others || (r != root && size_of_rank(r, scale) > 0);
      if (rank == root) {
        ASSERT_EQ(got.size(), static_cast<std::size_t>(world));
        for (int r = 0; r < world; ++r)
          EXPECT_EQ(to_bytes(got[static_cast<std::size_t>(r)]), pattern(r, size_of_rank(r, scale)))
              << "rank " << r << "'s object at root " << root << ", scale " << scale;
        if (others) {
          EXPECT_GT(fake_counter("tally_fake_nccl_recvs"), recvs);
        }
      } else {
        EXPECT_EQ(got.size(), 0u);
        if (!mine.empty()) {
          EXPECT_GT(fake_counter("tally_fake_nccl_sends"), sends);
        }
      }
    }
  }
  // Every object empty; only the root's not (nothing crosses the wire); only the last rank's.
  for (int root = 0; root < world; ++root) {
    for (const int only : {-1, root, world - 1}) {
      const Bytes mine = rank == only ? pattern(rank, 1000) : Bytes{};
      const auto got = b->gather_object(mine, root);
      if (rank != root) continue;
      for (int r = 0; r < world; ++r)
        EXPECT_EQ(to_bytes(got[static_cast<std::size_t>(r)]),
                  r == only ? pattern(r, 1000) : Bytes{})
            << "only rank " << only << " has bytes, root " << root;
    }
  }
}

// The primitive itself: counts with zeros, `recv` only on the root.
void check_gather_primitive(const tally::test::WithCollectives& b) {
  auto* g = tally::get_primitive<tally::RootedGather>(*b.backend);
  ASSERT_NE(g, nullptr);
  const int rank = b->rank();
  const int world = b->world_size();
  std::vector<std::size_t> counts(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) counts[static_cast<std::size_t>(r)] = r == 1 ? 0 : 5 * r + 3;
  std::size_t total = 0;
  for (const auto n : counts) total += n;
  const Bytes mine = pattern(rank, counts[static_cast<std::size_t>(rank)]);
  for (int root = 0; root < world; ++root) {
    Bytes recv(rank == root ? total : 0, std::byte{0xee});
    g->gather_varying(mine.data(), counts, rank == root ? recv.data() : nullptr, root,
                      {"test gather", {}});
    if (rank != root) continue;
    Bytes want;
    for (int r = 0; r < world; ++r) {
      const Bytes p = pattern(r, counts[static_cast<std::size_t>(r)]);
      want.insert(want.end(), p.begin(), p.end());
    }
    EXPECT_EQ(recv, want) << "root " << root;
  }
}

std::string probe_yaml() {
  return std::string("plugins: {paths: ['") + TALLY_TEST_PLUGIN_DIR +
         "/testkit']}\n"
         "metrics: [{type: SequenceProbe}, {type: CountProbe, bins: 7}]\n";
}

// An Evaluator over `backend` (null: its own nondist one) fed samples [begin, end) of 0..n-1.
tally::Value probe_results(std::shared_ptr<DistBackend> backend, int begin, int end) {
  tally::EvaluatorOptions options;
  options.backend = std::move(backend);
  auto ev = tally::Evaluator::from_yaml(probe_yaml(), std::move(options));
  for (int i = begin; i < end; i += 37) {
    std::vector<std::int64_t> xs;
    for (int x = i; x < std::min(end, i + 37); ++x) xs.push_back(x * 7919 % 10007);
    tally::Batch batch;
    batch.set("x", tally::Tensor::from_vector(xs));
    ev.add(batch);
  }
  return ev.compute().metrics;
}

constexpr int kProbeSamples = 1000;

}  // namespace

// One rank of a job that NcclEmulatedRanks.* starts (disabled: it runs only there).
TEST(NcclEmulatedRank, DISABLED_OneRankOfAJob) {
  const char* scenario = std::getenv("TALLY_TEST_NCCL_SCENARIO");
  const char* out_dir = std::getenv("TALLY_TEST_NCCL_OUT");
  if (scenario == nullptr || out_dir == nullptr)
    GTEST_SKIP() << "a rank of the jobs NcclEmulatedRanks.* start, not a test of its own";
  const fs::path out = out_dir;
  const int rank = env_int("RANK", 0);
  const int world = env_int("WORLD_SIZE", 1);
  if (std::string(scenario) == "no_rank0") {
    const std::string m = error_of<tally::RuntimeError>([] { make_nccl({{"timeout", 1.0}}); });
    std::ofstream(out / fmt::format("error-{}.txt", rank)) << m;
    return;
  }
  if (std::string(scenario) == "gather_alone") {  // rank 1 never joins rank 0's gather
    const auto b = make_nccl({{"timeout", 60.0}});
    b->barrier();
    if (rank == 0) {
      auto* g = tally::get_primitive<tally::RootedGather>(*b.backend);
      const std::size_t counts[] = {10, 20};
      Bytes recv(30);
      const Bytes mine = pattern(0, 10);
      const std::string m = error_of<tally::RuntimeError>([&] {
        g->gather_varying(mine.data(), counts, recv.data(), 0,
                          {"gather_object (sync payload)", std::chrono::milliseconds(1000)});
      });
      std::ofstream(out / "error-0.txt") << m << "\ninitialized=" << b.backend->is_initialized();
    }
    return;
  }
  if (std::string(scenario) == "wrong_world") {  // every rank but 0 says one rank more
    if (rank != 0) setenv("WORLD_SIZE", std::to_string(world + 1).c_str(), 1);
    std::string m;
    try {
      make_nccl({{"timeout", 3.0}});
      m = "no error";
    } catch (const tally::ConfigError& e) {
      m = std::string("ConfigError: ") + e.what();
    } catch (const tally::RuntimeError& e) {
      m = std::string("RuntimeError: ") + e.what();
    }
    std::ofstream(out / fmt::format("error-{}.txt", rank)) << m;
    return;
  }
  const auto b = make_nccl({{"timeout", 60.0}});
  ASSERT_EQ(b->rank(), rank);
  ASSERT_EQ(b->world_size(), world);
  const auto* id = static_cast<const char*>(dlsym(RTLD_DEFAULT, "tally_fake_nccl_last_id"));
  ASSERT_NE(id, nullptr);
  std::ofstream(out / fmt::format("id-{}.txt", rank)) << hex_of(id, 128);

  check_gather_primitive(b);
  check_gather_objects(b, {1, 1000, 100000});
  for (int src = 0; src < world; ++src) {
    const Bytes obj = pattern(src, 3000 + static_cast<std::size_t>(src));
    EXPECT_EQ(to_bytes(b->broadcast_object(rank == src ? obj : Bytes{}, src)), obj);
  }
  const auto all = b->all_gather_object(pattern(rank, size_of_rank(rank, 100)));
  ASSERT_EQ(all.size(), static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r)
    EXPECT_EQ(to_bytes(all[static_cast<std::size_t>(r)]), pattern(r, size_of_rank(r, 100)));
  for (int root = 0; root < world; ++root)
    for (const auto op : {tally::ReduceOp::sum, tally::ReduceOp::min, tally::ReduceOp::max})
      tally::test::check_reduce(*b, 300, op, root);

  // A second backend of the same job, through the same store (its keys under the next prefix),
  // with a chunk so small that every gather goes in rounds.
  const auto small = make_nccl({{"timeout", 60.0}, {"chunk_bytes", 64}});
  check_gather_primitive(small);
  check_gather_objects(small, {1, 300});
  for (int root = 0; root < world; ++root)
    tally::test::check_reduce(*small, 50, tally::ReduceOp::sum, root);

  // The engine's sync over the backend: an Evaluator fed this rank's shard.
  tally::Value results =
      probe_results(b.backend, kProbeSamples * rank / world, kProbeSamples * (rank + 1) / world);
  std::ofstream(out / fmt::format("results-{}.json", rank)) << results.to_json();
  b->barrier();
}

namespace {

class NcclEmulatedRanks : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr)
      GTEST_SKIP() << "runs in the plain test_nccl_emulated, not as a rank of mpirun";
  }
};

// The ranks' output for a failure message: the ranks that failed first (a CI log keeps the head
// of a long message), each rank's output cut to its last 6000 characters.
std::string describe(const std::vector<RankRun>& runs) {
  const auto tail = [](const std::string& t) {
    return t.size() <= 6000 ? t : "[...]" + t.substr(t.size() - 6000);
  };
  std::string s;
  for (const bool failed : {true, false})
    for (const auto& r : runs)
      if ((r.exit_code != 0) == failed)
        s += fmt::format("--- rank {}: exit {}\n{}{}\n", r.rank, r.exit_code, tail(r.out),
                         tail(r.err));
  return s;
}

}  // namespace

// N ranks bootstrapped through the TCP store: every rank joins with rank 0's id, and the rooted
// gather, the other collectives and an Evaluator's sync work across them; the sync's results
// equal the single-process run's (the probes' per-rank counts aside).
TEST_P(NcclEmulatedRanks, StoreBootstrapRootedGatherAndSync) {
  const int world = GetParam();
  tally::test::TempDir dir;
  const std::uint16_t port = free_port();
  ASSERT_NE(port, 0);
  std::vector<int> ranks(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) ranks[static_cast<std::size_t>(r)] = r;
  const auto runs = run_job(ranks, world, port, "job", dir.path);
  for (const auto& r : runs) ASSERT_EQ(r.exit_code, 0) << describe(runs);

  const std::string id0 = tally::test::read_file(dir.path / "id-0.txt");
  EXPECT_EQ(id0.size(), 256u);
  for (int r = 1; r < world; ++r)
    EXPECT_EQ(tally::test::read_file(dir.path / fmt::format("id-{}.txt", r)), id0)
        << "rank " << r << " did not get rank 0's id";

  tally::Value want = probe_results(nullptr, 0, kProbeSamples);
  want.find("SequenceProbe")->set("per_rank", tally::Value::array());
  for (int r = 0; r < world; ++r) {
    const std::string text = tally::test::read_file(dir.path / fmt::format("results-{}.json", r));
    ASSERT_FALSE(text.empty()) << "rank " << r;
    // Compared as JSON text: the probes' values and the per-rank counts of SequenceProbe.
    std::string per_rank = "[";
    for (int s = 0; s < world; ++s)
      per_rank += fmt::format("{}{}", s == 0 ? "" : ",",
                              kProbeSamples * (s + 1) / world - kProbeSamples * s / world);
    per_rank += "]";
    EXPECT_NE(text.find("\"count\":" + std::to_string(kProbeSamples)), std::string::npos) << text;
    std::string want_text = want.to_json();
    const std::string empty = "\"per_rank\":[]";
    const auto at = want_text.find(empty);
    ASSERT_NE(at, std::string::npos) << want_text;
    want_text.replace(at, empty.size(), "\"per_rank\":" + per_rank);
    EXPECT_EQ(text, want_text) << "rank " << r;
  }
  // The fake's message folders are gone: every rank left.
  for (const auto& e : fs::directory_iterator(dir.path))
    EXPECT_EQ(e.path().filename().string().rfind("tally-fake-nccl-", 0), std::string::npos)
        << e.path();
}

INSTANTIATE_TEST_SUITE_P(Worlds, NcclEmulatedRanks, ::testing::Values(1, 2, 3, 4),
                         [](const auto& p) { return std::to_string(p.param) + "Ranks"; });

// Rank 0 never starts: every other rank gives up after backend.timeout, naming itself, the store
// and what it waited for.
TEST(NcclEmulatedRanksFault, WithoutRankZeroTheOthersTimeOutNamingTheStoreAndTheRank) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr)
    GTEST_SKIP() << "runs in the plain test_nccl_emulated, not as a rank of mpirun";
  tally::test::TempDir dir;
  const std::uint16_t port = free_port();
  ASSERT_NE(port, 0);
  const auto runs = run_job({1, 2}, 3, port, "no_rank0", dir.path);
  for (const auto& r : runs) {
    ASSERT_EQ(r.exit_code, 0) << describe(runs);
    const std::string m = tally::test::read_file(dir.path / fmt::format("error-{}.txt", r.rank));
    EXPECT_HAS(m, "nccl backend");
    EXPECT_HAS(m, fmt::format("rank {}", r.rank));
    EXPECT_HAS(m, fmt::format("127.0.0.1:{}", port));
  }
}

// Ranks started with another world size than rank 0's: a ConfigError naming both sizes on those
// ranks (rank 0's record says its size); rank 0 then times out waiting for them to join.
TEST(NcclEmulatedRanksFault, ARankOfAnotherWorldSizeIsAConfigErrorNamingBoth) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr)
    GTEST_SKIP() << "runs in the plain test_nccl_emulated, not as a rank of mpirun";
  tally::test::TempDir dir;
  const std::uint16_t port = free_port();
  ASSERT_NE(port, 0);
  const auto runs = run_job({0, 1}, 2, port, "wrong_world", dir.path);
  for (const auto& r : runs) ASSERT_EQ(r.exit_code, 0) << describe(runs);
  const std::string m1 = tally::test::read_file(dir.path / "error-1.txt");
  EXPECT_HAS(m1, "ConfigError: nccl backend: rank 1 of 3");
  EXPECT_HAS(m1, "rank 0 set a world size of 2");
  EXPECT_HAS(m1, "this rank has a world size of 3");
  EXPECT_HAS(m1, fmt::format("127.0.0.1:{}", port));
  const std::string m0 = tally::test::read_file(dir.path / "error-0.txt");
  EXPECT_HAS(m0, "RuntimeError: nccl backend: rank 0 of 2");
  EXPECT_HAS(m0, "timed out after 3 s (backend.timeout)");
  EXPECT_HAS(m0, "did every rank start?");
}

// The rooted gather's root waits for a rank that never sends: the call's deadline passes, the
// communicator is aborted, and the message names the collective, the root and the deadline.
TEST(NcclEmulatedRanksFault, ARootedGatherThatARankNeverJoinsTimesOutAndAborts) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr)
    GTEST_SKIP() << "runs in the plain test_nccl_emulated, not as a rank of mpirun";
  tally::test::TempDir dir;
  const std::uint16_t port = free_port();
  ASSERT_NE(port, 0);
  const auto runs = run_job({0, 1}, 2, port, "gather_alone", dir.path);
  for (const auto& r : runs) ASSERT_EQ(r.exit_code, 0) << describe(runs);
  const std::string m = tally::test::read_file(dir.path / "error-0.txt");
  EXPECT_HAS(m,
             "nccl backend: rank 0 of 2 (cuda:0): gather_object (sync payload): grouped "
             "ncclSend/ncclRecv gathering 30 bytes to rank 0 timed out after 1 s (this call's "
             "deadline); the communicator was aborted; every rank must reach the same collective");
  EXPECT_HAS(m, "initialized=0");
}

// ---- across the hosts of the multi-host test bed (tests/multihost/netns.sh) --------------------

namespace {

// A test bed of `n` hosts (network namespaces on a bridge) for one test, or why there is none.
struct Bed {
  std::string skip;
  std::string name;
  std::vector<std::string> hosts;  // host k's address
  explicit Bed(int n) {
    const std::string bed = TALLY_MULTIHOST_BED;
    if (!fs::exists(bed)) {
      skip = bed + " is missing";
      return;
    }
    auto r = tally::test::run_command(bed + " check");
    if (r.exit_code != 0) {
      skip = r.out + r.err;
      while (!skip.empty() && skip.back() == '\n') skip.pop_back();
      return;
    }
    r = tally::test::run_command(fmt::format("{} up {} {}", bed, n, ::getpid()));
    std::istringstream lines(r.out);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("NAME=", 0) == 0) name = line.substr(5);
      if (line.rfind("HOSTS=", 0) == 0) {
        std::istringstream list(line.substr(6));
        std::string h;
        while (std::getline(list, h, ',')) hosts.push_back(h);
      }
    }
    if (r.exit_code != 0 || name.empty() || hosts.size() != static_cast<std::size_t>(n))
      skip = "netns.sh up " + std::to_string(n) + " failed (exit " + std::to_string(r.exit_code) +
             "): " + r.out + r.err;
  }
  ~Bed() {
    if (!name.empty()) tally::test::run_command(std::string(TALLY_MULTIHOST_BED) + " down " + name);
  }
  Bed(const Bed&) = delete;
  Bed& operator=(const Bed&) = delete;
  // The ranks run without LeakSanitizer's exit check: its tracer, stopping every thread of a
  // process entered into a namespace, once crashed itself there (signal 11 in LSan's tracer,
  // "LeakSanitizer has encountered a fatal error": no leak report) and failed a rank that had
  // passed. The same code paths are leak-checked on one host (NcclEmulatedRanks.*).
  std::vector<std::string> exec(int k) const {
    const char* asan = std::getenv("ASAN_OPTIONS");
    return {"/usr/bin/env",
            std::string("ASAN_OPTIONS=") + (asan != nullptr ? std::string(asan) + ":" : "") +
                "detect_leaks=0",
            TALLY_MULTIHOST_BED,
            "exec",
            name,
            std::to_string(k)};
  }
};

}  // namespace

// Ranks on separate hosts (network namespaces that share only a bridge; the file system is the
// machine's, which the fake's messages use): the NCCL id goes from rank 0 to the others through the
// TCP store rank 0 serves on host 0's address, over the veth links. 3 ranks on 3 hosts, then 4 on
// 3 hosts (two on host 0); every rank joins with rank 0's id and the collectives and the sync
// work as on one host.
TEST(NcclEmulatedAcrossHosts, TheIdGoesThroughTheStoreOnHostZero) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr)
    GTEST_SKIP() << "runs in the plain test_nccl_emulated, not as a rank of mpirun";
  const Bed bed(3);
  if (!bed.skip.empty()) GTEST_SKIP() << "no multi-host test bed: " << bed.skip;
  for (const int world : {3, 4}) {
    tally::test::TempDir dir;
    std::vector<int> ranks(static_cast<std::size_t>(world));
    for (int r = 0; r < world; ++r) ranks[static_cast<std::size_t>(r)] = r;
    // Rank r on host r % 3; local ranks count the ranks before it on its host.
    const auto runs = run_job(ranks, world, 29500, "job", dir.path, bed.hosts[0], [&](int rank) {
      return Placement{bed.exec(rank % 3), rank / 3};
    });
    for (const auto& r : runs) ASSERT_EQ(r.exit_code, 0) << world << " ranks\n" << describe(runs);
    const std::string id0 = tally::test::read_file(dir.path / "id-0.txt");
    EXPECT_EQ(id0.size(), 256u);
    for (int r = 1; r < world; ++r)
      EXPECT_EQ(tally::test::read_file(dir.path / fmt::format("id-{}.txt", r)), id0)
          << "rank " << r << " of " << world << " did not get rank 0's id";
    const std::string results0 = tally::test::read_file(dir.path / "results-0.json");
    EXPECT_NE(results0.find("\"count\":" + std::to_string(kProbeSamples)), std::string::npos)
        << results0;
    for (int r = 1; r < world; ++r)
      EXPECT_EQ(tally::test::read_file(dir.path / fmt::format("results-{}.json", r)), results0);
  }
  // Rank 0's host is cut off: the others time out naming the store on host 0.
  tally::test::TempDir dir;
  tally::test::run_command(fmt::format("{} cut {} 0", TALLY_MULTIHOST_BED, bed.name));
  const auto runs = run_job({1, 2}, 3, 29500, "no_rank0", dir.path, bed.hosts[0], [&](int rank) {
    return Placement{bed.exec(rank), 0};
  });
  tally::test::run_command(fmt::format("{} mend {} 0", TALLY_MULTIHOST_BED, bed.name));
  for (const auto& r : runs) {
    ASSERT_EQ(r.exit_code, 0) << describe(runs);
    const std::string m = tally::test::read_file(dir.path / fmt::format("error-{}.txt", r.rank));
    EXPECT_HAS(m, fmt::format("rank {}", r.rank));
    EXPECT_HAS(m, bed.hosts[0] + ":29500");
  }
}
