// ExplainedVariance: explained variance score (torchmetrics' and scikit-learn's).
//
// Formula. Per output d, over N samples of preds p and target y, with e = y - p:
//   num_d = sum (e - ebar)^2 / N,   den_d = sum (y - ybar)^2 / N
//   ev_d  = 1 - num_d / den_d; 1 where num_d = 0; 0 where only den_d = 0
//   multioutput: uniform_average (the mean of ev_d), raw_values (an array of D values),
//   variance_weighted (sum den_d ev_d / sum den_d; the uniform mean when every den_d is 0, as
//   scikit-learn: torchmetrics gives NaN there).
// The centred sums come from exact sums, rounded once: no digits lost when the mean is large
// against the spread.
//
// Reference: scikit-learn 1.7.2 sklearn.metrics.explained_variance_score(y, p,
// multioutput=...) (two passes, float64). Cross-checked with torchmetrics 1.9.0
// torchmetrics.regression.ExplainedVariance(multioutput) on float64 tensors: equal to 1e-12 on
// the test data, except values near 1e6 spread by 1e-2 (test case "explained_variance_large_mean"),
// where torchmetrics' sum y^2 / N - ybar^2 loses every digit.
//
// Example: target [3, -0.5, 2, 7], preds [2.5, 0, 2, 8] -> 0.9571734475374732 (torchmetrics'
// docstring: 0.9572).
//
// State: per output the exact sums of e, e^2, y and y^2 (products split exactly by fma), and N
// (OutputSumsState in common.hpp), added exactly across ranks; it does not grow with N. The
// number of outputs must be the same on every rank (agree).
#include "common.hpp"

namespace tally::regression {
namespace {

class ExplainedVariance final : public SumsMetric {
 public:
  explicit ExplainedVariance(const Params& p)
      : SumsMetric(p, {"ExplainedVariance", kPreds, kTarget, Layout::Outputs, 4}),
        multioutput_(p.get_string("multioutput")) {}

 protected:
  void add_terms(double p, double y, ExactSum* acc, std::int64_t sample,
                 std::int64_t) const override {
    check_magnitude(p, y, sample);
    const double e = y - p;
    acc[0].add(e);
    add_product(acc[1], e, e);
    acc[2].add(y);
    add_product(acc[3], y, y);
  }

  Value compute(const OutputSumsState& s) const override {
    const SumBank acc = sums(s);
    const auto d = static_cast<std::size_t>(s.outputs);
    const auto dn = static_cast<double>(s.n);
    std::vector<double> score(d), den(d);
    bool any_den = false;
    for (std::size_t k = 0; k < d; ++k) {
      const ExactSum* a = &acc[4 * k];
      const double num = std::max(0.0, centered_sum(a[1], a[0], a[0], s.n)) / dn;
      den[k] = std::max(0.0, centered_sum(a[3], a[2], a[2], s.n)) / dn;
      any_den |= den[k] != 0.0;
      score[k] = num == 0.0 ? 1.0 : den[k] == 0.0 ? 0.0 : 1.0 - num / den[k];
    }
    if (multioutput_ == "raw_values") return result("explained_variance", Value(score));
    if (multioutput_ == "variance_weighted" && any_den) {
      // np.average(score, weights=den): sum(score * den) / sum(den), numpy's order.
      std::vector<double> prod(d);
      for (std::size_t k = 0; k < d; ++k) prod[k] = score[k] * den[k];
      return result("explained_variance", numpy::sum(prod) / numpy::sum(den));
    }
    return result("explained_variance", numpy::mean(score));
  }

 private:
  std::string multioutput_;
};

}  // namespace

ComponentInfo explained_variance_info() {
  return metric<ExplainedVariance>(
      "ExplainedVariance",
      "Explained variance score 1 - var(y - p) / var(y), per output, from exact sums; key "
      "explained_variance (torchmetrics 1.9.0 ExplainedVariance's where its float64 sums keep "
      "their digits). Reference: scikit-learn 1.7.2 "
      "sklearn.metrics.explained_variance_score(target, preds, multioutput).",
      {param("multioutput", ParamType::String,
             "How the D outputs of [N, D] data combine: uniform_average (their mean), raw_values "
             "(an array of D values), variance_weighted (weighted by each target's variance).")
           .def("uniform_average")
           .choices({"uniform_average", "raw_values", "variance_weighted"})},
      preds_target_inputs("[N] or [N, D]"), {"ExplainedVarianceScore"},
      {{"explained_variance", Better::Higher, Plot::None,
        "explained variance score (array: per output)"}});
}
TALLY_COMPONENT(explained_variance_info)

}  // namespace tally::regression
