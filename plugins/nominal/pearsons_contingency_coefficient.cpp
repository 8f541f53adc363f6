// PearsonsContingencyCoefficient: Pearson's contingency coefficient C of two categorical series
// (torchmetrics' PearsonsContingencyCoefficient).
//
// Formula. On the contingency table (empty rows and columns dropped), chi2 (no continuity
// correction) and phi2 = chi2 / n as CramersV:
//   C = sqrt(phi2 / (1 + phi2)), clamped to [0, 1]; NaN for no samples (0/0).
//
// Reference: torchmetrics 1.9.0 torchmetrics.nominal.PearsonsContingencyCoefficient(num_classes,
// nan_strategy, nan_replace_value) (float64 default dtype). Cross-checked against SciPy 1.16.3
// scipy.stats.contingency.association(table, method="pearson", correction=False) on the table
// without empty rows/columns.
//
// Example: preds [0, 1, 1, 0], target [0, 1, 1, 1], num_classes 2
// -> pearsons_contingency_coefficient 0.5
//
// State: the num_classes x num_classes table of int64 counts, summed across ranks (exact).
#include <cmath>

#include "common.hpp"

namespace tally::nominal {
namespace {

class PearsonsContingencyCoefficient final : public TableMetric {
 public:
  explicit PearsonsContingencyCoefficient(const Params& p)
      : TableMetric(p, "PearsonsContingencyCoefficient", "pearsons_contingency_coefficient") {}

 protected:
  double value(const PackedVector<std::int64_t>& counts) const override {
    const Table t = nonempty_table(counts, k_);
    const double phi2 = chi_squared(t, false) / t.total;
    return clamp01(std::sqrt(phi2 / (1 + phi2)));
  }
};

}  // namespace

ComponentInfo pearsons_contingency_coefficient_info() {
  return with_results(
      metric<PearsonsContingencyCoefficient>(
          "PearsonsContingencyCoefficient",
          "Pearson's contingency coefficient sqrt(phi^2 / (1 + phi^2)) of two categorical series; "
          "key pearsons_contingency_coefficient. Reference: torchmetrics 1.9.0 "
          "torchmetrics.nominal.PearsonsContingencyCoefficient(num_classes).",
          association_params(), pair_inputs()),
      {{"pearsons_contingency_coefficient", Better::Higher, Plot::None,
        "Pearson's contingency coefficient in [0, 1)"}});
}
TALLY_COMPONENT(pearsons_contingency_coefficient_info)

}  // namespace tally::nominal
