// CramersV: Cramer's V, the association of two categorical series (torchmetrics' CramersV).
//
// Formula. On the contingency table n_rc (rows: target classes, columns: preds classes; empty
// rows and columns dropped, r x c left, n samples):
//   chi2 = sum_rc (n_rc - e_rc)^2 / e_rc,  e_rc = n_r. n_.c / n  (0 when (r-1)(c-1) = 0;
//          with bias_correction and a 2x2 table, Yates' correction: n_rc moved 0.5 towards e_rc)
//   phi2 = chi2 / n
//   V    = sqrt(phi2 / min(r - 1, c - 1))
//   bias_correction (Bergsma 2013): phi2~ = max(0, phi2 - (r-1)(c-1)/(n-1)),
//          r~ = r - (r-1)^2/(n-1), c~ = c - (c-1)^2/(n-1); NaN when min(r~, c~) = 1, else
//          V = sqrt(phi2~ / min(r~ - 1, c~ - 1))
//   clamped to [0, 1]. NaN for no samples, one class on a side (0/0) or one sample.
//
// Reference: torchmetrics 1.9.0 torchmetrics.nominal.CramersV(num_classes, bias_correction,
// nan_strategy, nan_replace_value) (float64 default dtype). Cross-checked without bias correction
// against SciPy 1.16.3 scipy.stats.contingency.association(table, method="cramer",
// correction=False) on the table without empty rows/columns (SciPy refuses empty ones); with
// bias correction SciPy has no equivalent.
//
// Example: preds [0, 1, 1, 0], target [0, 1, 1, 1], num_classes 2, bias_correction false
// -> cramers_v 0.5773502691896258
//
// State: the num_classes x num_classes table of int64 counts, summed across ranks (exact).
#include <cmath>

#include "common.hpp"

namespace tally::nominal {
namespace {

class CramersV final : public TableMetric {
 public:
  explicit CramersV(const Params& p)
      : TableMetric(p, "CramersV", "cramers_v"), bias_(p.get_bool("bias_correction")) {}

 protected:
  double value(const PackedVector<std::int64_t>& counts) const override {
    const Table t = nonempty_table(counts, k_);
    const double phi2 = chi_squared(t, bias_) / t.total;
    if (bias_) {
      const Corrected c = bias_corrected(phi2, t.rows, t.cols, t.total);
      if (nan_min(c.rows, c.cols) == 1.0) return std::numeric_limits<double>::quiet_NaN();
      return clamp01(std::sqrt(c.phi2 / nan_min(c.rows - 1, c.cols - 1)));
    }
    return clamp01(std::sqrt(phi2 / static_cast<double>(std::min(t.rows - 1, t.cols - 1))));
  }

 private:
  bool bias_;
};

}  // namespace

ComponentInfo cramers_v_info() {
  return with_results(
      metric<CramersV>(
          "CramersV",
          "Cramer's V association of two categorical series, from their contingency table, with "
          "optional bias correction; key cramers_v. Reference: torchmetrics 1.9.0 "
          "torchmetrics.nominal.CramersV(num_classes, bias_correction).",
          association_params({.bias_correction = true}), pair_inputs()),
      {{"cramers_v", Better::Higher, Plot::None, "Cramer's V in [0, 1]"}});
}
TALLY_COMPONENT(cramers_v_info)

}  // namespace tally::nominal
