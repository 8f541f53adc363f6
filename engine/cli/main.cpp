// The tally command: run, compare, validate, plugins (DESIGN.md, "Command line").
// Exit codes: 0 success; 1 the evaluation failed at run time (any rank); 2 usage, config or input;
// 3 a result regressed against the baseline (tally compare, tally run with `regression:`).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "compare.hpp"
#include "config.hpp"
#include "registry.hpp"
#include "report_progress.hpp"
#include "report_writers.hpp"
#include "results_io.hpp"
#include "tally/error.hpp"
#include "tally/evaluator.hpp"
#include "tally/version.hpp"

namespace fs = std::filesystem;

namespace {

// Before the backend is up, a launcher's environment tells this process's rank: errors every
// rank hits alike (a bad config) are printed once, by rank 0.
bool launcher_rank_zero() {
  for (const char* var :
       {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "RANK"}) {
    if (const char* v = std::getenv(var)) return std::string_view(v) == "0";
  }
  return true;
}

void print_error(const std::string& message) { fmt::print(stderr, "tally: error: {}\n", message); }
void print_warning(const std::string& message) {
  fmt::print(stderr, "tally: warning: {}\n", message);
}

// --color=auto: colors on a terminal, unless NO_COLOR is set or TERM is dumb.
bool use_color(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  if (std::getenv("NO_COLOR") != nullptr) return false;
  if (const char* term = std::getenv("TERM"); term != nullptr && std::string_view(term) == "dumb")
    return false;
  return ::isatty(STDOUT_FILENO) != 0;
}

// The reports asked for on the command line or in `output:` (the command line wins).
struct ReportPaths {
  std::optional<fs::path> json, junit, markdown, html;
  bool any_report() const { return junit || markdown || html; }
  void check_writable() const {
    for (const auto* p : {&json, &junit, &markdown, &html})
      if (*p) tally::check_writable(**p);
  }
};

struct ReportOptions {
  std::optional<std::string> junit, markdown, html;
};

// Chart.js for the HTML report, read before any work: a TALLY_CHARTJS that points nowhere is a
// configuration error; no Chart.js at all only costs the charts (a warning).
std::string load_chartjs() {
  const auto file = tally::find_chartjs();
  if (!file) {
    print_warning(
        "Chart.js not found (apt-get install libjs-chart.js, or set TALLY_CHARTJS): the HTML "
        "report will have "
        "tables but no charts");
    return {};
  }
  try {
    return tally::read_chartjs(*file);
  } catch (const tally::Error& e) {
    throw tally::ConfigError(e.what());
  }
}

void write_reports(const ReportPaths& paths, const tally::ReportInput& input,
                   const std::string& chartjs) {
  if (paths.junit) tally::write_file_atomic(*paths.junit, tally::junit_report(input));
  if (paths.markdown) tally::write_file_atomic(*paths.markdown, tally::markdown_report(input));
  if (paths.html) tally::write_file_atomic(*paths.html, tally::html_report(input, chartjs));
}

// One line on stderr naming what fell, for logs that show only stderr.
void print_regressions(const tally::Comparison& c) {
  std::string keys;
  std::size_t shown = 0;
  for (const auto& k : c.keys) {
    if (k.verdict != tally::Verdict::Regressed) continue;
    if (shown++ == 3) {
      keys += ", ...";
      break;
    }
    if (!keys.empty()) keys += ", ";
    if (k.delta)
      keys += fmt::format("{}{} {} -> {} ({})", k.name(), k.element,
                          tally::format_number(k.baseline), tally::format_number(k.value),
                          tally::format_delta(k.delta, k.baseline.is_int() && k.value.is_int()));
    else
      keys += fmt::format("{} ({})", k.name(), k.note);
  }
  fmt::print(stderr, "tally: regression against '{}': {} key{} regressed: {}\n", c.baseline_source,
             c.count(tally::Verdict::Regressed), c.count(tally::Verdict::Regressed) == 1 ? "" : "s",
             keys);
}

// The ResultSpecs of the metrics a results file names (run.types), read from the plugins; a
// warning, not an error, when that is impossible: the comparison then takes every key as
// higher-is-better.
tally::ResultSpecs specs_for(const std::vector<fs::path>& plugin_paths,
                             const std::vector<std::pair<std::string, std::string>>& types,
                             bool warn) {
  if (types.empty()) return {};
  try {
    const auto reg = tally::Registry::load(plugin_paths);
    std::vector<std::string> unknown;
    auto specs = tally::ResultSpecs::from_registry(reg, types, &unknown);
    if (warn && !unknown.empty())
      print_warning(
          fmt::format("metric type{} {} not found among the plugins ({}): {} keys are taken as "
                      "higher-is-better",
                      unknown.size() == 1 ? "" : "s", fmt::join(unknown, ", "), reg.search_text(),
                      unknown.size() == 1 ? "its" : "their"));
    return specs;
  } catch (const tally::Error& e) {
    if (warn)
      print_warning(fmt::format(
          "cannot load the plugins ({}): every key is taken as higher-is-better", e.what()));
    tally::ResultSpecs specs;
    for (const auto& [label, type] : types) specs.set(label, {}, type);
    return specs;
  }
}

tally::Tolerances tolerances_of(const tally::RegressionConfig& rc) {
  tally::Tolerances t;
  if (rc.rtol) t.defaults.rtol = *rc.rtol;
  if (rc.atol) t.defaults.atol = *rc.atol;
  if (rc.tolerances_file) t.add_file(*rc.tolerances_file);
  t.add_rules(rc.tolerances_inline, "regression.tolerances");
  return t;
}

// A path as readers like it: relative to the working directory when it lies below it.
std::string shown_path(const fs::path& p) {
  std::error_code ec;
  const auto rel = fs::proximate(p, ec);
  if (ec || rel.empty() || *rel.begin() == "..") return p.string();
  return rel.string();
}

struct RunOptions {
  std::string config;
  std::vector<std::string> sets;
  std::optional<std::string> output;
  ReportOptions reports;
  bool quiet = false;
  bool update_baseline = false;
  bool resume = false;
  std::optional<bool> progress;  // --progress / --no-progress; unset: on a terminal only
  std::string color = "auto";
};

int run_evaluation(const RunOptions& o, std::optional<tally::Evaluator>& ev) {
  int rank = -1;
  try {
    tally::EvaluatorOptions opts;
    opts.overrides = o.sets;
    ev.emplace(tally::Evaluator::from_file(o.config, opts));
    rank = ev->rank();
    // The same config, read again for the parts the CLI acts on (outputs, regression).
    const tally::Config cfg = tally::Config::load(o.config, o.sets);
    ReportPaths paths;
    paths.json = o.output ? std::optional<fs::path>(*o.output) : cfg.output_json;
    paths.junit = o.reports.junit ? std::optional<fs::path>(*o.reports.junit) : cfg.output_junit;
    paths.markdown =
        o.reports.markdown ? std::optional<fs::path>(*o.reports.markdown) : cfg.output_markdown;
    paths.html = o.reports.html ? std::optional<fs::path>(*o.reports.html) : cfg.output_html;
    if (o.update_baseline && !cfg.regression)
      throw tally::ConfigError(
          fmt::format("--update-baseline: {} has no 'regression:' section naming the baseline to "
                      "write (regression: {{baseline: "
                      "baseline.json}})",
                      o.config));
    if (o.resume && !cfg.checkpoint)
      throw tally::ConfigError(fmt::format(
          "--resume: {} has no 'checkpoint:' section (checkpoint: {{dir: DIR, every_n_batches: "
          "N}}), so there is no checkpoint to resume from",
          o.config));
    const bool comparing = cfg.regression && !o.update_baseline;

    tally::Tolerances tolerances;
    std::optional<tally::Results> baseline;
    std::string chartjs;
    std::shared_ptr<tally::Reader> reader;
    std::optional<tally::Progress> progress;
    // Everything that can be checked before the run is checked on every rank alike, so a bad
    // output path, baseline or tolerance fails before any work, not after it.
    try {
      if (rank == 0) {
        paths.check_writable();
        if (o.update_baseline) tally::check_writable(cfg.regression->baseline);
        if (paths.html) chartjs = load_chartjs();
      }
      if (comparing) {
        tolerances = tolerances_of(*cfg.regression);
        std::error_code ec;
        if (!fs::exists(cfg.regression->baseline, ec))
          throw tally::InputError(
              fmt::format("{}: the baseline '{}' does not exist; write it with 'tally run {} "
                          "--update-baseline'",
                          cfg.regression->where, cfg.regression->baseline.string(), o.config));
        baseline = tally::read_results_json(cfg.regression->baseline);
      }
      reader = ev->make_reader();
      const bool tty = ::isatty(STDERR_FILENO) != 0;
      const bool show = rank == 0 && o.progress.value_or(tty);
      if (show)
        progress.emplace(reader->shard_samples(), ev->world_size(), tty,
                         o.progress.value_or(false));
    } catch (const tally::Error& e) {
      ev->record_error(e.exit_code(), e.what());
    } catch (const std::exception& e) {
      ev->record_error(1, e.what());
    }
    // Every rank reads (collective with checkpoints, even on a rank that failed above); errors
    // are kept for compute(). A checkpoint that cannot be resumed throws here on every rank.
    tally::ReadOptions read;
    read.resume = o.resume;
    read.on_batch = [&](std::int64_t n) {
      if (progress) progress->add(n);
    };
    read.on_notice = [](const std::string& message) { fmt::print(stderr, "tally: {}\n", message); };
    ev->read_all(reader.get(), read);
    if (progress) progress->finish();
    const tally::Results results =
        ev->compute();  // collective; throws the same error on every rank

    // Every rank compares (the same numbers give the same verdict), so every rank exits alike.
    std::optional<tally::Comparison> comparison;
    const bool need_specs = comparing || (rank == 0 && paths.any_report());
    const tally::ResultSpecs specs = need_specs
                                         ? specs_for(cfg.plugin_paths, results.run.types, rank == 0)
                                         : tally::ResultSpecs{};
    if (comparing) {
      comparison = tally::compare(results.metrics, baseline->metrics, specs, tolerances);
      comparison->baseline_source = shown_path(cfg.regression->baseline);
    }
    if (rank == 0) {
      if (!o.quiet) {
        fmt::print("{}", tally::format_table(results));
        if (comparison)
          fmt::print("\n{}", tally::format_comparison(*comparison, use_color(o.color)));
      }
      std::fflush(stdout);
      if (paths.json) tally::write_file_atomic(*paths.json, results.to_json());
      const tally::ReportInput input{results, specs, comparison ? &*comparison : nullptr,
                                     baseline ? &baseline->metrics : nullptr, o.config};
      write_reports(paths, input, chartjs);
      if (o.update_baseline) {
        tally::write_file_atomic(cfg.regression->baseline, results.to_json());
        fmt::print(stderr, "tally: baseline written: {}\n", shown_path(cfg.regression->baseline));
      }
      if (comparison && comparison->regressed()) print_regressions(*comparison);
    }
    return comparison && comparison->regressed() ? tally::kExitRegression : 0;
  } catch (const tally::Error& e) {
    if (rank == 0 || (rank < 0 && launcher_rank_zero())) print_error(e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    if (rank <= 0) print_error(e.what());
    return 1;
  }
}

int run(const RunOptions& o) {
  std::optional<tally::Evaluator> ev;
  const int code = run_evaluation(o, ev);
  // Under mpirun a rank that exits non-zero makes the launcher kill the others, possibly before
  // rank 0 has printed the error or written its files: no rank leaves before every rank is done.
  if (ev && ev->world_size() > 1) {
    try {
      ev->barrier();
    } catch (const std::exception&) {  // the backend itself failed: nothing left to wait for
    }
  }
  return code;
}

struct CompareOptions {
  std::string results, baseline;
  std::optional<double> rtol, atol;
  std::optional<std::string> tolerances;
  std::vector<std::string> paths;
  ReportOptions reports;
  std::string color = "auto";
  bool quiet = false;
};

int compare(const CompareOptions& o) {
  try {
    const auto results = tally::read_results_json(o.results);
    const auto baseline = tally::read_results_json(o.baseline);
    tally::Tolerances tolerances;
    if (o.rtol) tolerances.defaults.rtol = *o.rtol;
    if (o.atol) tolerances.defaults.atol = *o.atol;
    if (o.tolerances) tolerances.add_file(*o.tolerances);
    ReportPaths paths;
    if (o.reports.junit) paths.junit = fs::path(*o.reports.junit);
    if (o.reports.markdown) paths.markdown = fs::path(*o.reports.markdown);
    if (o.reports.html) paths.html = fs::path(*o.reports.html);
    paths.check_writable();
    const std::string chartjs = paths.html ? load_chartjs() : std::string();

    // The results' metric types first; labels only the baseline has take the baseline's.
    auto types = results.run.types;
    for (const auto& t : baseline.run.types)
      if (std::none_of(types.begin(), types.end(),
                       [&](const auto& x) { return x.first == t.first; }))
        types.push_back(t);
    if (types.empty() && results.metrics.size() > 0)
      print_warning(fmt::format(
          "'{}' records no metric types (run.types; written by an older tally?): every key is "
          "taken as higher-is-better",
          o.results));
    std::vector<fs::path> plugin_paths(o.paths.begin(), o.paths.end());
    const auto specs = specs_for(plugin_paths, types, true);

    auto comparison = tally::compare(results.metrics, baseline.metrics, specs, tolerances);
    comparison.baseline_source = o.baseline;
    if (!o.quiet) fmt::print("{}", tally::format_comparison(comparison, use_color(o.color)));
    std::fflush(stdout);
    const tally::ReportInput input{results, specs, &comparison, &baseline.metrics, o.results};
    write_reports(paths, input, chartjs);
    if (comparison.regressed()) {
      print_regressions(comparison);
      return tally::kExitRegression;
    }
    return 0;
  } catch (const tally::Error& e) {
    print_error(e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    print_error(e.what());
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
    const tally::Config cfg = tally::Config::load(config, sets);
    std::string regression;
    if (cfg.regression) {
      const auto tolerances = tolerances_of(*cfg.regression);
      std::error_code ec;
      if (fs::exists(cfg.regression->baseline, ec)) {
        const auto baseline = tally::read_results_json(cfg.regression->baseline);
        regression = fmt::format("; baseline {} ({} metrics), {} tolerance rules",
                                 shown_path(cfg.regression->baseline), baseline.metrics.size(),
                                 tolerances.rules.size());
      } else {
        regression =
            fmt::format("; baseline {} does not exist yet (tally run --update-baseline writes it)",
                        shown_path(cfg.regression->baseline));
      }
    }
    fmt::print("{}: ok ({} samples, reader fields: {}{})\n", config, reader->total_samples(),
               fmt::join(reader->fields(), ", "), regression);
    return 0;
  } catch (const tally::Error& e) {
    print_error(e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    print_error(e.what());
    return 1;
  }
}

const char* better_word(tally::Better b) {
  switch (b) {
    case tally::Better::Higher:
      return "higher";
    case tally::Better::Lower:
      return "lower";
    case tally::Better::Neither:
      return "neither";
  }
  return "?";
}

const char* plot_word(tally::Plot p) {
  switch (p) {
    case tally::Plot::None:
      return "none";
    case tally::Plot::Bars:
      return "bars";
    case tally::Plot::Heatmap:
      return "heatmap";
    case tally::Plot::Curve:
      return "curve";
  }
  return "?";
}

nlohmann::ordered_json value_json(const tally::Value& v) {
  return nlohmann::ordered_json::parse(v.to_json());
}

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
          for (const auto& in : i.inputs)
            inputs.push_back({{"name", in.name}, {"required", in.required}, {"doc", in.doc}});
          j["inputs"] = inputs;
          auto results = nlohmann::ordered_json::array();
          for (const auto& r : i.results)
            results.push_back({{"key", r.key},
                               {"better", better_word(r.better)},
                               {"plot", plot_word(r.plot)},
                               {"doc", r.doc}});
          j["results"] = results;
        }
        out.push_back(j);
      }
      fmt::print("{}\n", out.dump(2));
      return 0;
    }
    for (auto kind : {tally::ComponentKind::Backend, tally::ComponentKind::Reader,
                      tally::ComponentKind::Metric}) {
      for (const auto& c : reg.components()) {
        const auto& i = *c.info;
        if (i.kind != kind) continue;
        fmt::print("{} {}{}  [{} {}, {}]\n", tally::component_kind_name(kind), i.name,
                   i.aliases.empty() ? "" : fmt::format(" (alias {})", fmt::join(i.aliases, ", ")),
                   c.plugin_name, c.plugin_version, c.file.string());
        if (!i.doc.empty()) fmt::print("    {}\n", i.doc);
        for (const auto& in : i.inputs)
          fmt::print("    input  {:<18} {}{}\n", in.name, in.required ? "" : "(optional) ", in.doc);
        for (const auto& p : i.params) {
          std::string def = p.required()                ? "required"
                            : p.default_value.is_null() ? "optional"
                                                        : "default " + p.default_value.to_json();
          if (!p.choices.empty()) def += fmt::format("; one of {}", fmt::join(p.choices, " | "));
          fmt::print("    param  {:<18} {:<24} {}  ({})\n", p.name, tally::param_type_name(p.type),
                     p.doc, def);
        }
        for (const auto& r : i.results)
          fmt::print("    result {:<18} {:<24} {}\n", r.key,
                     fmt::format("{}, {}", tally::better_name(r.better), plot_word(r.plot)), r.doc);
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
  app.footer(
      "Exit codes: 0 ok; 1 the evaluation failed at run time; 2 usage, config or input error; 3 a "
      "result "
      "regressed against the baseline.");

  RunOptions ro;
  auto* run_cmd =
      app.add_subcommand("run",
                         "Evaluate the metrics of CONFIG on its data (and compare with the "
                         "baseline of its regression: section)");
  run_cmd->add_option("config", ro.config, "The evaluation config (YAML)")->required();
  run_cmd->add_option("--set", ro.sets,
                      "Override a config key: KEY=VALUE (KEY dotted, VALUE YAML), repeatable");
  run_cmd->add_option("--output,-o", ro.output,
                      "Write the results JSON here (overrides output.json)");
  run_cmd->add_option("--junit", ro.reports.junit,
                      "Write a JUnit XML report here (overrides output.junit)");
  run_cmd->add_option("--markdown", ro.reports.markdown,
                      "Write a Markdown summary here (overrides output.markdown)");
  run_cmd->add_option("--html", ro.reports.html,
                      "Write a self-contained HTML report here (overrides output.html)");
  run_cmd->add_flag("--resume", ro.resume,
                    "Continue from the last complete checkpoint in checkpoint.dir (start from the "
                    "beginning when there is none)");
  run_cmd->add_flag("--update-baseline", ro.update_baseline,
                    "Write these results as the new baseline (regression.baseline) and exit 0");
  bool progress_flag = false;
  auto* progress_opt =
      run_cmd->add_flag("--progress,!--no-progress", progress_flag,
                        "Show (or hide) the progress bar on stderr; default: shown on a terminal");
  run_cmd
      ->add_option("--color", ro.color,
                   "Color the comparison table: auto (on a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  run_cmd->add_flag("--quiet,-q", ro.quiet, "Do not print the results and comparison tables");

  CompareOptions co;
  auto* cmp_cmd = app.add_subcommand(
      "compare",
      "Compare a results JSON with a baseline results JSON; exit 3 when a result regressed");
  cmp_cmd->add_option("results", co.results, "The results JSON to check")->required();
  cmp_cmd->add_option("baseline", co.baseline, "The baseline results JSON")->required();
  cmp_cmd->add_option("--rtol", co.rtol, "Relative tolerance for every key (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmp_cmd->add_option("--atol", co.atol, "Absolute tolerance for every key (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmp_cmd->add_option("--tolerances", co.tolerances,
                      "YAML file of per-key tolerances: KEY_PATTERN: {rtol: X, atol: Y, better: "
                      "higher|lower|neither}");
  cmp_cmd->add_option("--path", co.paths,
                      "Also search this folder for plugins (their ResultSpecs), repeatable");
  cmp_cmd->add_option("--junit", co.reports.junit, "Write a JUnit XML report here");
  cmp_cmd->add_option("--markdown", co.reports.markdown, "Write a Markdown summary here");
  cmp_cmd->add_option("--html", co.reports.html, "Write a self-contained HTML report here");
  cmp_cmd->add_option("--color", co.color, "Color the table: auto (on a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  cmp_cmd->add_flag("--quiet,-q", co.quiet, "Do not print the comparison table");

  std::string config;
  std::vector<std::string> sets;
  auto* val_cmd = app.add_subcommand(
      "validate", "Check CONFIG: parse it, load plugins, build metrics and reader; run nothing");
  val_cmd->add_option("config", config, "The evaluation config (YAML)")->required();
  val_cmd->add_option("--set", sets, "Override a config key: KEY=VALUE, repeatable");

  bool json = false;
  std::vector<std::string> paths;
  auto* plug_cmd =
      app.add_subcommand("plugins", "List every discovered plugin component with its parameters");
  plug_cmd->add_flag("--json", json, "Machine-readable output");
  plug_cmd->add_option("--path", paths,
                       "Also search this folder (before TALLY_PLUGIN_PATH), repeatable");

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (launcher_rank_zero()) print_error(fmt::format("{} (see 'tally --help')", e.what()));
    return 2;
  }
  if (*run_cmd) {
    if (progress_opt->count() > 0) ro.progress = progress_flag;
    return run(ro);
  }
  if (*cmp_cmd) return compare(co);
  if (*val_cmd) return validate(config, sets);
  return plugins(json, paths);
}
