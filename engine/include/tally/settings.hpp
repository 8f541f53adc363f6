// What a config says about a run's outputs and about its check against a baseline: the parts of
// the config that the program running the evaluation acts on (tally run). They are read with the
// rest of the config by Evaluator::from_file / from_yaml, once, and given by
// Evaluator::outputs(), Evaluator::regression() and Evaluator::has_checkpoint().
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tally/sdk/export.hpp"
#include "tally/sdk/plugin.hpp"  // Better

namespace tally {

/// The `output:` section: json, junit, markdown, html, records (relative to the working
/// directory).
struct OutputPaths {
  std::optional<std::filesystem::path> json, junit, markdown, html;
  /// The per-sample records file (tally/records.hpp), written by rank 0 with the others.
  std::optional<std::filesystem::path> records;
};

/// One entry of a tolerances map, `PATTERN: {rtol: X, atol: Y, better: higher|lower|neither}`
/// (any subset); the fields it leaves out come from the defaults (tally/reports/compare.hpp,
/// Tolerances).
struct ToleranceRule {
  std::string pattern;
  std::optional<double> rtol, atol;
  std::optional<Better> better;
  std::string where;  // file:line:column, for messages
};

/// The `regression:` section: compare the results with a baseline after the run.
///   regression:
///     baseline: baseline.json     # relative to the config file
///     rtol: 0.0                   # defaults for every key
///     atol: 0.0
///     tolerances: tolerances.yaml # relative to the config file, or an inline map
///     baseline_records: base.rec  # the baseline's per-sample records: paired tests
///     alpha: 0.05                 # their significance level
///     resamples: 1000             # paired bootstrap resamples
///     seed: 0
///     test: auto                  # auto (McNemar for accuracy-like keys) | bootstrap
///     history: runs/              # earlier results files: trends and slow drift
///     fail_on_drift: false        # exit 3 on a drift too
/// The paired tests over two runs' per-sample records (tally::paired_tests, records.hpp):
/// regression.alpha/resamples/seed/test, or tally compare's options of the same names.
struct PairedTestSettings {
  double alpha = 0.05;             ///< significance level and interval level 1 - alpha, in (0, 1)
  std::uint64_t resamples = 1000;  ///< paired bootstrap resamples, >= 2
  std::uint64_t seed = 0;
  bool mcnemar = true;   ///< test: auto (McNemar's exact test for accuracy-like keys) | bootstrap
  unsigned threads = 0;  ///< 0: every hardware thread
};

struct RegressionSettings {
  std::filesystem::path baseline;
  std::optional<double> rtol, atol;
  /// `tolerances: FILE`: read when the comparison is set up (read_tolerance_rules).
  std::optional<std::filesystem::path> tolerances_file;
  /// `tolerances:` written inline, checked with the rest of the config.
  std::vector<ToleranceRule> tolerances;
  /// `baseline_records: FILE`: with it the run keeps its own per-sample records and the
  /// comparison runs the paired tests (docs/significance.md); --update-baseline writes it.
  std::optional<std::filesystem::path> baseline_records;
  /// alpha (also the drift test's level), resamples, seed, test.
  PairedTestSettings paired;
  /// `history: DIR`: earlier results files, for the trends and the slow-drift flag.
  std::optional<std::filesystem::path> history;
  bool fail_on_drift = false;
  std::string where;  // where the section was written
};

/// The rules of a tolerances file (tally compare --tolerances, regression.tolerances: FILE): a
/// YAML map of KEY_PATTERN: {rtol, atol, better}; an empty file has none. InputError when the
/// file cannot be read, ConfigError naming file:line:column of a bad entry.
TALLY_API std::vector<ToleranceRule> read_tolerance_rules(const std::filesystem::path& file);

}  // namespace tally
