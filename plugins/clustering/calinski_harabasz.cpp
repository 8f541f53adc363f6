// CalinskiHarabaszScore: the variance ratio criterion, between-cluster dispersion over
// within-cluster dispersion scaled by their degrees of freedom (scikit-learn's
// calinski_harabasz_score).
//
// Formula. For N points in K clusters (labels ascending), mu the mean of all points, mu_k the
// mean of cluster k (n_k points):
//   B = sum_k n_k ||mu_k - mu||^2,   W = sum_k sum_{x in k} ||x - mu_k||^2
//   CH = B (N - K) / (W (K - 1)),   1 when W = 0. Needs 1 < K < N.
// W is evaluated exactly from running sums: per cluster and dimension S1 = sum x (exact), and
// per cluster S2 = sum_d sum x_d^2 (exact: each square as the two doubles of an exact product),
// then sum_{x in k} ||x - mu_k||^2 = S2 - sum_d (n_k mu_kd^2 + 2 mu_kd r_kd) with
// r_kd = S1_kd - n_k mu_kd, every product split exactly (only r_kd, a tiny residual, is rounded
// first): no cancellation however far the points lie from the origin.
//
// Reference: scikit-learn 1.7.2 sklearn.metrics.calinski_harabasz_score(X=data, labels=labels)
// (which sums (x - mu_k)^2 in float64 in two passes over the points). torchmetrics 1.9.0
// CalinskiHarabaszScore: the same formula.
//
// Example: data [[0, 0], [0.5, 0], [1, 0], [0.5, 1]], labels [0, 0, 0, 1] -> 3.0.
//
// State: per cluster label its count (int64) and D + 1 exact accumulators (ExactSum, 67 int64
// words each: S1 per dimension, S2): K (D + 1) 536 bytes, whatever N. Merged across ranks by
// label, counts added and accumulators added exactly, so the result has the same bits on any
// number of ranks. The number of dimensions is shared by every rank with samples (agree).
#include <cmath>
#include <unordered_map>

#include "common.hpp"
#include "tally/sdk/exact_sum.hpp"

namespace tally::clustering {
namespace {

/// a * b = hi + lo exactly (Dekker's product, no FMA needed), barring overflow and underflow.
inline void two_product(double a, double b, double& hi, double& lo) {
  constexpr double kSplit = 134217729.0;  // 2^27 + 1
  hi = a * b;
  const double ca = kSplit * a, cb = kSplit * b;
  const double ah = ca - (ca - a), al = a - ah;
  const double bh = cb - (cb - b), bl = b - bh;
  lo = ((ah * bh - hi) + ah * bl + al * bh) + al * bl;
}

/// Per cluster label: its count and D + 1 exact sums (sum x_d for each d, then sum_d x_d^2).
class ClusterSums {
 public:
  std::size_t clusters() const { return labels_.size(); }
  std::size_t stride() const { return stride_; }
  std::int64_t label(std::size_t k) const { return labels_[k]; }
  std::int64_t count(std::size_t k) const { return counts_[k]; }
  const ExactSum& sum(std::size_t k, std::size_t j) const { return acc_[k * stride_ + j]; }
  bool mismatched() const { return mismatched_; }

  /// The slot of `label` (a new one when unseen), for a state with `stride` sums per cluster.
  std::size_t slot(std::int64_t label, std::size_t stride) {
    if (stride_ == 0) stride_ = stride;
    const auto [it, fresh] = index_.try_emplace(label, labels_.size());
    if (fresh) {
      labels_.push_back(label);
      counts_.push_back(0);
      acc_.resize(acc_.size() + stride_);
    }
    return it->second;
  }
  void add_count(std::size_t k, std::int64_t n) {
    if (__builtin_add_overflow(counts_[k], n, &counts_[k]) || counts_[k] >= (std::int64_t{1} << 53))
      throw RuntimeError("CalinskiHarabaszScore: a cluster holds 2^53 points or more");
  }
  ExactSum& sum(std::size_t k, std::size_t j) { return acc_[k * stride_ + j]; }

  void merge(const ClusterSums& later) {
    if (later.labels_.empty()) return;
    if (stride_ != 0 && later.stride_ != stride_) {
      mismatched_ = true;
      return;
    }
    for (std::size_t k = 0; k < later.labels_.size(); ++k) {
      const std::size_t at = slot(later.labels_[k], later.stride_);
      add_count(at, later.counts_[k]);
      for (std::size_t j = 0; j < stride_; ++j) {
        ExactSum copy = later.acc_[k * stride_ + j];
        copy.normalize();
        acc_[at * stride_ + j].merge(copy.words().data());
      }
    }
  }

  /// [labels, counts, words]: clusters sorted by label, every accumulator normalized, so one
  /// state packs to one byte string whatever the order its points came in.
  void tally_pack(StateWriter& out) const {
    std::vector<std::size_t> order(labels_.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::sort(order.begin(), order.end(),
              [&](std::size_t x, std::size_t y) { return labels_[x] < labels_[y]; });
    PackedVector<std::int64_t> labels, counts, words;
    for (const std::size_t k : order) {
      labels.push_back(labels_[k]);
      counts.push_back(counts_[k]);
      for (std::size_t j = 0; j < stride_; ++j) {
        ExactSum copy = acc_[k * stride_ + j];
        copy.normalize();
        words.insert(words.end(), copy.words().begin(), copy.words().end());
      }
    }
    out.array(3);
    internal::write(out, labels);
    internal::write(out, counts);
    internal::write(out, words);
  }

  /// StateFormatError for what tally_pack cannot have written (a corrupt state).
  void tally_unpack(StateReader& in) {
    if (in.array() != 3) StateReader::fail("cluster sums are not [labels, counts, words]");
    PackedVector<std::int64_t> labels, counts, words;
    internal::read(in, labels);
    internal::read(in, counts);
    internal::read(in, words);
    const std::size_t k = labels.size();
    if (counts.size() != k || (k == 0 && !words.empty()) ||
        (k > 0 && words.size() % (k * ExactSum::kWords) != 0))
      StateReader::fail("corrupt cluster sums");
    ClusterSums s;
    s.stride_ = k == 0 ? 0 : words.size() / (k * ExactSum::kWords);
    if (k > 0 && s.stride_ < 2) StateReader::fail("corrupt cluster sums");
    for (std::size_t i = 0; i < k; ++i) {
      if ((i > 0 && labels[i - 1] >= labels[i]) || counts[i] <= 0 ||
          counts[i] >= (std::int64_t{1} << 53))
        StateReader::fail("corrupt cluster sums");
      const std::size_t at = s.slot(labels[i], s.stride_);
      s.counts_[at] = counts[i];
      for (std::size_t j = 0; j < s.stride_; ++j) {
        const std::int64_t* w = words.data() + (i * s.stride_ + j) * ExactSum::kWords;
        if (!ExactSum::normalized(w)) StateReader::fail("corrupt cluster sums");
        s.acc_[at * s.stride_ + j].merge(w);
      }
    }
    *this = std::move(s);
  }

 private:
  std::vector<std::int64_t> labels_, counts_;
  std::vector<ExactSum> acc_;
  std::unordered_map<std::int64_t, std::size_t> index_;
  std::size_t stride_ = 0;
  bool mismatched_ = false;
};

struct SumsState {
  ClusterSums sums;
  std::int64_t dims = -1;  // -1 until the first non-empty batch
  TALLY_STATE(merge(sums), agree(dims, -1))
};

class CalinskiHarabaszScore final : public TypedMetric<SumsState> {
 public:
  explicit CalinskiHarabaszScore(const Params& p) : check_(p.owner_or("CalinskiHarabaszScore")) {}

 protected:
  void update(SumsState& s, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    // The same checks and messages as the metrics that keep the points.
    points_.data.clear(), points_.labels.clear();
    points_.dims = s.dims;
    std::int64_t before = 0;  // samples this rank has seen: the first sample number of the batch
    for (std::size_t k = 0; k < s.sums.clusters(); ++k) before += s.sums.count(k);
    add_points(check_, batch, points_, before);
    const auto d = static_cast<std::size_t>(points_.dims);
    for (std::size_t i = 0; i < points_.labels.size(); ++i) {
      const std::size_t k = s.sums.slot(points_.labels[i], d + 1);
      const double* x = points_.data.data() + i * d;
      for (std::size_t j = 0; j < d; ++j) {
        double hi = 0, lo = 0;
        two_product(x[j], x[j], hi, lo);
        if (!std::isfinite(hi))
          check_.fail(kData, "a squared value overflows float64 (" + std::to_string(x[j]) + ")");
        s.sums.sum(k, j).add(x[j]);
        ExactSum& sq = s.sums.sum(k, d);
        sq.add(hi);
        sq.add(lo);
      }
      s.sums.add_count(k, 1);
    }
    s.dims = points_.dims;
  }

  Value compute(const SumsState& s) const override {
    const std::size_t k = s.sums.clusters();
    if (s.sums.mismatched() || (s.dims < 0 && k != 0) ||
        (k != 0 && s.sums.stride() != static_cast<std::size_t>(s.dims) + 1))
      check_.fail_runtime(std::string("the state is corrupt"));
    if (k == 0) check_.fail("no samples");
    const auto d = static_cast<std::size_t>(s.dims);
    // Clusters in ascending label order (scikit-learn's LabelEncoder).
    std::vector<std::size_t> order(k);
    for (std::size_t i = 0; i < k; ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](std::size_t x, std::size_t y) { return s.sums.label(x) < s.sums.label(y); });
    std::int64_t n = 0;
    for (std::size_t i = 0; i < k; ++i) n += s.sums.count(i);
    const auto kk = static_cast<std::int64_t>(k);
    if (!(1 < kk && kk < n))
      check_.fail(kLabels, "has " + std::to_string(kk) + " distinct cluster label(s) in " +
                               std::to_string(n) +
                               " samples; it needs between 2 and n_samples - 1 (scikit-learn's "
                               "and torchmetrics' check)");
    // The overall mean: every cluster's exact sums added exactly, then divided.
    std::vector<double> mean(d);
    for (std::size_t j = 0; j < d; ++j) {
      ExactSum total;
      for (std::size_t i = 0; i < k; ++i) {
        ExactSum part = s.sums.sum(i, j);
        part.normalize();
        total.merge(part.words().data());
      }
      mean[j] = total.value() / static_cast<double>(n);
    }
    double extra = 0.0, intra = 0.0;
    std::vector<double> sq(d);
    for (const std::size_t i : order) {
      const auto nk = static_cast<double>(s.sums.count(i));
      ExactSum within = s.sums.sum(i, d);  // S2, then minus sum_d (n mu^2 + 2 mu r)
      for (std::size_t j = 0; j < d; ++j) {
        const ExactSum& s1 = s.sums.sum(i, j);
        const double mu = s1.value() / nk;
        sq[j] = (mu - mean[j]) * (mu - mean[j]);
        double hi = 0, lo = 0, h1 = 0, l1 = 0, h2 = 0, l2 = 0;
        two_product(mu, mu, hi, lo);
        two_product(nk, hi, h1, l1);
        two_product(nk, lo, h2, l2);
        ExactSum r = s1;  // r = S1 - n mu, exactly
        double nh = 0, nl = 0;
        two_product(nk, mu, nh, nl);
        r.add(-nh);
        r.add(-nl);
        double th = 0, tl = 0;
        two_product(2.0 * mu, r.value(), th, tl);
        for (const double v : {h1, l1, h2, l2, th, tl}) within.add(-v);
      }
      extra += nk * numpy::sum(sq.data(), sq.size());
      intra += within.value();
    }
    Value out = Value::map();
    out.set("calinski_harabasz_score",
            intra == 0.0
                ? 1.0
                : extra * static_cast<double>(n - kk) / (intra * (static_cast<double>(kk) - 1.0)));
    return out;
  }

 private:
  InputChecker check_;
  PointsState points_;  // one batch, checked and converted to float64
};

}  // namespace

ComponentInfo calinski_harabasz_info() {
  return metric<CalinskiHarabaszScore>(
      "CalinskiHarabaszScore",
      "Calinski-Harabasz index (variance ratio criterion) of a clustering of points: "
      "between-cluster over within-cluster dispersion, scaled by (N - K) / (K - 1); key "
      "calinski_harabasz_score. Exact per-cluster sums: the state does not grow with N. "
      "Reference: scikit-learn 1.7.2 sklearn.metrics.calinski_harabasz_score(data, labels).",
      {}, points_inputs(), {"CalinskiHarabaszIndex"},
      {{"calinski_harabasz_score", Better::Higher, Plot::None, "variance ratio, >= 0"}});
}
TALLY_COMPONENT(calinski_harabasz_info)

}  // namespace tally::clustering
