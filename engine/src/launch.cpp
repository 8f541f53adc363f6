// See tally/launch.hpp: the table of launchers and the one precedence.
#include "tally/launch.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "tally/sdk/error.hpp"

namespace tally::launch {

namespace {

// One launcher's variables. `size` and `local` are nullptr where the launcher sets none (PMIx
// gives a rank only).
struct Launcher {
  const char* id;     // LaunchEnv::launcher
  const char* label;  // in LaunchEnv::source: "(torchrun)"
  const char* rank;
  const char* size;
  const char* local;
  // Wins over a disagreeing launcher of a lower tier (it runs inside it); equal tiers conflict,
  // and tier 0 (env) conflicts with every launcher.
  int tier;
  // A variable that must be set too for these to count (nullptr: none).
  const char* guard = nullptr;
};

// Innermost first (tally/launch.hpp says why). torchrun and env share their variables: which one
// they are is torchrun's signature (TORCHELASTIC_RUN_ID or MASTER_ADDR).
constexpr Launcher kTorchrun{"torchrun", "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", 3};
constexpr Launcher kLaunchers[] = {
    {"mpirun", "mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", 2},
    {"PMI", "MPICH/Intel MPI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", 2},
    {"PMIx", "PMIx", "PMIX_RANK", nullptr, nullptr, 2},
    // Only in an srun step: an sbatch script or salloc shell has SLURM_NTASKS (and SLURM_PROCID)
    // too, and tally run there is one process.
    {"srun", "Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", 1, "SLURM_STEP_ID"},
};
constexpr Launcher kEnv{"env", "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", 0};

// One launcher as this environment sets it.
struct Found {
  const Launcher* l = nullptr;
  int rank = 0;
  int size = 0;  // 0: the launcher gives none
  std::optional<int> local;
  std::string source;
};

[[noreturn]] void config_error(std::string_view who, const std::string& what) {
  throw ConfigError(std::string(who) + what);
}

int parse_int(std::string_view who, const char* name, const char* value) {
  const std::string_view s(value);
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < INT32_MIN ||
      v > INT32_MAX)
    config_error(who,
                 fmt::format("the launcher variable {} must be an integer, found '{}'", name, s));
  return static_cast<int>(v);
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

// Whether `l`'s rank and size are both set (PMIx: its rank), neither, or one of them.
enum class Presence { None, Partial, Complete };
Presence presence(const GetEnv& env, const Launcher& l) {
  if (l.guard != nullptr && env(l.guard) == nullptr) return Presence::None;
  const bool rank = env(l.rank) != nullptr;
  const bool size = l.size == nullptr ? rank : env(l.size) != nullptr;
  return rank && size ? Presence::Complete : rank || size ? Presence::Partial : Presence::None;
}

// The incomplete launcher's message (today's: tests check it).
[[noreturn]] void incomplete(const GetEnv& env, const Launcher& l, std::string_view who) {
  const bool rank = env(l.rank) != nullptr;
  const char* have = rank ? l.rank : l.size;
  const char* miss = rank ? l.size : l.rank;
  parse_int(who, have, env(have));  // a value that is no integer is named as that first
  config_error(who, fmt::format("{} is set but {} is not: {} sets {}, {} and {}; set them all or "
                                "none",
                                have, miss, l.label, l.rank, l.size, l.local));
}

Found parse(const GetEnv& env, const Launcher& l, std::string_view who) {
  Found f;
  f.l = &l;
  const char* rank = env(l.rank);
  f.rank = parse_int(who, l.rank, rank);
  f.source = fmt::format("{}={}", l.rank, rank);
  const char* size = l.size != nullptr ? env(l.size) : nullptr;
  if (size != nullptr) {
    f.size = parse_int(who, l.size, size);
    f.source += fmt::format(", {}={}", l.size, size);
  }
  const char* local = l.local != nullptr ? env(l.local) : nullptr;
  if (local != nullptr) {
    f.local = parse_int(who, l.local, local);
    f.source += fmt::format(", {}={}", l.local, local);
  }
  f.source += fmt::format(" ({})", l.label);
  if (size == nullptr) {
    if (f.rank < 0)
      config_error(who, fmt::format("{}={} is negative ({})", l.rank, rank, f.source));
    return f;
  }
  if (f.size < 1)
    config_error(who, fmt::format("{}={} must be at least 1 ({})", l.size, size, f.source));
  if (f.rank < 0 || f.rank >= f.size)
    config_error(
        who, fmt::format("{}={} is outside [0, {}={}) ({})", l.rank, rank, l.size, size, f.source));
  if (f.local && (*f.local < 0 || *f.local >= f.size))
    config_error(who, fmt::format("{}={} is outside [0, {}={}) ({})", l.local, local, l.size, size,
                                  f.source));
  return f;
}

// The same process: the same rank, and the same size where both give one.
bool agree(const Found& a, const Found& b) {
  return a.rank == b.rank && (a.size == 0 || b.size == 0 || a.size == b.size);
}

std::string job_id_of(const GetEnv& env) {
  std::string out;
  if (const char* run = env("TORCHELASTIC_RUN_ID")) {
    out = std::string("torchrun:") + run;
  } else if (const char* job = env("SLURM_JOB_ID")) {
    out = std::string("slurm:") + job;
    if (const char* step = env("SLURM_STEP_ID")) out += std::string(".") + step;
  } else if (const char* ns = env("PMIX_NAMESPACE")) {
    out = std::string("pmix:") + ns;
  } else if (const char* ompi = env("OMPI_MCA_ess_base_jobid")) {
    out = std::string("ompi:") + ompi;
  }
  return one_line(out);
}

// The launchers this environment sets, in the order of the table, complete ones parsed.
// An incomplete one alone is an error; beside a complete one it is stray and left out.
std::vector<Found> found_launchers(const GetEnv& env, std::string_view who) {
  const bool signed_torchrun =
      env("TORCHELASTIC_RUN_ID") != nullptr || env("MASTER_ADDR") != nullptr;
  std::vector<const Launcher*> table;
  if (signed_torchrun) table.push_back(&kTorchrun);
  for (const Launcher& l : kLaunchers) table.push_back(&l);
  if (!signed_torchrun) table.push_back(&kEnv);
  std::vector<Found> out;
  const Launcher* partial = nullptr;
  for (const Launcher* l : table) {
    const Presence p = presence(env, *l);
    if (p == Presence::Complete) out.push_back(parse(env, *l, who));
    if (p == Presence::Partial && partial == nullptr) partial = l;
  }
  if (out.empty() && partial != nullptr) incomplete(env, *partial, who);
  return out;
}

}  // namespace

GetEnv process_env() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

LaunchEnv read(const GetEnv& env, std::string_view who) {
  LaunchEnv out;
  out.job_id = job_id_of(env);
  const std::vector<Found> found = found_launchers(env, who);
  if (found.empty()) return out;
  const Found& first = found.front();
  out.rank = first.rank;
  out.world_size = first.size;
  out.local_rank = first.local;
  out.source = first.source;
  out.launcher = first.l->id;
  for (std::size_t i = 1; i < found.size(); ++i) {
    const Found& other = found[i];
    if (agree(first, other)) {
      out.agreeing.push_back(other.l->id);
      if (!out.local_rank) out.local_rank = other.local;
      if (out.world_size == 0) out.world_size = other.size;
      continue;
    }
    // The inner launcher wins over an outer one; launchers of one tier cannot be told apart.
    if (first.l->tier > other.l->tier && other.l->tier > 0) continue;
    // env (RANK and WORLD_SIZE without torchrun's signature) may be a wrapper's or an outer
    // shell's: no order says which.
    const char* why = other.l->tier == 0
                          ? " (without TORCHELASTIC_RUN_ID or MASTER_ADDR, so set by hand or left "
                            "over, not by torchrun)"
                          : "";
    config_error(who, fmt::format("two launchers disagree on this process's place: {} but {}{}; "
                                  "unset the variables of the one that did not start this process",
                                  first.source, other.source, why));
  }
  if (out.local_rank && out.world_size > 0 && *out.local_rank >= out.world_size)
    config_error(who, fmt::format("the local rank {} is outside [0, {}) ({})", *out.local_rank,
                                  out.world_size, out.source));
  out.under_mpi = first.l->tier == 2;
  out.srun_step = out.launcher == "srun" ||
                  std::find(out.agreeing.begin(), out.agreeing.end(), "srun") != out.agreeing.end();
  return out;
}

LaunchEnv current(std::string_view who) { return read(process_env(), who); }

namespace {

// The largest world that a complete launcher with valid values claims (0: none).
int largest_claimed(const GetEnv& env) {
  int out = 0;
  const auto claim = [&](const Launcher& l) {
    if (presence(env, l) != Presence::Complete) return;
    try {
      out = std::max(out, parse(env, l, "").size);  // PMIx's: 0
    } catch (const ConfigError&) {
      // a wrong value: this launcher claims nothing
    }
  };
  claim(kTorchrun);
  for (const Launcher& l : kLaunchers) claim(l);
  return out;
}

}  // namespace

int launcher_world_size(const GetEnv& env) noexcept {
  try {
    const LaunchEnv e = read(env, "");
    return std::max(1, e.world_size);
  } catch (const ConfigError&) {
    // Launchers that disagree: the larger world, so that the error paths err towards the others
    // (join them as failed; refuse a world-of-one backend) rather than run alone.
    try {
      return std::max(1, largest_claimed(env));
    } catch (...) {
      return 1;
    }
  } catch (...) {
    return 1;
  }
}

int launcher_world_size() noexcept { return launcher_world_size(process_env()); }

int launcher_rank(const GetEnv& env) noexcept {
  try {
    const LaunchEnv e = read(env, "");
    return e.launcher.empty() ? -1 : e.rank;
  } catch (...) {
    return -1;
  }
}

int launcher_rank() noexcept { return launcher_rank(process_env()); }

}  // namespace tally::launch
