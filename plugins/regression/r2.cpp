// R2: coefficient of determination of float arrays (scikit-learn's r2_score).
//
// Formula. For pred p and target y, [N] or [N, D], optional weights w (else 1):
//   ybar_d = sum_i w_i y_id / sum_i w_i
//   num_d  = sum_i w_i (y_id - p_id)^2,   den_d = sum_i w_i (y_id - ybar_d)^2
//   r2_d   = 1 - num_d / den_d; 1 when num_d = den_d = 0; 0 when only den_d = 0
//            (scikit-learn's force_finite=True)
//   r2     = mean_d r2_d (uniform_average), sum_d den_d r2_d / sum_d den_d (variance_weighted;
//            uniform when every den_d is 0), or [r2_1 .. r2_D] (raw_values)
//   Fewer than 2 samples: NaN (written null), as scikit-learn returns with a warning.
//
// Reference: scikit-learn 1.7.2 sklearn.metrics.r2_score(y_true, y_pred, sample_weight=w,
// multioutput=...). Float32 inputs are computed in float64.
//
// Example: y [3, -0.5, 2, 7], p [2.5, 0, 2, 8] -> 0.9486081370449679 (scikit-learn's docstring).
//
// State: the values themselves (target, pred and weight per sample, float64, packed as bins),
// concatenated across ranks in rank order: den_d needs the mean of the targets before the
// squares, a second pass no running sum can do both exactly and stably. compute() makes the
// passes in dataset order with exact sums (ExactSum), so any sharding gives the same bits. The
// number of outputs and the weighting must be the same on every rank that has samples (agree).
#include <cmath>
#include <limits>

#include "common.hpp"

namespace tally::regression {
namespace {

struct R2State {
  PackedVector<double> target, pred, weight;  // [n * outputs], [n * outputs], [n] if weighted
  std::int64_t outputs = -1;
  std::int64_t weighted = -1;
  TALLY_STATE(concat(target), concat(pred), concat(weight), agree(outputs, -1), agree(weighted, -1))
};

class R2 final : public TypedMetric<R2State> {
 public:
  explicit R2(const Params& p)
      : check_(p.owner_or("R2")), multioutput_(p.get_string("multioutput")) {}

 protected:
  void update(R2State& s, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    const std::int64_t first =
        s.outputs > 0 ? static_cast<std::int64_t>(s.target.size()) / s.outputs : 0;
    read_rows(check_, batch, first, rows_);
    check_consistent(check_, s.outputs, s.weighted, rows_, "");
    s.target.insert(s.target.end(), rows_.target.begin(), rows_.target.end());
    s.pred.insert(s.pred.end(), rows_.pred.begin(), rows_.pred.end());
    if (rows_.weighted) s.weight.insert(s.weight.end(), rows_.weight.begin(), rows_.weight.end());
  }

  Value compute(const R2State& s) const override {
    const bool any = !s.target.empty() || !s.pred.empty() || !s.weight.empty();
    const auto rows = s.outputs > 0 ? s.target.size() / static_cast<std::size_t>(s.outputs) : 0;
    if (s.outputs == 0 || (s.outputs < 0 && any) ||
        (s.outputs > 0 && (s.target.size() != s.pred.size() ||
                           s.target.size() % static_cast<std::size_t>(s.outputs) != 0 ||
                           (s.weighted != 0 && s.weight.size() != rows))))
      check_.fail_runtime(std::string("the state is corrupt"));
    const auto n = static_cast<std::int64_t>(rows);
    if (n == 0) check_.fail("no samples");
    if (n < 2) {
      Value out = Value::map();
      out.set("r2", std::numeric_limits<double>::quiet_NaN());
      return out;
    }
    const auto d = static_cast<std::size_t>(s.outputs);
    const bool weighted = s.weighted != 0;
    const auto each = [&](auto&& f) {  // f(target row, pred row, weight)
      for (std::size_t i = 0; i < rows; ++i)
        f(s.target.data() + i * d, s.pred.data() + i * d, weighted ? s.weight[i] : 1.0);
    };
    // Pass 1: sum w, sum w y, sum w (y - p)^2.
    ExactSum wsum;
    std::vector<ExactSum> wy(d), num(d);
    each([&](const double* y, const double* p, double w) {
      wsum.add(w);
      for (std::size_t k = 0; k < d; ++k) {
        wy[k].add(y[k] * w);
        const double e = y[k] - p[k];
        num[k].add(w * (e * e));
      }
    });
    const double wtotal = wsum.value();
    if (wtotal == 0.0) check_.fail(kWeight, "sums to 0: the weighted mean is undefined");
    std::vector<double> mean(d);
    for (std::size_t k = 0; k < d; ++k) mean[k] = wy[k].value() / wtotal;
    // Pass 2: sum w (y - ybar)^2.
    std::vector<ExactSum> den(d);
    each([&](const double* y, const double*, double w) {
      for (std::size_t k = 0; k < d; ++k) {
        const double c = y[k] - mean[k];
        den[k].add(w * (c * c));
      }
    });
    std::vector<double> score(d), denom(d);
    bool any_den = false;
    for (std::size_t k = 0; k < d; ++k) {
      const double nu = num[k].value(), de = den[k].value();
      denom[k] = de;
      any_den |= de != 0.0;
      if (!std::isfinite(nu) || !std::isfinite(de))
        check_.fail(kTarget, "the sums of squares overflow float64");
      score[k] = de != 0.0 && nu != 0.0 ? 1.0 - nu / de : (nu != 0.0 ? 0.0 : 1.0);
    }
    Value out = Value::map();
    if (multioutput_ == "raw_values") {
      out.set("r2", Value(score));
    } else if (multioutput_ == "variance_weighted" && any_den) {
      // np.average(score, weights=den): sum(score * den) / sum(den), numpy's order.
      std::vector<double> prod(d);
      for (std::size_t k = 0; k < d; ++k) prod[k] = score[k] * denom[k];
      out.set("r2", numpy::sum(prod) / numpy::sum(denom));
    } else {
      out.set("r2", numpy::mean(score));
    }
    return out;
  }

 private:
  InputChecker check_;
  std::string multioutput_;
  Rows rows_;
};

}  // namespace

ComponentInfo r2_info() {
  return with_results(
      metric<R2>("R2",
                 "Coefficient of determination 1 - SS_res / SS_tot, optionally weighted, with "
                 "scikit-learn's conventions for constant targets (force_finite): scikit-learn's "
                 "r2_score; "
                 "key r2.",
                 {multioutput_param({.variance_weighted = true})}, regression_inputs(),
                 {"R2Score"}),
      {{"r2", Better::Higher, Plot::None, "coefficient of determination (array: per output)"}});
}
TALLY_COMPONENT(r2_info)

}  // namespace tally::regression
