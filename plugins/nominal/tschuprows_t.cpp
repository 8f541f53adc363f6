// TschuprowsT: Tschuprow's T, the association of two categorical series (torchmetrics'
// TschuprowsT).
//
// Formula. On the contingency table (rows: target classes, columns: preds classes; empty rows
// and columns dropped, r x c left, n samples), chi2 and phi2 = chi2 / n as CramersV:
//   T = sqrt(phi2 / sqrt((r - 1)(c - 1)))
//   bias_correction: phi2~, r~, c~ as CramersV; NaN when min(r~, c~) = 1, else
//   T = sqrt(phi2~ / sqrt((r~ - 1)(c~ - 1)))
//   clamped to [0, 1]. NaN for no samples, one class on a side (0/0) or one sample.
//
// Reference: torchmetrics 1.9.0 torchmetrics.nominal.TschuprowsT(num_classes, bias_correction,
// nan_strategy, nan_replace_value) (float64 default dtype). Cross-checked without bias correction
// against SciPy 1.16.3 scipy.stats.contingency.association(table, method="tschuprow",
// correction=False) on the table without empty rows/columns.
//
// Example: preds [0, 1, 2, 0, 1, 2], target [0, 1, 1, 0, 1, 1], num_classes 3,
// bias_correction false -> tschuprows_t 0.8408964152537146
//
// State: the num_classes x num_classes table of int64 counts, summed across ranks (exact).
#include <cmath>

#include "common.hpp"

namespace tally::nominal {
namespace {

class TschuprowsT final : public TableMetric {
 public:
  explicit TschuprowsT(const Params& p)
      : TableMetric(p, "TschuprowsT", "tschuprows_t"), bias_(p.get_bool("bias_correction")) {}

 protected:
  double value(const PackedVector<std::int64_t>& counts) const override {
    const Table t = nonempty_table(counts, k_);
    const double phi2 = chi_squared(t, bias_) / t.total;
    if (bias_) {
      const Corrected c = bias_corrected(phi2, t.rows, t.cols, t.total);
      if (nan_min(c.rows, c.cols) == 1.0) return std::numeric_limits<double>::quiet_NaN();
      return clamp01(std::sqrt(c.phi2 / std::sqrt((c.rows - 1) * (c.cols - 1))));
    }
    const auto dof = static_cast<double>((t.rows - 1) * (t.cols - 1));
    return clamp01(std::sqrt(phi2 / std::sqrt(dof)));
  }

 private:
  bool bias_;
};

}  // namespace

ComponentInfo tschuprows_t_info() {
  return with_results(
      metric<TschuprowsT>(
          "TschuprowsT",
          "Tschuprow's T association of two categorical series, from their contingency table, with "
          "optional bias correction; key tschuprows_t. Reference: torchmetrics 1.9.0 "
          "torchmetrics.nominal.TschuprowsT(num_classes, bias_correction).",
          association_params({.bias_correction = true}), pair_inputs()),
      {{"tschuprows_t", Better::Higher, Plot::None, "Tschuprow's T in [0, 1]"}});
}
TALLY_COMPONENT(tschuprows_t_info)

}  // namespace tally::nominal
