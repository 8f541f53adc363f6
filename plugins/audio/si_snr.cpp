// ScaleInvariantSignalNoiseRatio (SI-SNR): SI-SDR of the zero-mean signals (Luo and Mesgarani,
// "TasNet", 2018).
//
// Formula. Per signal pair, p and t with their means subtracted, eps = 2^-52:
//   alpha  = (sum p t + eps) / (sum t^2 + eps)
//   si_snr = 10 log10((sum (alpha t)^2 + eps) / (sum (alpha t - p)^2 + eps))
// and the result is the mean over every signal.
//
// Reference: torchmetrics 1.9.0
// torchmetrics.audio.ScaleInvariantSignalNoiseRatio().set_dtype(torch.float64),
// update(preds.double(), target.double()), compute() (its functional form calls
// scale_invariant_signal_distortion_ratio(preds, target, zero_mean=True)).
//
// Example: preds [2.5, 0, 2, 8], target [3, -0.5, 2, 7] -> 15.0918 (torchmetrics' docstring).
//
// State: the exact sum of the per-signal values and their count (MeanState in common.hpp).
#include "common.hpp"

namespace tally::audio {
namespace {

class ScaleInvariantSignalNoiseRatio final : public SignalMeanMetric {
 public:
  explicit ScaleInvariantSignalNoiseRatio(const Params& p)
      : SignalMeanMetric(p, "ScaleInvariantSignalNoiseRatio", "scale_invariant_signal_noise_ratio",
                         1) {}

 protected:
  void signal_values(const Signals& s, const std::string&,
                     std::vector<double>& out) const override {
    for (std::int64_t r = 0; r < s.rows; ++r)
      out.push_back(si_sdr(s.pred_row(r), s.target_row(r), s.length, true));
  }
};

}  // namespace

ComponentInfo si_snr_info() {
  return with_results(
      metric<ScaleInvariantSignalNoiseRatio>(
          "ScaleInvariantSignalNoiseRatio",
          "Scale-invariant signal-to-noise ratio (SI-SNR, dB: SI-SDR of zero-mean signals), the "
          "mean "
          "over signals; key scale_invariant_signal_noise_ratio. Reference: torchmetrics 1.9.0 "
          "torchmetrics.audio.ScaleInvariantSignalNoiseRatio() in float64.",
          {}, signal_inputs(), {"SI_SNR", "SISNR"}),
      {{"scale_invariant_signal_noise_ratio", Better::Higher, Plot::None,
        "mean SI-SNR over signals, dB"}});
}
TALLY_COMPONENT(si_snr_info)

}  // namespace tally::audio
