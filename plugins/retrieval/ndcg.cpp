// RetrievalNormalizedDCG: normalized discounted cumulative gain with graded relevance, over queries
// (torchmetrics' RetrievalNormalizedDCG; scikit-learn's ndcg_score per query).
//
// Formula. Per query of n documents, discount d_i = 1 / log2(i + 2) for ranks i < top_k, else 0,
// and D_i = d_0 + ... + d_i. DCG averages over tied scores (torchmetrics' _tie_average_dcg, as
// scikit-learn's ndcg_score with ignore_ties=False): for each group G of equal scores, taking
// ranks a..b in descending score order, DCG += mean_{j in G}(target_j) * (D_b - D_{a-1}). The
// ideal DCG is sum_i d_i t_(i) with the targets sorted descending; nDCG = DCG / ideal, 0 when the
// ideal is 0. A query whose targets are all 0 is empty_target_action's. Then the aggregation.
// Tie averaging makes the value independent of the order of tied documents.
//
// Reference: torchmetrics 1.9.0 torchmetrics.retrieval.RetrievalNormalizedDCG(
// empty_target_action, ignore_index, top_k, aggregation)(preds, target, indexes=indexes), run in
// float64 (stock torchmetrics: float32 discounts and gains, within 1e-6); cross-checked per query
// with scikit-learn 1.7.2 sklearn.metrics.ndcg_score([target], [preds], k=top_k) (same values to
// 1e-15 on queries of 2 or more documents; scikit-learn refuses a query of one document and
// negative relevance, which tally refuses too).
//
// Example: indexes [0, 0, 0, 1, 1, 1, 1], preds [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2], target
// [0, 0, 1, 0, 1, 0, 1] -> 0.8467 (torchmetrics' docstring).
//
// State: every sample's query id, score and relevance (float64: graded), concatenated in rank
// order (common.hpp).
#include <array>
#include <functional>

#include "common.hpp"

namespace tally::retrieval {
namespace {

class RetrievalNormalizedDCG final : public RetrievalMetric<double> {
 public:
  static constexpr Identity kIdentity{.name = "RetrievalNormalizedDCG",
                                      .key = "retrieval_normalized_dcg",
                                      .key_doc = "mean over queries of nDCG (nDCG@top_k)",
                                      .graded = true,
                                      .empty_doc = "whose targets are all 0"};
  explicit RetrievalNormalizedDCG(const Params& p) : RetrievalMetric(p, kIdentity) {}

 protected:
  /// Queries of up to this many documents take the short path when their scores are distinct.
  static constexpr std::size_t kSmall = 64;

  double query_value(const double* p, const double* t, std::size_t m, Scratch& s) const override {
    const std::size_t k = std::min(k_or_all(m), m);
    // d_i and D_i (cumulated in rank order, as torch.cumsum does) for ranks 0..m-1, kept across
    // queries; with top_k, D_i stays D_{k-1} from rank k on (torch zeroes d_i there).
    std::vector<double>& d = s.values;
    std::vector<double>& cum = s.cumulated;
    for (std::size_t i = d.size(); i < m; ++i) {
      d.push_back(1.0 / std::log2(static_cast<double>(i) + 2.0));
      cum.push_back((i == 0 ? 0.0 : cum[i - 1]) + d[i]);
    }
    const auto D = [&](std::size_t i) { return cum[std::min(i, k - 1)]; };
    double gain = 0.0;
    if (m <= kSmall) {
      // A short query (the usual case), on the stack: its documents by descending score
      // (insertion sort). Without tied scores the order is unique, any sort gives it, and every
      // group below is one document: the same terms, t * (D_i - D_{i-1}), added in the same
      // order. With ties, the general path (the order torch gives tied scores decides the order
      // of the additions).
      std::array<std::pair<double, double>, kSmall> r;
      for (std::size_t i = 0; i < m; ++i) {
        const std::pair<double, double> x{p[i], t[i]};
        std::size_t j = i;
        for (; j > 0 && r[j - 1].first < x.first; --j) r[j] = r[j - 1];
        r[j] = x;
      }
      bool tied = false;
      for (std::size_t i = 1; i < m; ++i) tied |= r[i].first == r[i - 1].first;
      if (!tied) {
        for (std::size_t i = 0; i < m; ++i) {
          const double discount = D(i) - (i == 0 ? 0.0 : D(i - 1));
          const double sum = 0.0 + r[i].second;
          gain += sum / 1.0 * discount;
        }
        // The ideal: the targets in descending order.
        std::array<double, kSmall> sorted;
        for (std::size_t i = 0; i < m; ++i) sorted[i] = r[i].second;
        std::sort(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(m),
                  std::greater<>());
        double ideal = 0.0;
        for (std::size_t i = 0; i < k; ++i) ideal += d[i] * sorted[i];
        return ideal == 0.0 ? 0.0 : gain / ideal;
      }
    }
    argsort_desc(p, m, s.ranked);
    for (std::size_t a = 0; a < m;) {
      std::size_t b = a;
      double sum = 0.0;
      while (b < m && s.ranked[b].first == s.ranked[a].first)
        sum += t[static_cast<std::size_t>(s.ranked[b++].second)];
      const double discount = D(b - 1) - (a == 0 ? 0.0 : D(a - 1));
      gain += sum / static_cast<double>(b - a) * discount;
      a = b;
    }
    // The ideal: the targets in descending order (equal targets in any order: same sum).
    std::vector<double>& sorted = s.targets;
    sorted.assign(t, t + m);
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    double ideal = 0.0;
    for (std::size_t i = 0; i < k; ++i) ideal += d[i] * sorted[i];
    return ideal == 0.0 ? 0.0 : gain / ideal;
  }
};

}  // namespace

ComponentInfo ndcg_info() {
  return retrieval_component<RetrievalNormalizedDCG>(
      "Normalized discounted cumulative gain of each query's ranking by score, graded relevance, "
      "tied scores averaged, aggregated over queries. Reference: torchmetrics 1.9.0 "
      "torchmetrics.retrieval.RetrievalNormalizedDCG(...)(preds, target, indexes=indexes); "
      "scikit-learn 1.7.2 sklearn.metrics.ndcg_score per query.",
      {"NDCG"});
}
TALLY_COMPONENT(ndcg_info)

}  // namespace tally::retrieval
