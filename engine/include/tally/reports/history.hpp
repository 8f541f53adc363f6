// History: a folder of earlier runs' results files (`tally compare --history DIR`,
// `regression.history: DIR`) gives every scalar key a trend, drawn in the HTML report, and flags a
// slow drift that no single comparison with a baseline shows (issue 22, item 4).
//
// The folder: every `*.json` file directly in it is a results file (read_results_json), one run,
// named by its file stem. Runs are ordered oldest first by the *natural order* of their file names:
// runs of digits compare as numbers (`run-9.json` < `run-10.json`, `2024-5-1` < `2024-10-1`), the
// rest byte by byte; name runs by date (`2024-05-01.json`) or by build number (`build-812.json`).
// Subfolders and other files are ignored. An empty folder is an empty history.
//
// Keys: the scalar keys flatten_scalars gives for each label, named as compare names them
// (`<label>.<key>`, `<label>.<key>.<sub>` inside maps); arrays and curves are left out. The series
// of a key is its value in each history run, then in the current run; a run without the key (or
// with null/NaN) is a gap. Bootstrap intervals (Results::intervals) travel with the values.
//
// Slow drift, over a window of the last `window` history runs plus the current run, on the points
// that have a value (at least 4, else the note says "too few runs"), with x = the run's position
// in the window:
//   - Mann-Kendall trend test: Kendall's tau-b between x and the values, two-sided p-value equal to
//     scipy.stats.kendalltau(x, y) (SciPy 1.16.3, method='auto': the exact null distribution when
//     the values have no ties and n <= 33 (or the count of discordant or concordant pairs is <= 1),
//     else the normal approximation with the tie-corrected variance);
//   - Theil-Sen slope: the median of the pairwise slopes, per run (scipy.stats.theilslopes(y, x)'s
//     slope and intercept), for the plot and the message;
//   - drift = the key has a direction (ResultSpecs::better, or a tolerances entry's `better:`) and
//     the trend goes its bad way (tau < 0 for higher-is-better, > 0 for lower-is-better), p <
//     alpha, and the change from the window's first value to the current one is worse than the
//     key's tolerance (Tolerances::resolve(name, element).tol.at(first); with zero tolerance any
//     worsening counts).
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tally/evaluator.hpp"
#include "tally/reports/compare.hpp"

namespace tally {

/// One earlier run of a history folder.
struct HistoryRun {
  std::string name;  ///< the file stem ("run-12" for run-12.json)
  std::filesystem::path path;
  /// metrics, and intervals when the run had them: their numbers and maps only (arrays, curves
  /// and strings are dropped when read: trends use the scalar keys alone).
  Results results;
};

struct History {
  std::filesystem::path dir;
  std::vector<HistoryRun> runs;  ///< the newest ones read, oldest first (natural order)
  std::size_t files = 0;         ///< the results files the folder holds (runs: the newest of them)
};

/// At most this many results files in a history folder (InputError above it), and at most
/// kMaxHistoryEntries entries of any kind looked at.
inline constexpr std::size_t kMaxHistoryRuns = 10000;
inline constexpr std::size_t kMaxHistoryEntries = 100000;

/// True when `a` comes before `b` in natural order: runs of ASCII digits compare by their numeric
/// value (any length; leading zeros ignored), other bytes compare as unsigned bytes; names equal
/// that way (`run-01` and `run-1`) are ordered by plain byte comparison.
bool natural_less(std::string_view a, std::string_view b);

/// The newest `runs` of the `*.json` results files directly in `dir` (what a drift window of
/// `runs` needs), oldest first (natural order of the file names); the older files are listed,
/// never opened. Memory: one file parsed at a time, then only its numbers kept. InputError (exit
/// 2) when `dir` does not exist or is not a folder, holds more than kMaxHistoryRuns results files
/// or kMaxHistoryEntries entries, or naming the file that cannot be read or is not a tally
/// results file. An empty folder is an empty history.
History read_history(const std::filesystem::path& dir, std::size_t runs = 10);

/// Kendall's tau-b between x and y and its two-sided p-value, as scipy.stats.kendalltau(x, y)
/// (SciPy 1.16.3, method='auto', variant='b') computes them for x without ties (run positions).
/// NaN (both) when y is constant or there are fewer than 2 points.
struct MannKendall {
  double tau = 0;
  double p_value = 1;
  bool exact = false;  ///< the exact null distribution was used (else the normal approximation)
  std::size_t discordant = 0, y_ties = 0;
};
MannKendall mann_kendall(const std::vector<double>& x, const std::vector<double>& y);

/// The Theil-Sen line: the median of the slopes over pairs with x_j > x_i, and the intercept
/// median(y) - slope * median(x) (scipy.stats.theilslopes(y, x)'s slope and intercept, its default
/// method='separate'). NaN with fewer than 2 distinct x.
struct TheilSen {
  double slope = 0;
  double intercept = 0;
};
TheilSen theil_sen(const std::vector<double>& x, const std::vector<double>& y);

struct DriftOptions {
  std::size_t window = 10;  ///< history runs in the window (plus the current run); >= 3
  double alpha = 0.05;      ///< in (0, 1)
  std::string current_name = "current";  ///< the current run's name in the series
};

/// The trend of one scalar key.
struct KeyTrend {
  std::string label, key;  ///< key as flatten_scalars names it ("top1", "bbox.mAP")
  Better better = Better::Higher;
  /// One entry per run (Trends::runs: the history's, then the current run): the key's value, and
  /// its bootstrap interval where that run has one; nullopt is a gap.
  std::vector<std::optional<double>> values, lows, highs;
  /// The window: points [window_begin, values.size()); `points` of them have a value.
  std::size_t window_begin = 0, points = 0;
  /// Theil-Sen line over the window (x = position in the window, 0 at window_begin; per run).
  double slope = 0, intercept = 0;
  /// Mann-Kendall over the window (NaN when not computed: too few runs, constant).
  double p_value = 0, tau = 0;
  /// Window's first value, the current value, current - first, and the tolerance at first.
  std::optional<double> first, current;
  double change = 0, tolerance = 0;
  bool tested = false;  ///< the trend test ran (enough points, not constant, in the current run)
  bool drift = false;
  /// Why the key was not tested ("too few runs (3 with a value, 4 needed)", "constant", ...), or
  /// for a drifted key the sentence that says it.
  std::string note;

  std::string name() const;  ///< "<label>.<key>"
};

struct Trends {
  /// The history's run names (oldest first), then DriftOptions::current_name.
  std::vector<std::string> runs;
  std::vector<KeyTrend> keys;  ///< in the current run's order, then keys only earlier runs have
  std::size_t window = 10;
  double alpha = 0.05;
  std::filesystem::path dir;  ///< the history folder, for readers
  std::size_t history_runs() const { return runs.empty() ? 0 : runs.size() - 1; }
  std::size_t drifted() const;
};

/// The trends of every scalar key of the history's runs and the current one, and the drift flag of
/// each (see the top of this file). InputError when the options are out of range.
Trends trends(const History& history, const Results& current, const ResultSpecs& specs,
              const Tolerances& tolerances, const DriftOptions& options = {});

/// For the terminal: a one-line summary ("history: 12 runs, 1 key drifted: Accuracy.top1"), then
/// one line per drifted key; ANSI colors when `color`.
std::string format_trends(const Trends& trends, bool color);

}  // namespace tally
