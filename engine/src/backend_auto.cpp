#include "backend_auto.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tally/error.hpp"

namespace tally {

namespace {

class Env {
 public:
  explicit Env(const EnvLookup& env) : env_(env) {}

  bool has(const char* name) const { return env_(name) != nullptr; }

  // The integer value of `name`, or nullopt when unset. ConfigError when it is not an integer.
  std::optional<long long> integer(const char* name) const {
    const char* v = env_(name);
    if (v == nullptr) return std::nullopt;
    const std::string_view s(v);
    long long out = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size())
      throw ConfigError(fmt::format(
          "backend 'auto': the launcher variable {} must be an integer, found '{}'", name, s));
    return out;
  }

  // "A=1, B=2" for the variables among `names` that are set.
  std::string show(std::initializer_list<const char*> names) const {
    std::string out;
    for (const char* n : names) {
      const char* v = env_(n);
      if (v == nullptr) continue;
      if (!out.empty()) out += ", ";
      out += fmt::format("{}={}", n, v);
    }
    return out;
  }

 private:
  const EnvLookup& env_;
};

BackendChoice several_or_one(std::optional<long long> size, const char* several,
                             std::string reason) {
  // A size nobody states (PMIx alone): MPI will know it.
  if (size && *size <= 1) return {"nondist", std::move(reason) + "; a world of one"};
  return {several, std::move(reason)};
}

}  // namespace

EnvLookup process_env_lookup() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

const std::vector<std::string>& auto_candidates() {
  static const std::vector<std::string> names{"nondist", "mpi", "gloo"};
  return names;
}

BackendChoice choose_backend(const EnvLookup& lookup) {
  const Env env(lookup);
  if (env.has("OMPI_COMM_WORLD_SIZE"))
    return several_or_one(
        env.integer("OMPI_COMM_WORLD_SIZE"), "mpi",
        env.show({"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}) + " (Open MPI's mpirun)");
  if (env.has("RANK") && env.has("WORLD_SIZE") && env.has("MASTER_ADDR")) {
    env.integer("RANK");
    return several_or_one(
        env.integer("WORLD_SIZE"), "gloo",
        env.show({"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) +
            " (torchrun)");
  }
  const bool srun = env.has("SLURM_PROCID") && env.has("SLURM_STEP_ID");
  if (env.has("PMIX_RANK")) {
    std::optional<long long> size = env.integer("PMI_SIZE");
    if (!size && srun) size = env.integer("SLURM_NTASKS");
    return several_or_one(
        size, "mpi",
        env.show({"PMIX_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_ID"}) +
            (srun ? " (srun with PMIx)" : " (PMIx)"));
  }
  if (env.has("PMI_SIZE") && !srun)
    return several_or_one(env.integer("PMI_SIZE"), "mpi",
                          env.show({"PMI_RANK", "PMI_SIZE"}) + " (PMI: MPICH's mpiexec)");
  if (srun) {
    env.integer("SLURM_PROCID");
    return several_or_one(
        env.integer("SLURM_NTASKS"), "gloo",
        env.show({"SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_ID", "PMI_SIZE"}) +
            " (srun without PMIx: Open MPI joins srun only through srun --mpi=pmix)");
  }
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
        "path: {}); set backend.type to a backend that is installed",
        params.where, params.where.empty() ? "" : ": ", out.choice.type, out.choice.reason,
        out.choice.type, registry.search_text()));
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
