// SSIM: structural similarity of images (Wang et al. 2004), Gaussian window 11x11, sigma 1.5.
//
// Formula. Each image (each frame of a video) is transformed as for PSNR (reorder to HWC,
// float32 cast, optional Y channel, crop). For each channel, with G the 11x11 Gaussian window
// (sigma 1.5, normalised), evaluated only where it lies wholly inside the image (the "valid"
// region, (H-10) x (W-10) positions):
//   mu_x = G * x,  mu_y = G * y,  s_xx = G * x^2 - mu_x^2,  s_yy = G * y^2 - mu_y^2,
//   s_xy = G * (x y) - mu_x mu_y,  C1 = (0.01 * 255)^2,  C2 = (0.03 * 255)^2
//   ssim_map = (2 mu_x mu_y + C1)(2 s_xy + C2) / ((mu_x^2 + mu_y^2 + C1)(s_xx + s_yy + C2))
//   SSIM(channel) = mean of ssim_map
// A sample's value is the mean over its frames and channels; the result is the mean over samples.
//
// References, one definition (checked equal in tests/reference/restoration.py):
//   - mmeval 0.2.1 mmeval.metrics.StructuralSimilarity (ssim.py): cv2.filter2D with the outer
//     product of cv2.getGaussianKernel(11, 1.5), cropped [5:-5, 5:-5]; the transforms of PSNR.
//   - scikit-image 0.26 skimage.metrics.structural_similarity(gaussian_weights=True, sigma=1.5,
//     use_sample_covariance=False, data_range=255, channel_axis=-1): scipy's separable Gaussian
//     (truncate 3.5: radius 5, 11 taps) over the whole image, cropped by 5 on each side before the
//     mean. On the cropped region both are the valid correlation with the same window, so the
//     two agree (to ~1e-14) on uint8/uint16 images, and on float64 images whose values are
//     float32 numbers. They part only in precision: mmeval (and tally) cast every pixel to
//     float32 first; scikit-image computes float32 images in float32 arithmetic.
// Differences from mmeval, on purpose: input_order defaults to HWC (mmeval: CHW); an image
// smaller than 11x11 after the crop is an input error (mmeval: NaN); so are NaN pixels.
//
// Computation: the window is separable, so each row is filtered horizontally once (5 products:
// x, y, x^2, y^2, x y; 11 taps, folded by symmetry) into a ring of 11 rows, and each output row
// is the vertical combination of the ring, in vector registers. Scratch buffers live in the metric
// and are reused: nothing is allocated per pixel or per image once they have grown.
//
// Example (mmeval's docstring): x = 32x32 twos, y = 32x32 ones -> 0.913062377743969.
//
// State: one float64 per sample, concatenated across ranks in rank order and averaged in dataset
// order at compute, so any number of ranks gives the same bits.
#include <cstdint>
#include <vector>

#include "common.hpp"
#include "tally/sdk/simd.hpp"

namespace tally::restoration {
namespace {

// cv2.getGaussianKernel(11, 1.5) (OpenCV 5.0 / 4.x, float64), bit for bit; symmetric.
constexpr double kG[6] = {0x1.0d956b52a1d6ep-10, 0x1.f1fe01ae5a5b5p-8, 0x1.26eb175d83f66p-5,
                          0x1.bff0fe8e98418p-4,  0x1.b43c3f52b19f3p-3, 0x1.106560aa892bfp-2};
constexpr std::int64_t kWin = 11, kRad = 5, kQ = 5;  // window, radius, filtered products
constexpr double kC1 = (0.01 * 255) * (0.01 * 255);
constexpr double kC2 = (0.03 * 255) * (0.03 * 255);

// The three loops below run over whole rows, compiled for baseline x86-64 and for AVX2
// (TALLY_SIMD_CLONES): element-wise, with the same operations in the same order in both clones
// (AVX2 without FMA), so the bits do not depend on the CPU. `omp simd`: out never overlaps the
// inputs (separate buffers), which the compiler cannot prove for 12 pointers.

/// out[c] = sum_j kG * s[c + j], j = 0..10, for c in [0, n): the valid 1-D correlation.
TALLY_SIMD_CLONES void filter_h(const double* s, double* out, std::int64_t n) {
#pragma omp simd
  for (std::int64_t c = 0; c < n; ++c) {
    const double* p = s + c;
    out[c] = kG[5] * p[5] + (kG[0] * (p[0] + p[10]) + kG[1] * (p[1] + p[9]) +
                             kG[2] * (p[2] + p[8]) + kG[3] * (p[3] + p[7]) + kG[4] * (p[4] + p[6]));
  }
}

/// out[c] = sum_i kG * rows[i][c], i = 0..10: the vertical pass of the window.
TALLY_SIMD_CLONES void filter_v(const double* const* rows, double* out, std::int64_t n) {
  const double *v0 = rows[0], *v1 = rows[1], *v2 = rows[2], *v3 = rows[3], *v4 = rows[4],
               *v5 = rows[5], *v6 = rows[6], *v7 = rows[7], *v8 = rows[8], *v9 = rows[9],
               *v10 = rows[10];
#pragma omp simd
  for (std::int64_t c = 0; c < n; ++c)
    out[c] = kG[5] * v5[c] +
             (kG[0] * (v0[c] + v10[c]) + kG[1] * (v1[c] + v9[c]) + kG[2] * (v2[c] + v8[c]) +
              kG[3] * (v3[c] + v7[c]) + kG[4] * (v4[c] + v6[c]));
}

/// The SSIM map of one output row from the filtered means and second moments.
TALLY_SIMD_CLONES void ssim_map(const double* mu1, const double* mu2, const double* f11,
                                const double* f22, const double* f12, double* out, std::int64_t n) {
  for (std::int64_t c = 0; c < n; ++c) {
    const double mu1_sq = mu1[c] * mu1[c], mu2_sq = mu2[c] * mu2[c], mu1_mu2 = mu1[c] * mu2[c];
    const double s1 = f11[c] - mu1_sq, s2 = f22[c] - mu2_sq, s12 = f12[c] - mu1_mu2;
    out[c] = ((2 * mu1_mu2 + kC1) * (2 * s12 + kC2)) / ((mu1_sq + mu2_sq + kC1) * (s1 + s2 + kC2));
  }
}

class Ssim final : public PerSampleMetric {
 public:
  explicit Ssim(const Params& p) : PerSampleMetric(p, "SSIM", "ssim") {}

 protected:
  void frame_values(const Frame& pred, const Frame& gt, std::int64_t sample,
                    std::vector<double>& out) override {
    if (pred.h < kWin || pred.w < kWin)
      check_.fail(kPred, "sample " + std::to_string(sample) + ": SSIM needs images of at least " +
                             "11x11 after the crop (its Gaussian window), got " +
                             std::to_string(pred.h) + "x" + std::to_string(pred.w));
    const std::int64_t w = pred.w, wo = w - 2 * kRad;
    const auto need = static_cast<std::size_t>(w);
    if (sq_.size() < 3 * need) sq_.resize(3 * need);
    const auto ring_size = static_cast<std::size_t>(kWin * kQ * wo);
    if (ring_.size() < ring_size) ring_.resize(ring_size);
    if (acc_.size() < static_cast<std::size_t>((kQ + 1) * wo))
      acc_.resize(static_cast<std::size_t>((kQ + 1) * wo));  // the 5 filtered rows and the map
    for (std::int64_t plane = 0; plane < pred.planes; ++plane) {
      CompensatedSum total;
      for (std::int64_t r = 0; r < pred.h; ++r) {
        load_rows(pred, gt, r, plane, sample);
        const double* x = row_p_.data();
        const double* y = row_g_.data();
        double* xx = sq_.data();
        double* yy = xx + w;
        double* xy = yy + w;
        for (std::int64_t c = 0; c < w; ++c) {
          xx[c] = x[c] * x[c];
          yy[c] = y[c] * y[c];
          xy[c] = x[c] * y[c];
        }
        double* slot = ring_.data() + (r % kWin) * kQ * wo;
        filter_h(x, slot, wo);
        filter_h(y, slot + wo, wo);
        filter_h(xx, slot + 2 * wo, wo);
        filter_h(yy, slot + 3 * wo, wo);
        filter_h(xy, slot + 4 * wo, wo);
        if (r >= kWin - 1) total.add(output_row(r - (kWin - 1), wo));
      }
      out.push_back(total.value() / static_cast<double>((pred.h - 2 * kRad) * wo));
    }
  }

 private:
  /// The sum of the SSIM map over output row o, from the ring rows o .. o + 10.
  double output_row(std::int64_t o, std::int64_t wo) {
    const double* rows[kWin];
    for (std::int64_t i = 0; i < kWin; ++i) rows[i] = ring_.data() + ((o + i) % kWin) * kQ * wo;
    for (std::int64_t q = 0; q < kQ; ++q) {
      const double* at[kWin];
      for (std::int64_t i = 0; i < kWin; ++i) at[i] = rows[i] + q * wo;
      filter_v(at, acc_.data() + q * wo, wo);
    }
    const double* mu1 = acc_.data();
    double* map = acc_.data() + kQ * wo;
    ssim_map(mu1, mu1 + wo, mu1 + 2 * wo, mu1 + 3 * wo, mu1 + 4 * wo, map, wo);
    double sum = 0.0;  // in column order, as before the map had a buffer
    for (std::int64_t c = 0; c < wo; ++c) sum += map[c];
    return sum;
  }

  std::vector<double> sq_, ring_, acc_;
};

}  // namespace

ComponentInfo ssim_info() {
  return with_results(
      metric<Ssim>(
          "SSIM",
          "Structural similarity with an 11x11 Gaussian window (sigma 1.5) over the valid region, "
          "per channel, averaged over channels, frames and images. mmeval's StructuralSimilarity, "
          "equal to scikit-image's structural_similarity(gaussian_weights=True, sigma=1.5, "
          "use_sample_covariance=False, data_range=255); key ssim.",
          transform_params("SSIM"), image_inputs(), {"StructuralSimilarity"}),
      {{"ssim", Better::Higher, Plot::None, "in [-1, 1], mean over images"}});
}
TALLY_COMPONENT(ssim_info)

}  // namespace tally::restoration
