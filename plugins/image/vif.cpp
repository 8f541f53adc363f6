// VisualInformationFidelity: VIF in the pixel domain (Sheikh and Bovik 2006), torchmetrics' form.
//
// Formula. Per image and channel, over 4 scales s = 0..3 with an n x n Gaussian window G_s,
// n = 2^(4-s) + 1, sigma n / 5 (valid positions only); at s > 0 both images first become
// (G_s * image)[::2, ::2]. Then mu = G_s * x etc.:
//   s_t = max(G(t^2) - mu_t^2, 0), s_p = max(G(p^2) - mu_p^2, 0), s_tp = G(t p) - mu_t mu_p
//   g = s_tp / (s_t + eps), s_v = s_p - g s_tp, eps = 1e-10
//   where s_t < eps: g = 0, s_v = s_p, s_t = 0;  where s_p < eps: g = 0, s_v = 0;
//   where g < 0: s_v = s_p, g = 0;  s_v = max(s_v, eps)
//   num += sum log10(1 + g^2 s_t / (s_v + sigma_n_sq)),  den += sum log10(1 + s_t / sigma_n_sq)
//   vif(channel) = num / den
// The value of an image is the mean over channels; the result the mean over images (mean) or one
// value per image (none).
//
// Reference: torchmetrics 1.9.0 torchmetrics.image.VisualInformationFidelity(sigma_n_sq,
// reduction), updated with float64 tensors [N, C, H, W]. Differences: images under 41 x 41 are
// input errors (torchmetrics' functional check; its class fails in a convolution); NaN or
// infinite pixels are input errors. sigma_n_sq is on the scale of the pixels: 2.0 is meant for
// 0..255 images (2 / 255^2 for images in [0, 1]).
//
// Example: preds [1, 1, 41, 41] all 0.75 but the first 900 pixels (C order) 0, target [1, 1, 41,
// 41] all 1 but the first 800 pixels 0 -> 0.1831221448989... (torchmetrics: 0.18312214489896528).
//
// State: per image value, summed exactly with the count of images, or (reduction none)
// concatenated in rank order = dataset order.
#include <cmath>
#include <string>
#include <vector>

#include "common.hpp"

namespace tally::image {
namespace {

constexpr const char* kVifType = "VisualInformationFidelity";
constexpr const char* kVifKey = "visual_information_fidelity";
constexpr double kEps = 1e-10;

class Vif final : public PerImageMetric {
 public:
  explicit Vif(const Params& p)
      : PerImageMetric(p, kVifType, kVifKey), noise_(p.get_double("sigma_n_sq")) {
    if (!std::isfinite(noise_) || noise_ < 0)
      p.fail("sigma_n_sq", "must be a non-negative number, got " + std::to_string(noise_));
    for (int s = 0; s < 4; ++s) {
      const std::int64_t n = (std::int64_t{1} << (4 - s)) + 1;
      taps_[s] = gaussian_taps(n, static_cast<double>(n) / 5.0);
    }
  }

 protected:
  void check_batch(const ImageField& x, std::int64_t) override {
    if (x.h < 41 || x.w < 41)
      check_.fail(kPreds, "images must be at least 41x41, got " + std::to_string(x.h) + "x" +
                              std::to_string(x.w));
  }

  double image_value(const ImageField& p, const ImageField& t, std::int64_t i,
                     std::int64_t) override {
    double sum = 0.0;
    for (std::int64_t ch = 0; ch < p.c; ++ch)
      sum += channel(p.plane(i, ch, sx_), t.plane(i, ch, sy_), p.h, p.w);
    return p.c > 1 ? sum / static_cast<double>(p.c) : sum;
  }

 private:
  double channel(const double* px, const double* tx, std::int64_t h, std::int64_t w) {
    CompensatedSum num, den;
    const double* x = px;  // preds
    const double* y = tx;  // target
    for (int s = 0; s < 4; ++s) {
      const auto& k = taps_[s];
      const auto n = static_cast<std::int64_t>(k.size());
      if (s > 0) {
        down(x, h, w, k, dx_);
        down(y, h, w, k, dy_);
        h = (h - n + 1 + 1) / 2, w = (w - n + 1 + 1) / 2;
        x = dx_.data(), y = dy_.data();
      }
      const std::int64_t ho = h - n + 1, wo = w - n + 1;
      filter_.run(x, y, h, w, k, k, 0, 0, ho, wo, [&](std::int64_t, const double* const* m) {
        for (std::int64_t c = 0; c < wo; ++c) {
          const double mp = m[0][c], mt = m[1][c];
          double st = std::max(m[3][c] - mt * mt, 0.0);
          const double sp = std::max(m[2][c] - mp * mp, 0.0);
          const double stp = m[4][c] - mt * mp;
          double g = stp / (st + kEps);
          double sv = sp - g * stp;
          if (st < kEps) g = 0, sv = sp, st = 0;
          if (sp < kEps) g = 0, sv = 0;
          if (g < 0) sv = sp, g = 0;
          sv = std::max(sv, kEps);
          num.add(std::log10(1.0 + std::pow(g, 2.0) * st / (sv + noise_)));
          den.add(std::log10(1.0 + st / noise_));
        }
      });
    }
    return num.value() / den.value();
  }

  /// (G * x)[::2, ::2] over the valid positions, into out (the next scale).
  void down(const double* x, std::int64_t h, std::int64_t w, const std::vector<double>& k,
            std::vector<double>& out) {
    const auto n = static_cast<std::int64_t>(k.size());
    filter_plane(x, h, w, k, k, Pad::Zero, 0, 0, h - n + 1, w - n + 1, full_);
    const std::int64_t fw = w - n + 1, ho = (h - n + 2) / 2, wo = (fw + 1) / 2;
    std::vector<double> next(static_cast<std::size_t>(ho * wo));
    for (std::int64_t r = 0; r < ho; ++r)
      for (std::int64_t c = 0; c < wo; ++c)
        next[static_cast<std::size_t>(r * wo + c)] =
            full_[static_cast<std::size_t>(2 * r * fw + 2 * c)];
    out.swap(next);
  }

  double noise_;
  std::vector<double> taps_[4];
  MomentFilter filter_;
  std::vector<double> sx_, sy_, dx_, dy_, full_;
};

}  // namespace

ComponentInfo vif_info() {
  return metric<Vif>(
      kVifType,
      "Visual information fidelity (pixel domain, 4 scales), per image the mean over channels; "
      "reduced over images. Reference: torchmetrics 1.9.0 "
      "torchmetrics.image.VisualInformationFidelity(sigma_n_sq, reduction).",
      {param("sigma_n_sq", ParamType::Float,
             "Variance of the visual noise, on the pixels' scale (2.0 for 0..255 images).")
           .def(2.0),
       reduction_param({"mean", "none"}, "image")},
      pair_inputs(", at least 41x41"), {"VIF"},
      {{kVifKey, Better::Higher, Plot::None, "1 for identical images; mean over images"}});
}
TALLY_COMPONENT(vif_info)

}  // namespace tally::image
