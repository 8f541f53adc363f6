// SNR: signal-to-noise ratio of images.
//
// Formula. Each image (each frame of a video) is transformed as for PSNR (reorder to HWC,
// float32 cast, optional Y channel, crop), then
//   signal = mean(gt^2),  noise = mean((gt - pred)^2)
//   SNR    = 10 * log10(signal / noise)           (+inf when noise is 0 and signal is not)
// A video's value is the mean over its frames; the result is the mean over samples:
//   snr = (1/N) sum_i SNR_i
//
// Reference: mmeval 0.2.1 mmeval.metrics.SignalNoiseRatio (snr.py), the same transforms and
// precision. Differences, on purpose: input_order defaults to HWC (mmeval's default is CHW);
// shapes that differ, NaN pixels and empty crops are input errors. A perfect prediction gives
// +inf (0/0, an all-zero ground truth reproduced exactly, gives NaN), written null in JSON.
//
// Example: gt = 3x32x32 twos, pred = ones -> signal 4, noise 1 -> snr 6.0206 (10 log10 4).
//
// State: one float64 per sample, concatenated across ranks in rank order and averaged in dataset
// order at compute, so any number of ranks gives the same bits.
#include <cmath>
#include <cstdint>
#include <vector>

#include "common.hpp"

namespace tally::restoration {
namespace {

class Snr final : public PerSampleMetric {
 public:
  explicit Snr(const Params& p) : PerSampleMetric(p, "SNR", "snr") {}

 protected:
  void frame_values(const Frame& pred, const Frame& gt, std::int64_t sample,
                    std::vector<double>& out) override {
    CompensatedSum signal, noise;
    for (std::int64_t plane = 0; plane < pred.planes; ++plane) {
      for (std::int64_t r = 0; r < pred.h; ++r) {
        load_rows(pred, gt, r, plane, sample);
        double s = 0.0, n = 0.0;
        for (std::int64_t c = 0; c < pred.w; ++c) {
          const double g = row_g_[static_cast<std::size_t>(c)];
          const double d = g - row_p_[static_cast<std::size_t>(c)];
          s += g * g;
          n += d * d;
        }
        signal.add(s);
        noise.add(n);
      }
    }
    const auto count = static_cast<double>(pred.h * pred.w * pred.planes);
    out.push_back(10.0 * std::log10((signal.value() / count) / (noise.value() / count)));
  }
};

}  // namespace

ComponentInfo snr_info() {
  return with_results(
      metric<Snr>(
          "SNR",
          "Signal-to-noise ratio in dB: 10 log10(mean(gt^2) / mean((gt - pred)^2)) per image (mean "
          "over frames for a video), averaged over images. mmeval's SignalNoiseRatio; key snr.",
          transform_params("SNR"), image_inputs(), {"SignalNoiseRatio"}),
      {{"snr", Better::Higher, Plot::None, "dB, mean over images"}});
}
TALLY_COMPONENT(snr_info)

}  // namespace tally::restoration
