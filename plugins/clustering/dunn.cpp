// DunnIndex: the smallest distance between two cluster centroids over the largest distance of
// a point to its centroid (torchmetrics' dunn_index).
//
// Formula. For clusters with centroids mu_k (the mean of their points) and the p-norm
// ||v||_p = (sum_d |v_d|^p)^(1/p) (p = inf: max_d |v_d|):
//   DI = min_{k < l} ||mu_k - mu_l||_p / max_k max_{x in k} ||x - mu_k||_p
// Needs two clusters or more (torchmetrics fails on one); inf when every point sits on its
// centroid.
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.clustering.dunn_index(data, labels,
// p=...) (the class DunnIndex(p=...)), on float64 tensors. scikit-learn has no Dunn index.
//
// Example: data [[0, 0], [0.5, 0], [1, 0], [0.5, 1]], labels [0, 0, 0, 1], p 2 -> 2.0
// (torchmetrics' docstring).
//
// State: every point and its label (float64 [N, D] and int64 [N]), concatenated across ranks
// in rank order (= dataset order): the largest distance to a centroid needs the centroid first,
// so no running sum suffices. compute() groups the points by label in dataset order, so any
// sharding gives the same bits.
#include <cmath>
#include <limits>

#include "common.hpp"

namespace tally::clustering {
namespace {

class DunnIndex final : public TypedMetric<PointsState> {
 public:
  explicit DunnIndex(const Params& p) : check_(p.owner_or("DunnIndex")), p_(p.get_double("p")) {
    if (!(p_ > 0.0)) p.fail("p", "must be > 0 (or .inf), got " + std::to_string(p_));
  }

 protected:
  void update(PointsState& s, const Batch& batch) override { add_points(check_, batch, s); }

  Value compute(const PointsState& s) const override {
    const Clusters c = group_points(s, check_, false);
    const std::size_t k = c.members.size();
    const auto d = static_cast<std::size_t>(c.dims);
    std::vector<std::vector<double>> centroids(k);
    for (std::size_t i = 0; i < k; ++i) centroids[i] = centroid(s, c.members[i], c.dims);
    double inter = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < k; ++i)
      for (std::size_t l = i + 1; l < k; ++l)
        inter = std::min(inter, norm(centroids[i].data(), centroids[l].data(), d));
    double intra = 0.0;
    for (std::size_t i = 0; i < k; ++i)
      for (const std::size_t m : c.members[i])
        intra = std::max(intra, norm(s.data.data() + m * d, centroids[i].data(), d));
    Value out = Value::map();
    out.set("dunn_index", inter / intra);
    return out;
  }

 private:
  /// ||x - y||_p.
  double norm(const double* x, const double* y, std::size_t d) const {
    if (std::isinf(p_)) {
      double m = 0.0;
      for (std::size_t j = 0; j < d; ++j) m = std::max(m, std::abs(x[j] - y[j]));
      return m;
    }
    double sum = 0.0;
    if (p_ == 2.0) {
      for (std::size_t j = 0; j < d; ++j) sum += (x[j] - y[j]) * (x[j] - y[j]);
      return std::sqrt(sum);
    }
    if (p_ == 1.0) {
      for (std::size_t j = 0; j < d; ++j) sum += std::abs(x[j] - y[j]);
      return sum;
    }
    for (std::size_t j = 0; j < d; ++j) sum += std::pow(std::abs(x[j] - y[j]), p_);
    return std::pow(sum, 1.0 / p_);
  }

  InputChecker check_;
  double p_;
};

}  // namespace

ComponentInfo dunn_info() {
  return metric<DunnIndex>(
      "DunnIndex",
      "Dunn index of a clustering of points: the smallest distance between two centroids over "
      "the largest distance of a point to its centroid (p-norm); key dunn_index. Keeps every "
      "point (concatenated across ranks). Reference: torchmetrics 1.9.0 "
      "torchmetrics.functional.clustering.dunn_index(data, labels, p=...).",
      {param("p", ParamType::Float,
             "The norm of the distances (torchmetrics' p): 2 Euclidean, 1 Manhattan, .inf "
             "Chebyshev; any p > 0.")
           .def(2.0)},
      points_inputs(), {}, {{"dunn_index", Better::Higher, Plot::None, "Dunn index, >= 0"}});
}
TALLY_COMPONENT(dunn_info)

}  // namespace tally::clustering
