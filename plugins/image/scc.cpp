// SpatialCorrelationCoefficient: SCC (Zhou et al. 1998), the correlation of the high-pass
// details of two images in a sliding window.
//
// Formula. Per image and channel: the high-pass images hp(x) = 2 (x conv F), F the filter (default
// [[-1, -1, -1], [-1, 8, -1], [-1, -1, -1]]), a true convolution over the image padded
// symmetrically (edge repeated) by floor((k-1)/2) before and ceil((k-1)/2) after; then with U the
// ws x ws mean over the zero-padded image (ceil((ws-1)/2) before, floor((ws-1)/2) after):
//   var_p = max(U(hp_p^2) - U(hp_p)^2, 0), var_t likewise, cov = U(hp_t hp_p) - U(hp_t) U(hp_p)
//   scc = cov / (sqrt(var_t) sqrt(var_p)), 0 where that denominator is 0
// The value of an image is the mean of scc over channels and pixels; the result the mean over
// images.
//
// Reference: torchmetrics 1.9.0 torchmetrics.image.SpatialCorrelationCoefficient(
// high_pass_filter, window_size).set_dtype(torch.float64), updated with float64 tensors
// [N, C, H, W], with its cast of preds and target to float32 (_scc_update) made float64: tally
// computes in float64. torchmetrics as it is (float32) agrees to about 1e-7 (both values are in
// tests/reference/expected_image.json). Differences: NaN or infinite pixels are input errors; a
// 1 x 1 filter is refused (torchmetrics' padding of 0 takes the whole image).
//
// Example: preds [1, 1, 16, 16] all 0.75 but the first 100 pixels (C order) 0, target [1, 1, 16,
// 16] all 1 but the first 128 pixels 0 -> -0.07966722253304472 (torchmetrics, float64).
//
// State: per image value, summed exactly with the count of images.
#include <cmath>
#include <string>
#include <vector>

#include "common.hpp"

namespace tally::image {
namespace {

constexpr const char* kSccType = "SpatialCorrelationCoefficient";
constexpr const char* kSccKey = "spatial_correlation_coefficient";

class Scc final : public PerImageMetric {
 public:
  explicit Scc(const Params& p)
      : PerImageMetric(p, kSccType, kSccKey), ws_(p.get_size("window_size", 1, 1 << 12)) {
    const std::vector<double> f = p.get_double_list("hp_filter");
    k_ = static_cast<std::int64_t>(std::llround(std::sqrt(static_cast<double>(f.size()))));
    if (k_ * k_ != static_cast<std::int64_t>(f.size()) || k_ < 2 || k_ > 31)
      p.fail("hp_filter",
             "must hold k * k values (a square filter, row by row) with 2 <= k <= "
             "31, got " +
                 std::to_string(f.size()) + " values");
    for (const double v : f)
      if (!std::isfinite(v)) p.fail("hp_filter", "must hold finite numbers");
    flipped_.assign(f.rbegin(), f.rend());  // a convolution: the filter flipped on both axes
    ones_.assign(static_cast<std::size_t>(ws_), 1.0);
    inv_.assign(static_cast<std::size_t>(ws_), 1.0 / static_cast<double>(ws_ * ws_));
  }

 protected:
  void check_batch(const ImageField& x, std::int64_t) override {
    if (ws_ > x.h || ws_ > x.w)
      check_.fail(kPreds, "window_size " + std::to_string(ws_) + " is larger than the " +
                              std::to_string(x.h) + "x" + std::to_string(x.w) + " images");
  }

  double image_value(const ImageField& p, const ImageField& t, std::int64_t i,
                     std::int64_t) override {
    const std::int64_t h = p.h, w = p.w, hw = h * w;
    const std::int64_t before = (ws_ - 1 + 1) / 2, hp_before = (k_ - 1) / 2;
    CompensatedSum total;
    for (std::int64_t ch = 0; ch < p.c; ++ch) {
      high_pass(p.plane(i, ch, sx_), h, w, hp_before, hx_);
      high_pass(t.plane(i, ch, sy_), h, w, hp_before, hy_);
      prod_.resize(static_cast<std::size_t>(3 * hw));
      for (std::int64_t k = 0; k < hw; ++k) {
        const auto u = static_cast<std::size_t>(k);
        prod_[u] = hx_[u] * hx_[u];
        prod_[u + static_cast<std::size_t>(hw)] = hy_[u] * hy_[u];
        prod_[u + static_cast<std::size_t>(2 * hw)] = hy_[u] * hx_[u];
      }
      filter_plane(hx_.data(), h, w, inv_, ones_, Pad::Zero, before, before, h, w, mp_);
      filter_plane(hy_.data(), h, w, inv_, ones_, Pad::Zero, before, before, h, w, mt_);
      filter_plane(prod_.data(), h, w, inv_, ones_, Pad::Zero, before, before, h, w, fpp_);
      filter_plane(prod_.data() + hw, h, w, inv_, ones_, Pad::Zero, before, before, h, w, ftt_);
      filter_plane(prod_.data() + 2 * hw, h, w, inv_, ones_, Pad::Zero, before, before, h, w, ftp_);
      for (std::int64_t k = 0; k < hw; ++k) {
        const auto u = static_cast<std::size_t>(k);
        const double vp = std::max(fpp_[u] - mp_[u] * mp_[u], 0.0);
        const double vt = std::max(ftt_[u] - mt_[u] * mt_[u], 0.0);
        const double cov = ftp_[u] - mt_[u] * mp_[u];
        const double den = std::sqrt(vt) * std::sqrt(vp);
        total.add(den == 0 ? 0.0 : cov / den);
      }
    }
    return total.value() / static_cast<double>(p.c * hw);
  }

 private:
  /// 2 (x conv F) over the symmetrically padded plane: h x w values into out.
  void high_pass(const double* x, std::int64_t h, std::int64_t w, std::int64_t before,
                 std::vector<double>& out) const {
    out.assign(static_cast<std::size_t>(h * w), 0.0);
    for (std::int64_t r = 0; r < h; ++r)
      for (std::int64_t c = 0; c < w; ++c) {
        double acc = 0.0;
        for (std::int64_t a = 0; a < k_; ++a) {
          const std::int64_t sr = padded_index(r + a - before, h, Pad::Symmetric);
          for (std::int64_t b = 0; b < k_; ++b) {
            const std::int64_t sc = padded_index(c + b - before, w, Pad::Symmetric);
            acc += flipped_[static_cast<std::size_t>(a * k_ + b)] * x[sr * w + sc];
          }
        }
        out[static_cast<std::size_t>(r * w + c)] = acc * 2.0;
      }
  }

  std::int64_t ws_, k_ = 3;
  std::vector<double> flipped_, ones_, inv_;
  std::vector<double> sx_, sy_, hx_, hy_, prod_, mp_, mt_, fpp_, ftt_, ftp_;
};

}  // namespace

ComponentInfo scc_info() {
  return metric<Scc>(
      kSccType,
      "Spatial correlation coefficient of the high-pass details of preds and target in a "
      "sliding window, mean over pixels and channels per image, then over images. Reference: "
      "torchmetrics 1.9.0 torchmetrics.image.SpatialCorrelationCoefficient(high_pass_filter, "
      "window_size).set_dtype(torch.float64) with its float32 cast made float64.",
      {param("hp_filter", ParamType::FloatList,
             "The high-pass filter, k * k values row by row (torchmetrics' high_pass_filter).")
           .def(Value::Array{Value(-1), Value(-1), Value(-1), Value(-1), Value(8), Value(-1),
                             Value(-1), Value(-1), Value(-1)}),
       param("window_size", ParamType::Int, "Side of the sliding window.").def(8)},
      pair_inputs(""), {"SCC"},
      {{kSccKey, Better::Higher, Plot::None, "in [-1, 1]; mean over images"}});
}
TALLY_COMPONENT(scc_info)

}  // namespace tally::image
