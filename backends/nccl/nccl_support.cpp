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

#include "tally/error.hpp"

namespace tally_nccl {

namespace {

constexpr const char* kPrefix = "nccl backend: ";
constexpr const char* kMagic = "tally-nccl-rendezvous 1";

// One launcher's variables: rank, world size, local rank.
struct Family {
  const char* rank;
  const char* size;
  const char* local;
  const char* launcher;
};
constexpr Family kFamilies[] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun"},
    {"RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "Slurm"},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPICH/Intel MPI"},
};

[[noreturn]] void config_error(const std::string& what) {
  throw tally::ConfigError(kPrefix + what);
}

int parse_int(const char* name, const char* value) {
  const std::string_view s(value);
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < INT32_MIN ||
      v > INT32_MAX)
    config_error(std::string(name) + "='" + std::string(s) + "' is not an integer");
  return static_cast<int>(v);
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

GetEnv process_env() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

LaunchEnv read_launch_env(const GetEnv& env) {
  LaunchEnv out;
  const auto set = [&](const char* name) { return env(name) != nullptr; };
  out.under_mpi = set("OMPI_COMM_WORLD_SIZE") || set("PMI_SIZE") || set("PMIX_RANK");

  if (const char* run = env("TORCHELASTIC_RUN_ID")) {
    out.job_id = std::string("torchrun:") + run;
  } else if (const char* job = env("SLURM_JOB_ID")) {
    out.job_id = std::string("slurm:") + job;
    if (const char* step = env("SLURM_STEP_ID")) out.job_id += std::string(".") + step;
  } else if (const char* ns = env("PMIX_NAMESPACE")) {
    out.job_id = std::string("pmix:") + ns;
  } else if (const char* ompi = env("OMPI_MCA_ess_base_jobid")) {
    out.job_id = std::string("ompi:") + ompi;
  }
  out.job_id = one_line(out.job_id);

  for (const Family& f : kFamilies) {
    const char* rank = env(f.rank);
    const char* size = env(f.size);
    if (rank == nullptr && size == nullptr) continue;
    if (rank == nullptr || size == nullptr) {
      const char* have = rank != nullptr ? f.rank : f.size;
      const char* miss = rank != nullptr ? f.size : f.rank;
      config_error(std::string(have) + " is set but " + miss + " is not: " + f.launcher + " sets " +
                   f.rank + ", " + f.size + " and " + f.local + "; set them all or none");
    }
    out.rank = parse_int(f.rank, rank);
    out.world_size = parse_int(f.size, size);
    out.source = std::string(f.rank) + "=" + rank + ", " + f.size + "=" + size;
    if (const char* local = env(f.local)) {
      out.local_rank = parse_int(f.local, local);
      out.source += std::string(", ") + f.local + "=" + local;
    }
    out.source += std::string(" (") + f.launcher + ")";
    if (out.world_size < 1)
      config_error(std::string(f.size) + "=" + size + " must be at least 1 (" + out.source + ")");
    if (out.rank < 0 || out.rank >= out.world_size)
      config_error(std::string(f.rank) + "=" + rank + " is outside [0, " + f.size + "=" + size +
                   ") (" + out.source + ")");
    if (out.local_rank && (*out.local_rank < 0 || *out.local_rank >= out.world_size))
      config_error(std::string(f.local) + "=" + env(f.local) + " is outside [0, " + f.size + "=" +
                   size + ") (" + out.source + ")");
    return out;
  }
  return out;
}

const char* bootstrap_name(BootstrapKind k) noexcept {
  switch (k) {
    case BootstrapKind::Alone:
      return "alone";
    case BootstrapKind::Mpi:
      return "mpi";
    case BootstrapKind::File:
      return "rendezvous file";
  }
  return "?";
}

BootstrapKind choose_bootstrap(const LaunchEnv& env, bool have_rendezvous, bool built_with_mpi) {
  if (have_rendezvous) return BootstrapKind::File;
  if (env.under_mpi && built_with_mpi) return BootstrapKind::Mpi;
  if (env.world_size == 1) return BootstrapKind::Alone;
  config_error(env.source + " says " + std::to_string(env.world_size) +
               " processes, but they have no way to share the NCCL id: set backend.rendezvous to "
               "a file on a file system every rank sees" +
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

std::size_t grown_capacity(std::size_t current, std::size_t need, std::size_t limit) noexcept {
  if (need <= current) return current;
  const std::size_t doubled = current > SIZE_MAX / 2 ? SIZE_MAX : current * 2;
  return std::min(std::max(need, doubled), std::max(need, limit));
}

}  // namespace tally_nccl
