// Pieces the regression metrics share: reading pred / target / sample_weight into float64
// rows, the exactly-accumulated state of RegressionMAE, RegressionMSE and RMSE (numpy's mean of the
// per-output values: tally/sdk/numpy_math.hpp), and the component infos plugin.cpp registers.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/exact_sum.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/numpy_math.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"

#include "ranks.hpp"

namespace tally::regression {

inline constexpr const char* kPred = "pred";
inline constexpr const char* kTarget = "target";
inline constexpr const char* kWeight = "sample_weight";

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

/// The multioutput choices a metric offers beyond uniform_average and raw_values.
struct MultioutputChoices {
  bool variance_weighted = false;  // scikit-learn's variance_weighted (r2_score)
};

inline ParamSpec multioutput_param(MultioutputChoices offers = {}) {
  const bool variance_weighted = offers.variance_weighted;
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
        check_.fail_runtime(std::string("the restored state is corrupt: its sums are not ") +
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
      check_.fail_runtime(std::string("the state is corrupt"));
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

// ---- the torchmetrics-named metrics ---------------------------------------------------------

inline constexpr const char* kPreds = "preds";

/// How a metric lays out its two inputs (always the same shape as each other).
enum class Layout {
  Outputs,  // [N] or [N, D]: D outputs (torchmetrics' num_outputs)
  Flat,     // [N, ...]: every element alike (a sum over all of them)
  Matrix,   // [N, D]: one D-vector a sample
};

/// A double as the shortest text that reads back as it (std::to_chars), for messages.
inline std::string num(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

/// Two inputs of one batch as float64, row-major: n rows of cols values.
struct Pair {
  std::int64_t n = 0, cols = 1;
  std::vector<double> a, b;
};

/// Which values an input may hold besides finite ones.
enum class Allow { Finite, NegInf };

/// t as float64 into out; InputError naming the sample (and output) of the first NaN, or of an
/// infinity where `allow` does not allow it.
inline void read_checked(const InputChecker& check, const Tensor& t, const char* field,
                         std::int64_t first, std::int64_t cols, Allow allow,
                         std::vector<double>& out) {
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
  for (std::int64_t k = 0; k < n; ++k) {
    const double v = out[static_cast<std::size_t>(k)];
    if (std::isfinite(v) || (allow == Allow::NegInf && v == -HUGE_VAL)) continue;
    check.fail(field, "sample " + std::to_string(first + k / cols) +
                          (cols > 1 ? ", value " + std::to_string(k % cols) : std::string()) +
                          ": " +
                          (std::isnan(v) ? "NaN"
                           : v > 0       ? "+infinity"
                                         : "-infinity") +
                          (allow == Allow::NegInf ? " (expected finite values or -inf)"
                                                  : " (expected finite values)"));
  }
}

/// Fields fa and fb of `batch` (same shape, laid out as `layout`) into r. `first`: the index of
/// the batch's first sample, for messages.
inline void read_pair(const InputChecker& check, const Batch& batch, const char* fa, const char* fb,
                      Layout layout, std::int64_t first, Pair& r, Allow allow = Allow::Finite) {
  const Tensor& a = check.tensor(batch, fa);
  const Tensor& b = check.tensor(batch, fb);
  for (const auto& [field, x] : {std::pair{fa, &a}, std::pair{fb, &b}}) {
    if (layout == Layout::Outputs && (x->dim() < 1 || x->dim() > 2))
      check.fail(field, "must be [N] or [N, D] (D outputs), got " + x->describe());
    if (layout == Layout::Matrix && x->dim() != 2)
      check.fail(field, "must be 2-D [N, D], got " + x->describe());
    if (layout == Layout::Flat && (x->dim() < 1 || x->dim() > 8))
      check.fail(field, "must be [N, ...] (1 to 8 dimensions), got " + x->describe());
  }
  if (a.shape() != b.shape())
    check.fail(fa, "has shape " + a.describe() + ", '" + std::string(fb) + "' has " + b.describe() +
                       ": they must have the same shape");
  r.n = a.size(0);
  r.cols = r.n > 0 ? a.numel() / r.n : 1;
  if (a.dim() >= 2 && r.n == 0) {
    r.cols = 1;
    for (std::int64_t d = 1; d < a.dim(); ++d) r.cols *= a.size(d);
  }
  if (layout != Layout::Flat && r.cols < 1)
    check.fail(fa, "has no values per sample (" + a.describe() + ")");
  read_checked(check, a, fa, first, std::max<std::int64_t>(r.cols, 1), allow, r.a);
  read_checked(check, b, fb, first, std::max<std::int64_t>(r.cols, 1), allow, r.b);
}

/// torchmetrics' num_outputs check: num_outputs 1 takes [N] or [N, 1]; num_outputs D > 1 takes
/// [N, D].
inline void check_num_outputs(const InputChecker& check, const Batch& batch,
                              std::int64_t num_outputs) {
  const Tensor& p = check.tensor(batch, kPreds);
  const std::int64_t d = p.dim() == 2 ? p.size(1) : 1;
  if (d != num_outputs)
    check.fail(kPreds, "has " + std::to_string(d) + " outputs (" + p.describe() +
                           ") but the parameter num_outputs is " + std::to_string(num_outputs));
}

inline ParamSpec num_outputs_param() {
  return param("num_outputs", ParamType::Int,
               "Number of outputs: 1 takes preds and target [N] (or [N, 1]); D > 1 takes [N, D] "
               "and gives an array of D values (torchmetrics' num_outputs).")
      .def(Value(1));
}

/// InputError when the number of values a sample differs from the earlier batches' (-1: none
/// yet); records it otherwise.
inline void check_same_cols(const InputChecker& check, std::int64_t& cols, std::int64_t now,
                            const char* field) {
  if (cols >= 0 && cols != now)
    check.fail(field, "has " + std::to_string(now) + " values a sample but " +
                          std::to_string(cols) + " in earlier samples");
  cols = now;
}

/// count accumulators kept in an ExactSums state field: loaded (a fresh state: zeros), added to,
/// and stored back normalized. `owner` names the metric in a corrupt-state message.
class SumBank {
 public:
  SumBank() = default;
  SumBank(const ExactSums& words, std::size_t count, const std::string& owner) : acc_(count) {
    if (words.empty()) return;
    if (words.mismatched() || words.size() != count * ExactSum::kWords || !words.normalized())
      tally::throw_owned<RuntimeError>(
          owner, std::string("the state is corrupt: its sums are not ") + std::to_string(count) +
                     " normalized accumulators");
    for (std::size_t k = 0; k < count; ++k) acc_[k].merge(words.data() + k * ExactSum::kWords);
  }
  ExactSum& operator[](std::size_t k) { return acc_[k]; }
  const ExactSum& operator[](std::size_t k) const { return acc_[k]; }
  std::size_t size() const { return acc_.size(); }
  void store(ExactSums& words) {
    words.resize(acc_.size() * ExactSum::kWords);
    for (std::size_t k = 0; k < acc_.size(); ++k) {
      acc_[k].normalize();
      std::copy(acc_[k].words().begin(), acc_[k].words().end(),
                words.begin() + static_cast<std::ptrdiff_t>(k * ExactSum::kWords));
    }
  }

 private:
  std::vector<ExactSum> acc_;
};

/// The state of a metric that sums per-output terms exactly: `per_output` accumulators for each
/// of `outputs` outputs (the outputs shared by every rank with samples: agree), and the number of
/// samples (summed).
struct OutputSumsState {
  ExactSums words;
  std::int64_t outputs = -1;
  std::int64_t n = 0;       // samples (rows)
  std::int64_t values = 0;  // values (elements: rows times the values a row)
  TALLY_STATE(merge(words), agree(outputs, -1), sum(n), sum(values))
};

/// A sum of per-sample terms that may be NaN or infinite (a KL divergence against a zero
/// probability, a cosine with a zero vector): the finite terms exactly, the others counted.
struct SpecialCounts {
  std::int64_t nan = 0, pos_inf = 0, neg_inf = 0;
  void add(double v) {
    if (std::isnan(v))
      ++nan;
    else if (v > 0)
      ++pos_inf;
    else
      ++neg_inf;
  }
  /// The total of the finite sum `finite` and the counted terms, as IEEE addition would give it.
  double total(double finite) const {
    if (nan > 0 || (pos_inf > 0 && neg_inf > 0)) return std::numeric_limits<double>::quiet_NaN();
    if (pos_inf > 0) return HUGE_VAL;
    if (neg_inf > 0) return -HUGE_VAL;
    return finite;
  }
};

/// A result that is one value per output: a number for one output (torchmetrics squeezes), an
/// array for several.
inline Value per_output(const std::vector<double>& v, bool array) {
  if (!array && v.size() == 1) return Value(v[0]);
  return Value(v);
}

/// The most samples a metric that keeps every sample (Spearman, Kendall) ranks: indices fit 32
/// bits and every pair count and rank product fits int64 / int128.
inline constexpr std::int64_t kMaxRanked = std::int64_t{1} << 31;

// ---- PearsonCorrCoef and ConcordanceCorrCoef -------------------------------------------------

/// Per output: the exact sums of x, y, x^2, y^2, x y (x = preds, y = target; products split
/// exactly by fma), and the least and greatest x and y. Across ranks: the sums added exactly
/// (merge), min/max element-wise, the sample count summed: order-free, so any sharding and
/// batching gives the same bits, and the state does not grow with N.
struct MomentsState {
  ExactSums words;  // 5 accumulators an output: Sx, Sy, Sxx, Syy, Sxy
  PackedVector<double> lo_x, hi_x, lo_y, hi_y;
  std::int64_t n = 0;
  TALLY_STATE(merge(words), min(lo_x), max(hi_x), min(lo_y), max(hi_y), sum(n))
};

/// The centred moments of one output, each from the exact sums, rounded once (centered_sum).
struct Moments {
  double mean_x, mean_y;  // Sx / n, Sy / n
  double sxx, syy, sxy;   // sum (x - xbar)^2, sum (y - ybar)^2, sum (x - xbar)(y - ybar)
  double dev_x, dev_y;    // max |x - xbar|, max |y - ybar|
  double mean_diff;       // xbar - ybar, from Sx - Sy
};

/// The base of PearsonCorrCoef and ConcordanceCorrCoef: the MomentsState and its update;
/// compute() gets every output's Moments.
class MomentsMetric : public TypedMetric<MomentsState> {
 public:
  MomentsMetric(const Params& p, const char* type)
      : check_(p.owner_or(type)), outputs_(p.get_size("num_outputs")) {}

 protected:
  // Inputs are bounded so that no product of the state (x y, n xbar ybar) overflows float64.
  static constexpr double kMaxAbs = 1e100;

  void update(MomentsState& s, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    read_pair(check_, batch, kPreds, kTarget, Layout::Outputs, s.n, rows_);
    check_num_outputs(check_, batch, outputs_);
    const auto d = static_cast<std::size_t>(outputs_);
    SumBank acc(s.words, 5 * d, check_.owner());
    if (s.lo_x.empty()) {
      s.lo_x.assign(d, HUGE_VAL), s.lo_y.assign(d, HUGE_VAL);
      s.hi_x.assign(d, -HUGE_VAL), s.hi_y.assign(d, -HUGE_VAL);
    }
    if (s.lo_x.size() != d || s.hi_x.size() != d || s.lo_y.size() != d || s.hi_y.size() != d)
      check_.fail_runtime(std::string("the restored state is corrupt"));
    for (std::int64_t i = 0; i < rows_.n; ++i) {
      for (std::size_t k = 0; k < d; ++k) {
        const auto at = static_cast<std::size_t>(i) * d + k;
        const double x = rows_.a[at], y = rows_.b[at];
        if (std::abs(x) > kMaxAbs || std::abs(y) > kMaxAbs)
          check_.fail(std::abs(x) > kMaxAbs ? kPreds : kTarget,
                      "sample " + std::to_string(s.n + i) + ": " +
                          num(std::abs(x) > kMaxAbs ? x : y) +
                          " has a magnitude above 1e100 (its products would overflow float64)");
        ExactSum* a = &acc[5 * k];
        a[0].add(x);
        a[1].add(y);
        add_product(a[2], x, x);
        add_product(a[3], y, y);
        add_product(a[4], x, y);
        s.lo_x[k] = std::min(s.lo_x[k], x), s.hi_x[k] = std::max(s.hi_x[k], x);
        s.lo_y[k] = std::min(s.lo_y[k], y), s.hi_y[k] = std::max(s.hi_y[k], y);
      }
    }
    acc.store(s.words);
    s.n += rows_.n;
  }

  /// Every output's moments; InputError without samples.
  std::vector<Moments> moments(const MomentsState& s) const {
    const auto d = static_cast<std::size_t>(outputs_);
    if (s.n == 0 && s.words.empty()) check_.fail("no samples");
    if (s.words.mismatched() || s.words.size() != 5 * d * ExactSum::kWords || s.lo_x.size() != d ||
        s.hi_x.size() != d || s.lo_y.size() != d || s.hi_y.size() != d || s.n <= 0)
      check_.fail_runtime(std::string("the state is corrupt"));
    const SumBank acc(s.words, 5 * d, check_.owner());
    std::vector<Moments> out(d);
    const auto dn = static_cast<double>(s.n);
    for (std::size_t k = 0; k < d; ++k) {
      const ExactSum* a = &acc[5 * k];
      Moments& m = out[k];
      m.mean_x = a[0].value() / dn;
      m.mean_y = a[1].value() / dn;
      m.sxx = std::max(0.0, centered_sum(a[2], a[0], a[0], s.n));
      m.syy = std::max(0.0, centered_sum(a[3], a[1], a[1], s.n));
      m.sxy = centered_sum(a[4], a[0], a[1], s.n);
      m.dev_x = std::max(s.hi_x[k] - m.mean_x, m.mean_x - s.lo_x[k]);
      m.dev_y = std::max(s.hi_y[k] - m.mean_y, m.mean_y - s.lo_y[k]);
      m.mean_diff = mean_difference(a[0], a[1], s.n);
    }
    return out;
  }

  /// torchmetrics' Pearson r from one output's moments: NaN when a variance, scaled by the
  /// largest squared deviation, is below sqrt(float64 eps) or not finite (a constant input, fewer
  /// than 2 samples), else sxy / sqrt(sxx syy) clamped to [-1, 1].
  static double pearson(const Moments& m, std::int64_t n) {
    const double nm1 = static_cast<double>(n) - 1.0;
    const double vx = m.sxx / nm1 * std::pow(m.dev_x, -2.0);
    const double vy = m.syy / nm1 * std::pow(m.dev_y, -2.0);
    const double cxy = m.sxy / nm1 / (m.dev_x * m.dev_y);
    const double bound = std::sqrt(std::numeric_limits<double>::epsilon());
    if (!(vx >= bound) || !(vy >= bound) || !std::isfinite(vx) || !std::isfinite(vy) ||
        !std::isfinite(cxy))
      return std::numeric_limits<double>::quiet_NaN();
    return std::clamp(m.sxy / (std::sqrt(m.sxx) * std::sqrt(m.syy)), -1.0, 1.0);
  }

  InputChecker check_;
  std::int64_t outputs_;
  Pair rows_;
};

inline std::vector<InputSpec> preds_target_inputs(const char* what) {
  return {InputSpec{kPreds, std::string("Predictions ") + what + ", float or integer.", true},
          InputSpec{kTarget, "True values, the shape of preds.", true}};
}

// ---- SpearmanCorrCoef and KendallRankCorrCoef -----------------------------------------------

/// Every sample's preds and target (row-major [n, outputs], float64), concatenated across ranks
/// in rank order: rank statistics need all pairs. Bounded by kMaxRanked samples.
struct RankedState {
  PackedVector<double> preds, target;
  TALLY_STATE(concat(preds), concat(target))
};

/// The base of the rank correlations: keeps the samples; compute() gets them per output.
class RankedMetric : public TypedMetric<RankedState> {
 public:
  RankedMetric(const Params& p, const char* type)
      : check_(p.owner_or(type)), outputs_(p.get_size("num_outputs")) {}

 protected:
  void update(RankedState& s, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    const auto d = static_cast<std::size_t>(outputs_);
    const auto first = static_cast<std::int64_t>(s.preds.size() / d);
    read_pair(check_, batch, kPreds, kTarget, Layout::Outputs, first, rows_);
    check_num_outputs(check_, batch, outputs_);
    if (rows_.n > kMaxRanked - first)
      check_.fail(kPreds, "brings the samples to " + std::to_string(first + rows_.n) +
                              ", more than this metric ranks (" + std::to_string(kMaxRanked) + ")");
    s.preds.insert(s.preds.end(), rows_.a.begin(), rows_.a.end());
    s.target.insert(s.target.end(), rows_.b.begin(), rows_.b.end());
  }

  /// The number of samples; InputError without any, RuntimeError for a corrupt state.
  std::size_t samples(const RankedState& s) const {
    const auto d = static_cast<std::size_t>(outputs_);
    if (s.preds.size() != s.target.size() || s.preds.size() % d != 0)
      check_.fail_runtime(std::string("the state is corrupt"));
    const std::size_t n = s.preds.size() / d;
    if (n == 0) check_.fail("no samples");
    if (n > static_cast<std::size_t>(kMaxRanked))
      check_.fail("has " + std::to_string(n) + " samples, more than it ranks (" +
                  std::to_string(kMaxRanked) + ")");
    return n;
  }

  InputChecker check_;
  std::int64_t outputs_;
  Pair rows_;
};

// ---- metrics of exact sums of per-value terms -------------------------------------------------

/// The base of the metrics whose state is a few exact sums of per-value terms (OutputSumsState):
/// MeanAbsolutePercentageError, ..., RelativeSquaredError. Layout::Flat sums every value of the
/// batch into one set of `terms` accumulators; Layout::Outputs keeps a set per output (column).
class SumsMetric : public TypedMetric<OutputSumsState> {
 public:
  struct Spec {
    const char* type;
    const char* a;  // the first input (preds)
    const char* b;  // the second (target or targets)
    Layout layout;
    std::size_t terms;  // accumulators per output
  };
  /// num_outputs: the outputs the data must have (torchmetrics' parameter), or 0: any (the
  /// number of columns, the same in every batch).
  SumsMetric(const Params& p, Spec spec, std::int64_t num_outputs = 0)
      : check_(p.owner_or(spec.type)), spec_(spec), num_outputs_(num_outputs) {}

 protected:
  /// Adds the terms of one value pair (x from input a, y from input b) to acc[0 .. terms);
  /// `sample` and `col` locate it for messages.
  virtual void add_terms(double x, double y, ExactSum* acc, std::int64_t sample,
                         std::int64_t col) const = 0;

  void update(OutputSumsState& s, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    read_pair(check_, batch, spec_.a, spec_.b, spec_.layout, s.n, rows_);
    if (num_outputs_ > 0) check_num_outputs(check_, batch, num_outputs_);
    const bool flat = spec_.layout == Layout::Flat;
    const std::int64_t d = flat ? 1 : rows_.cols;
    if (s.outputs >= 0 && s.outputs != d)
      check_.fail(spec_.a, "has " + std::to_string(d) + " outputs but " +
                               std::to_string(s.outputs) + " in earlier samples");
    const auto t = spec_.terms;
    SumBank acc(s.words, t * static_cast<std::size_t>(d), check_.owner());
    for (std::int64_t i = 0; i < rows_.n; ++i)
      for (std::int64_t c = 0; c < rows_.cols; ++c) {
        const auto at = static_cast<std::size_t>(i * rows_.cols + c);
        add_terms(rows_.a[at], rows_.b[at], &acc[flat ? 0 : t * static_cast<std::size_t>(c)],
                  s.n + i, c);
      }
    acc.store(s.words);
    s.outputs = d;
    s.n += rows_.n;
    s.values += rows_.n * rows_.cols;
  }

  /// The accumulators of the merged state; InputError without samples.
  SumBank sums(const OutputSumsState& s) const {
    if (s.n == 0 && s.words.empty() && s.outputs < 0) check_.fail("no samples");
    if (s.outputs < 1 || s.outputs >= (std::int64_t{1} << 40) || s.words.mismatched() ||
        s.words.size() != spec_.terms * static_cast<std::size_t>(s.outputs) * ExactSum::kWords)
      check_.fail_runtime(std::string("the state is corrupt"));
    return SumBank(s.words, spec_.terms * static_cast<std::size_t>(s.outputs), check_.owner());
  }

  /// x + y into acc, or InputError when the term is not finite (it overflowed float64).
  void add_finite(ExactSum& acc, double term, const char* what, std::int64_t sample) const {
    if (!std::isfinite(term))
      check_.fail(spec_.a, "sample " + std::to_string(sample) + ": " + what + " is " + num(term) +
                               " (it overflows float64)");
    acc.add(term);
  }

  /// InputError unless |x| and |y| are at most 1e100 (the products of centred sums fit float64).
  void check_magnitude(double x, double y, std::int64_t sample) const {
    if (std::abs(x) > 1e100 || std::abs(y) > 1e100)
      check_.fail(std::abs(x) > 1e100 ? spec_.a : spec_.b,
                  "sample " + std::to_string(sample) + ": " + num(std::abs(x) > 1e100 ? x : y) +
                      " has a magnitude above 1e100 (its products would overflow float64)");
  }

  InputChecker check_;
  Spec spec_;
  std::int64_t num_outputs_;
  Pair rows_;
};

/// A single result value.
inline Value result(const char* key, const Value& v) {
  Value out = Value::map();
  out.set(key, v);
  return out;
}

/// torchmetrics' epsilon of the percentage errors (MAPE, SMAPE, WMAPE): 1.17e-06.
inline constexpr double kPercentEps = 1.17e-06;

// ---- CosineSimilarity and KLDivergence: one value a sample, then a reduction -----------------

/// Per-sample values reduced by sum or mean (the exact sum of the finite ones, the others
/// counted, and the number of samples), or kept, every one, for reduction "none" (concatenated
/// in rank order). Across ranks: exact merge, sums, concat, and the values a sample agreed.
struct RowValuesState {
  ExactSums words;  // one accumulator: the finite values
  std::int64_t nan = 0, pos_inf = 0, neg_inf = 0;
  std::int64_t n = 0;
  std::int64_t cols = -1;       // values a sample (CosineSimilarity: the same in every batch)
  PackedVector<double> values;  // reduction "none"
  TALLY_STATE(merge(words), sum(nan), sum(pos_inf), sum(neg_inf), sum(n), agree(cols, -1),
              concat(values))
};

/// The base of CosineSimilarity and KLDivergence: reads the [N, D] inputs a and b, computes one
/// value a row (row_value), and reduces them.
class RowValuesMetric : public TypedMetric<RowValuesState> {
 public:
  /// `same_cols`: a and b must have as many columns (rows compared element by element).
  struct Rows {
    const char* a;
    const char* b;
    Allow allow = Allow::Finite;
    bool same_cols = false;
  };
  RowValuesMetric(const Params& p, const char* type, Rows rows)
      : check_(p.owner_or(type)),
        a_(rows.a),
        b_(rows.b),
        allow_(rows.allow),
        same_cols_(rows.same_cols),
        reduction_(p.get_string("reduction")) {}

 protected:
  virtual double row_value(const double* a, const double* b, std::size_t d,
                           std::int64_t sample) const = 0;

  void update(RowValuesState& s, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    read_pair(check_, batch, a_, b_, Layout::Matrix, s.n, rows_, allow_);
    if (same_cols_) check_same_cols(check_, s.cols, rows_.cols, a_);
    const auto d = static_cast<std::size_t>(rows_.cols);
    const bool keep = reduction_ == "none";
    SumBank acc;
    if (!keep) acc = SumBank(s.words, 1, check_.owner());
    SpecialCounts special{s.nan, s.pos_inf, s.neg_inf};
    for (std::int64_t i = 0; i < rows_.n; ++i) {
      const auto at = static_cast<std::size_t>(i) * d;
      const double v = row_value(rows_.a.data() + at, rows_.b.data() + at, d, s.n + i);
      if (keep)
        s.values.push_back(v);
      else if (std::isfinite(v))
        acc[0].add(v);
      else
        special.add(v);
    }
    if (!keep) acc.store(s.words);
    s.nan = special.nan, s.pos_inf = special.pos_inf, s.neg_inf = special.neg_inf;
    s.n += rows_.n;
  }

  /// The reduced values: an array ("none"), their sum, or their mean.
  Value reduce(const RowValuesState& s) const {
    if (s.n == 0 && s.values.empty() && s.words.empty()) check_.fail("no samples");
    if (reduction_ == "none") {
      if (static_cast<std::int64_t>(s.values.size()) != s.n)
        check_.fail_runtime(std::string("the state is corrupt"));
      return Value(std::vector<double>(s.values.begin(), s.values.end()));
    }
    if (s.words.mismatched() || s.words.size() != ExactSum::kWords || s.n <= 0)
      check_.fail_runtime(std::string("the state is corrupt"));
    const SumBank acc(s.words, 1, check_.owner());
    const SpecialCounts special{s.nan, s.pos_inf, s.neg_inf};
    const double sum = special.total(acc[0].value());
    return Value(reduction_ == "sum" ? sum : sum / static_cast<double>(s.n));
  }

  InputChecker check_;
  const char* a_;
  const char* b_;
  Allow allow_;
  bool same_cols_;
  std::string reduction_;
  Pair rows_;
};

/// The sum of a[0..n) with Neumaier's compensation (two-sum of each addition): accurate to a few
/// ulps unless the sum cancels almost completely.
inline double compensated_sum(const double* a, std::size_t n) {
  double s = 0, c = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double t = s + a[i];
    c += std::abs(s) >= std::abs(a[i]) ? (s - t) + a[i] : (a[i] - t) + s;
    s = t;
  }
  // An infinite or NaN term: the compensation is NaN (inf - inf); the plain sum is what IEEE
  // addition (and torch) gives.
  return std::isfinite(s) ? s + c : s;
}

}  // namespace tally::regression
