// MatthewsCorrCoef: the Matthews correlation coefficient of a binary, multiclass or multilabel
// task (torchmetrics' MatthewsCorrCoef).
//
// Formula. From the confusion matrix M (multilabel: the labels' 2 x 2 matrices summed into one
// binary matrix), with t_k its row sums, p_k its column sums, c its trace and s its total:
//   mcc = (c s - sum_k t_k p_k) / sqrt((s^2 - sum_k p_k^2) (s^2 - sum_k t_k^2))
// Degenerate cases, as torchmetrics 1.9 (2 x 2 matrices [[tn, fp], [fn, tp]]): every sample
// right (fp + fn = 0, tp + tn > 0) -> 1; every sample wrong -> -1; a zero denominator -> the
// eps-smoothed value of torchmetrics' _matthews_corrcoef_reduce (eps = float32 epsilon; it
// computes this branch in float32, and so does tally, operation by operation) or 0; larger
// matrices with a zero
// denominator -> 0. scikit-learn's matthews_corrcoef returns 0 in all of these cases.
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.matthews_corrcoef(preds, target,
// task=..., threshold=..., num_classes=..., num_labels=..., ignore_index=...) in float64;
// cross-checked with scikit-learn 1.7.2 sklearn.metrics.matthews_corrcoef (equal to 1e-15 where
// the denominator is not 0).
//
// Key: matthews_corrcoef.
//
// Example: task binary, preds [0.1, 0.9, 0.6, 0.4, 0.8], target [0, 1, 0, 1, 1]
//   -> {matthews_corrcoef: 0.16666666666666666}
//
// State: the confusion counts of tm_core.hpp (int64, summed across ranks: exact).
#include <algorithm>
#include <cfloat>

#include "common.hpp"
#include "tm_core.hpp"

namespace tally::classification {
namespace {

using namespace tm;

TaskOptions mcc_options() { return TaskOptions{}; }

/// torchmetrics' binary special cases (its 2 x 2 matrix [[tn, fp], [fn, tp]]): the value, or
/// nullopt when the general formula applies. Its zero-denominator branch computes with int64
/// counts and a float32 epsilon tensor, so in float32 (torch's promotion of int64 and float32
/// tensors): reproduced here operation by operation.
std::optional<double> binary_special(std::int64_t tn, std::int64_t fp, std::int64_t fn,
                                     std::int64_t tp, double den) {
  if (tp + tn != 0 && fp + fn == 0) return 1.0;
  if (tp + tn == 0 && fp + fn != 0) return -1.0;
  if (den != 0.0) return std::nullopt;
  const float eps = FLT_EPSILON;
  const float root = std::sqrt(eps);
  // An int64 numerator stays exact until the division converts it to float32.
  float num = 0.0f;
  if (fn == 0 && tn == 0)
    num = root * static_cast<float>(tp - fp);
  else if (fp == 0 && tn == 0)
    num = root * static_cast<float>(tp - fn);
  else if (tp == 0 && fn == 0)
    num = root * static_cast<float>(tn - fp);
  else if (tp == 0 && fp == 0)
    num = root * static_cast<float>(tn - fn);
  else if (tp == 0)
    num = static_cast<float>(tn - fp * fn);
  else if (tn == 0)
    num = static_cast<float>(tp - fp * fn);
  else if (fp == 0 || fn == 0)
    num = static_cast<float>(tp * tn);
  else
    return 0.0;
  const auto f = [&](std::int64_t a, std::int64_t b) { return static_cast<float>(a + b) + eps; };
  const float d = f(tp, fp) * f(tp, fn) * f(tn, fp) * f(tn, fn);
  return static_cast<double>(num / std::sqrt(d));
}

class MatthewsCorrCoef final : public CountMetric {
 public:
  explicit MatthewsCorrCoef(const Params& p)
      : CountMetric(p, "MatthewsCorrCoef", mcc_options(), SigmoidOver::Kept) {
    if (tp_.task == Task::Multilabel) over_ = SigmoidOver::All;
  }

 protected:
  Value compute(const CountState& state) const override {
    const auto& m = checked(state);
    // The matrix: multiclass C x C; binary and multilabel one 2 x 2 (labels summed).
    std::size_t k = 2;
    std::vector<double> cm;
    std::int64_t counts[4] = {0, 0, 0, 0};  // the 2 x 2 matrix, when k is 2
    if (tp_.task == Task::Multiclass) {
      k = static_cast<std::size_t>(tp_.classes);
      cm.assign(m.begin(), m.end());
      if (k == 2) std::copy(m.begin(), m.end(), counts);
    } else {
      for (std::size_t i = 0; i < m.size(); ++i) counts[i % 4] += m[i];
      cm = {static_cast<double>(counts[0]), static_cast<double>(counts[1]),
            static_cast<double>(counts[2]), static_cast<double>(counts[3])};
    }
    std::vector<double> t(k, 0.0), p(k, 0.0);
    double c = 0.0, s = 0.0;
    for (std::size_t i = 0; i < k; ++i)
      for (std::size_t j = 0; j < k; ++j) {
        t[i] += cm[i * k + j];
        p[j] += cm[i * k + j];
      }
    for (std::size_t i = 0; i < k; ++i) c += cm[i * k + i];
    for (const double x : t) s += x;
    // Python's sum() over the tensor: left to right from 0.
    double tp_sum = 0.0, pp_sum = 0.0, tt_sum = 0.0;
    for (std::size_t i = 0; i < k; ++i) {
      tp_sum += t[i] * p[i];
      pp_sum += p[i] * p[i];
      tt_sum += t[i] * t[i];
    }
    const double num = c * s - tp_sum;
    const double den = (s * s - pp_sum) * (s * s - tt_sum);
    Value out = Value::map();
    if (k == 2) {
      if (const auto v = binary_special(counts[0], counts[1], counts[2], counts[3], den)) {
        out.set("matthews_corrcoef", *v);
        return out;
      }
    } else if (den == 0.0) {
      out.set("matthews_corrcoef", 0.0);
      return out;
    }
    out.set("matthews_corrcoef", num / std::sqrt(den));
    return out;
  }
};

}  // namespace

ComponentInfo matthews_corrcoef_info() {
  return with_results(
      metric<MatthewsCorrCoef>(
          "MatthewsCorrCoef",
          "Matthews correlation coefficient of a binary, multiclass or multilabel task (in [-1, "
          "1]); key matthews_corrcoef. Reference: torchmetrics 1.9.0 "
          "torchmetrics.functional.matthews_corrcoef(preds, target, task, threshold, num_classes, "
          "num_labels, ignore_index=ignore_index).",
          task_params(mcc_options()), task_inputs()),
      {{"matthews_corrcoef", Better::Higher, Plot::None,
        "Matthews correlation coefficient, in [-1, 1]"}});
}
TALLY_COMPONENT(matthews_corrcoef_info)

}  // namespace tally::classification
