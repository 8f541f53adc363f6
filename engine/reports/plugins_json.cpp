// `tally plugins --json` and Python's tally.plugins(): every discovered component as JSON.
#include <nlohmann/json.hpp>

#include "tally/registry.hpp"
#include "tally/reports/reports.hpp"
#include "tally/text_safety.hpp"
#include "value_json.hpp"

namespace tally {

const char* plot_name(Plot p) {
  switch (p) {
    case Plot::None:
      return "none";
    case Plot::Bars:
      return "bars";
    case Plot::Heatmap:
      return "heatmap";
    case Plot::Curve:
      return "curve";
  }
  return "?";
}

namespace {

const char* better_word(Better b) {
  switch (b) {
    case Better::Higher:
      return "higher";
    case Better::Lower:
      return "lower";
    case Better::Neither:
      return "neither";
  }
  return "?";
}

}  // namespace

std::string plugins_json(const Registry& reg) {
  std::vector<const Component*> all;
  for (const auto& c : reg.components()) all.push_back(&c);
  return plugins_json(all);
}

std::string plugins_json(const std::vector<const Component*>& components, bool single) {
  auto out = nlohmann::ordered_json::array();
  for (const Component* cp : components) {
    const Component& c = *cp;
    const auto& i = *c.info;
    nlohmann::ordered_json j;
    j["kind"] = component_kind_name(i.kind);
    j["name"] = i.name;
    j["aliases"] = i.aliases;
    j["plugin"] = c.plugin_name;
    j["version"] = c.plugin_version;
    // A file name need not be UTF-8: its stray bytes are written as \xNN (JSON text must be
    // UTF-8); any other such text from a plugin becomes U+FFFD (the dump's error handler).
    j["file"] = escape_invalid_utf8(c.file.native());
    j["doc"] = i.doc;
    auto params = nlohmann::ordered_json::array();
    for (const auto& p : i.params)
      params.push_back({{"name", p.name},
                        {"type", param_type_name(p.type)},
                        {"required", p.required()},
                        {"default", detail::value_to_json(p.default_value)},
                        {"nullable", p.nullable},
                        {"choices", p.choices},
                        {"doc", p.doc}});
    j["params"] = params;
    if (i.kind == ComponentKind::Metric) {
      auto inputs = nlohmann::ordered_json::array();
      for (const auto& in : i.inputs)
        inputs.push_back({{"name", in.name}, {"required", in.required}, {"doc", in.doc}});
      j["inputs"] = inputs;
      auto results = nlohmann::ordered_json::array();
      for (const auto& r : i.results)
        results.push_back({{"key", r.key},
                           {"better", better_word(r.better)},
                           {"plot", plot_name(r.plot)},
                           {"doc", r.doc}});
      j["results"] = results;
    }
    out.push_back(j);
  }
  const auto& shown = single && out.size() == 1 ? out[0] : out;
  return shown.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace tally
