// Bootstrap intervals over units from per-sample records (tally/records.hpp,
// docs/significance.md): the one place where the engine calls the statistics core (tally_stats,
// engine/stats), so that its interface is met here only.
#include <cmath>
#include <limits>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#include "tally/error.hpp"
#include "tally/records.hpp"
#include "tally/stats/bootstrap.hpp"

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
    MetricPool pool(factory(m.label));
    const UnitReplay replay(m);
    std::vector<std::string> keys;
    try {
      const auto lease = pool.take();
      for (auto& [k, v] : flatten_scalars(replay.compute(*lease))) keys.push_back(k);
    } catch (const std::exception& e) {
      throw RuntimeError(
          fmt::format("{}: cannot be recomputed from its per-sample records: {}", owner, e.what()));
    }
    if (keys.empty()) {
      out.set(m.label, std::move(per_key));
      continue;
    }
    // A resample on which the metric throws (a class absent from it, say) counts as non-finite:
    // the stats core leaves it out and counts it (Summary::dropped).
    const auto guarded = [&](auto&& fn) {
      try {
        return fn();
      } catch (const std::exception&) {
        return std::vector<double>(keys.size(), kNaN);
      }
    };
    stats::BootstrapResult res;
    try {
      if (!m.gathers) {
        // The fast path: the stats core sums the units' sparse counts per resample.
        const std::vector<double> values(m.count.begin(), m.count.end());
        stats::UnitSums sums;
        sums.dimension = m.summed_size;
        sums.offsets = m.offsets;
        sums.indices = m.index;
        sums.values = values;
        const stats::Finalize finalize = [&](std::span<const double> s) {
          return guarded([&] {
            std::vector<std::int64_t> counts(s.size());
            for (std::size_t i = 0; i < s.size(); ++i) {
              // Weighted sums of int64 counts: integers, exact below 2^53.
              if (!(s[i] >= 0 && s[i] < 9007199254740992.0))
                throw std::range_error("a weighted count is out of range");
              counts[i] = static_cast<std::int64_t>(s[i]);
            }
            const auto lease = pool.take();
            return values_of((*lease).compute_synced({}, counts), keys);
          });
        };
        res = stats::bootstrap_sums(sums, settings.resamples, settings.seed, finalize, opt);
      } else {
        const stats::Statistic statistic = [&](std::span<const std::uint32_t> w) {
          return guarded([&] {
            const auto lease = pool.take();
            return values_of(replay.compute(*lease, w), keys);
          });
        };
        res = stats::bootstrap(m.units(), settings.resamples, settings.seed, statistic, opt);
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

}  // namespace tally
