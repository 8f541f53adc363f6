// The tally command: run, compare, validate, plugins (docs/architecture.md, "Command line").
// Exit codes: 0 success; 1 the evaluation failed at run time (any rank); 2 usage, config or input;
// 3 a result regressed against the baseline (tally compare, tally run with `regression:`).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

// The public API only (libtally and tally_reports), and the command's own pieces.
#include "new_plugin.hpp"
#include "progress.hpp"
#include "tally/evaluator.hpp"
#include "tally/file_io.hpp"
#include "tally/records.hpp"
#include "tally/registry.hpp"
#include "tally/reports/compare.hpp"
#include "tally/reports/history.hpp"
#include "tally/reports/reports.hpp"
#include "tally/reports/run.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/version.hpp"
#include "tally/text_safety.hpp"

namespace fs = std::filesystem;

namespace {

// Every line tally prints to stderr goes through here: control characters (ESC, CR, newlines)
// and bytes that are not UTF-8, which may come from file names, configs, data or plugins, are
// shown escaped (\x1b), never sent raw to the terminal, and a message stays one line.
void print_line(std::string_view prefix, const std::string& message) {
  fmt::print(stderr, "tally: {}{}\n", prefix, tally::escape_for_terminal(message));
}
void print_error(const std::string& message) { print_line("error: ", message); }
void print_warning(const std::string& message) { print_line("warning: ", message); }

// --color=auto: colors on a terminal, unless NO_COLOR is set or TERM is dumb.
bool use_color(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  if (std::getenv("NO_COLOR") != nullptr) return false;
  if (const char* term = std::getenv("TERM"); term != nullptr && std::string_view(term) == "dumb")
    return false;
  return ::isatty(STDOUT_FILENO) != 0;
}

// An output path and the option or config key that named it ("--output", "output.json").
// The command line's path (the command line wins) or the config's.
std::optional<tally::OutputTarget> chosen(const std::optional<std::string>& option,
                                          const char* option_name,
                                          const std::optional<tally::OutputTarget>& configured) {
  if (option) return tally::OutputTarget{*option, option_name};
  return configured;
}

struct ReportOptions {
  std::optional<std::string> junit, markdown, html;
};

// The ResultSpecs of the metrics that results files name (run.types), read from the plugins
// (tally compare: a results file carries no specs; a run's Results do); a warning, not an error,
// when that is impossible: the comparison then takes every key as higher-is-better.
// `loaded`: the plugins when the caller has loaded them already (tally compare --records), so that
// they are not loaded twice.
tally::ResultSpecs specs_for(const std::vector<fs::path>& plugin_paths,
                             const std::vector<std::pair<std::string, std::string>>& types,
                             const tally::Registry* loaded = nullptr) {
  if (types.empty()) return {};
  try {
    std::optional<tally::Registry> own;
    const tally::Registry& reg =
        loaded ? *loaded : own.emplace(tally::Registry::load(plugin_paths));
    std::vector<std::string> unknown;
    auto specs = tally::ResultSpecs::from_registry(reg, types, &unknown);
    if (!unknown.empty())
      print_warning(
          fmt::format("metric type{} {} not found among the plugins ({}): {} keys are taken as "
                      "higher-is-better",
                      unknown.size() == 1 ? "" : "s", fmt::join(unknown, ", "), reg.search_text(),
                      unknown.size() == 1 ? "its" : "their"));
    return specs;
  } catch (const tally::Error& e) {
    print_warning(fmt::format(
        "cannot load the plugins ({}): every key is taken as higher-is-better", e.what()));
    tally::ResultSpecs specs;
    for (const auto& [label, type] : types) specs.set(label, {}, type);
    return specs;
  }
}

// `tally run`'s command line: the library's request (tally/reports/run.hpp), and how to print.
struct RunCommand {
  tally::RunRequest request;
  std::optional<bool> progress;  // --progress / --no-progress; unset: on a terminal only
  std::string color = "auto";
};

// The command prints what a run gives it: tables to stdout (flushed before the outputs are
// written, so that a log shows them first), notices and errors to stderr.
tally::RunSinks terminal_sinks() {
  tally::RunSinks s;
  s.out = [](std::string_view text) {
    fmt::print("{}", text);
    std::fflush(stdout);
  };
  s.err = [](std::string_view line) { fmt::print(stderr, "{}", line); };
  return s;
}

// tally run: the library runs it (tally::run); the command adds the progress bar and the colors.
int run(RunCommand& c) {
  c.request.color = use_color(c.color);
  tally::RunSinks sinks = terminal_sinks();
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  std::optional<tally::Progress> progress;
  if (c.progress.value_or(tty)) {
    const bool forced = c.progress.value_or(false);
    sinks.progress_begin = [&progress, tty, forced](std::int64_t total, int world_size) {
      progress.emplace(total, world_size, tty, forced);
    };
    sinks.progress_total = [&progress](std::int64_t n) {
      if (progress) progress->set_total(n);
    };
    sinks.progress_add = [&progress](std::int64_t n) {
      if (progress) progress->add(n);
    };
    sinks.progress_step = [&progress](const tally::RunStep& step) {
      if (progress) progress->step(step);
    };
    sinks.progress_finish = [&progress] {
      if (progress) progress->finish();
    };
    // Notices and warnings go above the line being redrawn.
    sinks.err = [&progress, plain = sinks.err](std::string_view line) {
      if (progress)
        progress->print_above(line);
      else
        plain(line);
    };
  }
  return tally::run(c.request, sinks).exit_code;
}

struct CompareOptions {
  std::string results, baseline;
  std::optional<std::string> records, baseline_records;
  tally::PairedTestSettings paired;  // --alpha, --resamples, --seed; --test sets mcnemar
  std::string test = "auto";
  std::optional<std::string> json;
  std::optional<std::string> history;
  std::size_t drift_window = 10;
  bool fail_on_drift = false;
  std::optional<double> rtol, atol;
  std::optional<std::string> tolerances;
  std::vector<std::string> paths;
  ReportOptions reports;
  std::string color = "auto";
  bool quiet = false;
};

// A file named on the command line: what named it ("results", "--records") and its path.
struct NamedFile {
  std::string what;
  fs::path path;
};

// ConfigError (exit 2) when an output names one of the inputs: the same file once links are
// followed (a symlink, a hard link, another relative path to it), which writing would replace.
void refuse_outputs_on_inputs(const std::vector<NamedFile>& outputs,
                              const std::vector<NamedFile>& inputs) {
  for (const auto& out : outputs) {
    struct stat os {};
    if (::stat(out.path.c_str(), &os) != 0 || !S_ISREG(os.st_mode)) continue;  // new, or a device
    for (const auto& in : inputs) {
      struct stat is {};
      if (::stat(in.path.c_str(), &is) != 0 || is.st_dev != os.st_dev || is.st_ino != os.st_ino)
        continue;
      throw tally::ConfigError(fmt::format(
          "{} '{}' is the {} '{}'{}: writing it would replace an input (name another file)",
          out.what, out.path.string(), in.what, in.path.string(),
          out.path == in.path ? "" : " (the same file, links followed)"));
    }
  }
}

// A tolerance on the command line: a finite number >= 0 (CLI::NonNegativeNumber lets nan and inf
// through, and a NaN tolerance passes every key).
CLI::Validator tolerance_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double x = 0;
        if (!CLI::detail::lexical_cast(text, x) || !std::isfinite(x) || x < 0)
          return fmt::format("expects a finite number >= 0 such as 0.01, found '{}'", text);
        return {};
      },
      "FINITE >= 0");
}

// A command's body with its errors printed, one line each: a tally::Error gives its exit code,
// anything else 1; `out_of_memory`, when given, is what a std::bad_alloc says instead of "std::
// bad_alloc".
template <class Body>
int printing_errors(Body&& body, std::string_view out_of_memory = {}) {
  try {
    return body();
  } catch (const tally::Error& e) {
    print_error(e.what());
    return e.exit_code();
  } catch (const std::bad_alloc& e) {
    print_error(out_of_memory.empty() ? std::string(e.what()) : std::string(out_of_memory));
    return 1;
  } catch (const std::exception& e) {
    print_error(e.what());
    return 1;
  }
}

int compare(const CompareOptions& o) {
  return printing_errors(
      [&] {
        const auto results = tally::read_results_json(o.results);
        const auto baseline = tally::read_results_json(o.baseline);
        tally::Tolerances tolerances;
        if (o.rtol) tolerances.defaults.rtol = *o.rtol;
        if (o.atol) tolerances.defaults.atol = *o.atol;
        if (o.tolerances) tolerances.add_file(*o.tolerances);
        tally::ReportTargets paths;
        paths.junit = chosen(o.reports.junit, "--junit", std::nullopt);
        paths.markdown = chosen(o.reports.markdown, "--markdown", std::nullopt);
        paths.html = chosen(o.reports.html, "--html", std::nullopt);
        paths.check_writable();
        if (o.json) tally::check_writable(*o.json, "--json");
        std::vector<NamedFile> outputs, inputs{{"results", o.results}, {"baseline", o.baseline}};
        for (const auto* t : {&paths.junit, &paths.markdown, &paths.html})
          if (*t) outputs.push_back({(*t)->what, (*t)->path});
        if (o.json) outputs.push_back({"--json", *o.json});
        if (o.tolerances) inputs.push_back({"--tolerances", *o.tolerances});
        if (o.records) inputs.push_back({"--records", *o.records});
        if (o.baseline_records) inputs.push_back({"--baseline-records", *o.baseline_records});
        refuse_outputs_on_inputs(outputs, inputs);
        const std::string chartjs = paths.html ? tally::load_chartjs(print_warning) : std::string();

        // The results' metric types first; labels only the baseline has take the baseline's.
        auto types = results.run.types;
        {
          std::unordered_set<std::string_view> labels;
          for (const auto& t : results.run.types) labels.insert(t.first);
          for (const auto& t : baseline.run.types)
            if (labels.insert(t.first).second) types.push_back(t);
        }
        if (types.empty() && results.metrics.size() > 0)
          print_warning(fmt::format(
              "'{}' records no metric types (run.types; written by an older tally?): every key is "
              "taken as higher-is-better",
              o.results));
        if (!(o.paired.alpha > 0 && o.paired.alpha < 1))
          throw tally::ConfigError(fmt::format(
              "--alpha expects a number in (0, 1) such as 0.05, found {}", o.paired.alpha));
        if (o.records.has_value() != o.baseline_records.has_value())
          throw tally::ConfigError(
              fmt::format("{} needs {} too: a paired test reads both runs' per-sample records",
                          o.records ? "--records" : "--baseline-records",
                          o.records ? "--baseline-records" : "--records"));
        std::optional<tally::Records> records, baseline_records;
        if (o.records) {
          records = tally::read_records(*o.records);
          baseline_records = tally::read_records(*o.baseline_records);
        }
        std::vector<fs::path> plugin_paths(o.paths.begin(), o.paths.end());
        // The paired tests rebuild each records file's metrics from the plugins: loaded once, here,
        // and a failure to load them is an error rather than a warning.
        std::optional<tally::Registry> registry;
        if (records) registry.emplace(tally::Registry::load(plugin_paths));
        const auto specs = specs_for(plugin_paths, types, registry ? &*registry : nullptr);

        auto comparison = tally::compare(results.metrics, baseline.metrics, specs, tolerances);
        comparison.baseline_source = o.baseline;
        if (records) {
          tally::PairedTestSettings ps = o.paired;
          ps.mcnemar = o.test == "auto";
          tally::apply_paired_tests(
              comparison,
              tally::paired_tests(*baseline_records, *records, tally::records_factory(*registry),
                                  ps, *o.baseline_records, *o.records),
              *o.records, *o.baseline_records);
        }
        std::optional<tally::Trends> trends;
        if (o.history) {
          tally::DriftOptions drift;
          drift.window = o.drift_window;
          drift.alpha = o.paired.alpha;
          drift.current_name = fs::path(o.results).stem().string();
          const auto history = tally::read_history(*o.history, o.drift_window);
          std::vector<NamedFile> runs;
          for (const auto& run : history.runs) runs.push_back({"history run", run.path});
          refuse_outputs_on_inputs(outputs, runs);
          trends = tally::trends(history, results, specs, tolerances, drift);
        }
        if (!o.quiet) {
          fmt::print("{}", tally::format_comparison(comparison, use_color(o.color)));
          if (trends) fmt::print("\n{}", tally::format_trends(*trends, use_color(o.color)));
        }
        std::fflush(stdout);
        const tally::ReportInput input{results,           specs,     &comparison,
                                       &baseline.metrics, o.results, trends ? &*trends : nullptr};
        tally::OutputSet out;
        paths.stage(out, input, chartjs);
        if (o.json) out.stage(*o.json, tally::comparison_json(comparison), "--json");
        out.commit();
        if (comparison.regressed()) print_line("", tally::regression_summary(comparison));
        if (trends && trends->drifted() > 0)
          print_line("", fmt::format("history: {} key{} drifted{}", trends->drifted(),
                                     trends->drifted() == 1 ? "" : "s",
                                     o.fail_on_drift ? " (--fail-on-drift)" : ""));
        return comparison.regressed() || (o.fail_on_drift && trends && trends->drifted() > 0)
                   ? tally::kExitRegression
                   : 0;
      },
      "out of memory: the results, baseline, records or history read need more memory than this "
      "machine gives");
}

int validate(const std::string& config, const std::vector<std::string>& sets) {
  return printing_errors([&] {
    tally::EvaluatorOptions opts;
    opts.overrides = sets;
    opts.validate_only = true;
    auto ev = tally::Evaluator::from_file(config, opts);
    auto reader = ev.make_reader();
    std::string regression;
    if (const auto& rc = ev.regression()) {
      const auto tolerances = tally::Tolerances::of(*rc);
      std::error_code ec;
      if (fs::exists(rc->baseline, ec)) {
        const auto baseline = tally::read_results_json(rc->baseline);
        regression = fmt::format("; baseline {} ({} metrics), {} tolerance rules",
                                 tally::shown_path(rc->baseline), baseline.metrics.size(),
                                 tolerances.rules.size());
      } else {
        regression =
            fmt::format("; baseline {} does not exist yet (tally run --update-baseline writes it)",
                        tally::shown_path(rc->baseline));
      }
    }
    fmt::print("{}\n",
               tally::escape_for_terminal(fmt::format(
                   "{}: ok ({} samples, reader fields: {}{})", config, reader->total_samples(),
                   fmt::join(reader->fields(), ", "), regression)));
    return 0;
  });
}

// One component of `tally plugins` as text: its kind, name, aliases and file, doc, inputs,
// parameters and result keys. Names, docs and file names come from plugins and folders: escaped
// for a terminal.
std::string component_text(const tally::Component& c) {
  const auto t = [](std::string_view text) { return tally::escape_for_terminal(text); };
  const auto& i = *c.info;
  std::vector<std::string> aliases;
  for (const auto& x : i.aliases) aliases.push_back(t(x));
  std::string out =
      fmt::format("{} {}{}  [{} {}, {}]\n", tally::component_kind_name(i.kind), t(i.name),
                  aliases.empty() ? "" : fmt::format(" (alias {})", fmt::join(aliases, ", ")),
                  t(c.plugin_name), t(c.plugin_version), t(c.file.native()));
  auto to = std::back_inserter(out);
  if (!i.doc.empty()) fmt::format_to(to, "    {}\n", t(i.doc));
  for (const auto& in : i.inputs)
    fmt::format_to(to, "    input  {:<18} {}{}\n", t(in.name), in.required ? "" : "(optional) ",
                   t(in.doc));
  for (const auto& p : i.params) {
    std::string def = p.required()                ? "required"
                      : p.default_value.is_null() ? "optional"
                                                  : "default " + p.default_value.to_json();
    if (!p.choices.empty()) def += fmt::format("; one of {}", fmt::join(p.choices, " | "));
    fmt::format_to(to, "    param  {:<18} {:<24} {}  ({})\n", t(p.name),
                   tally::param_type_name(p.type), t(p.doc), t(def));
  }
  for (const auto& r : i.results)
    fmt::format_to(to, "    result {:<18} {:<24} {}\n", t(r.key),
                   fmt::format("{}, {}", tally::better_name(r.better), tally::plot_name(r.plot)),
                   t(r.doc));
  return out + "\n";
}

// The components NAMEs name, each a name or an alias of some kind (Registry::find), in the
// registry's order; every component when there are none. ConfigError naming the first NAME that
// names nothing.
std::vector<const tally::Component*> chosen_components(const tally::Registry& reg,
                                                       const std::vector<std::string>& names) {
  std::vector<const tally::Component*> found;
  for (const auto& n : names) {
    const auto before = found.size();
    for (auto kind : {tally::ComponentKind::Backend, tally::ComponentKind::Reader,
                      tally::ComponentKind::Metric})
      if (const auto* c = reg.find(kind, n)) found.push_back(c);
    if (found.size() == before)
      throw tally::ConfigError(
          fmt::format("no plugin component is named '{}' (tally plugins lists them){}",
                      tally::escape_for_terminal(n), reg.unloaded_text()));
  }
  std::vector<const tally::Component*> out;
  for (const auto& c : reg.components())
    if (names.empty() || std::find(found.begin(), found.end(), &c) != found.end())
      out.push_back(&c);
  return out;
}

// `tally plugins [NAME...] [--json]`: every component, or those NAMEs name (a name or an alias;
// exit 2 naming the first that names none). Written whole; a reader that goes away (`| head`)
// ends it quietly with 0.
int plugins(bool json, const std::vector<std::string>& names,
            const std::vector<std::string>& paths) {
  return printing_errors([&] {
    std::vector<fs::path> ps(paths.begin(), paths.end());
    const auto reg = tally::Registry::load(ps);
    const auto chosen = chosen_components(reg, names);
    std::string out;
    if (json) {
      out = tally::plugins_json(chosen, names.size() == 1) + "\n";
    } else {
      for (auto kind : {tally::ComponentKind::Backend, tally::ComponentKind::Reader,
                        tally::ComponentKind::Metric})
        for (const auto* c : chosen)
          if (c->info->kind == kind) out += component_text(*c);
      if (names.empty())
        for (const auto& u : reg.unloaded())
          out += fmt::format("not loaded: {} needs {}, which this machine does not have\n",
                             tally::escape_for_terminal(u.file.native()), u.missing_library);
    }
    const int err = tally::write_all(STDOUT_FILENO, out);
    if (err != 0 && err != EPIPE)
      throw tally::RuntimeError(fmt::format("cannot write to stdout: {}", std::strerror(err)));
    return 0;
  });
}

// `tally run`'s options into `c`; `progress_flag` and the option itself for --[no-]progress.
CLI::App* add_run_command(CLI::App& app, RunCommand& c, bool& progress_flag,
                          CLI::Option*& progress_opt) {
  tally::RunRequest& r = c.request;
  auto* cmd = app.add_subcommand("run",
                                 "Evaluate the metrics of CONFIG on its data (and compare with the "
                                 "baseline of its regression: section)");
  cmd->add_option("config", r.config, "The evaluation config (YAML)")->required();
  cmd->add_option("--set", r.overrides,
                  "Override a config key: KEY=VALUE (KEY dotted, VALUE YAML), repeatable");
  cmd->add_option("--output,-o", r.output, "Write the results JSON here (overrides output.json)");
  cmd->add_option("--junit", r.junit, "Write a JUnit XML report here (overrides output.junit)");
  cmd->add_option("--markdown", r.markdown,
                  "Write a Markdown summary here (overrides output.markdown)");
  cmd->add_option("--html", r.html,
                  "Write a self-contained HTML report here (overrides output.html)");
  cmd->add_flag("--resume", r.resume,
                "Continue from the last complete checkpoint in checkpoint.dir (start from the "
                "beginning when there is none)");
  cmd->add_flag("--update-baseline", r.update_baseline,
                "Write these results as the new baseline (regression.baseline) and exit 0");
  progress_opt =
      cmd->add_flag("--progress,!--no-progress", progress_flag,
                    "Show (or hide) the progress bar on stderr; default: shown on a terminal");
  cmd->add_option("--color", c.color,
                  "Color the comparison table: auto (on a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  cmd->add_flag("--quiet,-q", r.quiet, "Do not print the results and comparison tables");
  return cmd;
}

CLI::App* add_compare_command(CLI::App& app, CompareOptions& co) {
  auto* cmd = app.add_subcommand(
      "compare",
      "Compare a results JSON with a baseline results JSON; exit 3 when a result regressed");
  cmd->add_option("results", co.results, "The results JSON to check")->required();
  cmd->add_option("baseline", co.baseline, "The baseline results JSON")->required();
  cmd->add_option("--rtol", co.rtol, "Relative tolerance for every key (default 0)")
      ->check(tolerance_validator());
  cmd->add_option("--atol", co.atol, "Absolute tolerance for every key (default 0)")
      ->check(tolerance_validator());
  cmd->add_option("--tolerances", co.tolerances,
                  "YAML file of per-key tolerances: KEY_PATTERN: {rtol: X, atol: Y, better: "
                  "higher|lower|neither}");
  cmd->add_option("--records", co.records,
                  "The per-sample records of the results (output.records): with "
                  "--baseline-records, a key beyond its tolerance regresses only when a "
                  "paired test finds the change significant");
  cmd->add_option("--baseline-records", co.baseline_records,
                  "The per-sample records of the baseline");
  cmd->add_option("--alpha", co.paired.alpha,
                  "Significance level of the paired tests (default 0.05)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--resamples", co.paired.resamples, "Paired bootstrap resamples (default 1000)")
      ->check(CLI::Range(std::uint64_t{2}, std::uint64_t{1000000}));
  cmd->add_option("--seed", co.paired.seed, "Seed of the paired bootstrap (default 0)");
  cmd->add_option("--test", co.test,
                  "auto: McNemar's exact test for accuracy-like keys, the paired bootstrap for "
                  "the others; bootstrap: the paired bootstrap for every key")
      ->check(CLI::IsMember({"auto", "bootstrap"}));
  cmd->add_option("--history", co.history,
                  "A folder of earlier results files (natural order of their names): trends in "
                  "the HTML report and a slow-drift check (docs/history.md)");
  cmd->add_option("--drift-window", co.drift_window,
                  "How many of the latest history runs the drift check looks at (default 10)")
      ->check(CLI::Range(std::size_t{3}, std::size_t{10000}));
  cmd->add_flag("--fail-on-drift", co.fail_on_drift, "Exit 3 when a key drifted, too");
  cmd->add_option("--path", co.paths,
                  "Also search this folder for plugins (their ResultSpecs), repeatable");
  cmd->add_option("--json", co.json,
                  "Write the comparison as JSON here (verdicts, deltas, tolerances, tests)");
  cmd->add_option("--junit", co.reports.junit, "Write a JUnit XML report here");
  cmd->add_option("--markdown", co.reports.markdown, "Write a Markdown summary here");
  cmd->add_option("--html", co.reports.html, "Write a self-contained HTML report here");
  cmd->add_option("--color", co.color, "Color the table: auto (on a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  cmd->add_flag("--quiet,-q", co.quiet, "Do not print the comparison table");
  return cmd;
}

int new_plugin(const std::string& name, const std::string& dir) {
  return printing_errors([&] {
    tally::cli::write_plugin_skeleton(name, dir);
    fmt::print("wrote the plugin {} (metric {}) into {}\n", name,
               tally::cli::plugin_metric_type(name), dir);
    return 0;
  });
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file size limit (ulimit -f) a write fails with EFBIG and a clear message, instead of
  // SIGXFSZ killing the process with its temporary files left behind.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"tally: metrics evaluation, on one process or many", "tally"};
  app.set_version_flag("--version", std::string(tally::kVersion));
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 ok; 1 the evaluation failed at run time; 2 usage, config or input error; 3 a "
      "result "
      "regressed against the baseline.");

  RunCommand rc;
  bool progress_flag = false;
  CLI::Option* progress_opt = nullptr;
  auto* run_cmd = add_run_command(app, rc, progress_flag, progress_opt);
  CompareOptions co;
  auto* cmp_cmd = add_compare_command(app, co);

  std::string config;
  std::vector<std::string> sets;
  auto* val_cmd = app.add_subcommand(
      "validate", "Check CONFIG: parse it, load plugins, build metrics and reader; run nothing");
  val_cmd->add_option("config", config, "The evaluation config (YAML)")->required();
  val_cmd->add_option("--set", sets, "Override a config key: KEY=VALUE, repeatable");

  bool json = false;
  std::vector<std::string> paths, names;
  auto* plug_cmd =
      app.add_subcommand("plugins", "List every discovered plugin component with its parameters");
  plug_cmd->add_option("names", names, "Show only these components (a name or an alias)");
  plug_cmd->add_flag("--json", json, "Machine-readable output (one object for one NAME)");
  plug_cmd->add_option("--path", paths,
                       "Also search this folder (before TALLY_PLUGIN_PATH), repeatable");

  std::string new_name, new_dir;
  auto* new_cmd = app.add_subcommand(
      "new-plugin", "Write the skeleton of a metric plugin (code, CMake, a test, an example)");
  new_cmd->add_option("name", new_name, "Plugin name: [a-z][a-z0-9_]*, e.g. my_metric")->required();
  new_cmd->add_option("dir", new_dir, "Folder to create (it may exist if empty)")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    tally::print_before_backend(terminal_sinks(), fmt::format("{} (see 'tally --help')", e.what()));
    return 2;
  }
  if (*run_cmd) {
    if (progress_opt->count() > 0) rc.progress = progress_flag;
    return run(rc);
  }
  if (*cmp_cmd) return compare(co);
  if (*val_cmd) return validate(config, sets);
  if (*new_cmd) return new_plugin(new_name, new_dir);
  return plugins(json, names, paths);
}
