// CosineSimilarity: cosine similarity of each predicted vector with its target (torchmetrics').
//
// Formula. For each sample i, preds x_i and target y_i of D values:
//   cos_i = (x_i . y_i) / (|x_i| |y_i|)            (NaN for a zero vector, as torchmetrics)
//   reduction sum: sum_i cos_i (the default); mean: sum_i cos_i / N; none: [cos_1 .. cos_N].
// Each dot product and squared norm is summed with an error-free product and compensated
// summation (Ogita, Rump and Oishi's Dot2): accurate to a few ulps.
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.regression.cosine_similarity's
// _cosine_similarity_compute(preds, target, reduction) on float64 tensors: the metric's own
// formula in float64, because torchmetrics.regression.CosineSimilarity casts its inputs to float32
// (.float()); that float32 value agrees to ~1e-6 relative. Cross-checked with SciPy 1.16.3
// 1 - scipy.spatial.distance.cosine(x_i, y_i).
//
// Example: target [[1, 2, 3, 4], [1, 2, 3, 4]], preds [[1, 2, 3, 4], [-1, -2, -3, -4]], reduction
// mean -> 0.0 (torchmetrics' docstring).
//
// State: sum/mean: the exact sum of the finite similarities, the number of NaN / infinite ones,
// and N (RowValuesState in common.hpp), merged exactly: any sharding gives the same bits. none:
// every sample's similarity, concatenated in rank order. D must be the same in every batch.
#include "common.hpp"

namespace tally::regression {
namespace {

/// x . y by Dot2: products split by fma, sums by two-sum, the errors summed on the side.
double dot2(const double* x, const double* y, std::size_t d) {
  double s = 0, c = 0;
  for (std::size_t i = 0; i < d; ++i) {
    const double p = x[i] * y[i];
    const double pe = std::fma(x[i], y[i], -p);
    const double t = s + p;
    const double z = t - s;
    c += ((s - (t - z)) + (p - z)) + pe;
    s = t;
  }
  return s + c;
}

class CosineSimilarity final : public RowValuesMetric {
 public:
  explicit CosineSimilarity(const Params& p)
      : RowValuesMetric(p, "CosineSimilarity", {.a = kPreds, .b = kTarget, .same_cols = true}) {}

 protected:
  double row_value(const double* x, const double* y, std::size_t d,
                   std::int64_t sample) const override {
    const double dot = dot2(x, y, d);
    const double nx = std::sqrt(dot2(x, x, d)), ny = std::sqrt(dot2(y, y, d));
    const double v = dot / (nx * ny);
    if (std::isinf(v) || (std::isnan(v) && nx != 0 && ny != 0))
      check_.fail(kPreds, "sample " + std::to_string(sample) +
                              ": the dot product or the norms overflow float64");
    return v;
  }

  Value compute(const RowValuesState& s) const override {
    return result("cosine_similarity", reduce(s));
  }
};

}  // namespace

ComponentInfo cosine_info() {
  return metric<CosineSimilarity>(
      "CosineSimilarity",
      "Cosine similarity of each predicted vector with its target, summed (default), averaged "
      "or kept per sample; key cosine_similarity (torchmetrics' CosineSimilarity casts to "
      "float32; its formula in float64 is the reference). Reference: torchmetrics 1.9.0 "
      "torchmetrics.functional.regression.cosine_similarity._cosine_similarity_compute(preds, "
      "target, reduction).",
      {param("reduction", ParamType::String,
             "sum (the default), mean, or none (an array: one similarity a sample).")
           .def("sum")
           .choices({"sum", "mean", "none"})},
      preds_target_inputs("[N, D]"), {},
      {{"cosine_similarity", Better::Higher, Plot::None,
        "cosine similarity: summed, averaged, or per sample"}});
}
TALLY_COMPONENT(cosine_info)

}  // namespace tally::regression
