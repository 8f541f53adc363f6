// The library API for host programs on several ranks (tally/evaluator.hpp): make_backend(),
// Evaluator::local_rank(), Evaluator::collectives(); the typed object collectives are templates
// in the header, over Collectives.
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "backend_auto.hpp"
#include "config.hpp"
#include "evaluator_impl.hpp"
#include "registry.hpp"

namespace tally {

namespace {

// A launcher's variables: this process's local rank, rank and world size.
struct LauncherVars {
  const char* local;
  const char* rank;
  const char* size;
  const char* launcher;
};
constexpr LauncherVars kLaunchers[] = {
    {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
    {"LOCAL_RANK", "RANK", "WORLD_SIZE", "torchrun"},
    {"SLURM_LOCALID", "SLURM_PROCID", "SLURM_NTASKS", "srun"},
    {"MPI_LOCALRANKID", "PMI_RANK", "PMI_SIZE", "MPICH"},
};

std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  const std::string_view s(v);
  int out = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return out;
}

std::string env_text(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string("unset") : fmt::format("'{}'", v);
}

}  // namespace

std::shared_ptr<DistBackend> make_backend(const std::string& type, const Value::Map& params,
                                          const std::vector<std::filesystem::path>& plugin_paths) {
  const Registry registry = Registry::load(plugin_paths);
  // auto: the backend the launcher's variables ask for, as a config's `type: auto` (its
  // parameters must then be ones the chosen backend takes).
  const std::string chosen = type == "auto" ? choose_backend(process_env_lookup()).type : type;
  const Component& c = registry.get(ComponentKind::Backend, chosen);
  const std::string what = type == "auto" ? fmt::format("backend 'auto' (chose {})", chosen)
                                          : fmt::format("backend '{}'", type);
  return Registry::make_backend(c, make_params(*c.info, params, what));
}

int Evaluator::local_rank() const {
  DistBackend* b = impl_->backend.get();
  if (b == nullptr) return 0;
  if (auto* known = get_primitive<LocalRank>(*b)) return known->local_rank();
  const int rank = b->rank();
  const int world = b->world_size();
  if (world == 1) return 0;
  std::string found;
  for (const auto& l : kLaunchers) {
    const auto local = env_int(l.local);
    const auto r = env_int(l.rank);
    const auto n = env_int(l.size);
    if (local && r == rank && n == world && *local >= 0 && *local < world) return *local;
    if (std::getenv(l.local) != nullptr || std::getenv(l.rank) != nullptr)
      found += fmt::format("; {}: {}={}, {}={}, {}={}", l.launcher, l.local, env_text(l.local),
                           l.rank, env_text(l.rank), l.size, env_text(l.size));
  }
  throw RuntimeError(fmt::format(
      "Evaluator::local_rank: the {} backend does not say which ranks share a host, and no "
      "launcher's variables give the local rank of rank {} of {} (expected "
      "OMPI_COMM_WORLD_LOCAL_RANK, LOCAL_RANK, SLURM_LOCALID or MPI_LOCALRANKID beside a rank "
      "and world size equal to the backend's){}",
      b->name(), rank, world, found.empty() ? "; found none of them" : found));
}

Collectives& Evaluator::collectives() {
  if (!impl_->backend)
    throw ConfigError("Evaluator::collectives: this evaluator has no backend (validate_only)");
  return impl_->collectives();
}

Collectives* Evaluator::collectives_if_any() {
  return impl_->backend ? &impl_->collectives() : nullptr;
}

}  // namespace tally
