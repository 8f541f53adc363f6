#include "backend_auto.hpp"

#include <algorithm>
#include <initializer_list>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tally/launch.hpp"
#include "tally/sdk/error.hpp"

namespace tally {

namespace {

// "A=1, B=2" for the variables among `names` that are set.
std::string show(const EnvLookup& env, std::initializer_list<const char*> names) {
  std::string out;
  for (const char* n : names) {
    const char* v = env(n);
    if (v == nullptr) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("{}={}", n, v);
  }
  return out;
}

BackendChoice several_or_one(int size, const char* several, std::string reason) {
  // A size nobody states (0: PMIx alone): MPI will know it.
  if (size == 1) return {"nondist", std::move(reason) + "; a world of one"};
  return {several, std::move(reason)};
}

}  // namespace

EnvLookup process_env_lookup() { return launch::process_env(); }

const std::vector<std::string>& auto_candidates() {
  static const std::vector<std::string> names{"nondist", "mpi", "gloo"};
  return names;
}

BackendChoice choose_backend(const EnvLookup& env) {
  // Which launcher started this process is tally/launch.hpp's answer, the same everywhere; this
  // maps it to the backend that can join it.
  const launch::LaunchEnv e = launch::read(env, "backend 'auto': ");
  const auto agrees = [&](const char* id) {
    return std::find(e.agreeing.begin(), e.agreeing.end(), id) != e.agreeing.end();
  };
  if (e.launcher == "mpirun")
    return several_or_one(
        e.world_size, "mpi",
        show(env, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}) + " (Open MPI's mpirun)");
  if (e.launcher == "torchrun" || e.launcher == "env")
    return several_or_one(
        e.world_size, "gloo",
        show(env, {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) +
            (e.launcher == "env" ? " (torchrun's variables, set by hand)" : " (torchrun)"));
  if (e.launcher == "PMIx" || (e.launcher == "PMI" && agrees("PMIx")))
    return several_or_one(
        e.world_size, "mpi",
        show(env, {"PMIX_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_ID"}) +
            (e.srun_step ? " (srun with PMIx)" : " (PMIx)"));
  // PMI that agrees with an srun step is srun's own (--mpi=pmi2), which Debian's Open MPI cannot
  // join; PMI against a disagreeing step is hydra's, which started its proxies through srun.
  if (e.launcher == "PMI" && !e.srun_step)
    return several_or_one(e.world_size, "mpi",
                          show(env, {"PMI_RANK", "PMI_SIZE"}) + " (PMI: MPICH's mpiexec)");
  if (e.launcher == "srun" || e.launcher == "PMI")
    return several_or_one(
        e.world_size, "gloo",
        show(env, {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_ID", "PMI_SIZE"}) +
            " (srun without PMIx: Open MPI joins srun only through srun --mpi=pmix)");
  return {"nondist", "no launcher variables"};
}

namespace {

bool takes(const Component& c, const std::string& key) {
  const auto& ps = c.info->params;
  return std::any_of(ps.begin(), ps.end(), [&](const ParamSpec& p) { return p.name == key; });
}

}  // namespace

AutoBackend resolve_auto_backend(const Registry& registry, const Located& params,
                                 const EnvLookup& env) {
  AutoBackend out;
  out.choice = choose_backend(env);
  // Every key must be one some candidate takes, whichever is chosen here: a config that runs
  // under torchrun also runs alone.
  std::vector<const Component*> candidates;
  for (const auto& name : auto_candidates())
    if (const Component* c = registry.find(ComponentKind::Backend, name)) candidates.push_back(c);
  for (const auto& [key, located] : params.children) {
    if (std::none_of(candidates.begin(), candidates.end(),
                     [&](const Component* c) { return takes(*c, key); })) {
      std::vector<std::string> known, found;
      for (const Component* c : candidates) {
        found.push_back(c->info->name);
        for (const auto& p : c->info->params)
          if (std::find(known.begin(), known.end(), p.name) == known.end()) known.push_back(p.name);
      }
      std::sort(known.begin(), known.end());
      const std::string& w = located.key_where.empty() ? located.where : located.key_where;
      throw ConfigError(fmt::format(
          "{}{}backend 'auto': unknown parameter '{}' (auto passes on the parameters of the "
          "backends it may choose ({}): {})",
          w, w.empty() ? "" : ": ", key, fmt::join(found, ", "),
          known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", "))));
    }
  }
  out.component = registry.find(ComponentKind::Backend, out.choice.type);
  if (out.component == nullptr)
    throw ConfigError(fmt::format(
        "{}{}backend 'auto' chose {} from {}, but no plugin provides the {} backend (search "
        "path: {}){}; set backend.type to a backend that is installed",
        params.where, params.where.empty() ? "" : ": ", out.choice.type, out.choice.reason,
        out.choice.type, registry.search_text(), registry.unloaded_text()));
  out.params = Located{Value::map(), params.where, params.key_where, {}};
  for (const auto& [key, located] : params.children) {
    if (!takes(*out.component, key)) {
      out.ignored.push_back(key);
      continue;
    }
    out.params.value.set(key, located.value);
    out.params.children.emplace_back(key, located);
  }
  return out;
}

}  // namespace tally
