// The library API for host programs on several ranks (tally/evaluator.hpp): make_backend(),
// Evaluator::local_rank(), Evaluator::collectives(); the typed object collectives are templates
// in the header, over Collectives.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend_auto.hpp"
#include "config.hpp"
#include "evaluator_impl.hpp"
#include "registry.hpp"
#include "tally/launch.hpp"

namespace tally {

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
  // The launcher's own answer (tally/launch.hpp), when it is about this backend's rank.
  std::string found;
  try {
    const launch::LaunchEnv e = launch::current("");
    if (e.local_rank && e.rank == rank && e.world_size == world) return *e.local_rank;
    found = e.launcher.empty() ? std::string("; found none of them")
                               : fmt::format("; found {}", e.source);
  } catch (const ConfigError& e) {
    found = fmt::format("; {}", e.what());
  }
  throw RuntimeError(fmt::format(
      "Evaluator::local_rank: the {} backend does not say which ranks share a host, and no "
      "launcher's variables give the local rank of rank {} of {} (expected "
      "OMPI_COMM_WORLD_LOCAL_RANK, LOCAL_RANK, SLURM_LOCALID or MPI_LOCALRANKID beside a rank "
      "and world size equal to the backend's){}",
      b->name(), rank, world, found));
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
