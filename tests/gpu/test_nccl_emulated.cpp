// The nccl backend's own code (backends/nccl/nccl_backend.cpp, compiled into this test) on an
// emulated device: the CUDA runtime is fake_cudart.cpp (host memory as device memory) and the
// libnccl.so.2 it opens is fake_nccl.cpp, a world of one that answers like a non-blocking
// communicator and injects faults on request. Runs on machines without a GPU and checks what a
// GPU machine cannot easily provoke: the polling of non-blocking calls, collective and bootstrap
// timeouts, asynchronous errors, the abort and the state after it; and the object collectives
// through the staging buffers at every size and chunk. Also run under `mpirun -np 1`, where the
// backend bootstraps through MPI.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "config.hpp"
#include "support/expect_error.hpp"
#include "support/process.hpp"
#include "support/with_collectives.hpp"
#include "tally/dist_backend.hpp"
#include "tally/error.hpp"
#include "tally/plugin.hpp"

// The plugin entry of nccl_backend.cpp, compiled into this executable (BOOST_DLL_ALIAS).
namespace _autoaliases {
extern "C" const void* tally_plugin;
}

using tally::DistBackend;
using tally::Value;

namespace {

using Bytes = std::vector<std::byte>;

const tally::ComponentInfo& nccl_info() {
  using Entry = const tally::PluginManifest* (*)() noexcept;
  static const tally::PluginManifest* m = reinterpret_cast<Entry>(_autoaliases::tally_plugin)();
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
    // NCCL has a reduction; varying gathers are the engine's padded fallback.
    EXPECT_NE(tally::get_primitive<tally::Reducer>(*b.backend), nullptr);
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
