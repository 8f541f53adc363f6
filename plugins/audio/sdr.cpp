// SignalDistortionRatio (SDR): BSS Eval's signal-to-distortion ratio, the reference allowed a
// distortion filter of filter_length taps (Vincent et al., 2006), as fast-bss-eval and
// torchmetrics compute it.
//
// Formula. Per signal pair, in float64: p and t (their means subtracted when zero_mean) scaled to
// unit norm (norm clamped at 1e-6); r = the autocorrelation of t and b = the cross-correlation of
// t and p at lags 0..L-1 (L = filter_length; torch's circular correlation over n_fft =
// 2^ceil(log2(2T - 1)) points, so for T < L the last lags wrap); R = the symmetric Toeplitz matrix
// of r (+ load_diag on its diagonal); h solves R h = b (Gaussian elimination with partial
// pivoting, or use_cg_iter iterations of fast-bss-eval's circulant-preconditioned conjugate
// gradient); coh = b.h;
//   sdr = 10 log10(coh / (1 - coh))
// and the result is the mean over every signal.
//
// Reference: torchmetrics 1.9.0 torchmetrics.audio.SignalDistortionRatio(use_cg_iter=...,
// filter_length=..., zero_mean=..., load_diag=...).set_dtype(torch.float64),
// update(preds.double(), target.double()), compute(); with fast-bss-eval 0.1.4 installed (its
// toeplitz_conjugate_gradient for use_cg_iter; without it torchmetrics falls back to
// torch.linalg.solve). The correlations here are direct sums instead of FFTs: the same numbers to
// rounding. A silent target makes R singular: torch.linalg.solve raises, here an InputError
// (load_diag avoids it). Where coh > 1 (rounding, or wrapped lags of signals shorter than the
// filter) the value is NaN, as in torchmetrics.
//
// Example: preds [1, 2, 3, 5], target [1, 2, 3, 4], filter_length 2 -> 19.2315 (torchmetrics:
// signal_distortion_ratio(tensor([1., 2, 3, 5]).double(), tensor([1., 2, 3, 4]).double(),
// filter_length=2)).
//
// State: the exact sum of the per-signal values and their count (MeanState in common.hpp).
#include "common.hpp"

namespace tally::audio {
namespace {

class SignalDistortionRatio final : public SignalMeanMetric {
 public:
  explicit SignalDistortionRatio(const Params& p)
      : SignalMeanMetric(p, "SignalDistortionRatio", "signal_distortion_ratio", 1),
        options_(read_sdr_options(p, p.get_bool("zero_mean"))) {}

 protected:
  void signal_values(const Signals& s, const std::string& where,
                     std::vector<double>& out) const override {
    for (std::int64_t r = 0; r < s.rows; ++r) {
      const auto v = sdr(s.pred_row(r), s.target_row(r), s.length, options_);
      if (!v)
        check_.fail(kTarget, where + (s.rows > 1 ? ", signal " + std::to_string(r) : "") +
                                 ": the Toeplitz system is singular (a silent target; "
                                 "torchmetrics' torch.linalg.solve raises): set load_diag");
      out.push_back(*v);
    }
  }

 private:
  SdrOptions options_;
};

}  // namespace

ComponentInfo sdr_info() {
  auto params = sdr_params();
  params.push_back(zero_mean_param());
  return with_results(
      metric<SignalDistortionRatio>(
          "SignalDistortionRatio",
          "Signal-to-distortion ratio (SDR, dB; BSS Eval with a distortion filter of filter_length "
          "taps), the mean over signals; key signal_distortion_ratio. Reference: torchmetrics "
          "1.9.0 "
          "torchmetrics.audio.SignalDistortionRatio(use_cg_iter=..., filter_length=..., "
          "zero_mean=..., load_diag=...) in float64, with fast-bss-eval 0.1.4.",
          std::move(params), signal_inputs(), {"SDR"}),
      {{"signal_distortion_ratio", Better::Higher, Plot::None, "mean SDR over signals, dB"}});
}
TALLY_COMPONENT(sdr_info)

}  // namespace tally::audio
