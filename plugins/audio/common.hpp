// Pieces the audio metrics share: reading `preds` / `target` signals into float64 rows, the
// per-signal kernels (SI-SDR, SDR) that the metrics and PermutationInvariantTraining call, the
// exactly-summed mean state, and the component infos plugin.cpp registers.
//
// Every audio metric of torchmetrics 1.9 averages one value per signal over all signals seen
// (sum / total): here the sum is exact (ExactSum, shared with the regression plugin), so any
// number of ranks and any batching give the same bits.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/exact_sum.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"
#include "tally/sdk/value.hpp"

namespace tally::audio {

inline constexpr const char* kPreds = "preds";
inline constexpr const char* kTarget = "target";

/// The most speakers a PermutationInvariantTraining sample may have: it evaluates S^2 pairs.
inline constexpr std::int64_t kMaxSpeakers = 1024;
/// The largest SDR filter_length: the solver holds an L x L matrix (4096: 128 MiB).
inline constexpr std::int64_t kMaxFilterLength = 4096;

// ---- inputs -------------------------------------------------------------------------------------

/// The signals of one sample as float64: `rows` signals of `length` values each, row-major (a
/// [T] sample is one row; [S, T], S rows; [..., T], the product of the leading sizes).
struct Signals {
  std::int64_t rows = 0, length = 0;
  std::vector<std::int64_t> shape;  // the sample's shape ([T], [S, T], ...)
  std::vector<double> preds, target;
  const double* pred_row(std::int64_t r) const {
    return preds.data() + static_cast<std::size_t>(r * length);
  }
  const double* target_row(std::int64_t r) const {
    return target.data() + static_cast<std::size_t>(r * length);
  }
};

inline std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// The preds and target of one batch, one tensor per sample (dense [N, T] / [N, S, T] rows, or a
/// ragged field of [T] / [S, T] tensors, as the wav reader gives).
class SignalBatch {
 public:
  SignalBatch(const InputChecker& check, const Batch& batch)
      : check_(check), preds_(batch, kPreds, check), target_(batch, kTarget, check) {
    if (preds_.size() != target_.size())
      check.fail(kPreds, "has " + std::to_string(preds_.size()) + " samples, '" + kTarget +
                             "' has " + std::to_string(target_.size()));
  }

  std::int64_t size() const { return preds_.size(); }

  /// Sample i (the `first`-th of this rank for messages) into `out`. `min_dims`: 1 for
  /// [..., T], 2 for [S, ..., T] (speakers first). InputError for a non-float dtype, shapes that
  /// differ, an empty time axis, NaN or infinity.
  void read(std::int64_t i, std::int64_t first, std::int64_t min_dims, Signals& out) const {
    const Tensor p = preds_[i], t = target_[i];
    const std::string where = "sample " + std::to_string(first + i);
    for (const auto& [field, x] : {std::pair{kPreds, &p}, std::pair{kTarget, &t}}) {
      if (!is_floating(x->dtype()))
        check_.fail(field, where + ": must hold float32 or float64 audio, got " + x->describe());
      if (x->dim() < min_dims)
        check_.fail(field, where + ": must be " +
                               (min_dims == 1 ? std::string("[T] (a [N, T] or [N, S, T] field)")
                                              : std::string("[S, T] (a [N, S, T] field: speakers, "
                                                            "time)")) +
                               ", got " + x->describe());
    }
    if (p.shape() != t.shape())
      check_.fail(kPreds, where + ": shape " + shape_text(p.shape()) + " differs from '" + kTarget +
                              "' " + shape_text(t.shape()) +
                              " (torchmetrics requires the same shape)");
    out.shape = p.shape();
    out.length = p.shape().back();
    if (out.length < 1) check_.fail(kPreds, where + ": has no time steps (" + p.describe() + ")");
    out.rows = p.numel() / out.length;
    load(p, kPreds, where, out.preds);
    load(t, kTarget, where, out.target);
  }

 private:
  void load(const Tensor& x, const char* field, const std::string& where,
            std::vector<double>& out) const {
    const auto n = static_cast<std::size_t>(x.numel());
    out.resize(n);
    visit_floating(x, [&](const auto* v) {
      for (std::size_t k = 0; k < n; ++k) out[k] = static_cast<double>(v[k]);
    });
    for (std::size_t k = 0; k < n; ++k)
      if (!std::isfinite(out[k]))
        check_.fail(field, where + ", time step " +
                               std::to_string(k % static_cast<std::size_t>(x.shape().back())) +
                               ": " + (std::isnan(out[k]) ? "NaN" : "infinity") +
                               " (audio must be finite)");
  }

  const InputChecker& check_;
  PerSample preds_, target_;
};

// ---- kernels (kernels.cpp)
// ------------------------------------------------------------------------

/// torchmetrics' scale_invariant_signal_distortion_ratio of one signal pair of n samples, in
/// float64 (eps = 2^-52, float64's machine epsilon).
double si_sdr(const double* preds, const double* target, std::int64_t n, bool zero_mean);

struct SdrOptions {
  std::optional<std::int64_t> use_cg_iter;
  std::int64_t filter_length = 512;
  bool zero_mean = false;
  std::optional<double> load_diag;
};

/// torchmetrics' signal_distortion_ratio of one signal pair, in float64. nullopt when the
/// Toeplitz system is singular (torch.linalg.solve raises there).
std::optional<double> sdr(const double* preds, const double* target, std::int64_t n,
                          const SdrOptions& o);

// ---- the mean over signals
// ------------------------------------------------------------------------

/// The sum of the per-signal values, exact, and their count; infinities and NaNs counted apart
/// (ExactSum takes finite values), so that the mean is torch's: NaN if any value is NaN or both
/// infinities occur, else +-inf if one does. Across ranks: the accumulator added exactly (merge),
/// the counts summed.
struct MeanState {
  ExactSums total;  // one accumulator (ExactSum::kWords words), or empty
  std::int64_t n = 0, pos_inf = 0, neg_inf = 0, nans = 0;
  std::int64_t samples = 0;  // samples read (sample numbers in messages)
  TALLY_STATE(merge(total), sum(n), sum(pos_inf), sum(neg_inf), sum(nans), sum(samples))
};

/// Adds `values` to `s`.
inline void add_values(MeanState& s, std::span<const double> values, const std::string& owner) {
  ExactSum acc;
  if (!s.total.empty()) {
    // A state restored from a checkpoint: as checked as one from another rank.
    if (s.total.size() != ExactSum::kWords || !s.total.normalized())
      tally::throw_owned<RuntimeError>(
          owner, std::string("the restored state is corrupt: its sum is not one normalized "
                             "accumulator"));
    acc.merge(s.total.data());
  }
  for (const double v : values) {
    if (std::isnan(v))
      ++s.nans;
    else if (std::isinf(v))
      ++(v > 0 ? s.pos_inf : s.neg_inf);
    else
      acc.add(v);
  }
  acc.normalize();
  s.total.assign(acc.words().begin(), acc.words().end());
  s.n += static_cast<std::int64_t>(values.size());
}

/// The mean of the values (torchmetrics' sum / total; NaN without any, as 0 / 0 is there).
inline double mean_of(const MeanState& s, const std::string& owner) {
  if (s.total.mismatched() ||
      (!s.total.empty() && (s.total.size() != ExactSum::kWords || !s.total.normalized())) ||
      s.pos_inf + s.neg_inf + s.nans > s.n)
    tally::throw_owned<RuntimeError>(owner, std::string("the state is corrupt"));
  if (s.n == 0 || s.nans > 0 || (s.pos_inf > 0 && s.neg_inf > 0))
    return std::numeric_limits<double>::quiet_NaN();
  if (s.pos_inf > 0) return std::numeric_limits<double>::infinity();
  if (s.neg_inf > 0) return -std::numeric_limits<double>::infinity();
  ExactSum acc;
  if (!s.total.empty()) acc.merge(s.total.data());
  return acc.value() / static_cast<double>(s.n);
}

/// Which signals a metric reads: any [N, T] / [N, S, T] (the default), or always S speakers.
struct SignalInputs {
  bool speakers = false;  // [N, S, T] with S speakers (PIT)
};

inline std::vector<InputSpec> signal_inputs(SignalInputs what = {}) {
  if (what.speakers)
    return {InputSpec{kPreds,
                      "Estimated signals [N, S, T] (S speakers), float32 or float64; or one [S, T] "
                      "tensor per sample (the wav reader's multi-channel files).",
                      true},
            InputSpec{kTarget, "Reference signals, the shape of preds.", true}};
  return {InputSpec{kPreds,
                    "Estimated signals [N, T] or [N, S, T], float32 or float64; or one [T] / "
                    "[S, T] tensor per sample (the wav reader's files). Computed in float64.",
                    true},
          InputSpec{kTarget, "Reference signals, the shape of preds.", true}};
}

inline ParamSpec zero_mean_param() {
  return param("zero_mean", ParamType::Bool,
               "Subtract each signal's mean (over time) from preds and target first.")
      .def(false);
}

/// The SDR parameters (SignalDistortionRatio's, and PermutationInvariantTraining's for
/// metric_func signal_distortion_ratio).
inline std::vector<ParamSpec> sdr_params() {
  return {
      param("use_cg_iter", ParamType::Int,
            "If set, solve for the distortion filter with this many iterations of "
            "fast-bss-eval's preconditioned conjugate gradient (as torchmetrics does when "
            "fast-bss-eval is installed) instead of Gaussian elimination.")
          .optional()
          .nullable(),
      param("filter_length", ParamType::Int, "The length of the distortion filter allowed.")
          .def(512),
      param("load_diag", ParamType::Float,
            "If set, added to the diagonal of the Toeplitz system (stabilises silent targets).")
          .optional()
          .nullable(),
  };
}

inline SdrOptions read_sdr_options(const Params& p, bool zero_mean) {
  SdrOptions o;
  o.zero_mean = zero_mean;
  if (p.has("filter_length"))  // PermutationInvariantTraining's is unset unless given: 512
    o.filter_length = p.get_size("filter_length", 1, kMaxFilterLength,
                                 "the solver holds a filter_length^2 matrix");
  if (p.has("use_cg_iter")) o.use_cg_iter = p.get_size("use_cg_iter", 1, 100000);
  if (p.has("load_diag")) {
    o.load_diag = p.get_double("load_diag");
    if (!std::isfinite(*o.load_diag)) p.fail("load_diag", "must be a finite number");
  }
  return o;
}

}  // namespace tally::audio

namespace tally::audio {

/// The metrics that average one value per signal pair (SI-SDR, SI-SNR, SDR, and PIT's one value
/// per sample): update() reads each sample and adds the values signal_values() gives.
class SignalMeanMetric : public TypedMetric<MeanState> {
 public:
  SignalMeanMetric(const Params& p, const char* type, std::string key, std::int64_t min_dims)
      : check_(p.owner_or(type)), key_(std::move(key)), min_dims_(min_dims) {}

 protected:
  /// The values of one sample's signals (appended to `out`). `where` names the sample.
  virtual void signal_values(const Signals& s, const std::string& where,
                             std::vector<double>& out) const = 0;

  void update(MeanState& state, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    const SignalBatch signals(check_, batch);
    values_.clear();
    for (std::int64_t i = 0; i < signals.size(); ++i) {
      signals.read(i, state.samples, min_dims_, sample_);
      signal_values(sample_, "sample " + std::to_string(state.samples + i), values_);
    }
    add_values(state, values_, check_.owner());
    state.samples += signals.size();
  }

  Value compute(const MeanState& s) const override {
    Value out = Value::map();
    out.set(key_, mean_of(s, check_.owner()));
    return out;
  }

  InputChecker check_;
  std::string key_;
  std::int64_t min_dims_;
  Signals sample_;
  std::vector<double> values_;
};

}  // namespace tally::audio
