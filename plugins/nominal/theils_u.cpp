// TheilsU: Theil's U, the uncertainty coefficient U(preds | target) of two categorical series
// (torchmetrics' TheilsU): the fraction of the entropy of preds that knowing target removes.
//
// Formula. On the contingency table n_rc (rows: target classes y, columns: preds classes x;
// empty rows and columns dropped, n samples), p_rc = n_rc / n, p_r = n_r. / n, p_c = n_.c / n:
//   H(x|y) = sum_rc p_rc log(p_r / p_rc)   (cells with n_rc = 0 left out, torch.nansum)
//   H(x)   = -sum_c p_c log p_c
//   U      = (H(x) - H(x|y)) / H(x); 0 when H(x) = 0 (one preds class, or no samples).
// Not symmetric: U(preds | target) != U(target | preds).
//
// Reference: torchmetrics 1.9.0 torchmetrics.nominal.TheilsU(num_classes, nan_strategy,
// nan_replace_value) (float64 default dtype).
//
// Example: preds [0, 1, 2, 0, 1, 2], target [0, 1, 1, 0, 1, 1], num_classes 3
// -> theils_u 0.579380164285695
//
// State: the num_classes x num_classes table of int64 counts, summed across ranks (exact).
#include <cmath>

#include "common.hpp"

namespace tally::nominal {
namespace {

class TheilsU final : public TableMetric {
 public:
  explicit TheilsU(const Params& p) : TableMetric(p, "TheilsU", "theils_u") {}

 protected:
  double value(const PackedVector<std::int64_t>& counts) const override {
    const Table t = nonempty_table(counts, k_);
    double s_xy = 0.0;
    for (std::int64_t r = 0; r < t.rows; ++r) {
      const double p_y = t.row_sums[static_cast<std::size_t>(r)] / t.total;
      for (std::int64_t c = 0; c < t.cols; ++c) {
        const double p_xy = t.obs[static_cast<std::size_t>(r * t.cols + c)] / t.total;
        if (p_xy != 0.0) s_xy += p_xy * std::log(p_y / p_xy);
      }
    }
    double s_x = 0.0;
    for (const double n_c : t.col_sums) {
      const double p_x = n_c / t.total;
      s_x += p_x * std::log(p_x);
    }
    s_x = -s_x;
    if (s_x == 0.0) return 0.0;
    return (s_x - s_xy) / s_x;
  }
};

}  // namespace

ComponentInfo theils_u_info() {
  return with_results(
      metric<TheilsU>(
          "TheilsU",
          "Theil's U, the uncertainty coefficient U(preds | target) = (H(preds) - H(preds | "
          "target)) "
          "/ H(preds) of two categorical series; key theils_u. Reference: torchmetrics 1.9.0 "
          "torchmetrics.nominal.TheilsU(num_classes).",
          association_params(), pair_inputs(), {"UncertaintyCoefficient"}),
      {{"theils_u", Better::Higher, Plot::None, "Theil's U(preds | target) in [0, 1]"}});
}
TALLY_COMPONENT(theils_u_info)

}  // namespace tally::nominal
