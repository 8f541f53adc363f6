// Per-sample records (docs/significance.md): what each unit (a sample: a batch row, an image for
// the detection readers) contributed to each metric, kept by the engine without any metric code,
// and the re-evaluation of a metric on a reweighted set of units (the bootstrap, paired tests).
//
// How a unit's contribution is taken: the evaluator keeps, per metric, a shadow instance made by
// the same factory with the same parameters; for each unit it calls shadow.add(batch.slice(i, i +
// 1)), keeps the nonzero entries of shadow.write_sums() (sparse index/count pairs) and, when
// shadow.gathers(), the unit's pack_gathered() bytes, then shadow.reset(). Because the engine's
// own sync merges ranks exactly this way (counts summed, gathered parts merged in rank order),
// Metric::compute_synced over the units' records reproduces the metric on any subset or
// reweighting of the units: a unit's gathered object repeated w times and its counts times w.
//
// The records file (output.records) is msgpack, written whole or not at all by rank 0:
//   {"format": "tally-records", "version": 1, "tally_version": "...", "units": N,
//    "sample_hash": uint64, "sample_hash_of": "dataset index" | "dataset index, FIELD",
//    "metrics": [{"label", "type", "parameters": {...}, "summed_size": S,
//                 "offsets": bin (uint64 LE x N+1), "index": bin (uint32 LE), "count": bin
//                 (int64 LE),   -- the nonzero counts of unit u at [offsets[u], offsets[u+1])
//                 "gathered_offsets": bin (uint64 LE x N+1) | nil,
//                 "gathered": bin (the units' msgpack objects, back to back) | nil}, ...]}
// It is the same, byte for byte, on any number of ranks and for any batch size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tally/value_msgpack.hpp"

#include "tally/sdk/export.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/value.hpp"
#include "tally/settings.hpp"

namespace tally {

inline constexpr std::string_view kRecordsFormat = "tally-records";
inline constexpr std::uint64_t kRecordsVersion = 2;
/// The most bytes of a records file, and of the records map inside it once inflated (the
/// reader's peak memory is about twice the inflated size; pack_records refuses more).
inline constexpr std::uint64_t kRecordsMaxBytes = std::uint64_t{2} << 30;

/// One metric's per-unit records.
struct MetricRecords {
  std::string label;
  std::string type;
  Value parameters = Value::map();  ///< the metric's checked parameters (defaults filled in)
  std::uint64_t summed_size = 0;    ///< Metric::summed_size()
  /// CSR: unit u's nonzero counts are index[j], count[j] for j in [offsets[u], offsets[u + 1]).
  std::vector<std::uint64_t> offsets{0};
  std::vector<std::uint32_t> index;
  std::vector<std::int64_t> count;
  /// Metric::gathers(): unit u's pack_gathered() bytes are gathered[gathered_offsets[u] ..
  /// gathered_offsets[u + 1]).
  bool gathers = false;
  std::vector<std::uint64_t> gathered_offsets{0};
  std::string gathered;

  std::size_t units() const noexcept { return offsets.empty() ? 0 : offsets.size() - 1; }
  std::string_view gathered_of(std::size_t u) const noexcept {
    return std::string_view(gathered).substr(gathered_offsets[u],
                                             gathered_offsets[u + 1] - gathered_offsets[u]);
  }
};

/// Every metric's records over the same units (dataset order).
struct Records {
  std::string tally_version;
  std::uint64_t units = 0;
  /// FNV-1a 64 over the units in order: for unit u the 8 little-endian bytes of u (its dataset
  /// index), then, when the reader has an id field (sample_hash_of names it), the 8 bytes of the
  /// unit's id as int64. Two runs with equal hashes cover the same samples in the same order.
  std::uint64_t sample_hash = 0;
  std::string sample_hash_of = "dataset index";
  std::vector<MetricRecords> metrics;

  const MetricRecords* find(std::string_view label) const;
};

/// The records file's bytes (see the top of this file).
TALLY_API std::string pack_records(const Records& records);
/// Records from the bytes of a records file; InputError naming `source` and what is wrong (not
/// msgpack, another format or version, a field missing or of another type, offsets that do not
/// fit the data) for anything but what pack_records() writes.
TALLY_API Records unpack_records(std::string_view bytes, const std::string& source);
/// A records file read back (bounded read; errors as unpack_records, exit 2).
TALLY_API Records read_records(const std::filesystem::path& path);

/// One metric's records ready to be re-evaluated with multiplicities per unit: the units'
/// gathered states are checked once, and decoded once (Metric::decode_gathered, by the first
/// metric compute() is given: every metric it is given has the records' type and parameters).
/// Holds a reference to `records`, which must outlive it. compute() is const and may be called
/// from several threads at once with distinct metrics.
class TALLY_API UnitReplay {
 public:
  explicit UnitReplay(const MetricRecords& records);
  UnitReplay(UnitReplay&&) noexcept;
  ~UnitReplay();

  std::size_t units() const noexcept { return records_->units(); }
  const MetricRecords& records() const noexcept { return *records_; }
  /// Unit u's gathered state, the bytes its metric packed (records().gathers only).
  Bytes gathered(std::size_t u) const { return units_[u]; }

  /// The metric (of the records' type and parameters) on the units weighted by `weights` (one
  /// per unit): sums = sum_u w_u * counts_u, gathered = each unit's object repeated w_u times in
  /// unit order; returns metric.compute_synced(gathered, sums). RuntimeError when a weighted sum
  /// overflows. Throws what the metric throws.
  Value compute(const Metric& metric, std::span<const std::uint32_t> weights) const;
  /// The same with every weight 1 (the point estimate).
  Value compute(const Metric& metric) const;

 private:
  const DecodedStates& decoded(const Metric& metric) const;

  const MetricRecords* records_;
  std::vector<Bytes> units_;  // every unit's gathered state, checked to be one msgpack value
  struct Decoded;             // units_ decoded, made by the first compute()
  std::unique_ptr<Decoded> decoded_;
};

/// InputError naming `source` when `records` cannot be replayed through `metric` (a metric of
/// their type and parameters): their summed_size or whether they gather differs from the
/// metric's. UnitReplay::compute checks it too (source "the records").
TALLY_API void check_replayable(const MetricRecords& records, const Metric& metric,
                                const std::string& source);

/// The scalar result keys of one metric's results: "key" for a number, "key.sub" for a number in
/// a map (any depth); arrays, strings, booleans and nulls are left out. In the metric's order.
TALLY_API std::vector<std::pair<std::string, double>> flatten_scalars(const Value& results);

/// The `intervals:` section: bootstrap confidence intervals over units for every scalar key.
struct IntervalSettings {
  double confidence = 0.95;  ///< in (0, 1)
  std::uint64_t resamples = 1000;
  std::uint64_t seed = 0;
  std::string method = "percentile";  ///< percentile | bca
  unsigned threads = 0;               ///< 0: every hardware thread
};

/// Makes a fresh metric of one label's type and parameters (the registry's factory).
using MetricMaker = std::function<std::shared_ptr<Metric>()>;

/// Bootstrap intervals of every scalar key of every metric in `records` (rank 0, after compute):
/// {label: {key: {"low", "high", "standard_error"}}, ...}. `factory(label)` makes a metric of
/// that label's type and parameters (one per thread: compute_synced is never called on one
/// metric from two threads). Sum-only metrics take the fast path (the stats core's CSR sums);
/// metrics with gathered state re-run compute_synced on each resample.
TALLY_API Value bootstrap_intervals(const Records& records,
                                    const std::function<MetricMaker(const std::string&)>& factory,
                                    const IntervalSettings& settings);

/// A paired test of one scalar key of one metric over two runs' records of the same units
/// (paired_tests; tally compare --records --baseline-records).
struct PairedTest {
  std::string key;  ///< as flatten_scalars names it
  /// "paired bootstrap", or "McNemar exact" for an accuracy-like key (every unit alone scores 0 or
  /// the same s > 0 in both runs, and the key is the units' mean): then p_value is McNemar's exact
  /// two-sided p-value; the interval is the paired bootstrap's in both cases.
  std::string method;
  std::size_t units = 0;
  std::size_t resamples = 0;
  double alpha = 0.05;
  double baseline = std::numeric_limits<double>::quiet_NaN();  ///< the key from the records
  double value = std::numeric_limits<double>::quiet_NaN();     ///< the same, the other run
  /// value - baseline, both recomputed from the records.
  double difference = std::numeric_limits<double>::quiet_NaN();
  /// The (1 - alpha) percentile interval of the difference (paired bootstrap) and its standard
  /// error.
  double low = std::numeric_limits<double>::quiet_NaN();
  double high = std::numeric_limits<double>::quiet_NaN();
  double standard_error = std::numeric_limits<double>::quiet_NaN();
  double p_value = std::numeric_limits<double>::quiet_NaN();  ///< two-sided
  /// McNemar only: units the baseline scored s and the other run 0 (worse), and the reverse.
  std::uint64_t worse = 0, better = 0;
  /// Resamples left out because the metric gave NaN or threw on them (either run).
  std::size_t dropped = 0;
  /// The gate's verdict once a direction is known: "regressed", "within noise", "improved" or
  /// "undetermined" (set by tally compare, empty here).
  std::string gate;
};

/// The paired tests of every scalar key the two runs' records of one metric share: the same
/// bootstrap resamples of the units for both runs (stats::paired_bootstrap), the difference
/// results - baseline with its interval and two-sided p-value, or McNemar's exact test where the
/// key is accuracy-like. The records must cover the same units (the caller checks the sample hash);
/// `make_baseline` / `make_results` make metrics of each run's type and parameters. RuntimeError
/// when a run's metric cannot be recomputed from its records.
TALLY_API std::vector<PairedTest> paired_tests(const MetricRecords& baseline,
                                               const MetricMaker& make_baseline,
                                               const MetricRecords& results,
                                               const MetricMaker& make_results,
                                               const PairedTestSettings& settings);

/// One metric's paired tests, or why it has none.
struct MetricPairedTests {
  std::string label;
  std::string skipped;  ///< non-empty: no test, and why ("no records of 'X' in base.rec")
  std::vector<PairedTest> tests;
};

/// The paired tests of every metric of `results` that `baseline` also recorded (by label, the
/// same type). `factory(m)` makes a metric of records entry m's type and parameters. InputError
/// (naming both sources) when the records cover other samples: units, sample_hash or
/// sample_hash_of differ.
TALLY_API std::vector<MetricPairedTests> paired_tests(
    const Records& baseline, const Records& results,
    const std::function<MetricMaker(const MetricRecords&)>& factory,
    const PairedTestSettings& settings, const std::string& baseline_source,
    const std::string& results_source);

class Registry;
/// The `factory` of paired_tests() from the plugins of `registry` (which must outlive it): a
/// metric of a records entry's type and recorded parameters. ConfigError for a type no plugin has.
TALLY_API std::function<MetricMaker(const MetricRecords&)> records_factory(
    const Registry& registry);

/// The tests as a Value (to broadcast them) and back.
TALLY_API Value paired_tests_to_value(const std::vector<MetricPairedTests>& tests);
TALLY_API std::vector<MetricPairedTests> paired_tests_from_value(const Value& v);

/// The gate's verdict on a paired test (tally::stats::decide at the test's alpha, no minimum
/// effect): sets test.gate to "regressed" / "improved" (p_value < alpha, by the sign of the
/// difference and the direction), "within noise", or "undetermined" (a NaN difference or
/// p-value).
TALLY_API void decide_gate(PairedTest& test, bool higher_is_better);

}  // namespace tally
