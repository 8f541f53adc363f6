// Pieces the regression metrics share: reading pred / target / sample_weight into float64
// rows, the exactly-accumulated state of RegressionMAE, RegressionMSE and RMSE (numpy's mean of the
// per-output values: tally/numpy_math.hpp), and the component infos plugin.cpp registers.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "exact_sum.hpp"
#include "tally/batch.hpp"
#include "tally/input.hpp"
#include "tally/metric.hpp"
#include "tally/numpy_math.hpp"
#include "tally/params.hpp"
#include "tally/plugin.hpp"
#include "tally/state.hpp"

namespace tally::regression {

inline constexpr const char* kPred = "pred";
inline constexpr const char* kTarget = "target";
inline constexpr const char* kWeight = "sample_weight";

ComponentInfo mae_info();
ComponentInfo mse_info();
ComponentInfo rmse_info();
ComponentInfo r2_info();

/// The inputs of one batch as float64: pred and target [n, outputs] row-major, weight [n] (all
/// 1 when the batch has no sample_weight). InputError for a missing field, a shape mismatch, a
/// NaN or an infinity (scikit-learn's check_array rejects them too).
struct Rows {
  std::int64_t n = 0, outputs = 0;
  bool weighted = false;
  std::vector<double> pred, target, weight;
};

inline void read_values(const InputChecker& check, const Tensor& t, const char* field,
                        std::int64_t first, std::int64_t cols, std::vector<double>& out) {
  const std::int64_t n = t.numel();
  out.resize(static_cast<std::size_t>(n));
  const auto put = [&](const auto* v) {
    for (std::int64_t k = 0; k < n; ++k)
      out[static_cast<std::size_t>(k)] = static_cast<double>(v[k]);
  };
  if (is_floating(t.dtype()))
    visit_floating(t, put);
  else if (is_integral(t.dtype()))
    visit_integral(t, put);
  else
    check.fail(field, "must hold numbers (float or integer), got " + t.describe());
  for (std::int64_t k = 0; k < n; ++k)
    if (!std::isfinite(out[static_cast<std::size_t>(k)]))
      check.fail(field, "sample " + std::to_string(first + k / cols) +
                            (cols > 1 ? ", output " + std::to_string(k % cols) : std::string()) +
                            ": " +
                            (std::isnan(out[static_cast<std::size_t>(k)]) ? "NaN" : "infinity") +
                            " (scikit-learn rejects non-finite values)");
}

inline void read_rows(const InputChecker& check, const Batch& batch, std::int64_t first, Rows& r) {
  const Tensor& p = check.tensor(batch, kPred);
  const Tensor& t = check.tensor(batch, kTarget);
  for (const auto& [field, x] : {std::pair{kPred, &p}, std::pair{kTarget, &t}})
    if (x->dim() < 1 || x->dim() > 2)
      check.fail(field, "must be [N] or [N, D] (D outputs), got " + x->describe());
  const std::int64_t dp = p.dim() == 2 ? p.size(1) : 1, dt = t.dim() == 2 ? t.size(1) : 1;
  check.same_rows(p, kPred, t, kTarget);
  if (dp != dt)
    check.fail(kPred, "has " + std::to_string(dp) + " outputs (" + p.describe() + "), '" + kTarget +
                          "' has " + std::to_string(dt) + " (" + t.describe() + ")");
  if (dp < 1) check.fail(kPred, "has no outputs (" + p.describe() + ")");
  r.n = p.size(0);
  r.outputs = dp;
  read_values(check, p, kPred, first, dp, r.pred);
  read_values(check, t, kTarget, first, dp, r.target);
  r.weighted = batch.has(kWeight);
  if (r.weighted) {
    const Tensor& w = check.tensor(batch, kWeight);
    if (w.dim() != 1) check.fail(kWeight, "must be 1-D [N], got " + w.describe());
    check.same_rows(w, kWeight, p, kPred);
    read_values(check, w, kWeight, first, 1, r.weight);
  } else {
    r.weight.assign(static_cast<std::size_t>(r.n), 1.0);
  }
}

/// InputError when a batch's outputs or weighting differ from the earlier batches' (-1: none yet).
inline void check_consistent(const InputChecker& check, std::int64_t& outputs,
                             std::int64_t& weighted, const Rows& r, const std::string& where) {
  if (outputs >= 0 && outputs != r.outputs)
    check.fail(kPred, "has " + std::to_string(r.outputs) + " outputs" + where + " but " +
                          std::to_string(outputs) + " in earlier samples");
  if (weighted >= 0 && weighted != static_cast<std::int64_t>(r.weighted))
    check.fail(kWeight, std::string(r.weighted ? "is given" : "is missing") + where + " but was " +
                            (r.weighted ? "missing" : "given") +
                            " for earlier samples: weight all samples or none");
  outputs = r.outputs;
  weighted = static_cast<std::int64_t>(r.weighted);
}

inline ParamSpec multioutput_param(bool variance_weighted) {
  std::vector<std::string> choices{"uniform_average", "raw_values"};
  if (variance_weighted) choices.push_back("variance_weighted");
  return param("multioutput", ParamType::String,
               std::string("How the D outputs of [N, D] data combine (scikit-learn's "
                           "multioutput): uniform_average (their mean), raw_values (an array of "
                           "D values)") +
                   (variance_weighted ? ", variance_weighted (weighted by the variance of each "
                                        "target)"
                                      : "") +
                   ".")
      .def("uniform_average")
      .choices(std::move(choices));
}

inline std::vector<InputSpec> regression_inputs() {
  return {InputSpec{kPred, "Predictions [N] or [N, D] (D outputs), float or integer.", true},
          InputSpec{kTarget, "True values, the shape of pred.", true},
          InputSpec{kWeight,
                    "Optional per-sample weights [N] (scikit-learn's sample_weight); give it for "
                    "every sample or for none.",
                    false}};
}

// ---- RegressionMAE, RegressionMSE, RMSE ------------------------------------------------------

/// Exact sums: per output, sum_i w_i * term(pred_i, target_i); and sum_i w_i. Order-free. Across
/// ranks: the accumulators added exactly (merge), the number of outputs and the weighting shared
/// by every rank that has samples (agree), the sample count summed.
struct ErrorSumState {
  ExactSums words;            // (outputs + 1) accumulators of ExactSum::kWords, weight last
  std::int64_t outputs = -1;  // -1 until the first non-empty batch
  std::int64_t weighted = -1;
  std::int64_t n = 0;
  TALLY_STATE(merge(words), agree(outputs, -1), agree(weighted, -1), sum(n))
};

enum class ErrorKind { Absolute, Squared, RootSquared };

/// The three error metrics: output_errors[d] = sum_i w_i term_id / sum_i w_i (RMSE: its square
/// root), then scikit-learn's multioutput.
class ErrorMetric : public TypedMetric<ErrorSumState> {
 public:
  ErrorMetric(const Params& p, const char* type, std::string key, ErrorKind kind)
      : check_(p.owner_or(type)),
        key_(std::move(key)),
        kind_(kind),
        raw_(p.get_string("multioutput") == "raw_values") {}

 protected:
  void update(ErrorSumState& s, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    read_rows(check_, batch, s.n, rows_);
    check_consistent(check_, s.outputs, s.weighted, rows_, "");
    const auto d = static_cast<std::size_t>(rows_.outputs);
    std::vector<ExactSum> acc(d + 1);
    if (!s.words.empty()) {
      // A state restored from a checkpoint: as checked as one from another rank.
      if (s.words.size() != (d + 1) * ExactSum::kWords || !s.words.normalized())
        throw RuntimeError(check_.owner() + ": the restored state is corrupt: its sums are not " +
                           std::to_string(d + 1) + " normalized accumulators");
      for (std::size_t k = 0; k <= d; ++k) acc[k].merge(s.words.data() + k * ExactSum::kWords);
    }
    for (std::int64_t i = 0; i < rows_.n; ++i) {
      const double w = rows_.weight[static_cast<std::size_t>(i)];
      for (std::size_t k = 0; k < d; ++k) {
        const auto at = static_cast<std::size_t>(i) * d + k;
        // scikit-learn: abs(y_pred - y_true) * w; (y_true - y_pred) ** 2 * w.
        const double term =
            kind_ == ErrorKind::Absolute
                ? std::abs(rows_.pred[at] - rows_.target[at])
                : (rows_.target[at] - rows_.pred[at]) * (rows_.target[at] - rows_.pred[at]);
        const double wt = term * w;
        if (!std::isfinite(wt))
          check_.fail(kPred, "sample " + std::to_string(s.n + i) +
                                 ": the error overflows float64 (" + std::to_string(wt) + ")");
        acc[k].add(wt);
      }
      acc[d].add(w);
    }
    s.words.resize((d + 1) * ExactSum::kWords);
    for (std::size_t k = 0; k <= d; ++k) {
      acc[k].normalize();
      std::copy(acc[k].words().begin(), acc[k].words().end(),
                s.words.begin() + static_cast<std::ptrdiff_t>(k * ExactSum::kWords));
    }
    s.n += rows_.n;
  }

  Value compute(const ErrorSumState& s) const override {
    // A rank's accumulators that do not match the other ranks' or its own number of outputs.
    const bool unset = s.outputs < 0;
    if (s.words.mismatched() || (unset && (s.n != 0 || !s.words.empty())) ||
        (!unset && (s.outputs >= (std::int64_t{1} << 40) ||
                    s.words.size() != static_cast<std::size_t>(s.outputs + 1) * ExactSum::kWords ||
                    !s.words.normalized())))
      throw RuntimeError(check_.owner() + ": the state is corrupt");
    if (s.n == 0) check_.fail("no samples");
    const auto d = static_cast<std::size_t>(s.outputs);
    std::vector<ExactSum> acc(d + 1);
    for (std::size_t k = 0; k <= d; ++k) acc[k].merge(s.words.data() + k * ExactSum::kWords);
    const double wsum = acc[d].value();
    if (wsum == 0.0) check_.fail(kWeight, "sums to 0: the weighted average is undefined");
    std::vector<double> errors(d);
    for (std::size_t k = 0; k < d; ++k) {
      errors[k] = acc[k].value() / wsum;
      if (kind_ == ErrorKind::RootSquared) errors[k] = std::sqrt(errors[k]);
    }
    Value out = Value::map();
    if (raw_)
      out.set(key_, Value(errors));
    else
      out.set(key_, numpy::mean(errors));
    return out;
  }

  InputChecker check_;
  std::string key_;
  ErrorKind kind_;
  bool raw_;
  Rows rows_;
};

}  // namespace tally::regression
