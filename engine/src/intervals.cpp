// Bootstrap intervals and paired tests over units from per-sample records (tally/records.hpp,
// docs/significance.md): the one place where the engine calls the statistics core (tally_stats,
// engine/stats), so that its interface is met here only.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#include "tally/records.hpp"
#include "tally/registry.hpp"
#include "tally/sdk/error.hpp"
#include "tally/stats/bootstrap.hpp"
#include "tally/stats/gate.hpp"
#include "tally/stats/mcnemar.hpp"

namespace tally {

namespace {

/// Metrics of one label, one per concurrent caller: compute_synced() is const, but a metric may
/// keep caches, so no metric is used by two threads at once.
class MetricPool {
 public:
  explicit MetricPool(MetricMaker make) : make_(std::move(make)) {}

  class Lease {
   public:
    Lease(MetricPool& pool, std::shared_ptr<Metric> m) : pool_(pool), metric_(std::move(m)) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { pool_.put(std::move(metric_)); }
    const Metric& operator*() const { return *metric_; }

   private:
    MetricPool& pool_;
    std::shared_ptr<Metric> metric_;
  };

  Lease take() {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) return Lease(*this, make_());
    auto m = std::move(free_.back());
    free_.pop_back();
    return Lease(*this, std::move(m));
  }

 private:
  void put(std::shared_ptr<Metric> m) {
    const std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(m));
  }
  MetricMaker make_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<Metric>> free_;
};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The values of `keys` in `results` (NaN for a key the results lack).
std::vector<double> values_of(const Value& results, const std::vector<std::string>& keys) {
  const auto flat = flatten_scalars(results);
  std::vector<double> out(keys.size(), kNaN);
  // Usually the same keys in the same order: match by position first.
  for (std::size_t k = 0; k < keys.size(); ++k) {
    if (k < flat.size() && flat[k].first == keys[k]) {
      out[k] = flat[k].second;
      continue;
    }
    for (const auto& [name, v] : flat)
      if (name == keys[k]) out[k] = v;
  }
  return out;
}

/// One metric's records as the statistics core sees them: the scalar keys of the metric
/// recomputed on weighted units, by the fast path (summed counts) when the metric gathers nothing.
/// A resample on which the metric throws (a class absent from it, say) gives NaN for every key:
/// the stats core leaves it out and counts it (Summary::dropped).
class RecordsStatistic {
 public:
  RecordsStatistic(const MetricRecords& m, MetricMaker make, const std::string& owner)
      : m_(m), pool_(std::move(make)), replay_(m) {
    try {
      const auto lease = pool_.take();
      for (auto& [k, v] : flatten_scalars(replay_.compute(*lease))) {
        keys_.push_back(k);
        point_.push_back(v);
      }
    } catch (const std::exception& e) {
      throw RuntimeError(
          fmt::format("{}: cannot be recomputed from its per-sample records: {}", owner, e.what()));
    }
    if (!m.gathers) values_.assign(m.count.begin(), m.count.end());
  }

  const std::vector<std::string>& keys() const { return keys_; }
  /// The keys' values with every unit once.
  const std::vector<double>& point() const { return point_; }
  std::size_t units() const { return m_.units(); }
  const MetricRecords& records() const { return m_; }
  bool sums_only() const { return !m_.gathers; }

  /// The CSR counts of the fast path (sums_only()).
  stats::UnitSums sums() const {
    stats::UnitSums u;
    u.dimension = m_.summed_size;
    u.offsets = m_.offsets;
    u.indices = m_.index;
    u.values = values_;
    return u;
  }
  /// The keys from summed counts (sums_only()); the values are restricted to `keys`.
  std::vector<double> finalize(std::span<const double> s, const std::vector<std::string>& keys) {
    return guarded(keys, [&] {
      std::vector<std::int64_t> counts(s.size());
      for (std::size_t i = 0; i < s.size(); ++i) {
        // Weighted sums of int64 counts: integers, exact below 2^53.
        if (!(s[i] >= 0 && s[i] < 9007199254740992.0))
          throw std::range_error("a weighted count is out of range");
        counts[i] = static_cast<std::int64_t>(s[i]);
      }
      const auto lease = pool_.take();
      return values_of((*lease).compute_synced({}, counts), keys);
    });
  }
  /// The keys on units weighted by `w` (any metric).
  std::vector<double> weighted(std::span<const std::uint32_t> w,
                               const std::vector<std::string>& keys) {
    return guarded(keys, [&] {
      const auto lease = pool_.take();
      return values_of(replay_.compute(*lease, w), keys);
    });
  }
  /// The keys on unit u alone (sums_only()): the metric on that unit's counts.
  std::vector<double> unit(std::size_t u, const std::vector<std::string>& keys) {
    std::vector<double> s(m_.summed_size, 0.0);
    for (std::uint64_t j = m_.offsets[u]; j < m_.offsets[u + 1]; ++j)
      s[m_.index[j]] = static_cast<double>(m_.count[j]);
    return finalize(s, keys);
  }

 private:
  template <typename Fn>
  static std::vector<double> guarded(const std::vector<std::string>& keys, Fn&& fn) {
    try {
      return fn();
    } catch (const std::exception&) {
      return std::vector<double>(keys.size(), kNaN);
    }
  }

  const MetricRecords& m_;
  MetricPool pool_;
  UnitReplay replay_;
  std::vector<std::string> keys_;
  std::vector<double> point_;
  std::vector<double> values_;  // the counts as doubles (fast path)
};

}  // namespace

Value bootstrap_intervals(const Records& records,
                          const std::function<MetricMaker(const std::string&)>& factory,
                          const IntervalSettings& settings) {
  stats::BootstrapOptions opt;
  opt.alpha = 1.0 - settings.confidence;
  opt.threads = settings.threads;
  opt.bca = settings.method == "bca";
  Value out = Value::map();
  for (const auto& m : records.metrics) {
    const std::string owner = fmt::format("intervals: metric '{}'", m.label);
    Value per_key = Value::map();
    if (m.units() == 0) {
      out.set(m.label, std::move(per_key));
      continue;
    }
    RecordsStatistic st(m, factory(m.label), owner);
    const auto& keys = st.keys();
    if (keys.empty()) {
      out.set(m.label, std::move(per_key));
      continue;
    }
    stats::BootstrapResult res;
    try {
      if (st.sums_only()) {
        // The fast path: the stats core sums the units' sparse counts per resample.
        res = stats::bootstrap_sums(
            st.sums(), settings.resamples, settings.seed,
            [&](std::span<const double> s) { return st.finalize(s, keys); }, opt);
      } else {
        res = stats::bootstrap(
            m.units(), settings.resamples, settings.seed,
            [&](std::span<const std::uint32_t> w) { return st.weighted(w, keys); }, opt);
      }
    } catch (const std::invalid_argument& e) {
      throw RuntimeError(fmt::format("{}: the bootstrap failed: {}", owner, e.what()));
    }
    for (std::size_t k = 0; k < keys.size(); ++k) {
      const auto& s = res.statistics[k];
      const stats::Interval& iv = opt.bca ? s.bca : s.percentile;
      Value entry = Value::map();
      entry.set("low", iv.low);
      entry.set("high", iv.high);
      entry.set("standard_error", s.standard_error);
      per_key.set(keys[k], std::move(entry));
    }
    out.set(m.label, std::move(per_key));
  }
  return out;
}

namespace {

/// Whether each key of `keys` is accuracy-like in both runs: every unit alone scores 0 or the same
/// s > 0 (per key, in both runs), and the key is the mean of the units' scores. Units with the same
/// counts score the same, so the metric runs once per distinct row of counts (a handful for
/// accuracy; more than kMaxKinds kinds of unit and the metric is not taken for accuracy). Returns
/// per key the scale s, or NaN when the key is not accuracy-like; for those that are, `worse[k]`
/// and `better[k]` count the units the baseline scored s and the results 0, and the reverse.
constexpr std::size_t kMaxKinds = 256;

std::vector<double> accuracy_like(RecordsStatistic& a, RecordsStatistic& b,
                                  const std::vector<std::string>& keys,
                                  const std::vector<double>& point_a,
                                  const std::vector<double>& point_b,
                                  std::vector<std::uint64_t>& worse,
                                  std::vector<std::uint64_t>& better) {
  const std::size_t n = a.units(), K = keys.size();
  std::vector<double> scale(K, kNaN);
  worse.assign(K, 0);
  better.assign(K, 0);
  if (!a.sums_only() || !b.sums_only() || n == 0) return scale;
  // kind[u]: the index of unit u's row of counts among the distinct rows; values[kind]: its keys.
  struct Kinds {
    std::vector<std::uint32_t> kind;
    std::vector<std::vector<double>> values;
  };
  const auto kinds_of = [&](RecordsStatistic& st, Kinds& out) {
    const MetricRecords& m = st.records();
    using Row = std::pair<std::vector<std::uint32_t>, std::vector<std::int64_t>>;
    std::map<Row, std::uint32_t> seen;
    out.kind.resize(n);
    Row row;
    for (std::size_t u = 0; u < n; ++u) {
      const auto lo = static_cast<std::ptrdiff_t>(m.offsets[u]);
      const auto hi = static_cast<std::ptrdiff_t>(m.offsets[u + 1]);
      row.first.assign(m.index.begin() + lo, m.index.begin() + hi);
      row.second.assign(m.count.begin() + lo, m.count.begin() + hi);
      const auto it = seen.find(row);
      if (it != seen.end()) {
        out.kind[u] = it->second;
        continue;
      }
      if (seen.size() >= kMaxKinds) return false;
      const auto id = static_cast<std::uint32_t>(out.values.size());
      seen.emplace(row, id);
      out.values.push_back(st.unit(u, keys));
      out.kind[u] = id;
    }
    return true;
  };
  Kinds ka, kb;
  if (!kinds_of(a, ka) || !kinds_of(b, kb)) return scale;
  const auto close = [](double x, double y) {
    return std::abs(x - y) <= 1e-12 * std::max(1.0, std::abs(y));
  };
  for (std::size_t k = 0; k < K; ++k) {
    // The scale: the one nonzero score any kind of unit has, in either run.
    double s = 0;
    bool ok = true;
    for (const Kinds* kinds : {&ka, &kb})
      for (const auto& v : kinds->values) {
        const double x = v[k];
        if (x == 0) continue;
        if (!(x > 0) || !std::isfinite(x) || (s != 0 && x != s)) ok = false;
        s = x;
      }
    if (!ok) continue;
    if (s == 0) s = 1;  // every unit scores 0 in both runs
    std::uint64_t ones_a = 0, ones_b = 0, w = 0, c = 0;
    for (std::size_t u = 0; u < n; ++u) {
      const bool ua = ka.values[ka.kind[u]][k] != 0, ub = kb.values[kb.kind[u]][k] != 0;
      ones_a += ua;
      ones_b += ub;
      w += ua && !ub;
      c += !ua && ub;
    }
    const auto mean_of = [&](std::uint64_t ones) {
      return s * static_cast<double>(ones) / static_cast<double>(n);
    };
    if (!close(point_a[k], mean_of(ones_a)) || !close(point_b[k], mean_of(ones_b))) continue;
    scale[k] = s;
    worse[k] = w;
    better[k] = c;
  }
  return scale;
}

}  // namespace

std::vector<PairedTest> paired_tests(const MetricRecords& baseline,
                                     const MetricMaker& make_baseline, const MetricRecords& results,
                                     const MetricMaker& make_results,
                                     const PairedTestSettings& settings) {
  if (baseline.units() != results.units())
    throw InputError(
        fmt::format("metric '{}': the baseline's records hold {} units, the results' {}",
                    results.label, baseline.units(), results.units()));
  std::vector<PairedTest> out;
  const std::size_t n = results.units();
  if (n == 0) return out;
  const std::string owner = fmt::format("metric '{}'", results.label);
  RecordsStatistic a(baseline, make_baseline, owner + " (baseline)");
  RecordsStatistic b(results, make_results, owner);
  // The keys both runs have, in the results' order.
  std::vector<std::string> keys;
  std::vector<double> point_a, point_b;
  for (std::size_t k = 0; k < b.keys().size(); ++k)
    for (std::size_t j = 0; j < a.keys().size(); ++j)
      if (a.keys()[j] == b.keys()[k]) {
        keys.push_back(b.keys()[k]);
        point_b.push_back(b.point()[k]);
        point_a.push_back(a.point()[j]);
      }
  if (keys.empty()) return out;

  stats::BootstrapOptions opt;
  opt.alpha = settings.alpha;
  opt.threads = settings.threads;
  opt.bca = false;
  stats::PairedResult res;
  try {
    if (a.sums_only() && b.sums_only()) {
      res = stats::paired_bootstrap_sums(
          a.sums(), b.sums(), settings.resamples, settings.seed,
          [&](std::span<const double> s) { return a.finalize(s, keys); },
          [&](std::span<const double> s) { return b.finalize(s, keys); }, opt);
    } else {
      res = stats::paired_bootstrap(
          n, settings.resamples, settings.seed,
          [&](std::span<const std::uint32_t> w) { return a.weighted(w, keys); },
          [&](std::span<const std::uint32_t> w) { return b.weighted(w, keys); }, opt);
    }
  } catch (const std::invalid_argument& e) {
    throw RuntimeError(fmt::format("{}: the paired bootstrap failed: {}", owner, e.what()));
  }

  std::vector<std::uint64_t> worse, better;
  const std::vector<double> scale = settings.mcnemar
                                        ? accuracy_like(a, b, keys, point_a, point_b, worse, better)
                                        : std::vector<double>(keys.size(), kNaN);
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const auto& s = res.statistics[k];
    PairedTest t;
    t.key = keys[k];
    t.units = n;
    t.resamples = res.resamples;
    t.alpha = settings.alpha;
    t.baseline = point_a[k];
    t.value = point_b[k];
    t.difference = s.difference.estimate;
    t.low = s.difference.percentile.low;
    t.high = s.difference.percentile.high;
    t.standard_error = s.difference.standard_error;
    t.dropped = s.difference.dropped;
    if (!std::isnan(scale[k])) {
      t.worse = worse[k];
      t.better = better[k];
      t.method = "McNemar exact";
      t.p_value = stats::mcnemar_exact(t.worse, t.better).pvalue;
    } else {
      t.method = "paired bootstrap";
      t.p_value = s.p_two_sided;
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<MetricPairedTests> paired_tests(
    const Records& baseline, const Records& results,
    const std::function<MetricMaker(const MetricRecords&)>& factory,
    const PairedTestSettings& settings, const std::string& baseline_source,
    const std::string& results_source) {
  if (results.units != baseline.units || results.sample_hash != baseline.sample_hash ||
      results.sample_hash_of != baseline.sample_hash_of)
    throw InputError(fmt::format(
        "{} and {} cover different samples ({} units, sample hash {:016x} of the {}; against {} "
        "units, sample hash {:016x} of the {}): a paired test needs both runs over the same "
        "samples in the same order (the same data, reader and shuffling)",
        results_source, baseline_source, results.units, results.sample_hash, results.sample_hash_of,
        baseline.units, baseline.sample_hash, baseline.sample_hash_of));
  std::vector<MetricPairedTests> out;
  for (const MetricRecords& mr : results.metrics) {
    MetricPairedTests mt;
    mt.label = mr.label;
    const MetricRecords* mb = baseline.find(mr.label);
    if (mb == nullptr)
      mt.skipped =
          fmt::format("no paired test: {} holds no records of '{}'", baseline_source, mr.label);
    else if (mb->type != mr.type)
      mt.skipped =
          fmt::format("no paired test: the metric type changed ({} -> {})", mb->type, mr.type);
    else {
      const MetricMaker make_baseline = factory(*mb), make_results = factory(mr);
      check_replayable(*mb, *make_baseline(), baseline_source);
      check_replayable(mr, *make_results(), results_source);
      mt.tests = paired_tests(*mb, make_baseline, mr, make_results, settings);
    }
    out.push_back(std::move(mt));
  }
  return out;
}

std::function<MetricMaker(const MetricRecords&)> records_factory(const Registry& registry) {
  return [&registry](const MetricRecords& m) -> MetricMaker {
    const Component& comp = registry.get(ComponentKind::Metric, m.type);
    Params params(fmt::format("metric '{}' ({})", m.label, m.type),
                  m.parameters.is_map() ? m.parameters.as_map() : Value::Map{});
    return [&comp, params] { return Registry::make_metric(comp, params); };
  };
}

Value paired_tests_to_value(const std::vector<MetricPairedTests>& tests) {
  Value out = Value::array();
  for (const auto& mt : tests) {
    Value m = Value::map();
    m.set("label", mt.label);
    m.set("skipped", mt.skipped);
    Value ts = Value::array();
    for (const auto& t : mt.tests) {
      Value v = Value::map();
      v.set("key", t.key);
      v.set("method", t.method);
      v.set("units", static_cast<std::int64_t>(t.units));
      v.set("resamples", static_cast<std::int64_t>(t.resamples));
      v.set("alpha", t.alpha);
      v.set("baseline", t.baseline);
      v.set("value", t.value);
      v.set("difference", t.difference);
      v.set("low", t.low);
      v.set("high", t.high);
      v.set("standard_error", t.standard_error);
      v.set("p_value", t.p_value);
      v.set("worse", static_cast<std::int64_t>(t.worse));
      v.set("better", static_cast<std::int64_t>(t.better));
      v.set("dropped", static_cast<std::int64_t>(t.dropped));
      ts.push_back(std::move(v));
    }
    m.set("tests", std::move(ts));
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<MetricPairedTests> paired_tests_from_value(const Value& v) {
  // NaN travels as null in a Value.
  const auto num = [](const Value& x) { return x.is_number() ? x.as_double() : kNaN; };
  std::vector<MetricPairedTests> out;
  for (const Value& m : v.as_array()) {
    MetricPairedTests mt;
    mt.label = m.at("label").as_string();
    mt.skipped = m.at("skipped").as_string();
    for (const Value& x : m.at("tests").as_array()) {
      PairedTest t;
      t.key = x.at("key").as_string();
      t.method = x.at("method").as_string();
      t.units = static_cast<std::size_t>(x.at("units").as_int());
      t.resamples = static_cast<std::size_t>(x.at("resamples").as_int());
      t.alpha = num(x.at("alpha"));
      t.baseline = num(x.at("baseline"));
      t.value = num(x.at("value"));
      t.difference = num(x.at("difference"));
      t.low = num(x.at("low"));
      t.high = num(x.at("high"));
      t.standard_error = num(x.at("standard_error"));
      t.p_value = num(x.at("p_value"));
      t.worse = static_cast<std::uint64_t>(x.at("worse").as_int());
      t.better = static_cast<std::uint64_t>(x.at("better").as_int());
      t.dropped = static_cast<std::size_t>(x.at("dropped").as_int());
      mt.tests.push_back(std::move(t));
    }
    out.push_back(std::move(mt));
  }
  return out;
}

void decide_gate(PairedTest& test, bool higher_is_better) {
  stats::GateOptions opt;
  opt.alpha = test.alpha;
  opt.direction =
      higher_is_better ? stats::Direction::higher_is_better : stats::Direction::lower_is_better;
  test.gate = std::string(to_string(stats::decide(test.difference, test.p_value, opt).verdict));
}

}  // namespace tally
