// Evaluator::join_as_failed: a rank whose config failed before it had a backend joins the other
// ranks, about to wait for it in the start exchange, as an evaluator that only fails.
#include <optional>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "backend_auto.hpp"
#include "config.hpp"
#include "tally/evaluator.hpp"
#include "tally/file_io.hpp"
#include "tally/registry.hpp"

namespace tally {

namespace fs = std::filesystem;

namespace {

// The backend type a config that failed to load asks for, read as leniently as possible: the
// last `backend.type=X` override, else the file's backend.type; nullopt when unknown.
std::optional<std::string> requested_backend_type(const fs::path& config,
                                                  const std::vector<std::string>& overrides) {
  constexpr std::string_view key = "backend.type=";
  for (auto it = overrides.rbegin(); it != overrides.rend(); ++it)
    if (it->starts_with(key)) return it->substr(key.size());
  try {
    const YAML::Node root = YAML::Load(read_whole_file(config, "config", kConfigMaxBytes));
    if (!root.IsMap()) return std::nullopt;
    const YAML::Node backend = root["backend"];
    if (!backend) return std::string("nondist");
    if (!backend.IsMap() || !backend["type"]) return std::string("nondist");
    if (backend["type"].IsScalar()) return backend["type"].Scalar();
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace

std::optional<Evaluator> Evaluator::join_as_failed(const fs::path& config,
                                                   const EvaluatorOptions& options, int exit_code,
                                                   const std::string& message) {
  try {
    std::optional<std::string> type = requested_backend_type(config, options.overrides);
    if (type == "auto") type = choose_backend(process_env_lookup()).type;
    if (type != "mpi") return std::nullopt;
    const auto reg = Registry::load({});
    const Component& bc = reg.get(ComponentKind::Backend, "mpi");
    const Params params = make_params(*bc.info, Value::Map{}, "backend 'mpi'", fs::current_path());
    return failed(Registry::make_backend(bc, params), exit_code, message);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace tally
