// RetrievalAUROC: area under the ROC curve of each query's documents, over queries (torchmetrics'
// RetrievalAUROC; scikit-learn's roc_auc_score per query).
//
// Formula. Per query of n documents: the min(top_k, n) best-scored (torch.topk, ties in
// torchmetrics' order: common.hpp); 0 unless they hold both a relevant and a non-relevant
// document. Their scores go through a sigmoid when any lies outside [0, 1] (binary_auroc's
// logits rule: it can only merge scores into ties). The ROC curve has a point per distinct score
// (tied scores move together), from (0, 0); AUC = sum (fpr_i - fpr_{i-1}) (tpr_i + tpr_{i-1}) / 2,
// the Mann-Whitney probability with ties counted 1/2, computed exactly from integer counts. With
// max_fpr < 1 the curve stops at fpr = max_fpr (tpr interpolated linearly, torch.lerp) and the
// partial area A gets McClish's correction 0.5 (1 + (A - m) / (max_fpr - m)), m = max_fpr^2 / 2.
// A query with no relevant document is empty_target_action's. Then the aggregation.
//
// Reference: torchmetrics 1.9.0 torchmetrics.retrieval.RetrievalAUROC(empty_target_action,
// ignore_index, top_k, max_fpr, aggregation)(preds, target, indexes=indexes), run in float64
// (stock torchmetrics: float32 rates, within 1e-6); cross-checked per query with scikit-learn
// 1.7.2 sklearn.metrics.roc_auc_score(target, preds, max_fpr=max_fpr) (equal to 1e-15).
//
// Example: indexes [0, 0, 0, 1, 1, 1, 1], preds [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2], target
// [0, 0, 1, 0, 1, 0, 1] -> 0.75 (torchmetrics' docstring).
//
// State: every sample's query id, score and relevance (common.hpp), concatenated in rank order.
#include "common.hpp"

namespace tally::retrieval {
namespace {

class RetrievalAUROC final : public RetrievalMetric<std::uint8_t> {
 public:
  static constexpr Identity kIdentity{
      .name = "RetrievalAUROC",
      .key = "retrieval_auroc",
      .key_doc = "mean over queries of the area under the ROC curve"};
  explicit RetrievalAUROC(const Params& p) : RetrievalMetric(p, kIdentity) {
    if (p.has("max_fpr")) {
      max_fpr_ = p.get_number("max_fpr", kPositiveFraction);
    }
  }

 protected:
  double query_value(const double* p, const std::uint8_t* t, std::size_t m,
                     Scratch& s) const override {
    const std::size_t k = std::min(k_or_all(m), m);
    topk(p, m, k, s.ranked);
    s.ranked.resize(k);
    std::int64_t pos = 0, neg = 0;
    bool probabilities = true;
    for (auto& [score, i] : s.ranked) {
      i = t[static_cast<std::size_t>(i)];  // from here on: the document's relevance
      (i != 0 ? pos : neg) += 1;
      probabilities = probabilities && score >= 0.0 && score <= 1.0;
    }
    if (pos == 0 || neg == 0) return 0.0;
    if (!probabilities)
      for (auto& r : s.ranked) r.first = 1.0 / (1.0 + std::exp(-r.first));
    // Descending scores; the order within ties does not change the curve.
    std::sort(s.ranked.begin(), s.ranked.end(), score_desc);
    // One point per distinct score: cumulated true and false positives.
    std::vector<double>& fpr = s.values;
    std::vector<double>& tpr = s.cumulated;
    fpr.assign(1, 0.0);
    tpr.assign(1, 0.0);
    std::int64_t tp = 0, fp = 0, area2 = 0;  // area2: twice the area, times pos * neg
    for (std::size_t a = 0; a < k;) {
      const std::int64_t tp0 = tp, fp0 = fp;
      std::size_t b = a;
      while (b < k && s.ranked[b].first == s.ranked[a].first)
        (s.ranked[b++].second != 0 ? tp : fp) += 1;
      area2 += (fp - fp0) * (tp + tp0);
      fpr.push_back(static_cast<double>(fp) / static_cast<double>(neg));
      tpr.push_back(static_cast<double>(tp) / static_cast<double>(pos));
      a = b;
    }
    if (!max_fpr_ || *max_fpr_ == 1.0)
      return static_cast<double>(area2) /
             (2.0 * static_cast<double>(pos) * static_cast<double>(neg));
    // torchmetrics' _binary_auroc_compute: the curve up to max_fpr, then McClish's correction.
    const double mx = *max_fpr_;
    const auto stop =
        static_cast<std::size_t>(std::upper_bound(fpr.begin(), fpr.end(), mx) - fpr.begin());
    const double w = (mx - fpr[stop - 1]) / (fpr[stop] - fpr[stop - 1]);
    const double y0 = tpr[stop - 1], y1 = tpr[stop];
    const double interp = w < 0.5 ? y0 + w * (y1 - y0) : y1 - (y1 - y0) * (1.0 - w);  // torch.lerp
    double partial = 0.0;
    for (std::size_t i = 1; i <= stop; ++i) {
      const double x1 = i < stop ? fpr[i] : mx, yi = i < stop ? tpr[i] : interp;
      partial += (x1 - fpr[i - 1]) * (yi + tpr[i - 1]);
    }
    partial /= 2.0;
    const double min_area = 0.5 * mx * mx;
    return 0.5 * (1.0 + (partial - min_area) / (mx - min_area));
  }

 private:
  std::optional<double> max_fpr_;
};

}  // namespace

ComponentInfo auroc_info() {
  return retrieval_component<RetrievalAUROC>(
      "Area under the ROC curve of each query's documents by score (optionally partial, up to "
      "max_fpr), aggregated over queries. Reference: torchmetrics 1.9.0 "
      "torchmetrics.retrieval.RetrievalAUROC(...)(preds, target, indexes=indexes); scikit-learn "
      "1.7.2 sklearn.metrics.roc_auc_score per query.",
      {},
      {param("max_fpr", ParamType::Float,
             "If set, in (0, 1]: the standardized partial AUC up to this false positive "
             "rate (McClish's correction, torchmetrics' and scikit-learn's max_fpr); "
             "null: the whole curve.")
           .nullable()
           .optional()});
}
TALLY_COMPONENT(auroc_info)

}  // namespace tally::retrieval
