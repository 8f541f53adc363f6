// One run of a config (tally/reports/run.hpp): the whole of `tally run`, for the command and for
// Python.
#include "tally/reports/run.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tally/file_io.hpp"
#include "tally/launch.hpp"
#include "tally/records.hpp"
#include "tally/reports/history.hpp"
#include "tally/reports/reports.hpp"
#include "tally/sdk/error.hpp"
#include "tally/text_safety.hpp"

namespace fs = std::filesystem;

namespace tally {
namespace {

// Every line a run prints to stderr goes through here: control characters (ESC, CR, newlines)
// and bytes that are not UTF-8, which may come from file names, configs, data or plugins, are
// shown escaped (\x1b), never sent raw to the terminal, and a message stays one line.
class Printer {
 public:
  Printer(const RunSinks& sinks, RunOutcome& outcome) : sinks_(sinks), outcome_(outcome) {}

  void line(std::string_view prefix, const std::string& message) {
    std::string text = fmt::format("{}{}", prefix, escape_for_terminal(message));
    if (sinks_.err) sinks_.err(fmt::format("tally: {}\n", text));
    outcome_.messages.push_back(std::move(text));
  }
  void notice(const std::string& message) { line("", message); }
  void warning(const std::string& message) { line("warning: ", message); }
  // The error that ends the run: printed by the command; Python raises it instead.
  void error(const std::string& message) {
    if (sinks_.print_errors) line("error: ", message);
  }
  bool prints_errors() const { return sinks_.print_errors; }
  void out(const std::string& text) const {
    if (sinks_.out) sinks_.out(text);
  }
  const RunSinks& sinks() const { return sinks_; }

 private:
  const RunSinks& sinks_;
  RunOutcome& outcome_;
};

// An output path and the option or config key that named it ("--output", "output.json").
// The command line's path (the command line wins) or the config's.
std::optional<OutputTarget> chosen(const std::optional<std::string>& option,
                                   const char* option_name,
                                   const std::optional<OutputTarget>& configured) {
  if (option) return OutputTarget{*option, option_name};
  return configured;
}

// The request's settings that every rank must give alike (ReadOptions::settings): the outputs
// (only rank 0 writes them, so one given to another rank alone would be lost), and the flags that
// change what the ranks do together. The config's own are the evaluator's.
std::vector<std::pair<std::string, std::string>> agreed_options(const RunRequest& r) {
  std::vector<std::pair<std::string, std::string>> s;
  const auto add = [&](const char* name, const std::optional<std::string>& v) {
    if (v) s.emplace_back(name, *v);
  };
  add("--output", r.output);
  add("--junit", r.junit);
  add("--markdown", r.markdown);
  add("--html", r.html);
  if (r.update_baseline) s.emplace_back("--update-baseline", "given");
  if (r.resume) s.emplace_back("--resume", "given");
  return s;
}

// An error before this process has a backend (its config, its plugins), under a launcher of
// several ranks that cannot be told through one: rank 0 prints it at once; another rank first
// gives rank 0 five seconds, then prints it naming itself. When every rank fails alike, rank 0
// has printed and exited by then and the launcher stops the rest (mpirun does within about 2 s of
// the first non-zero exit): one message. When this rank alone failed, it is the only one that
// knows why: its message, naming it, and the launcher stops the others when it exits.
void print_before_backend(Printer& p, const std::string& message) {
  if (!p.prints_errors()) return;
  const int r = launch::launcher_rank();
  if (launch::launcher_world_size() <= 1 || r <= 0) return p.error(message);
  std::this_thread::sleep_for(std::chrono::seconds(5));
  p.error(fmt::format("rank {}: {}", r, message));
}

// The error that ended the run on `rank` (-1: before it had a backend) into `o`, printed by the
// rank that should: rank 0 for an error every rank agreed on, this rank for its own.
void fail(Printer& p, RunOutcome& o, const std::exception_ptr& error, int rank,
          const Evaluator* ev) {
  o.error = error;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    o.exit_code = e.exit_code();
    o.message = e.what();
    if (rank == 0) {
      p.error(e.what());
    } else if (rank < 0) {
      print_before_backend(p, e.what());
    } else if (ev && e.context().backend == ev->backend_name() && e.context().rank == rank) {
      // This rank's own transport failed (a peer gone, a deadline passed): no rank agreed on the
      // error, and rank 0 may have failed differently or not at all: say it here too.
      p.error(fmt::format("rank {}: {}", rank, e.what()));
    }
  } catch (const std::exception& e) {
    o.exit_code = 1;
    o.message = e.what();
    if (rank <= 0) p.error(e.what());
  }
}

// Under mpirun a rank that exits non-zero makes the launcher kill the others, possibly before
// rank 0 has printed the error or written its files: no rank leaves before every rank is done.
// And every rank leaves with one exit code, the first non-zero one in rank order: what rank 0
// alone decided after the last collective (an output it could not write, a drift over its
// history, a verdict against its baseline) is every rank's, under every backend.
void agree_exit_code(Evaluator& ev, RunOutcome& o) {
  if (ev.world_size() <= 1) return;
  try {
    const std::vector<int> codes = ev.all_gather(o.exit_code);
    const auto first = std::find_if(codes.begin(), codes.end(), [](int c) { return c != 0; });
    const int code = first == codes.end() ? 0 : *first;
    if (code != o.exit_code) {
      o.error = nullptr;
      o.message = fmt::format("the run failed on rank {} (exit code {}); that rank says why",
                              first - codes.begin(), code);
    }
    o.exit_code = code;
  } catch (const std::exception&) {  // the backend itself failed: nothing left to wait for
  }
}

// What a run checks and reads before it reads any data.
struct Prepared {
  ReportTargets paths;
  bool comparing = false;
  Tolerances tolerances;
  std::optional<Results> baseline;
  std::optional<History> history;
  std::string chartjs;
  std::shared_ptr<Reader> reader;
  bool progress = false;
};

// Everything that can be checked before the run, checked on every rank alike, so that a bad
// output path, baseline or tolerance fails before any work, not after it. Throws; the caller
// records the error for read_all()'s start exchange.
void prepare(Evaluator& ev, const RunRequest& r, Printer& p, Prepared& prep) {
  const int rank = ev.rank();
  const OutputPaths configured = ev.outputs();
  const std::optional<RegressionSettings>& regression = ev.regression();
  const auto configured_targets = ReportTargets::of(configured);
  prep.paths.json = chosen(r.output, "--output", configured_targets.json);
  prep.paths.junit = chosen(r.junit, "--junit", configured_targets.junit);
  prep.paths.markdown = chosen(r.markdown, "--markdown", configured_targets.markdown);
  prep.paths.html = chosen(r.html, "--html", configured_targets.html);
  if (r.update_baseline && !regression)
    throw ConfigError(
        fmt::format("--update-baseline: {} has no 'regression:' section naming the baseline to "
                    "write (regression: {{baseline: baseline.json}})",
                    r.config));
  // --resume without a checkpoint: section is read_all()'s error (one message, every rank).
  prep.comparing = regression && !r.update_baseline;
  if (rank == 0) {
    prep.paths.check_writable();
    if (configured.records) check_writable(*configured.records, "output.records");
    if (r.update_baseline) check_writable(regression->baseline, "regression.baseline");
    if (r.update_baseline && regression->baseline_records)
      check_writable(*regression->baseline_records, "regression.baseline_records");
    if (prep.paths.html) prep.chartjs = load_chartjs([&](const std::string& m) { p.warning(m); });
  }
  if (prep.comparing) {
    prep.tolerances = Tolerances::of(*regression);
    prep.baseline = read_baseline(*regression, r.config);
    if (rank == 0 && regression->history) prep.history = read_history(*regression->history);
    // The baseline's records are read on rank 0 only, after the run (Evaluator::paired_tests).
    if (rank == 0 && regression->baseline_records && !fs::exists(*regression->baseline_records))
      throw InputError(fmt::format(
          "regression.baseline_records: {} does not exist: write it with the baseline (tally "
          "run {} --update-baseline)",
          shown_path(*regression->baseline_records), r.config));
  }
  prep.reader = ev.make_reader();
  if (rank == 0 && p.sinks().progress_begin) {
    p.sinks().progress_begin(prep.reader->shard_samples(), ev.world_size());
    prep.progress = true;
  }
}

// Every rank reads (collective with checkpoints, even on a rank that failed in prepare()); errors
// are kept for compute(). A checkpoint that cannot be resumed throws here on every rank.
Results read_and_compute(Evaluator& ev, const RunRequest& r, Printer& p, const Prepared& prep) {
  ReadOptions read;
  read.resume = r.resume;
  if (prep.progress && p.sinks().progress_add) read.on_batch = p.sinks().progress_add;
  if (prep.progress && p.sinks().progress_total) read.on_shard = p.sinks().progress_total;
  read.on_notice = [&p](const std::string& message) { p.notice(message); };
  read.settings = agreed_options(r);
  ev.read_all(prep.reader.get(), read);
  // Collective; throws the same error on every rank.
  return ev.compute(std::nullopt, prep.progress ? p.sinks().progress_step : RunStepFn());
}

// Ends rank 0's progress display (idempotent): after the outputs, or before a failure's message.
void finish_progress(const RunSinks& sinks) {
  if (sinks.progress_finish) sinks.progress_finish();
}

// Every rank compares (the same numbers give the same verdict; agree_exit_code() gives every rank
// rank 0's exit code all the same, should a baseline differ from host to host).
std::optional<Comparison> compare_with_baseline(Evaluator& ev, const Results& results,
                                                const ResultSpecs& specs, const Prepared& prep) {
  if (!prep.comparing) return std::nullopt;
  const RegressionSettings& regression = *ev.regression();
  Comparison comparison = compare(results.metrics, prep.baseline->metrics, specs, prep.tolerances);
  comparison.baseline_source = shown_path(regression.baseline);
  if (regression.baseline_records)  // collective: rank 0 runs the tests
    apply_paired_gate(comparison, ev, results, regression,
                      shown_path(*regression.baseline_records));
  return comparison;
}

// The trends over the history folder (rank 0, which alone writes the reports).
std::optional<Trends> trends_of(const Evaluator& ev, const Results& results,
                                const ResultSpecs& specs, const Prepared& prep) {
  if (ev.rank() != 0 || !prep.history) return std::nullopt;
  DriftOptions drift;
  drift.current_name = "this run";
  drift.alpha = ev.regression()->paired.alpha;
  return trends(*prep.history, results, specs, prep.tolerances, drift);
}

std::string drift_summary(const Trends& trends, bool fail_on_drift) {
  return fmt::format("history: {} key{} drifted{}", trends.drifted(),
                     trends.drifted() == 1 ? "" : "s",
                     fail_on_drift ? " (regression.fail_on_drift)" : "");
}

// Rank 0: the tables, then every output staged (written to a temporary file, or opened when it
// is a device or FIFO) and put in place only once all are: a run that fails on any leaves none,
// and earlier files at those paths intact. Then the notices: baseline written, regression, drift.
void write_outputs(const Evaluator& ev, const RunRequest& r, Printer& p, const Prepared& prep,
                   const Results& results, const ResultSpecs& specs,
                   const std::optional<Comparison>& comparison,
                   const std::optional<Trends>& trends) {
  const OutputPaths configured = ev.outputs();
  const std::optional<RegressionSettings>& regression = ev.regression();
  if (!r.quiet) {
    p.out(format_table(results));
    if (comparison) p.out("\n" + format_comparison(*comparison, r.color));
    if (trends) p.out("\n" + format_trends(*trends, r.color));
  }
  const bool writes = prep.paths.json || prep.paths.junit || prep.paths.markdown ||
                      prep.paths.html || (configured.records && results.records) ||
                      r.update_baseline;
  if (writes && prep.progress && p.sinks().progress_step) {
    RunStep writing;
    writing.kind = RunStep::Kind::writing;
    p.sinks().progress_step(writing);
  }
  OutputSet out;
  const ReportInput input{results,
                          specs,
                          comparison ? &*comparison : nullptr,
                          prep.baseline ? &prep.baseline->metrics : nullptr,
                          r.config,
                          trends ? &*trends : nullptr};
  prep.paths.stage(out, input, prep.chartjs);
  if (configured.records && results.records)
    out.stage(*configured.records, pack_records(*results.records), "output.records");
  if (r.update_baseline) out.stage(regression->baseline, results.to_json(), "regression.baseline");
  if (r.update_baseline && regression->baseline_records && results.records)
    out.stage(*regression->baseline_records, pack_records(*results.records),
              "regression.baseline_records");
  out.commit();
  finish_progress(p.sinks());
  if (r.update_baseline)
    p.notice("baseline written: " + shown_path(regression->baseline) +
             (regression->baseline_records
                  ? " (records: " + shown_path(*regression->baseline_records) + ")"
                  : ""));
  if (comparison && comparison->regressed()) p.notice(regression_summary(*comparison));
  if (trends && trends->drifted() > 0) p.notice(drift_summary(*trends, regression->fail_on_drift));
}

// The run on an evaluator whose backend is up, to its exit code (throws what fails).
void evaluate(Evaluator& ev, const RunRequest& r, Printer& p, RunOutcome& o) {
  const int rank = ev.rank();
  // backend.type auto says what it chose, once (stderr, as other notices; --quiet hides only
  // the tables).
  if (rank == 0 && !ev.backend_choice().empty()) p.notice("backend auto -> " + ev.backend_choice());
  // Whatever fails from here to the first collective fails on this rank only: it is recorded,
  // and read_all()'s start exchange fails every rank with it, naming this rank.
  Prepared prep;
  try {
    prepare(ev, r, p, prep);
  } catch (const Error& e) {
    ev.record_error(e.exit_code(), e.what());
  } catch (const std::exception& e) {
    ev.record_error(1, e.what());
  }
  const Results& results = o.results.emplace(read_and_compute(ev, r, p, prep));
  const ResultSpecs specs = ResultSpecs::from_results(results);
  o.comparison = compare_with_baseline(ev, results, specs, prep);
  // A drift fails the run only with regression.fail_on_drift, on every rank alike (the drift is
  // known on rank 0 only: agree_exit_code() gives every rank rank 0's exit code).
  const std::optional<Trends> trends = trends_of(ev, results, specs, prep);
  if (rank == 0) write_outputs(ev, r, p, prep, results, specs, o.comparison, trends);
  const bool drifted = trends && trends->drifted() > 0 && ev.regression()->fail_on_drift;
  if (o.comparison && o.comparison->regressed()) {
    o.exit_code = kExitRegression;
    o.message = regression_summary(*o.comparison);
  } else if (drifted) {
    o.exit_code = kExitRegression;
    o.message = drift_summary(*trends, true);
  }
}

Evaluator open_evaluator(const RunRequest& r) {
  EvaluatorOptions opts;
  opts.overrides = r.overrides;
  opts.locate_by_key_path = r.locate_by_key_path;
  if (r.yaml) return Evaluator::from_yaml(*r.yaml, opts, r.config, r.base_dir);
  try {
    return Evaluator::from_file(r.config, opts);
  } catch (const Error& e) {
    // No backend yet (the config or its plugins failed on this rank): under a launcher of several
    // ranks, join the others, who are about to wait in the start exchange, so that they fail
    // with this rank's error instead of waiting for it. Nothing to join (no launcher, another
    // backend, or no mpi backend to be had): this rank prints its own error naming itself, and
    // the launcher then stops the others.
    if (launch::launcher_world_size() <= 1) throw;
    auto joined = Evaluator::join_as_failed(r.config, opts, e.exit_code(), e.what());
    if (!joined) throw;
    return std::move(*joined);
  }
}

}  // namespace

void print_before_backend(const RunSinks& sinks, const std::string& message) {
  RunOutcome unused;
  Printer p(sinks, unused);
  print_before_backend(p, message);
}

void check_launcher_backend(const Evaluator& ev) {
  const int launched = launch::launcher_world_size();
  if (ev.world_size() != 1 || launched <= 1) return;
  throw ConfigError(fmt::format(
      "started as one of {} ranks by a launcher, but the backend is {}: every rank would "
      "evaluate the whole dataset alone and write the same outputs; set backend.type: auto "
      "(--set backend.type=auto) or mpi, or start one process",
      launched, ev.backend_name()));
}

RunOutcome run(Evaluator& ev, const RunRequest& request, const RunSinks& sinks) {
  RunOutcome outcome;
  Printer p(sinks, outcome);
  int rank = -1;  // the mismatch below fails before the backend counts: printed as such
  try {
    check_launcher_backend(ev);
    rank = ev.rank();
    evaluate(ev, request, p, outcome);
  } catch (...) {
    finish_progress(sinks);
    fail(p, outcome, std::current_exception(), rank, &ev);
  }
  finish_progress(sinks);
  agree_exit_code(ev, outcome);
  return outcome;
}

RunOutcome run(const RunRequest& request, const RunSinks& sinks) {
  std::optional<Evaluator> ev;
  try {
    ev.emplace(open_evaluator(request));
  } catch (...) {
    RunOutcome outcome;
    Printer p(sinks, outcome);
    fail(p, outcome, std::current_exception(), -1, nullptr);
    return outcome;
  }
  return run(*ev, request, sinks);
}

std::string regression_summary(const Comparison& c) {
  std::string keys;
  std::size_t shown = 0;
  for (const auto& k : c.keys) {
    if (k.verdict != Verdict::Regressed) continue;
    if (shown++ == 3) {
      keys += ", ...";
      break;
    }
    if (!keys.empty()) keys += ", ";
    if (k.delta)
      keys += fmt::format("{}{} {} -> {} ({})", k.name(), k.element, format_number(k.baseline),
                          format_number(k.value),
                          format_delta(k.delta, k.baseline.is_int() && k.value.is_int()));
    else
      keys += fmt::format("{} ({})", k.name(), k.note);
  }
  const std::size_t regressed = c.count(Verdict::Regressed);
  return fmt::format("regression against '{}': {} key{} regressed: {}", c.baseline_source,
                     regressed, regressed == 1 ? "" : "s", keys);
}

std::string load_chartjs(const std::function<void(const std::string&)>& warn) {
  const auto file = find_chartjs();
  if (!file) {
    warn(
        "Chart.js not found (apt-get install libjs-chart.js, or set TALLY_CHARTJS): the HTML "
        "report will have tables but no charts");
    return {};
  }
  try {
    return read_chartjs(*file);
  } catch (const Error& e) {
    throw ConfigError(e.what());
  }
}

std::string shown_path(const fs::path& p) {
  std::error_code ec;
  const auto rel = fs::proximate(p, ec);
  if (ec || rel.empty() || *rel.begin() == "..") return p.string();
  return rel.string();
}

}  // namespace tally
