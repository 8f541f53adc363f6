// PSNR: peak signal-to-noise ratio of images, against a peak of 255.
//
// Formula. Each image (each frame of a video) is reordered to HWC, cast to float32 and then
// float64, optionally converted to BasicSR's Y channel, and cropped by crop_border pixels on
// every side (mmeval's reorder_and_crop); then
//   mse  = mean over pixels and channels of (gt - pred)^2
//   PSNR = 20 * log10(255 / sqrt(mse))            (+inf when mse is 0)
// A video's value is the mean over its frames; the result is the mean over samples:
//   psnr = (1/N) sum_i PSNR_i
//
// Reference: mmeval 0.2.1 mmeval.metrics.PeakSignalNoiseRatio (psnr.py): the same transforms,
// in the same float32/float64 precision, and numpy's pairwise summation of the per-sample list.
// Differences, on purpose: input_order defaults to HWC (tally's readers give HWC; mmeval's
// default is CHW); an image with nothing left after the crop, shapes that differ, or NaN pixels
// are input errors (mmeval gives NaN or asserts). An infinite result (a perfect prediction) is
// written as null in the results JSON.
//
// Example: gt = 32x32 ones, pred = 32x32 twos -> mse 1 -> psnr 48.1308 (20 log10 255).
//
// State: one float64 per sample, averaged in dataset order at compute, so any number of ranks
// gives the same bits.
#include <cmath>
#include <cstdint>
#include <vector>

#include "common.hpp"

namespace tally::restoration {
namespace {

class Psnr final : public PerSampleMetric {
 public:
  explicit Psnr(const Params& p) : PerSampleMetric(p, "PSNR", "psnr") {}

 protected:
  void frame_values(const Frame& pred, const Frame& gt, std::int64_t sample,
                    std::vector<double>& out) override {
    CompensatedSum sum;
    for (std::int64_t plane = 0; plane < pred.planes; ++plane) {
      for (std::int64_t r = 0; r < pred.h; ++r) {
        load_rows(pred, gt, r, plane, sample);
        double row = 0.0;
        for (std::int64_t c = 0; c < pred.w; ++c) {
          const double d =
              row_g_[static_cast<std::size_t>(c)] - row_p_[static_cast<std::size_t>(c)];
          row += d * d;
        }
        sum.add(row);
      }
    }
    const double mse = sum.value() / static_cast<double>(pred.h * pred.w * pred.planes);
    out.push_back(mse == 0.0 ? INFINITY : 20.0 * std::log10(255.0 / std::sqrt(mse)));
  }
};

}  // namespace

ComponentInfo psnr_info() {
  return metric<Psnr>(
      "PSNR",
      "Peak signal-to-noise ratio in dB against a peak of 255: 20 log10(255 / sqrt(mse)) per "
      "image (mean over frames for a video), averaged over images. mmeval's "
      "PeakSignalNoiseRatio; key psnr (+inf, written null, when an image is reproduced exactly).",
      transform_params("PSNR"), image_inputs(), {"PeakSignalNoiseRatio"});
}

}  // namespace tally::restoration
