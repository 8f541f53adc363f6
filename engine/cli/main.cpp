// The tally command: run, validate, plugins (DESIGN.md, "Command line").
// Exit codes: 0 success; 1 the evaluation failed at run time (any rank); 2 usage, config or input.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "registry.hpp"
#include "results_io.hpp"
#include "tally/error.hpp"
#include "tally/evaluator.hpp"
#include "tally/version.hpp"

namespace fs = std::filesystem;

namespace {

// Before the backend is up, a launcher's environment tells this process's rank: errors every
// rank hits alike (a bad config) are printed once, by rank 0.
bool launcher_rank_zero() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "RANK"}) {
    if (const char* v = std::getenv(var)) return std::string_view(v) == "0";
  }
  return true;
}

void print_error(const std::string& message) { fmt::print(stderr, "tally: error: {}\n", message); }

int run(const std::string& config, const std::vector<std::string>& sets, const std::optional<std::string>& output,
        bool quiet) {
  int rank = -1;
  try {
    tally::EvaluatorOptions opts;
    opts.overrides = sets;
    auto ev = tally::Evaluator::from_file(config, opts);
    rank = ev.rank();
    std::optional<fs::path> out = output ? std::optional<fs::path>(*output) : ev.output_json();
    // Everything that can be checked before the run is checked on every rank alike, so a bad
    // output path fails before any work, not after it.
    try {
      if (out && rank == 0) tally::check_writable(*out);
      auto reader = ev.make_reader();
      while (auto batch = reader->next()) ev.add(*batch);
    } catch (const tally::Error& e) {
      ev.record_error(e.exit_code(), e.what());
    } catch (const std::exception& e) {
      ev.record_error(1, e.what());
    }
    const tally::Results results = ev.compute();  // collective; throws the same error on every rank
    if (rank == 0) {
      if (!quiet) fmt::print("{}", tally::format_table(results));
      if (out) tally::write_file_atomic(*out, results.to_json());
    }
    return 0;
  } catch (const tally::Error& e) {
    if (rank == 0 || (rank < 0 && launcher_rank_zero())) print_error(e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    if (rank <= 0) print_error(e.what());
    return 1;
  }
}

int validate(const std::string& config, const std::vector<std::string>& sets) {
  try {
    tally::EvaluatorOptions opts;
    opts.overrides = sets;
    opts.validate_only = true;
    auto ev = tally::Evaluator::from_file(config, opts);
    auto reader = ev.make_reader();
    fmt::print("{}: ok ({} samples, reader fields: {})\n", config, reader->total_samples(),
               fmt::join(reader->fields(), ", "));
    return 0;
  } catch (const tally::Error& e) {
    print_error(e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    print_error(e.what());
    return 1;
  }
}

nlohmann::ordered_json value_json(const tally::Value& v) { return nlohmann::ordered_json::parse(v.to_json()); }

int plugins(bool json, const std::vector<std::string>& paths) {
  try {
    std::vector<fs::path> ps(paths.begin(), paths.end());
    const auto reg = tally::Registry::load(ps);
    if (json) {
      auto out = nlohmann::ordered_json::array();
      for (const auto& c : reg.components()) {
        const auto& i = *c.info;
        nlohmann::ordered_json j;
        j["kind"] = tally::component_kind_name(i.kind);
        j["name"] = i.name;
        j["aliases"] = i.aliases;
        j["plugin"] = c.plugin_name;
        j["version"] = c.plugin_version;
        j["file"] = c.file.string();
        j["doc"] = i.doc;
        auto params = nlohmann::ordered_json::array();
        for (const auto& p : i.params)
          params.push_back({{"name", p.name},
                            {"type", tally::param_type_name(p.type)},
                            {"required", p.required()},
                            {"default", value_json(p.default_value)},
                            {"nullable", p.nullable},
                            {"choices", p.choices},
                            {"doc", p.doc}});
        j["params"] = params;
        if (i.kind == tally::ComponentKind::Metric) {
          auto inputs = nlohmann::ordered_json::array();
          for (const auto& in : i.inputs) inputs.push_back({{"name", in.name}, {"required", in.required}, {"doc", in.doc}});
          j["inputs"] = inputs;
        }
        out.push_back(j);
      }
      fmt::print("{}\n", out.dump(2));
      return 0;
    }
    for (auto kind : {tally::ComponentKind::Backend, tally::ComponentKind::Reader, tally::ComponentKind::Metric}) {
      for (const auto& c : reg.components()) {
        const auto& i = *c.info;
        if (i.kind != kind) continue;
        fmt::print("{} {}{}  [{} {}, {}]\n", tally::component_kind_name(kind), i.name,
                   i.aliases.empty() ? "" : fmt::format(" (alias {})", fmt::join(i.aliases, ", ")), c.plugin_name,
                   c.plugin_version, c.file.string());
        if (!i.doc.empty()) fmt::print("    {}\n", i.doc);
        for (const auto& in : i.inputs)
          fmt::print("    input  {:<18} {}{}\n", in.name, in.required ? "" : "(optional) ", in.doc);
        for (const auto& p : i.params) {
          std::string def = p.required() ? "required" : p.default_value.is_null() ? "optional" : "default " + p.default_value.to_json();
          if (!p.choices.empty()) def += fmt::format("; one of {}", fmt::join(p.choices, " | "));
          fmt::print("    param  {:<18} {:<24} {}  ({})\n", p.name, tally::param_type_name(p.type), p.doc, def);
        }
        fmt::print("\n");
      }
    }
    return 0;
  } catch (const tally::Error& e) {
    print_error(e.what());
    return e.exit_code();
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tally: metrics evaluation, on one process or many", "tally"};
  app.set_version_flag("--version", std::string(tally::kVersion));
  app.require_subcommand(1);

  std::string config;
  std::vector<std::string> sets;
  std::optional<std::string> output;
  bool quiet = false;
  auto* run_cmd = app.add_subcommand("run", "Evaluate the metrics of CONFIG on its data");
  run_cmd->add_option("config", config, "The evaluation config (YAML)")->required();
  run_cmd->add_option("--set", sets, "Override a config key: KEY=VALUE (KEY dotted, VALUE YAML), repeatable");
  run_cmd->add_option("--output,-o", output, "Write the results JSON here (overrides output.json)");
  run_cmd->add_flag("--quiet,-q", quiet, "Do not print the results table");

  auto* val_cmd = app.add_subcommand("validate", "Check CONFIG: parse it, load plugins, build metrics and reader; run nothing");
  val_cmd->add_option("config", config, "The evaluation config (YAML)")->required();
  val_cmd->add_option("--set", sets, "Override a config key: KEY=VALUE, repeatable");

  bool json = false;
  std::vector<std::string> paths;
  auto* plug_cmd = app.add_subcommand("plugins", "List every discovered plugin component with its parameters");
  plug_cmd->add_flag("--json", json, "Machine-readable output");
  plug_cmd->add_option("--path", paths, "Also search this folder (before TALLY_PLUGIN_PATH), repeatable");

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (launcher_rank_zero()) print_error(fmt::format("{} (see 'tally --help')", e.what()));
    return 2;
  }
  if (*run_cmd) return run(config, sets, output, quiet);
  if (*val_cmd) return validate(config, sets);
  return plugins(json, paths);
}
