// ScaleInvariantSignalDistortionRatio (SI-SDR): how close an estimated signal is to the reference,
// up to a gain (Le Roux et al., "SDR - half-baked or well done?", 2019).
//
// Formula. Per signal pair (p, t) over time, eps = 2^-52 (float64's machine epsilon), after
// subtracting each signal's mean when zero_mean:
//   alpha  = (sum p t + eps) / (sum t^2 + eps)
//   si_sdr = 10 log10((sum (alpha t)^2 + eps) / (sum (alpha t - p)^2 + eps))
// and the result is the mean over every signal ([N, T]: N values; [N, S, T]: N S values).
//
// Reference: torchmetrics 1.9.0
// torchmetrics.audio.ScaleInvariantSignalDistortionRatio(zero_mean=...).set_dtype(torch.float64),
// update(preds.double(), target.double()), compute(). Float32 inputs are computed in float64 (with
// float64's eps, where torchmetrics would use float32's on float32 tensors).
//
// Example: preds [2.5, 0, 2, 8], target [3, -0.5, 2, 7] -> 18.4030 (torchmetrics' docstring).
//
// State: the exact sum of the per-signal values (ExactSum) and their count (MeanState in
// common.hpp): shard-independent bits.
#include "common.hpp"

namespace tally::audio {
namespace {

class ScaleInvariantSignalDistortionRatio final : public SignalMeanMetric {
 public:
  explicit ScaleInvariantSignalDistortionRatio(const Params& p)
      : SignalMeanMetric(p, "ScaleInvariantSignalDistortionRatio",
                         "scale_invariant_signal_distortion_ratio", 1),
        zero_mean_(p.get_bool("zero_mean")) {}

 protected:
  void signal_values(const Signals& s, const std::string&,
                     std::vector<double>& out) const override {
    for (std::int64_t r = 0; r < s.rows; ++r)
      out.push_back(si_sdr(s.pred_row(r), s.target_row(r), s.length, zero_mean_));
  }

 private:
  bool zero_mean_;
};

}  // namespace

ComponentInfo si_sdr_info() {
  return with_results(
      metric<ScaleInvariantSignalDistortionRatio>(
          "ScaleInvariantSignalDistortionRatio",
          "Scale-invariant signal-to-distortion ratio (SI-SDR, dB), the mean over signals; key "
          "scale_invariant_signal_distortion_ratio. Reference: torchmetrics 1.9.0 "
          "torchmetrics.audio.ScaleInvariantSignalDistortionRatio(zero_mean=...) in float64.",
          {zero_mean_param()}, signal_inputs(), {"SI_SDR", "SISDR"}),
      {{"scale_invariant_signal_distortion_ratio", Better::Higher, Plot::None,
        "mean SI-SDR over signals, dB"}});
}
TALLY_COMPONENT(si_sdr_info)

}  // namespace tally::audio
