// See launch_env.hpp.
#include "launch_env.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tally/error.hpp"

namespace tally_launch {

namespace {

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

[[noreturn]] void config_error(std::string_view who, const std::string& what) {
  throw tally::ConfigError(std::string(who) + what);
}

int parse_int(std::string_view who, const char* name, const char* value) {
  const std::string_view s(value);
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < INT32_MIN ||
      v > INT32_MAX)
    config_error(who, std::string(name) + "='" + std::string(s) + "' is not an integer");
  return static_cast<int>(v);
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

}  // namespace

GetEnv process_env() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

LaunchEnv read_launch_env(const GetEnv& env, std::string_view who) {
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
      config_error(who, std::string(have) + " is set but " + miss + " is not: " + f.launcher +
                            " sets " + f.rank + ", " + f.size + " and " + f.local +
                            "; set them all or none");
    }
    out.rank = parse_int(who, f.rank, rank);
    out.world_size = parse_int(who, f.size, size);
    out.source = std::string(f.rank) + "=" + rank + ", " + f.size + "=" + size;
    if (const char* local = env(f.local)) {
      out.local_rank = parse_int(who, f.local, local);
      out.source += std::string(", ") + f.local + "=" + local;
    }
    out.source += std::string(" (") + f.launcher + ")";
    if (out.world_size < 1)
      config_error(who,
                   std::string(f.size) + "=" + size + " must be at least 1 (" + out.source + ")");
    if (out.rank < 0 || out.rank >= out.world_size)
      config_error(who, std::string(f.rank) + "=" + rank + " is outside [0, " + f.size + "=" +
                            size + ") (" + out.source + ")");
    if (out.local_rank && (*out.local_rank < 0 || *out.local_rank >= out.world_size))
      config_error(who, std::string(f.local) + "=" + env(f.local) + " is outside [0, " + f.size +
                            "=" + size + ") (" + out.source + ")");
    return out;
  }
  return out;
}

}  // namespace tally_launch
