// Results for people and CI systems (library tally_reports, CMake target tally::reports): the
// terminal table, a results JSON read back (tally compare, baselines), and reports: JUnit XML
// (one testcase per metric key), a Markdown summary (GitHub job summaries, PR comments) and a
// self-contained HTML report with charts. They are driven by the metrics' ResultSpecs (Better,
// Plot): no writer knows any particular metric.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "tally/evaluator.hpp"
#include "tally/file_io.hpp"
#include "tally/registry.hpp"
#include "tally/reports/compare.hpp"
#include "tally/reports/history.hpp"

namespace tally {

/// Every component of `registry` as a JSON array (`tally plugins --json`): kind, name, aliases,
/// plugin, version, file, doc, params (name, type, required, default, nullable, choices, doc);
/// metrics also inputs and results (key, better, plot, doc).
std::string plugins_json(const Registry& registry);
/// The same for `components` alone, in their order (`tally plugins NAME... --json`); `single`:
/// the one component as an object rather than an array of one.
std::string plugins_json(const std::vector<const Component*>& components, bool single = false);
/// "none", "bars", "heatmap", "curve".
const char* plot_name(Plot p);

/// An aligned, readable table of every metric's results.
std::string format_table(const Results& results);

/// A results JSON file back as Results (metrics, and the run info it records: types, plugins;
/// no specs). InputError naming the file when it cannot be read, is not JSON, nests deeper than
/// 64 levels, or has no "results" object.
Results read_results_json(const std::filesystem::path& path);

struct ReportInput {
  const Results& results;
  const ResultSpecs& specs;
  /// The comparison with a baseline, or nullptr when there is none.
  const Comparison* comparison = nullptr;
  /// The baseline's results (label -> key -> value), drawn beside the results; may be nullptr.
  const Value* baseline = nullptr;
  /// What was evaluated, for titles: the config file (or the results file for tally compare).
  std::string title;
  /// The trends over a history folder of earlier runs (tally/reports/history.hpp), or nullptr: the
  /// HTML report draws a "Trends" section (one line chart per key, drifted keys first), the
  /// Markdown a "Drift" list.
  const Trends* trends = nullptr;
};

/// An output file of a run and what named it, for messages: a config key ("output.junit") or a
/// command-line option ("--junit").
struct OutputTarget {
  std::filesystem::path path;
  std::string what;
};

/// The files a run or a comparison writes: the results JSON and the reports.
struct ReportTargets {
  std::optional<OutputTarget> json, junit, markdown, html;
  /// The config's `output:` section, each file named by its key.
  static ReportTargets of(const OutputPaths& configured);
  /// check_writable() of each, before any work: a bad path fails first, not after the run.
  void check_writable() const;
  /// Stages the results JSON of `input.results` (when json is set) and each report in `out`:
  /// nothing is written before out.commit().
  void stage(OutputSet& out, const ReportInput& input, const std::string& chartjs) const;
};

/// The results file a `regression:` section names as its baseline. InputError when it does not
/// exist, saying to write it with `tally run CONFIG --update-baseline`, or cannot be read.
Results read_baseline(const RegressionSettings& regression, const std::string& config);

/// JUnit XML (Jenkins/Surefire style): one testsuite, one testcase per metric key (classname =
/// the metric label, name = the key). A regressed key is a <failure> carrying baseline, value,
/// delta, tolerance and its paired test when there is one; a key missing from the results is
/// <skipped>; every other verdict (within noise included) passes, its numbers in <system-out>.
/// No baseline: no failures.
std::string junit_report(const ReportInput& in);

/// Markdown: a summary line, the results table, the comparison with arrows (and each key's paired
/// test, when there is one), then the drift list when there are trends.
std::string markdown_report(const ReportInput& in);

/// A self-contained HTML page: run info, the comparison (with the paired tests), the trends over a
/// history (one line chart per key, or a table without Chart.js), and per metric its results table
/// and a chart or heatmap for each array key its ResultSpec says how to draw (Plot::Bars, Heatmap,
/// Curve). `chartjs` is the Chart.js source inlined into the page; empty: tables only, and the
/// page says the charts are unavailable.
std::string html_report(const ReportInput& in, const std::string& chartjs);

/// Where Chart.js is: $TALLY_CHARTJS, else <libdir>/tally/chart.js/ beside libtally (the wheel's
/// copy), else Debian's libjs-chart.js (/usr/share/javascript/chart.js/). nullopt when none exists.
std::optional<std::filesystem::path> find_chartjs();

/// The text of the Chart.js file, checked to be the UMD build a classic <script> can load.
/// RuntimeError naming the file otherwise.
std::string read_chartjs(const std::filesystem::path& file);

}  // namespace tally
