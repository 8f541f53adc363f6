// SpearmanCorrCoef: Spearman's rank correlation of preds and target.
//
// Formula. Per output: the ranks of preds and of target (1..N, ties given their average rank, as
// scipy.stats.rankdata), then Pearson's r of the two rank vectors:
//   rho = sum (rx - rbar)(ry - rbar) / sqrt(sum (rx - rbar)^2 sum (ry - rbar)^2)
//   NaN for a constant input (no variance) or N < 2.
//   num_outputs D > 1: preds and target [N, D], an array of D coefficients.
// Twice a rank is an integer, so every sum above is computed exactly (int128) and rounded once.
//
// Reference: SciPy 1.16.3 scipy.stats.spearmanr(x, y).statistic (float64). torchmetrics 1.9.0
// torchmetrics.regression.SpearmanCorrCoef(num_outputs=D), whose name this metric takes, ranks
// in float32 whatever the input dtype and divides by (std_x std_y + 1e-6): it agrees to ~1e-6
// relative on the test data, and gives 0 where SciPy (and this metric) give NaN (a constant
// input).
//
// Example: target [3, -0.5, 2, 7], preds [1, 0, 2, 8] -> 0.8 (scipy.stats.spearmanr:
// 0.7999999999999999).
//
// State: every sample's preds and target, concatenated across ranks in rank order (RankedState in
// common.hpp): ranks need all of them. compute() ranks them in O(N) (a radix sort each, ranks.cpp).
#include "common.hpp"

namespace tally::regression {
namespace {

class SpearmanCorrCoef final : public RankedMetric {
 public:
  explicit SpearmanCorrCoef(const Params& p) : RankedMetric(p, "SpearmanCorrCoef") {}

 protected:
  Value compute(const RankedState& s) const override {
    const std::size_t n = samples(s);
    const auto d = static_cast<std::size_t>(outputs_);
    std::vector<double> rho(d);
    RankScratch scratch;
    for (std::size_t k = 0; k < d; ++k) {
      // Twice the ranks: each <= 2^32, products <= 2^64, n of them <= 2^95; n times that
      // < 2^127: exact in int128 (ranks.hpp).
      const SpearmanSums r = spearman_sums(s.preds.data() + k, s.target.data() + k, n, d, scratch);
      const Int128 sx = r.sx, sy = r.sy, sxx = r.sxx, syy = r.syy, sxy = r.sxy;
      const auto nn = static_cast<Int128>(n);
      // n^2 times the centred sums (the factor cancels in the ratio).
      const auto cxx = static_cast<long double>(nn * sxx - sx * sx);
      const auto cyy = static_cast<long double>(nn * syy - sy * sy);
      const auto cxy = static_cast<long double>(nn * sxy - sx * sy);
      rho[k] =
          cxx == 0 || cyy == 0
              ? std::numeric_limits<double>::quiet_NaN()
              : std::clamp(static_cast<double>(cxy / (std::sqrt(cxx) * std::sqrt(cyy))), -1.0, 1.0);
    }
    Value out = Value::map();
    out.set("spearman_corrcoef", per_output(rho, outputs_ > 1));
    return out;
  }
};

}  // namespace

ComponentInfo spearman_info() {
  return metric<SpearmanCorrCoef>(
      "SpearmanCorrCoef",
      "Spearman's rank correlation of preds and target (average ranks for ties), per output; key "
      "spearman_corrcoef (torchmetrics 1.9.0 SpearmanCorrCoef computes it in float32, with an "
      "epsilon). Reference: SciPy 1.16.3 scipy.stats.spearmanr(preds, target).statistic.",
      {num_outputs_param()}, preds_target_inputs("[N] or [N, D]"), {},
      {{"spearman_corrcoef", Better::Higher, Plot::None,
        "Spearman's rho in [-1, 1] (array: per output)"}});
}
TALLY_COMPONENT(spearman_info)

}  // namespace tally::regression
