// See nccl_support.hpp. Plain C++ and POSIX: no CUDA, NCCL or MPI here.
#include "nccl_support.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "tally/sdk/error.hpp"

namespace tally_nccl {

namespace {

constexpr const char* kPrefix = "nccl backend: ";
constexpr const char* kMagic = "tally-nccl-rendezvous 1";

[[noreturn]] void config_error(const std::string& what) {
  throw tally::ConfigError(kPrefix + what);
}

std::string hex(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (std::byte b : bytes) {
    const auto v = static_cast<unsigned>(b);
    out += kDigits[v >> 4];
    out += kDigits[v & 15];
  }
  return out;
}

std::optional<std::vector<std::byte>> unhex(std::string_view s) {
  if (s.size() % 2 != 0) return std::nullopt;
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::vector<std::byte> out(s.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = digit(s[2 * i]);
    const int lo = digit(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<std::byte>(hi * 16 + lo);
  }
  return out;
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "host";
  return buf;
}

}  // namespace

const char* bootstrap_name(BootstrapKind k) noexcept {
  switch (k) {
    case BootstrapKind::Alone:
      return "alone";
    case BootstrapKind::Mpi:
      return "mpi";
    case BootstrapKind::File:
      return "rendezvous file";
    case BootstrapKind::Store:
      return "tcp store";
  }
  return "?";
}

BootstrapKind choose_bootstrap(const LaunchEnv& env, bool have_rendezvous, bool built_with_mpi,
                               StoreSource store) {
  if (have_rendezvous) return BootstrapKind::File;
  if (store == StoreSource::Config) return BootstrapKind::Store;
  if (env.under_mpi && built_with_mpi) return BootstrapKind::Mpi;
  if (env.world_size == 1) return BootstrapKind::Alone;
  if (store == StoreSource::Environment) return BootstrapKind::Store;
  config_error(env.source + " says " + std::to_string(env.world_size) +
               " processes, but they have no way to share the NCCL id: set MASTER_ADDR and "
               "MASTER_PORT (or backend.master_addr and backend.master_port) to where rank 0 "
               "can serve a TCP store, or set backend.rendezvous to a file on a file system "
               "every rank sees" +
               (built_with_mpi ? std::string(", or launch with mpirun")
                               : std::string(" (this nccl backend was built without MPI)")));
}

int choose_device(std::optional<std::int64_t> requested, const LaunchEnv& env, int device_count) {
  if (device_count < 1) config_error("no CUDA device to choose from");
  if (requested) {
    if (*requested < 0 || *requested >= device_count)
      config_error("backend.device is " + std::to_string(*requested) + ", but this process sees " +
                   std::to_string(device_count) + " CUDA device" + (device_count == 1 ? "" : "s") +
                   " (0 to " + std::to_string(device_count - 1) + ")");
    return static_cast<int>(*requested);
  }
  if (env.local_rank) return *env.local_rank % device_count;
  if (env.world_size == 1) return 0;
  config_error(env.source +
               " gives no local rank (OMPI_COMM_WORLD_LOCAL_RANK, LOCAL_RANK, SLURM_LOCALID or "
               "MPI_LOCALRANKID), so the device of this rank is unknown: set backend.device");
}

// ---- the rendezvous file ------------------------------------------------------------------

std::string encode_rendezvous(std::span<const std::byte> id, int world_size,
                              const std::string& job_id) {
  // Appends, not a chain of operator+: g++ 12 at -O2 warns (-Warray-bounds, a false positive)
  // on the chain once it is inlined.
  std::string out(kMagic);
  out += "\nworld_size=";
  out += std::to_string(world_size);
  out += "\njob_id=";
  out += one_line(job_id);
  out += "\nid=";
  out += hex(id);
  out += "\nend\n";
  return out;
}

RendezvousRecord decode_rendezvous(const std::string& text) {
  RendezvousRecord r;
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kMagic) return r;
  bool have_world = false, have_job = false, have_id = false, have_end = false;
  while (std::getline(in, line)) {
    if (line == "end") {
      have_end = true;
      break;
    }
    const auto eq = line.find('=');
    if (eq == std::string::npos) return r;
    const std::string key = line.substr(0, eq);
    const std::string value = line.substr(eq + 1);
    if (key == "world_size") {
      int w = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), w);
      if (ec != std::errc() || end != value.data() + value.size() || w < 1) return r;
      r.world_size = w;
      have_world = true;
    } else if (key == "job_id") {
      r.job_id = value;
      have_job = true;
    } else if (key == "id") {
      auto bytes = unhex(value);
      if (!bytes || bytes->empty()) return r;
      r.id = std::move(*bytes);
      have_id = true;
    }
  }
  r.valid = have_world && have_job && have_id && have_end;
  return r;
}

void publish_rendezvous(const std::filesystem::path& path, std::span<const std::byte> id,
                        int world_size, const std::string& job_id) {
  const std::string text = encode_rendezvous(id, world_size, job_id);
  const std::filesystem::path tmp =
      path.parent_path() /
      ("." + path.filename().string() + ".tmp-" + host_name() + "-" + std::to_string(::getpid()));
  const auto fail = [&](const std::string& what) {
    const int err = errno;
    ::unlink(tmp.c_str());
    config_error("cannot write the rendezvous file " + path.string() +
                 " (backend.rendezvous): " + what + ": " + std::strerror(err));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("open " + tmp.string());
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      fail("write " + tmp.string());
    }
    done += static_cast<std::size_t>(n);
  }
  // On disk before the rename makes it visible: a reader never sees a partial record.
  if (::fsync(fd) != 0 && errno != EINVAL) {
    ::close(fd);
    fail("fsync " + tmp.string());
  }
  if (::close(fd) != 0) fail("close " + tmp.string());
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename " + tmp.string());
}

std::vector<std::byte> wait_for_rendezvous(const std::filesystem::path& path, std::size_t id_size,
                                           int world_size, const std::string& job_id, int rank,
                                           std::chrono::duration<double> timeout) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(timeout);
  auto pause = std::chrono::milliseconds(5);
  std::string seen = "the file does not exist";
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream text;
      text << in.rdbuf();
      const RendezvousRecord r = decode_rendezvous(text.str());
      if (!r.valid) {
        seen = "it is not a complete tally rendezvous record";
      } else {
        const bool same_job = !job_id.empty() && r.job_id == job_id;
        const bool other_job = !job_id.empty() && !r.job_id.empty() && r.job_id != job_id;
        const std::string what = "job '" + (r.job_id.empty() ? std::string("?") : r.job_id) +
                                 "', world size " + std::to_string(r.world_size);
        if (other_job) {
          seen = "it holds the record of another job (" + what + "), left by an earlier run?";
        } else if (r.world_size != world_size || r.id.size() != id_size) {
          if (same_job)
            config_error("rank " + std::to_string(rank) + ": rank 0 published a world size of " +
                         std::to_string(r.world_size) + " and an id of " +
                         std::to_string(r.id.size()) + " bytes in " + path.string() +
                         ", this rank has a world size of " + std::to_string(world_size) +
                         " and expects " + std::to_string(id_size) + " bytes");
          seen = "it holds a record of world size " + std::to_string(r.world_size) +
                 " (this job has " + std::to_string(world_size) + "), left by an earlier run?";
        } else {
          return r.id;
        }
      }
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      const double waited = std::chrono::duration<double>(now - start).count();
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.3g", waited);
      throw tally::RuntimeError(
          std::string(kPrefix) + "rank " + std::to_string(rank) + " of " +
          std::to_string(world_size) + ": timed out after " + secs +
          " s (backend.timeout) waiting for rank 0 to publish the NCCL id in " + path.string() +
          " (backend.rendezvous): " + seen +
          "; is rank 0 running, and is the file on a file system every rank sees?");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(250));
  }
}

void remove_rendezvous(const std::filesystem::path& path) noexcept {
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

// ---- the TCP store ---------------------------------------------------------------------------

bool store_in_env(const GetEnv& env) {
  return env("MASTER_ADDR") != nullptr || env("MASTER_PORT") != nullptr ||
         env("SLURM_STEP_NODELIST") != nullptr;
}

tally_store::StoreAddress store_address(const GetEnv& env, int rank,
                                        const std::optional<std::string>& master_addr,
                                        std::optional<std::int64_t> master_port) {
  if (!master_addr && !master_port) {
    auto from_env = tally_store::store_address_from_env(env, rank, kPrefix);
    if (!from_env)
      config_error(
          "no TCP store to bootstrap through: set MASTER_ADDR and MASTER_PORT, or "
          "backend.master_addr and backend.master_port");
    return *from_env;
  }
  tally_store::StoreAddress a;
  const char* env_addr = env("MASTER_ADDR");
  const char* env_port = env("MASTER_PORT");
  std::string addr_from, port_from;
  if (master_addr) {
    if (master_addr->empty())
      config_error("backend.master_addr is empty: expected a host name or address");
    a.host = *master_addr;
    addr_from = "backend.master_addr=" + a.host;
  } else if (env_addr != nullptr && *env_addr != '\0') {
    a.host = env_addr;
    addr_from = "MASTER_ADDR=" + a.host;
  } else {
    config_error("backend.master_port is set but backend.master_addr is not, and MASTER_ADDR is " +
                 std::string(env_addr == nullptr ? "not set" : "empty") +
                 ": set either to the host of rank 0");
  }
  std::int64_t port = 0;
  if (master_port) {
    port = *master_port;
    if (port < 1 || port > 65535)
      config_error("backend.master_port must be a port in 1..65535, got " + std::to_string(port));
    port_from = "backend.master_port=" + std::to_string(port);
  } else if (env_port != nullptr) {
    const std::string_view s(env_port);
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), port);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || port < 1 || port > 65535)
      config_error("MASTER_PORT='" + std::string(s) +
                   "' is not a port in 1..65535 (backend.master_addr is set; set "
                   "backend.master_port too, or correct MASTER_PORT)");
    port_from = "MASTER_PORT=" + std::string(s);
  } else {
    config_error(
        "backend.master_addr is set but backend.master_port is not, and MASTER_PORT is not set: "
        "set either to a free TCP port on the host of rank 0");
  }
  a.port = static_cast<std::uint16_t>(port);
  // torchrun's agent already hosts a store at MASTER_ADDR:MASTER_PORT: a second server there
  // would fail, so tally is only a client of it when the configured address is that one.
  const char* agent = env("TORCHELASTIC_USE_AGENT_STORE");
  const bool agent_store = agent != nullptr && std::string_view(agent) == "True" &&
                           env_addr != nullptr && a.host == env_addr && env_port != nullptr &&
                           std::to_string(port) == env_port;
  a.host_here = rank == 0 && !agent_store;
  a.agent_store = agent_store;
  a.source = addr_from + ", " + port_from + (agent_store ? " (torchrun's agent store)" : "");
  return a;
}

std::string store_id_key(const std::string& prefix) { return prefix + "nccl/id"; }

namespace {
constexpr char kIdMagic[8] = {'t', 'a', 'l', 'l', 'y', 'n', 'i', '1'};
}

std::vector<std::byte> encode_store_id(const StoreIdRecord& record) {
  std::vector<std::byte> out(sizeof kIdMagic + 3 * sizeof(std::int32_t) + record.id.size());
  std::byte* p = out.data();
  const auto put = [&](const void* src, std::size_t n) {
    std::memcpy(p, src, n);
    p += n;
  };
  const auto size = static_cast<std::int32_t>(record.id.size());
  put(kIdMagic, sizeof kIdMagic);
  put(&record.status, sizeof record.status);
  put(&record.world_size, sizeof record.world_size);
  put(&size, sizeof size);
  if (!record.id.empty()) put(record.id.data(), record.id.size());
  return out;
}

std::optional<StoreIdRecord> decode_store_id(std::span<const std::byte> bytes) {
  constexpr std::size_t kHead = sizeof kIdMagic + 3 * sizeof(std::int32_t);
  if (bytes.size() < kHead || std::memcmp(bytes.data(), kIdMagic, sizeof kIdMagic) != 0)
    return std::nullopt;
  StoreIdRecord r;
  std::int32_t size = 0;
  const std::byte* p = bytes.data() + sizeof kIdMagic;
  std::memcpy(&r.status, p, sizeof r.status);
  std::memcpy(&r.world_size, p + 4, sizeof r.world_size);
  std::memcpy(&size, p + 8, sizeof size);
  if (size < 0 || static_cast<std::size_t>(size) != bytes.size() - kHead) return std::nullopt;
  r.id.assign(bytes.begin() + static_cast<std::ptrdiff_t>(kHead), bytes.end());
  return r;
}

std::size_t grown_capacity(std::size_t current, std::size_t need, std::size_t limit) noexcept {
  if (need <= current) return current;
  const std::size_t doubled = current > SIZE_MAX / 2 ? SIZE_MAX : current * 2;
  return std::min(std::max(need, doubled), std::max(need, limit));
}

}  // namespace tally_nccl
