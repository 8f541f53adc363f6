// One run of a config, start to end (library tally_reports): what `tally run` and Python's
// tally.run() / Evaluator.run() do, in one place, so that the two cannot drift. The config and its
// evaluator (a rank whose config fails under a launcher joins the others as failed), the
// launcher/backend check, the outputs (results JSON, JUnit, Markdown, HTML, records), checkpoints
// and --resume, the regression gate with its paired tests, history and drift (fail_on_drift),
// --update-baseline, the all-or-nothing commit of every output, and one exit code on every rank.
// The callers only parse their arguments and print what the sinks are given.
#pragma once

#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tally/evaluator.hpp"
#include "tally/reports/compare.hpp"

namespace tally {

/// What to run, and `tally run`'s options (Python's run() takes the same, by the same names).
struct RunRequest {
  /// The config file; with `yaml`, the name its text goes by in messages ("config", "<yaml>").
  std::string config;
  /// The config's YAML text instead of a file (Python's dict and text configs); its relative
  /// paths resolve against `base_dir`.
  std::optional<std::string> yaml;
  /// `yaml` is a serialized mapping (a dict): messages locate values by key path
  /// (EvaluatorOptions::locate_by_key_path).
  bool locate_by_key_path = false;
  std::filesystem::path base_dir;
  /// --set KEY=VALUE overrides.
  std::vector<std::string> overrides;
  /// --output, --junit, --markdown, --html: override the config's output.json, .junit, ...
  std::optional<std::string> output, junit, markdown, html;
  /// --update-baseline: write the results as regression.baseline (and its records) and pass.
  bool update_baseline = false;
  /// --resume: continue from the last complete checkpoint of the checkpoint: section.
  bool resume = false;
  /// --quiet: no results, comparison or trends table through RunSinks::out.
  bool quiet = false;
  /// Color the comparison and trends tables (--color).
  bool color = false;
};

/// Where a run prints. Every sink may be empty (nothing printed there).
struct RunSinks {
  /// The tables (stdout): results, comparison, trends; rank 0 only.
  std::function<void(std::string_view)> out;
  /// Whole lines for stderr, "tally: ...\n", escaped for a terminal: notices ("backend auto ->",
  /// checkpoints, "baseline written", the regression and drift lines), warnings, and, with
  /// print_errors, the error that ended the run ("tally: error: ...").
  std::function<void(std::string_view)> err;
  /// Whether the error that ends the run is printed (the command, which then exits with its code)
  /// or only returned in RunOutcome, for the caller to raise (Python).
  bool print_errors = true;
  /// A progress display on rank 0: begin(this rank's shard samples, world size), total(samples)
  /// once the read knows what it counts (a resume on another number of ranks changes rank 0's
  /// part: ReadOptions::on_shard), add(samples) after every batch, step() for each step after
  /// the read (the sync, each metric's compute with its time, the outputs: RunStep), finish()
  /// once the outputs are written or the run has failed (before its error is printed). Unset:
  /// none.
  std::function<void(std::int64_t, int)> progress_begin;
  std::function<void(std::int64_t)> progress_total;
  std::function<void(std::int64_t)> progress_add;
  RunStepFn progress_step;
  std::function<void()> progress_finish;
};

/// How a run ended, on this rank.
struct RunOutcome {
  /// The command's exit code (0 ok, 1 failed at run time, 2 usage, config or input, 3 regressed
  /// or, with fail_on_drift, drifted), the same on every rank: the first non-zero in rank order.
  int exit_code = 0;
  /// The results, when the run got that far.
  std::optional<Results> results;
  /// The comparison with the baseline, when there was one.
  std::optional<Comparison> comparison;
  /// Why exit_code is not 0, in one line (without "tally: "): the error, or the regression or
  /// drift line; on a rank whose code is another rank's, which rank it was.
  std::string message;
  /// The error that ended the run on this rank, to rethrow (null when there was none, or when
  /// the exit code is another rank's).
  std::exception_ptr error;
  /// Every line given to RunSinks::err, in order (without "tally: " and the newline).
  std::vector<std::string> messages;
};

/// Opens `request`'s config (from_file, or from_yaml with request.yaml) and runs it as below. A
/// config that fails on one rank of several started by a launcher joins the other ranks as a
/// failed evaluator (Evaluator::join_as_failed), so that they fail with its error.
RunOutcome run(const RunRequest& request, const RunSinks& sinks);
/// Runs the config of an evaluator already made (Python's Evaluator.run()): reads its data,
/// computes, compares, writes the outputs on rank 0. Collective.
RunOutcome run(Evaluator& evaluator, const RunRequest& request, const RunSinks& sinks);

/// An error before there is an evaluator (a command line that does not parse), printed through
/// sinks.err as run() prints its own: at once on rank 0 or without a launcher; on another rank of
/// several after five seconds (rank 0 prints first), naming the rank.
void print_before_backend(const RunSinks& sinks, const std::string& message);

/// ConfigError when a launcher started several ranks but `evaluator`'s backend is a world of one:
/// every rank would evaluate alone and write the same outputs (the command's exit 2).
void check_launcher_backend(const Evaluator& evaluator);

/// The one line naming what regressed: "regression against 'B': 2 keys regressed: K 0.9 -> 0.8
/// (-0.1), ..." (the first three), printed by `tally run` and `tally compare`.
std::string regression_summary(const Comparison& comparison);

/// Chart.js for the HTML report (find_chartjs, read_chartjs), read before any work: a
/// TALLY_CHARTJS that points nowhere is a ConfigError; no Chart.js at all only costs the charts:
/// `warn` is told so, and the text is empty.
std::string load_chartjs(const std::function<void(const std::string&)>& warn);

/// A path as messages show it: relative to the working directory when it lies below it.
std::string shown_path(const std::filesystem::path& p);

}  // namespace tally
