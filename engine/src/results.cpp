// The results JSON document of a run (Results::to_json, docs/architecture.md, "Results JSON"); it
// is read back by tally_reports (read_results_json).
#include <nlohmann/json.hpp>

#include "tally/evaluator.hpp"
#include "tally/sdk/version.hpp"
#include "tally/text_safety.hpp"
#include "value_json.hpp"

namespace tally {

std::string Results::to_json() const {
  nlohmann::ordered_json doc;
  doc["results"] = detail::value_to_json(metrics);
  if (!intervals.is_null()) doc["intervals"] = detail::value_to_json(intervals);
  // The config's file name need not be UTF-8: its stray bytes are written as \xNN, never an error
  // after the work; any other such text (a plugin's result keys) becomes U+FFFD in the dump.
  doc["run"] = {{"tally_version", kVersion}, {"config", escape_invalid_utf8(run.config)},
                {"backend", run.backend},    {"world_size", run.world_size},
                {"samples", run.samples},    {"wall_seconds", run.wall_seconds}};
  auto types = nlohmann::ordered_json::object();
  for (const auto& [label, type] : run.types) types[label] = type;
  auto plugins = nlohmann::ordered_json::object();
  for (const auto& [name, version] : run.plugins) plugins[name] = version;
  doc["run"]["types"] = std::move(types);
  doc["run"]["plugins"] = std::move(plugins);
  return doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace tally
