// KLDivergence: the Kullback-Leibler divergence KL(P || Q) of each sample's distributions
// (torchmetrics').
//
// Formula. For each sample i, p_i and q_i of D values:
//   log_prob false (probabilities, >= 0; each row normalised to sum 1 first):
//     kl_i = sum_j p_ij log(p_ij / q_ij)        (a term with p_ij = 0 is 0; q_ij = 0 < p_ij: inf)
//   log_prob true (log-probabilities, -inf allowed):
//     kl_i = sum_j exp(p_ij) (p_ij - q_ij)       (IEEE arithmetic: -inf - -inf gives NaN)
//   reduction mean: sum_i kl_i / N (the default); sum: sum_i kl_i; none: [kl_1 .. kl_N].
// A row's terms are summed with compensated summation (accurate to a few ulps).
//
// Reference: torchmetrics 1.9.0 torchmetrics.regression.KLDivergence(log_prob, reduction) on
// float64 tensors. Cross-checked with SciPy 1.16.3 scipy.stats.entropy(p_i, q_i) (log_prob false;
// it normalises the same way).
//
// Example: p [[0.36, 0.48, 0.16]], q [[1/3, 1/3, 1/3]] -> 0.0852996013183706 (torchmetrics'
// docstring: 0.0853).
//
// State: mean/sum: the exact sum of the finite divergences, the number of NaN / infinite ones,
// and N (RowValuesState in common.hpp), merged exactly: any sharding gives the same bits. none:
// every sample's divergence, concatenated in rank order.
#include "common.hpp"

namespace tally::regression {
namespace {

class KLDivergence final : public RowValuesMetric {
 public:
  explicit KLDivergence(const Params& p)
      : RowValuesMetric(
            p, "KLDivergence",
            {.a = "p", .b = "q", .allow = p.get_bool("log_prob") ? Allow::NegInf : Allow::Finite}),
        log_prob_(p.get_bool("log_prob")) {}

 protected:
  double row_value(const double* p, const double* q, std::size_t d,
                   std::int64_t sample) const override {
    terms_.resize(d);
    if (log_prob_) {
      for (std::size_t j = 0; j < d; ++j) terms_[j] = std::exp(p[j]) * (p[j] - q[j]);
      return compensated_sum(terms_.data(), d);
    }
    for (std::size_t j = 0; j < d; ++j)
      if (p[j] < 0 || q[j] < 0)
        check_.fail(p[j] < 0 ? "p" : "q",
                    "sample " + std::to_string(sample) + ", value " + std::to_string(j) + ": " +
                        num(p[j] < 0 ? p[j] : q[j]) + " is negative (probabilities must be >= 0)");
    const double sp = compensated_sum(p, d), sq = compensated_sum(q, d);
    for (std::size_t j = 0; j < d; ++j) {
      const double pn = p[j] / sp, qn = q[j] / sq;
      // torchmetrics' _safe_xlogy: 0 where p is 0 (even for 0 / 0), else p log(p / q).
      terms_[j] = pn == 0 ? 0.0 : pn * std::log(pn / qn);
    }
    return compensated_sum(terms_.data(), d);
  }

  Value compute(const RowValuesState& s) const override {
    return result("kl_divergence", reduce(s));
  }

 private:
  bool log_prob_;
  mutable std::vector<double> terms_;
};

}  // namespace

ComponentInfo kl_divergence_info() {
  return metric<KLDivergence>(
      "KLDivergence",
      "Kullback-Leibler divergence KL(p || q) of each sample's distributions (probabilities, "
      "normalised, or log-probabilities), averaged (default), summed or kept per sample; key "
      "kl_divergence. Reference: torchmetrics 1.9.0 torchmetrics.regression.KLDivergence("
      "log_prob, reduction).",
      {param("log_prob", ParamType::Bool,
             "p and q hold log-probabilities (else probabilities, each row normalised).")
           .def(false),
       param("reduction", ParamType::String,
             "mean (the default), sum, or none (an array: one divergence a sample).")
           .def("mean")
           .choices({"mean", "sum", "none"})},
      {InputSpec{"p", "The data distribution P [N, D] (probabilities or log-probabilities).", true},
       InputSpec{"q", "The approximating distribution Q [N, D], the shape of p.", true}},
      {}, {{"kl_divergence", Better::Lower, Plot::None, "KL divergence: mean, sum or per sample"}});
}
TALLY_COMPONENT(kl_divergence_info)

}  // namespace tally::regression
