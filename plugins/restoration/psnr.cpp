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
// uint8 images without the Y conversion take an integer path: the squared differences summed
// exactly in integers (the same double as mmeval's float64 sum, whose partial sums are integers
// below 2^53), 16 pixels per AVX2 step.
//
// State: one float64 per sample, concatenated across ranks in rank order and averaged in dataset
// order at compute, so any number of ranks gives the same bits.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "common.hpp"
#include "tally/sdk/simd.hpp"

namespace tally::restoration {
namespace {

/// sum over [0, n) of (a_i - b_i)^2, exactly. uint32 lanes hold blocks of 2^15 pixels (at most
/// 2^15 * 255^2 < 2^32 each); the loop vectorises to 16-bit differences and pairwise 32-bit
/// multiply-adds, compiled for baseline x86-64 and for AVX2 (TALLY_SIMD_CLONES).
TALLY_SIMD_CLONES std::uint64_t squared_difference_u8(const std::uint8_t* a, const std::uint8_t* b,
                                                      std::int64_t n) {
  std::uint64_t total = 0;
  for (std::int64_t base = 0; base < n; base += std::int64_t{1} << 15) {
    const std::int64_t m = std::min(n - base, std::int64_t{1} << 15);
    std::uint32_t block = 0;
#pragma omp simd reduction(+ : block)
    for (std::int64_t i = 0; i < m; ++i) {
      const int d = static_cast<int>(a[base + i]) - static_cast<int>(b[base + i]);
      block += static_cast<std::uint32_t>(d * d);
    }
    total += block;
  }
  return total;
}

class Psnr final : public PerSampleMetric {
 public:
  explicit Psnr(const Params& p) : PerSampleMetric(p, "PSNR", "psnr") {}

 protected:
  void frame_values(const Frame& pred, const Frame& gt, std::int64_t sample,
                    std::vector<double>& out) override {
    // The integer sum is the same double as the float one: every partial sum there is an integer
    // below 2^53, so exact, and so is this one (255^2 per element: below 2^53 for 1.3e11).
    const auto total = integer_sum(pred, gt);
    const double squares = total ? static_cast<double>(*total) : float_sum(pred, gt, sample);
    const double mse = squares / static_cast<double>(pred.h * pred.w * pred.planes);
    out.push_back(mse == 0.0 ? INFINITY : 20.0 * std::log10(255.0 / std::sqrt(mse)));
  }

 private:
  /// The sum of squared differences of two frames in mmeval's float64 values (any dtype, any
  /// layout, the Y conversion).
  double float_sum(const Frame& pred, const Frame& gt, std::int64_t sample) {
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
    return sum.value();
  }

  /// The sum of squared differences of two uint8 frames without the Y conversion, as an
  /// integer, where each row of the frame is contiguous (HW, CHW, or HWC with every channel);
  /// nullopt otherwise (the float path handles any layout and dtype).
  std::optional<std::uint64_t> integer_sum(const Frame& pred, const Frame& gt) const {
    if (pred.dtype != DType::U8 || gt.dtype != DType::U8 || t_.to_y) return std::nullopt;
    const auto* p = static_cast<const std::uint8_t*>(pred.data);
    const auto* g = static_cast<const std::uint8_t*>(gt.data);
    std::uint64_t total = 0;
    if (pred.sw == 1) {  // HW or CHW: each (plane, row) is contiguous
      for (std::int64_t plane = 0; plane < pred.planes; ++plane)
        for (std::int64_t r = 0; r < pred.h; ++r) {
          const std::int64_t at = plane * pred.sc + r * pred.sh;
          total += squared_difference_u8(p + at, g + at, pred.w);
        }
      return total;
    }
    if (pred.sc == 1 && pred.sw == pred.c) {  // HWC: a row of every channel is contiguous
      for (std::int64_t r = 0; r < pred.h; ++r)
        total += squared_difference_u8(p + r * pred.sh, g + r * pred.sh, pred.w * pred.c);
      return total;
    }
    return std::nullopt;
  }
};

}  // namespace

ComponentInfo psnr_info() {
  return with_results(
      metric<Psnr>(
          "PSNR",
          "Peak signal-to-noise ratio in dB against a peak of 255: 20 log10(255 / sqrt(mse)) per "
          "image (mean over frames for a video), averaged over images. mmeval's "
          "PeakSignalNoiseRatio; key psnr (+inf, written null, when an image is reproduced "
          "exactly).",
          transform_params("PSNR"), image_inputs(), {"PeakSignalNoiseRatio"}),
      {{"psnr", Better::Higher, Plot::None, "dB, mean over images"}});
}
TALLY_COMPONENT(psnr_info)

}  // namespace tally::restoration
