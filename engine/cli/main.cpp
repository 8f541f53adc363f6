// The tally command: run, compare, validate, plugins (DESIGN.md, "Command line").
// Exit codes: 0 success; 1 the evaluation failed at run time (any rank); 2 usage, config or input;
// 3 a result regressed against the baseline (tally compare, tally run with `regression:`).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

// The public API only (libtally and tally_reports), and the command's own pieces.
#include "new_plugin.hpp"
#include "progress.hpp"
#include "tally/compare.hpp"
#include "tally/error.hpp"
#include "tally/evaluator.hpp"
#include "tally/file_io.hpp"
#include "tally/history.hpp"
#include "tally/records.hpp"
#include "tally/registry.hpp"
#include "tally/reports.hpp"
#include "tally/text_safety.hpp"
#include "tally/version.hpp"

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
  print_line("", fmt::format("regression against '{}': {} key{} regressed: {}", c.baseline_source,
                             c.count(tally::Verdict::Regressed),
                             c.count(tally::Verdict::Regressed) == 1 ? "" : "s", keys));
}

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

// The command line's settings that every rank must give alike (ReadOptions::settings): the
// outputs (only rank 0 writes them, so one given to another rank alone would be lost), and the
// flags that change what the ranks do together. The config's own are the evaluator's.
std::vector<std::pair<std::string, std::string>> agreed_options(const RunOptions& o) {
  std::vector<std::pair<std::string, std::string>> s;
  const auto add = [&](const char* name, const std::optional<std::string>& v) {
    if (v) s.emplace_back(name, *v);
  };
  add("--output", o.output);
  add("--junit", o.reports.junit);
  add("--markdown", o.reports.markdown);
  add("--html", o.reports.html);
  if (o.update_baseline) s.emplace_back("--update-baseline", "given");
  if (o.resume) s.emplace_back("--resume", "given");
  return s;
}

// The number of ranks a launcher started (mpirun, MPICH's hydra or srun through PMI, torchrun,
// srun), or 1. SLURM_NTASKS only in an srun step (SLURM_STEP_ID): a batch script that runs tally
// once has SLURM_NTASKS too, but no SLURM_STEP_ID.
int launcher_world_size() {
  const bool srun_step = std::getenv("SLURM_STEP_ID") != nullptr;
  for (const char* var :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE", srun_step ? "SLURM_NTASKS" : nullptr}) {
    if (var == nullptr) continue;
    if (const char* v = std::getenv(var)) {
      try {
        return std::max(1, std::stoi(v));
      } catch (const std::exception&) {
        return 1;
      }
    }
  }
  return 1;
}

// This rank failed before it had a backend (its config, --set or plugins), while under mpirun the
// other ranks are about to wait for it in the start exchange: it joins them through a default mpi
// backend as an evaluator that only fails, so every rank fails at once with this rank's message,
// printed once by rank 0. Nothing to join (no launcher, another backend, or no mpi backend to be
// had): nullopt, and this rank prints its own error naming itself; mpirun then stops the others.
std::optional<tally::Evaluator> join_as_failed(const RunOptions& o,
                                               const tally::EvaluatorOptions& opts, int exit_code,
                                               const std::string& message) {
  if (launcher_world_size() <= 1) return std::nullopt;
  return tally::Evaluator::join_as_failed(o.config, opts, exit_code, message);
}

// An error before this process has a backend (its command line, its config, its plugins), under
// a launcher of several ranks that cannot be told through one: rank 0 prints it at once; another
// rank first gives rank 0 five seconds, then prints it naming itself. When every rank fails alike,
// rank 0 has printed and exited by then and the launcher stops the rest (mpirun does within about
// 2 s of the first non-zero exit): one message. When this
// rank alone failed, it is the only one that knows why: its message, naming it, and the launcher
// stops the others when it exits.
void print_before_backend(const std::string& message);

// The rank a launcher gave this process, or -1.
int launcher_rank() {
  for (const char* var :
       {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "RANK"}) {
    if (const char* v = std::getenv(var)) {
      try {
        return std::stoi(v);
      } catch (const std::exception&) {
        return -1;
      }
    }
  }
  return -1;
}

void print_before_backend(const std::string& message) {
  const int r = launcher_rank();
  if (launcher_world_size() <= 1 || r <= 0) return print_error(message);
  std::this_thread::sleep_for(std::chrono::seconds(5));
  print_error(fmt::format("rank {}: {}", r, message));
}

int run_evaluation(const RunOptions& o, std::optional<tally::Evaluator>& ev) {
  int rank = -1;
  try {
    tally::EvaluatorOptions opts;
    opts.overrides = o.sets;
    try {
      ev.emplace(tally::Evaluator::from_file(o.config, opts));
    } catch (const tally::Error& e) {
      // No backend yet (the config or its plugins failed on this rank): under a launcher of
      // several ranks, join the others, who are about to wait in the start exchange, so that
      // they fail with this rank's error instead of waiting for it.
      auto joined = join_as_failed(o, opts, e.exit_code(), e.what());
      if (!joined) throw;
      ev.emplace(std::move(*joined));
    }
    if (ev->world_size() == 1 && launcher_world_size() > 1) {
      const std::string backend = ev->backend_name();
      ev.reset();
      throw tally::ConfigError(fmt::format(
          "started as one of {} ranks by a launcher, but the backend is {}: every rank would "
          "evaluate the whole dataset alone and write the same outputs; set backend.type: auto "
          "(--set backend.type=auto) or mpi, or start one process",
          launcher_world_size(), backend));
    }
    rank = ev->rank();
    // backend.type auto says what it chose, once (stderr, as other notices; --quiet hides only
    // the tables).
    if (rank == 0 && !ev->backend_choice().empty())
      print_line("", "backend auto -> " + ev->backend_choice());
    // Whatever fails from here to the first collective fails on this rank only: it is recorded,
    // and read_all()'s start exchange fails every rank with it, naming this rank.
    const tally::OutputPaths configured = ev->outputs();
    const std::optional<tally::RegressionSettings>& regression = ev->regression();
    tally::ReportTargets paths;
    bool comparing = false;
    tally::Tolerances tolerances;
    std::optional<tally::Results> baseline;
    std::optional<tally::History> history;
    std::string chartjs;
    std::shared_ptr<tally::Reader> reader;
    std::optional<tally::Progress> progress;
    // Everything that can be checked before the run is checked on every rank alike, so a bad
    // output path, baseline or tolerance fails before any work, not after it.
    try {
      // The parts of the config the command acts on (outputs, regression), as the evaluator read
      // them.
      const auto configured_targets = tally::ReportTargets::of(configured);
      paths.json = chosen(o.output, "--output", configured_targets.json);
      paths.junit = chosen(o.reports.junit, "--junit", configured_targets.junit);
      paths.markdown = chosen(o.reports.markdown, "--markdown", configured_targets.markdown);
      paths.html = chosen(o.reports.html, "--html", configured_targets.html);
      if (o.update_baseline && !regression)
        throw tally::ConfigError(
            fmt::format("--update-baseline: {} has no 'regression:' section naming the baseline to "
                        "write (regression: {{baseline: "
                        "baseline.json}})",
                        o.config));
      if (o.resume && !ev->has_checkpoint())
        throw tally::ConfigError(fmt::format(
            "--resume: {} has no 'checkpoint:' section (checkpoint: {{dir: DIR, every_n_batches: "
            "N}}), so there is no checkpoint to resume from",
            o.config));
      comparing = regression && !o.update_baseline;

      if (rank == 0) {
        paths.check_writable();
        if (configured.records) tally::check_writable(*configured.records, "output.records");
        if (o.update_baseline) tally::check_writable(regression->baseline, "regression.baseline");
        if (o.update_baseline && regression->baseline_records)
          tally::check_writable(*regression->baseline_records, "regression.baseline_records");

        if (paths.html) chartjs = load_chartjs();
      }
      if (comparing) {
        tolerances = tally::Tolerances::of(*regression);
        baseline = tally::read_baseline(*regression, o.config);
        if (rank == 0 && regression->history) history = tally::read_history(*regression->history);
        // The baseline's records are read on rank 0 only, after the run (Evaluator::paired_tests).
        if (rank == 0 && regression->baseline_records && !fs::exists(*regression->baseline_records))
          throw tally::InputError(fmt::format(
              "regression.baseline_records: {} does not exist: write it with the baseline (tally "
              "run {} --update-baseline)",
              shown_path(*regression->baseline_records), o.config));
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
    read.on_notice = [](const std::string& message) { print_line("", message); };
    read.settings = agreed_options(o);
    ev->read_all(reader.get(), read);
    if (progress) progress->finish();
    const tally::Results results =
        ev->compute();  // collective; throws the same error on every rank

    // Every rank compares (the same numbers give the same verdict; run() gives every rank rank 0's
    // exit code all the same, should a baseline differ from host to host).
    std::optional<tally::Comparison> comparison;
    const tally::ResultSpecs specs = tally::ResultSpecs::from_results(results);
    if (comparing) {
      comparison = tally::compare(results.metrics, baseline->metrics, specs, tolerances);
      comparison->baseline_source = shown_path(regression->baseline);
      if (regression->baseline_records)  // collective: rank 0 runs the tests
        tally::apply_paired_gate(*comparison, *ev, results, *regression,
                                 shown_path(*regression->baseline_records));
    }
    // The trends over the history folder (rank 0, which alone writes the reports); a drift fails
    // the run only with regression.fail_on_drift, on every rank alike (broadcast below).
    std::optional<tally::Trends> trends;
    if (rank == 0 && history) {
      tally::DriftOptions drift;
      drift.current_name = "this run";
      drift.alpha = regression->paired.alpha;
      trends = tally::trends(*history, results, specs, tolerances, drift);
    }
    if (rank == 0) {
      if (!o.quiet) {
        fmt::print("{}", tally::format_table(results));
        if (comparison)
          fmt::print("\n{}", tally::format_comparison(*comparison, use_color(o.color)));
        if (trends) fmt::print("\n{}", tally::format_trends(*trends, use_color(o.color)));
      }
      std::fflush(stdout);
      // Every output is staged (written to a temporary file, or opened when it is a device or
      // FIFO) and put in place only once all are: a run that fails on any leaves none, and
      // earlier files at those paths intact.
      tally::OutputSet out;
      const tally::ReportInput input{results,
                                     specs,
                                     comparison ? &*comparison : nullptr,
                                     baseline ? &baseline->metrics : nullptr,
                                     o.config,
                                     trends ? &*trends : nullptr};
      paths.stage(out, input, chartjs);
      if (configured.records && results.records)
        out.stage(*configured.records, tally::pack_records(*results.records), "output.records");
      if (o.update_baseline)
        out.stage(regression->baseline, results.to_json(), "regression.baseline");
      if (o.update_baseline && regression->baseline_records && results.records)
        out.stage(*regression->baseline_records, tally::pack_records(*results.records),
                  "regression.baseline_records");
      out.commit();
      if (o.update_baseline)
        print_line("", "baseline written: " + shown_path(regression->baseline) +
                           (regression->baseline_records
                                ? " (records: " + shown_path(*regression->baseline_records) + ")"
                                : ""));
      if (comparison && comparison->regressed()) print_regressions(*comparison);
      if (trends && trends->drifted() > 0)
        print_line("", fmt::format("history: {} key{} drifted{}", trends->drifted(),
                                   trends->drifted() == 1 ? "" : "s",
                                   regression->fail_on_drift ? " (regression.fail_on_drift)" : ""));
    }
    // The drift is known on rank 0 only: run() gives every rank rank 0's exit code.
    const bool drifted = trends && trends->drifted() > 0 && regression->fail_on_drift;
    return (comparison && comparison->regressed()) || drifted ? tally::kExitRegression : 0;
  } catch (const tally::Error& e) {
    if (rank == 0) {
      print_error(e.what());
    } else if (rank < 0) {
      print_before_backend(e.what());
    } else if (ev && std::string_view(e.what()).starts_with(
                         fmt::format("{} backend: rank {} of ", ev->backend_name(), rank))) {
      // This rank's own transport failed (a peer gone, a deadline passed): no rank agreed on the
      // error, and rank 0 may have failed differently or not at all: say it here too.
      print_error(fmt::format("rank {}: {}", rank, e.what()));
    }
    return e.exit_code();
  } catch (const std::exception& e) {
    if (rank <= 0) print_error(e.what());
    return 1;
  }
}

int run(const RunOptions& o) {
  std::optional<tally::Evaluator> ev;
  int code = run_evaluation(o, ev);
  // Under mpirun a rank that exits non-zero makes the launcher kill the others, possibly before
  // rank 0 has printed the error or written its files: no rank leaves before every rank is done.
  // And every rank leaves with one exit code, the first non-zero one in rank order: what rank 0
  // alone decided after the last collective (an output it could not write, a drift over its
  // history, a verdict against its baseline) is every rank's, under every backend.
  if (ev && ev->world_size() > 1) {
    try {
      const std::vector<int> codes = ev->all_gather(code);
      const auto first = std::find_if(codes.begin(), codes.end(), [](int c) { return c != 0; });
      code = first == codes.end() ? 0 : *first;
    } catch (const std::exception&) {  // the backend itself failed: nothing left to wait for
    }
  }
  return code;
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

int compare(const CompareOptions& o) {
  try {
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
    const std::string chartjs = paths.html ? load_chartjs() : std::string();

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
      throw tally::ConfigError(
          fmt::format("--alpha expects a number in (0, 1) such as 0.05, found {}", o.paired.alpha));
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
          tally::paired_tests(*baseline_records, *records, tally::records_factory(*registry), ps,
                              *o.baseline_records, *o.records),
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
    if (comparison.regressed()) print_regressions(comparison);
    if (trends && trends->drifted() > 0)
      print_line("", fmt::format("history: {} key{} drifted{}", trends->drifted(),
                                 trends->drifted() == 1 ? "" : "s",
                                 o.fail_on_drift ? " (--fail-on-drift)" : ""));
    return comparison.regressed() || (o.fail_on_drift && trends && trends->drifted() > 0)
               ? tally::kExitRegression
               : 0;
  } catch (const tally::Error& e) {
    print_error(e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    print_error(
        "out of memory: the results, baseline, records or history read need more memory than "
        "this machine gives");
    return 1;
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
    std::string regression;
    if (const auto& rc = ev.regression()) {
      const auto tolerances = tally::Tolerances::of(*rc);
      std::error_code ec;
      if (fs::exists(rc->baseline, ec)) {
        const auto baseline = tally::read_results_json(rc->baseline);
        regression =
            fmt::format("; baseline {} ({} metrics), {} tolerance rules", shown_path(rc->baseline),
                        baseline.metrics.size(), tolerances.rules.size());
      } else {
        regression =
            fmt::format("; baseline {} does not exist yet (tally run --update-baseline writes it)",
                        shown_path(rc->baseline));
      }
    }
    fmt::print("{}\n",
               tally::escape_for_terminal(fmt::format(
                   "{}: ok ({} samples, reader fields: {}{})", config, reader->total_samples(),
                   fmt::join(reader->fields(), ", "), regression)));
    return 0;
  } catch (const tally::Error& e) {
    print_error(e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    print_error(e.what());
    return 1;
  }
}

int plugins(bool json, const std::vector<std::string>& paths) {
  try {
    std::vector<fs::path> ps(paths.begin(), paths.end());
    const auto reg = tally::Registry::load(ps);
    if (json) {
      fmt::print("{}\n", tally::plugins_json(reg));
      return 0;
    }
    // Names, docs and file names come from plugins and folders: shown escaped on a terminal.
    const auto t = [](std::string_view text) { return tally::escape_for_terminal(text); };
    const auto ts = [&](const std::vector<std::string>& texts) {
      std::vector<std::string> out;
      for (const auto& x : texts) out.push_back(t(x));
      return out;
    };
    for (auto kind : {tally::ComponentKind::Backend, tally::ComponentKind::Reader,
                      tally::ComponentKind::Metric}) {
      for (const auto& c : reg.components()) {
        const auto& i = *c.info;
        if (i.kind != kind) continue;
        fmt::print(
            "{} {}{}  [{} {}, {}]\n", tally::component_kind_name(kind), t(i.name),
            i.aliases.empty() ? "" : fmt::format(" (alias {})", fmt::join(ts(i.aliases), ", ")),
            t(c.plugin_name), t(c.plugin_version), t(c.file.native()));
        if (!i.doc.empty()) fmt::print("    {}\n", t(i.doc));
        for (const auto& in : i.inputs)
          fmt::print("    input  {:<18} {}{}\n", t(in.name), in.required ? "" : "(optional) ",
                     t(in.doc));
        for (const auto& p : i.params) {
          std::string def = p.required()                ? "required"
                            : p.default_value.is_null() ? "optional"
                                                        : "default " + p.default_value.to_json();
          if (!p.choices.empty()) def += fmt::format("; one of {}", fmt::join(p.choices, " | "));
          fmt::print("    param  {:<18} {:<24} {}  ({})\n", t(p.name),
                     tally::param_type_name(p.type), t(p.doc), t(def));
        }
        for (const auto& r : i.results)
          fmt::print("    result {:<18} {:<24} {}\n", t(r.key),
                     fmt::format("{}, {}", tally::better_name(r.better), tally::plot_name(r.plot)),
                     t(r.doc));
        fmt::print("\n");
      }
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
      ->check(tolerance_validator());
  cmp_cmd->add_option("--atol", co.atol, "Absolute tolerance for every key (default 0)")
      ->check(tolerance_validator());
  cmp_cmd->add_option("--tolerances", co.tolerances,
                      "YAML file of per-key tolerances: KEY_PATTERN: {rtol: X, atol: Y, better: "
                      "higher|lower|neither}");
  cmp_cmd->add_option("--records", co.records,
                      "The per-sample records of the results (output.records): with "
                      "--baseline-records, a key beyond its tolerance regresses only when a "
                      "paired test finds the change significant");
  cmp_cmd->add_option("--baseline-records", co.baseline_records,
                      "The per-sample records of the baseline");
  cmp_cmd
      ->add_option("--alpha", co.paired.alpha,
                   "Significance level of the paired tests (default 0.05)")
      ->check(CLI::Range(0.0, 1.0));
  cmp_cmd
      ->add_option("--resamples", co.paired.resamples, "Paired bootstrap resamples (default 1000)")
      ->check(CLI::Range(std::uint64_t{2}, std::uint64_t{1000000}));
  cmp_cmd->add_option("--seed", co.paired.seed, "Seed of the paired bootstrap (default 0)");
  cmp_cmd
      ->add_option("--test", co.test,
                   "auto: McNemar's exact test for accuracy-like keys, the paired bootstrap for "
                   "the others; bootstrap: the paired bootstrap for every key")
      ->check(CLI::IsMember({"auto", "bootstrap"}));
  cmp_cmd->add_option("--history", co.history,
                      "A folder of earlier results files (natural order of their names): trends in "
                      "the HTML report and a slow-drift check (docs/history.md)");
  cmp_cmd
      ->add_option("--drift-window", co.drift_window,
                   "How many of the latest history runs the drift check looks at (default 10)")
      ->check(CLI::Range(std::size_t{3}, std::size_t{10000}));
  cmp_cmd->add_flag("--fail-on-drift", co.fail_on_drift, "Exit 3 when a key drifted, too");
  cmp_cmd->add_option("--path", co.paths,
                      "Also search this folder for plugins (their ResultSpecs), repeatable");
  cmp_cmd->add_option("--json", co.json,
                      "Write the comparison as JSON here (verdicts, deltas, tolerances, tests)");
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
    print_before_backend(fmt::format("{} (see 'tally --help')", e.what()));
    return 2;
  }
  if (*run_cmd) {
    if (progress_opt->count() > 0) ro.progress = progress_flag;
    return run(ro);
  }
  if (*cmp_cmd) return compare(co);
  if (*val_cmd) return validate(config, sets);
  if (*new_cmd) {
    try {
      tally::cli::write_plugin_skeleton(new_name, new_dir);
      fmt::print("wrote the plugin {} (metric {}) into {}\n", new_name,
                 tally::cli::plugin_metric_type(new_name), new_dir);
      return 0;
    } catch (const tally::Error& e) {
      print_error(e.what());
      return e.exit_code();
    } catch (const std::exception& e) {
      print_error(e.what());
      return 1;
    }
  }
  return plugins(json, paths);
}
