// Comparing results with a baseline (tally compare, and tally run with a `regression:` section).
//
// Keys are named `<label>.<key>`; the elements of arrays `<label>.<key>[i]` (matrices
// `<label>.<key>[i][j]`), of nested maps `<label>.<key>.<sub>`. Per key (and per element):
//   delta = value - baseline;  tolerance = atol + rtol * |baseline|   (numpy.isclose's rule)
//   |delta| <= tolerance                  -> ok
//   otherwise, by the key's direction      -> improved / regressed (Better::Higher, Better::Lower)
//                                             changed (Better::Neither: counts, matrices)
//   only in the baseline / only in results -> missing / new
// A key holding an array is compared element by element; its verdict is the worst of its
// elements' (regressed > changed > improved > ok) and it names the element that decided it. An
// array whose shape changed is a regression (changed for Better::Neither): it cannot be compared.
// Directions come from the metrics' ResultSpecs (found through the "types" the results JSON
// records); keys no spec covers are higher-is-better. A tolerances entry may override it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tally/evaluator.hpp"
#include "tally/records.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/value.hpp"
#include "tally/settings.hpp"

namespace tally {

class Registry;

/// WithinNoise: the key moved beyond its tolerance, but the paired test over both runs'
/// per-sample records (apply_paired_tests) does not find the change significant.
enum class Verdict { Ok, Improved, Regressed, Changed, Missing, New, WithinNoise };
const char* verdict_name(Verdict v);
const char* better_name(Better b);

/// `*` matches any run of characters (dots and brackets included), `?` any one character;
/// everything else is literal (so `[` in `prf.precision_classwise[3]` is a bracket).
bool glob_match(std::string_view pattern, std::string_view text);

struct Tolerance {
  double rtol = 0;
  double atol = 0;
  /// atol + rtol * |baseline|
  double at(double baseline) const;
};

/// Per-key tolerances: `--rtol/--atol` (or regression.rtol/atol) as defaults, then entries
/// `PATTERN: {rtol: X, atol: Y, better: higher|lower|neither}` (any subset). For an element
/// `L.k[i]` the entry that applies is, in order: one written exactly `L.k[i]`; one written
/// exactly `L.k`; else the glob matching `L.k[i]` or `L.k` with the most literal characters (the
/// first written on a tie). Fields an entry leaves out come from the defaults.
struct Tolerances {
  using Rule = ToleranceRule;
  Tolerance defaults;
  std::vector<Rule> rules;

  struct Resolved {
    Tolerance tol;
    std::optional<Better> better;
    const Rule* rule = nullptr;
  };
  Resolved resolve(std::string_view key, std::string_view element) const;

  /// ConfigError unless every tolerance (the defaults and each entry's) is a finite number >= 0,
  /// whatever its source (a NaN tolerance would pass every key: |delta| > NaN is false).
  void check() const;

  /// Entries already read (regression.tolerances written inline: RegressionSettings).
  void add_rules(const std::vector<ToleranceRule>& more);
  /// Entries from a YAML file (read_tolerance_rules).
  void add_file(const std::filesystem::path& file);
  /// The defaults and rules of a config's `regression:` section (its tolerances file read now).
  static Tolerances of(const RegressionSettings& regression);
};

/// Tolerances::resolve for many keys: the rules indexed once, exact patterns by name and globs by
/// their literal prefix (before the first wildcard) and suffix (after the last), so that resolving
/// n elements costs about n * (an element name's length) lookups, not n * (rules) glob matches.
/// The same answers as Tolerances::resolve. Holds a reference to `tolerances`.
class ToleranceIndex {
 public:
  explicit ToleranceIndex(const Tolerances& tolerances);
  ToleranceIndex(const ToleranceIndex&) = delete;
  ToleranceIndex& operator=(const ToleranceIndex&) = delete;
  ~ToleranceIndex();

  /// What applies to the elements of one key: what depends on the key alone is found once.
  class Key {
   public:
    Tolerances::Resolved resolve(std::string_view element) const;

   private:
    friend class ToleranceIndex;
    const ToleranceIndex* index_ = nullptr;
    std::string key_;
    std::size_t exact_ = 0, glob_ = 0;  // rule numbers, npos for none
  };
  Key key(std::string_view key) const;
  Tolerances::Resolved resolve(std::string_view key, std::string_view element) const {
    return this->key(key).resolve(element);
  }

 private:
  struct Impl;
  std::size_t best_glob(std::string_view text, std::size_t best) const;
  Tolerances::Resolved make(std::size_t rule) const;
  const Tolerances& tolerances_;
  std::unique_ptr<Impl> impl_;
};

/// What each metric label declares about its keys (ResultSpec lists), looked up by label.
class ResultSpecs {
 public:
  void set(const std::string& label, std::vector<ResultSpec> specs, std::string type = {});
  /// The first spec of `label` whose key glob matches `key`, or nullptr.
  const ResultSpec* find(std::string_view label, std::string_view key) const;
  Better better(std::string_view label, std::string_view key) const;
  Plot plot(std::string_view label, std::string_view key) const;
  /// The metric type recorded for `label` ("" when unknown).
  std::string type(std::string_view label) const;

  /// The specs the metrics of a run declared (Results::specs, filled by Evaluator::compute()),
  /// with their types (run.types).
  static ResultSpecs from_results(const Results& results);
  /// The specs of each label's metric type (label -> type from a results file's run.types),
  /// read from the registry. Returns the types the registry does not know in `unknown`.
  static ResultSpecs from_registry(const Registry& registry,
                                   const std::vector<std::pair<std::string, std::string>>& types,
                                   std::vector<std::string>* unknown = nullptr);

 private:
  struct Entry {
    std::string label, type;
    std::vector<ResultSpec> specs;
  };
  const Entry* entry(std::string_view label) const;
  std::vector<Entry> entries_;
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::unordered_map<std::string, std::size_t, Hash, std::equal_to<>> by_label_;  // -> entries_
};

/// One element of an array (or nested map) key that did not compare ok.
struct ElementDiff {
  std::string index;  // "[3]", "[1][2]", ".x"
  Value baseline, value;
  std::optional<double> delta;
  double tolerance = 0;
  Verdict verdict = Verdict::Ok;
};

struct KeyDiff {
  std::string label, key;
  Verdict verdict = Verdict::Ok;
  Better better = Better::Higher;
  Tolerance tol;
  /// The numbers shown for the key: the key's own for a scalar; for an array, those of the
  /// element that decided the verdict (`element` names it), or of the largest |delta|.
  Value baseline, value;
  std::optional<double> delta;
  double tolerance = 0;  // tol.at(baseline) for the element shown
  std::string element;
  bool is_array = false;
  std::size_t element_count = 0;  // elements compared (arrays)
  std::size_t regressed_count = 0, improved_count = 0, changed_count = 0;
  /// Elements that did not compare ok, in order (at most kMaxElementDiffs kept).
  std::vector<ElementDiff> elements;
  /// A sentence for readers when the numbers alone do not say it ("shape [5] -> [6]", ...).
  std::string note;
  /// The paired test, for a scalar key both runs' records cover (apply_paired_tests).
  std::optional<PairedTest> test;

  std::string name() const;  // "<label>.<key>"
};

inline constexpr std::size_t kMaxElementDiffs = 50;

struct Comparison {
  std::string baseline_source;  // the baseline's path, for readers
  std::vector<KeyDiff> keys;
  std::size_t count(Verdict v) const;
  bool regressed() const { return count(Verdict::Regressed) > 0; }
  /// "1 regressed, 2 improved, 10 ok, 1 missing" (zero counts left out).
  std::string summary() const;
  const KeyDiff* find(std::string_view label, std::string_view key) const;
};

/// Compares the `results` maps (label -> key -> value) of two runs.
Comparison compare(const Value& results, const Value& baseline, const ResultSpecs& specs,
                   const Tolerances& tolerances);

/// Puts the paired tests (tally::paired_tests over both runs' per-sample records,
/// docs/significance.md) beside the keys they test and combines each with the tolerance verdict
/// already in `comparison`: a key beyond its tolerance is Regressed or Improved only when the test
/// finds the change significant at its alpha, WithinNoise otherwise (Undetermined tests leave the
/// tolerance's verdict, with a note); a significant change within the tolerance stays Ok (the
/// tolerance is the smallest effect that counts). Keys without a direction keep their verdict.
/// InputError when the records do not reproduce the values compared (naming `results_source` or
/// `baseline_source`): records of another run.
void apply_paired_tests(Comparison& comparison, std::vector<MetricPairedTests> tests,
                        const std::string& results_source, const std::string& baseline_source);

/// `tally run`'s gate (the command and the Python package): with regression.baseline_records,
/// this run's paired tests against the baseline's records (Evaluator::paired_tests: collective,
/// every rank gets them) applied to `comparison`; nothing without it. `shown` names the records
/// file in messages (default: its path).
void apply_paired_gate(Comparison& comparison, Evaluator& evaluator, const Results& results,
                       const RegressionSettings& regression, const std::string& shown = {});

/// Exit code of a comparison: 3 on a regression, else 0.
inline constexpr int kExitRegression = 3;

/// Number formatting shared by the comparison table and the reports: integers as they are,
/// floats with 6 significant digits, null as "null (NaN)".
std::string format_number(const Value& v);
std::string format_delta(std::optional<double> delta, bool integral);

/// A paired test's p-value for readers: "p = 0.0034"; "p < 0.001" for a bootstrap p-value of 0
/// (its resolution is 1 / the resamples used); "p n/a" for NaN.
std::string format_p_value(const PairedTest& t);

/// The comparison as JSON (tally compare --json), for CI scripts: {"baseline": source,
/// "summary": "...", "counts": {verdict: n}, "regressed": bool, "keys": [{"label", "key",
/// "element", "verdict", "better", "baseline", "value", "delta", "tolerance", "note", "test":
/// {PairedTest's fields, "gate"} | null}]}; NaN as null.
std::string comparison_json(const Comparison& c);

/// The comparison as an aligned table; ANSI colors when `color`.
std::string format_comparison(const Comparison& c, bool color);

}  // namespace tally
