// KendallRankCorrCoef: Kendall's rank correlation tau of preds and target, variants a, b, c, and
// optionally the p-value of the asymptotic test of tau = 0 (torchmetrics').
//
// Formula. Per output, over N samples x = preds, y = target: C concordant pairs (x and y both
// strictly increase), D discordant pairs (one strictly increases, the other strictly decreases),
// n0 = N (N - 1) / 2, n1 = sum_t t (t - 1) / 2 over the groups of t tied x, n2 the same for y,
// m = min(distinct x, distinct y):
//   a: tau = (C - D) / (C + D)                      (torchmetrics' variant a: pairs tied in x or
//                                                     y left out of the denominator)
//   b: tau = (C - D) / sqrt((n0 - n1) (n0 - n2))
//   c: tau = 2 (C - D) / (N^2 (m - 1) / m)
//   clamped to [-1, 1]; NaN where the denominator is 0 (a constant input, N < 2).
//   t_test: z = (C - D) / sqrt(var), a: var = N (N - 1) (2N + 5) / 18; b, c:
//     var = (N (N-1) (2N+5) - v1x - v1y) / 18 + 2 n1 n2 / (N (N-1))
//           + v2x v2y / (9 N (N-1) (N-2)),  v1 = sum t (t-1) (2t+5), v2 = sum t (t-1) (t-2)
//   p_value = 2 Phi(-|z|) (two-sided), Phi(-z) (greater), Phi(z) (less), Phi the normal CDF
//   (computed with erfc, so small p-values keep their digits).
//   num_outputs D > 1: preds and target [N, D], arrays of D values.
// Computed in O(N log N) (Knight's algorithm): sort by (x, y), count D as the inversions of y in
// that order (merge sort), the ties from the sorted runs; C = n0 - n1 - n2 + n12 - D, n12 the pairs
// tied in both.
//
// Reference: variants b and c: SciPy 1.16.3 scipy.stats.kendalltau(x, y, variant=v,
// method="asymptotic", alternative=...) (tau and pvalue, float64). Variant a, which SciPy lacks:
// torchmetrics 1.9.0 torchmetrics.functional.regression.kendall's own formulas, evaluated in
// float64 on its exact pair counts (kendall._get_metric_metadata). torchmetrics 1.9.0
// torchmetrics.regression.KendallRankCorrCoef itself returns float32 (and counts pairs in O(N^2)
// time and memory; its tie sums are int32): it agrees to ~1e-6 relative on the test data.
//
// Example: target [3, -0.5, 2, 7], preds [2.5, 0, 2, 8] -> 1.0 (no discordant pair).
//
// State: every sample's preds and target, concatenated across ranks in rank order (RankedState in
// common.hpp).
#include "common.hpp"

namespace tally::regression {
namespace {

class KendallRankCorrCoef final : public RankedMetric {
 public:
  explicit KendallRankCorrCoef(const Params& p)
      : RankedMetric(p, "KendallRankCorrCoef"),
        variant_(p.get_string("variant")[0]),
        t_test_(p.get_bool("t_test")),
        alternative_(p.get_string("alternative")) {}

 protected:
  Value compute(const RankedState& s) const override {
    const std::size_t n = samples(s);
    const auto d = static_cast<std::size_t>(outputs_);
    std::vector<double> tau(d), pv(d);
    RankScratch scratch;
    for (std::size_t k = 0; k < d; ++k) {
      const KendallCounts c =
          kendall_counts(s.preds.data() + k, s.target.data() + k, n, d, scratch);
      const Ties &tx = c.x, &ty = c.y;
      const std::int64_t joint = c.joint, dis = c.discordant;
      const auto nn = static_cast<std::int64_t>(n);
      const std::int64_t n0 = nn * (nn - 1) / 2;
      const std::int64_t con = n0 - tx.pairs - ty.pairs + joint - dis;
      const auto s_cd = static_cast<double>(con - dis);
      const double nan = std::numeric_limits<double>::quiet_NaN();
      double t = nan;
      if (variant_ == 'a') {
        if (con + dis > 0) t = s_cd / static_cast<double>(con + dis);
      } else if (variant_ == 'b') {
        if (tx.pairs < n0 && ty.pairs < n0)
          t = s_cd / std::sqrt(static_cast<double>(n0 - tx.pairs)) /
              std::sqrt(static_cast<double>(n0 - ty.pairs));
      } else {
        const auto m = static_cast<double>(std::min(tx.distinct, ty.distinct));
        const auto dn = static_cast<double>(nn);
        if (m > 1) t = 2.0 * s_cd / (dn * dn * (m - 1.0) / m);
      }
      tau[k] = std::isnan(t) ? t : std::clamp(t, -1.0, 1.0);
      if (!t_test_) continue;
      const auto dn = static_cast<double>(nn);
      const double base = dn * (dn - 1.0) * (2.0 * dn + 5.0);
      double var = base / 18.0;
      if (variant_ != 'a') {
        const double m = dn * (dn - 1.0);
        var = (base - tx.v1 - ty.v1) / 18.0 +
              2.0 * static_cast<double>(tx.pairs) * static_cast<double>(ty.pairs) / m +
              tx.v2 * ty.v2 / (9.0 * m * (dn - 2.0));
      }
      const double z = s_cd / std::sqrt(var);
      double p = nan;
      if (!std::isnan(t) && !std::isnan(z)) {
        if (alternative_ == "two-sided")
          p = std::erfc(std::abs(z) / std::sqrt(2.0));
        else if (alternative_ == "greater")
          p = 0.5 * std::erfc(z / std::sqrt(2.0));
        else
          p = 0.5 * std::erfc(-z / std::sqrt(2.0));
      }
      pv[k] = p;
    }
    Value out = Value::map();
    out.set("kendall_rank_corrcoef", per_output(tau, outputs_ > 1));
    if (t_test_) out.set("p_value", per_output(pv, outputs_ > 1));
    return out;
  }

 private:
  char variant_;
  bool t_test_;
  std::string alternative_;
};

}  // namespace

ComponentInfo kendall_info() {
  return metric<KendallRankCorrCoef>(
      "KendallRankCorrCoef",
      "Kendall's rank correlation tau of preds and target (variant a, b or c), per output, in "
      "O(N log N); with t_test also the p-value of the asymptotic test (key p_value); key "
      "kendall_rank_corrcoef (variant a: torchmetrics 1.9.0 KendallRankCorrCoef's formulas, in "
      "float64). Reference: SciPy 1.16.3 scipy.stats.kendalltau(preds, target, variant, "
      "method='asymptotic', alternative).",
      {param("variant", ParamType::String,
             "a: (C - D) / (C + D); b: tau-b, corrected for ties; c: tau-c (Stuart's).")
           .def("b")
           .choices({"a", "b", "c"}),
       param("t_test", ParamType::Bool,
             "Also give the p-value of the asymptotic test of tau = 0 (key p_value).")
           .def(false),
       param("alternative", ParamType::String,
             "The alternative hypothesis of the test: two-sided, less (tau < 0) or greater.")
           .def("two-sided")
           .choices({"two-sided", "less", "greater"}),
       num_outputs_param()},
      preds_target_inputs("[N] or [N, D]"), {},
      {{"kendall_rank_corrcoef", Better::Higher, Plot::None,
        "Kendall's tau in [-1, 1] (array: per output)"},
       {"p_value", Better::Neither, Plot::None, "p-value of the test of tau = 0"}});
}
TALLY_COMPONENT(kendall_info)

}  // namespace tally::regression
