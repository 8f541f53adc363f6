// DaviesBouldinScore: the mean over clusters of the worst ratio of within-cluster scatter to
// between-centroid distance (scikit-learn's davies_bouldin_score).
//
// Formula. For K clusters (labels ascending) with centroids mu_k (the mean of their points)
// and s_k = mean distance of their points to mu_k (Euclidean):
//   DB = 1/K sum_k max_{l != k} (s_k + s_l) / ||mu_k - mu_l||
// (a pair of equal centroids counts as ratio 0, scikit-learn's inf distance); 0 when every s_k
// <= 1e-8 or every centroid distance <= 1e-8 (NumPy's allclose(x, 0)). Needs 1 < K < N.
//
// Reference: scikit-learn 1.7.2 sklearn.metrics.davies_bouldin_score(X=data, labels=labels).
// scikit-learn computes the distances as sqrt(|x|^2 - 2 x.y + |y|^2) (euclidean_distances),
// which loses digits to cancellation when the points lie far from the origin relative to their
// spread; tally computes sqrt(sum_d (x_d - y_d)^2) directly, as torchmetrics 1.9.0
// DaviesBouldinScore does (so the two references differ in their last digits on such data).
//
// Example: data [[0, 0], [0.5, 0], [1, 0], [0.5, 1]], labels [0, 0, 0, 1] ->
// 0.3333333333333333.
//
// State: every point and its label (float64 [N, D] and int64 [N]), concatenated across ranks
// in rank order (= dataset order): the distances to a centroid need the centroid first, so no
// running sum suffices. compute() groups the points by label in dataset order, so any sharding
// gives the same bits.
#include <cmath>
#include <limits>

#include "common.hpp"

namespace tally::clustering {
namespace {

class DaviesBouldinScore final : public TypedMetric<PointsState> {
 public:
  explicit DaviesBouldinScore(const Params& p) : check_(p.owner_or("DaviesBouldinScore")) {}

 protected:
  void update(PointsState& s, const Batch& batch) override { add_points(check_, batch, s); }

  Value compute(const PointsState& s) const override {
    const Clusters c = group_points(s, check_, true);
    const std::size_t k = c.members.size();
    const auto d = static_cast<std::size_t>(c.dims);
    std::vector<std::vector<double>> centroids(k);
    std::vector<double> intra(k);
    for (std::size_t i = 0; i < k; ++i) {
      centroids[i] = centroid(s, c.members[i], c.dims);
      std::vector<double> dist(c.members[i].size());
      for (std::size_t r = 0; r < dist.size(); ++r) {
        const double* x = s.data.data() + c.members[i][r] * d;
        double sq = 0.0;
        for (std::size_t j = 0; j < d; ++j)
          sq += (x[j] - centroids[i][j]) * (x[j] - centroids[i][j]);
        dist[r] = std::sqrt(sq);
      }
      intra[i] = numpy::mean(dist.data(), dist.size());  // np.average of the [n_k, 1] distances
    }
    // The centroid distances, computed twice rather than kept: K^2 of them could be large.
    const auto between = [&](std::size_t i, std::size_t l) {
      double sq = 0.0;
      for (std::size_t j = 0; j < d; ++j)
        sq += (centroids[i][j] - centroids[l][j]) * (centroids[i][j] - centroids[l][j]);
      return std::sqrt(sq);
    };
    // NumPy's allclose(x, 0): every |x| <= 1e-8 (the diagonal of the distances is 0).
    bool intra_zero = true, between_zero = true;
    for (const double x : intra) intra_zero = intra_zero && std::abs(x) <= 1e-8;
    for (std::size_t i = 0; i < k && between_zero; ++i)
      for (std::size_t l = i + 1; l < k && between_zero; ++l) between_zero = between(i, l) <= 1e-8;
    Value out = Value::map();
    if (intra_zero || between_zero) {
      out.set("davies_bouldin_score", 0.0);
      return out;
    }
    std::vector<double> scores(k);
    for (std::size_t i = 0; i < k; ++i) {
      double worst = -std::numeric_limits<double>::infinity();
      for (std::size_t l = 0; l < k; ++l) {
        // scikit-learn: a zero distance (the diagonal, equal centroids) counts as inf.
        const double dist = l == i ? 0.0 : between(i, l);
        worst = std::max(worst, (intra[i] + intra[l]) /
                                    (dist == 0.0 ? std::numeric_limits<double>::infinity() : dist));
      }
      scores[i] = worst;
    }
    out.set("davies_bouldin_score", numpy::mean(scores.data(), scores.size()));
    return out;
  }

 private:
  InputChecker check_;
};

}  // namespace

ComponentInfo davies_bouldin_info() {
  return metric<DaviesBouldinScore>(
      "DaviesBouldinScore",
      "Davies-Bouldin index of a clustering of points: the mean over clusters of the largest "
      "(scatter_k + scatter_l) / centroid distance; lower is better; key davies_bouldin_score. "
      "Keeps every point (concatenated across ranks). Reference: scikit-learn 1.7.2 "
      "sklearn.metrics.davies_bouldin_score(data, labels).",
      {}, points_inputs(), {"DaviesBouldinIndex"},
      {{"davies_bouldin_score", Better::Lower, Plot::None, "Davies-Bouldin index, >= 0"}});
}
TALLY_COMPONENT(davies_bouldin_info)

}  // namespace tally::clustering
