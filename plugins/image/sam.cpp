// SpectralAngleMapper: the angle between the predicted and the true spectrum of each pixel.
//
// Formula. For each image and pixel, with p, t the C-channel vectors there:
//   angle = arccos(clamp(<p, t> / (|p| |t|), -1, 1))
//   sam   = sum of angles over every pixel of every image / their number (elementwise_mean), or
//           the sum (sum)
// torchmetrics averages over all pixels of all images. A pixel where p or t is the zero vector
// gives 0/0 = NaN, and so does the result, as in torchmetrics. <p, t> and |p|^2 add the channels
// in order, as torch does, so that nearly parallel spectra (angles of 1e-8) round alike.
//
// Reference: torchmetrics 1.9.0 torchmetrics.image.SpectralAngleMapper(reduction)
// .set_dtype(torch.float64), updated with float64 tensors [N, C, H, W]. Differences, on purpose:
// reduction none (torchmetrics returns the [N, H, W] map) is not offered; NaN or infinite pixels
// are input errors.
//
// Example: preds [1, 3, 16, 16] all 0.5 but the first 100 values (C order: of channel 0) 0,
// target [1, 3, 16, 16] all 1 -> 0.24042176119937012 (torchmetrics).
//
// State: the exact sum of the angles (ExactSum, merged exactly), the pixels and images (summed),
// NaN angles counted apart.
#include <cmath>
#include <string>
#include <vector>

#include "common.hpp"

namespace tally::image {
namespace {

constexpr const char* kSamType = "SpectralAngleMapper";
constexpr const char* kSamKey = "spectral_angle_mapper";

class Sam final : public TypedMetric<SumState> {
 public:
  explicit Sam(const Params& p)
      : check_(p.owner_or(kSamType)), sum_(reduction_of(p) == Reduce::Sum) {}

 protected:
  void update(SumState& s, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    const auto [p, t] = read_pair(check_, batch, s.images);
    if (p.n == 0) return;
    if (p.c <= 1)
      check_.fail(kPreds,
                  "must have more than 1 channel (a spectrum per pixel), got " + p.t->describe());
    const std::int64_t hw = p.plane_size();
    dot_.resize(static_cast<std::size_t>(hw));
    pp_.resize(static_cast<std::size_t>(hw));
    tt_.resize(static_cast<std::size_t>(hw));
    ExactAccumulators acc(s.total, 1, check_.owner());
    for (std::int64_t i = 0; i < p.n; ++i) {
      for (std::int64_t ch = 0; ch < p.c; ++ch) {
        const double* x = p.plane(i, ch, sx_);
        const double* y = t.plane(i, ch, sy_);
        if (ch == 0) {
          for (std::int64_t k = 0; k < hw; ++k) {
            dot_[static_cast<std::size_t>(k)] = x[k] * y[k];
            pp_[static_cast<std::size_t>(k)] = x[k] * x[k];
            tt_[static_cast<std::size_t>(k)] = y[k] * y[k];
          }
        } else {
          for (std::int64_t k = 0; k < hw; ++k) {
            dot_[static_cast<std::size_t>(k)] += x[k] * y[k];
            pp_[static_cast<std::size_t>(k)] += x[k] * x[k];
            tt_[static_cast<std::size_t>(k)] += y[k] * y[k];
          }
        }
      }
      CompensatedSum total;
      std::int64_t nan = 0;
      for (std::int64_t k = 0; k < hw; ++k) {
        const auto u = static_cast<std::size_t>(k);
        const double v = dot_[u] / (std::sqrt(pp_[u]) * std::sqrt(tt_[u]));
        if (std::isnan(v)) {
          ++nan;
          continue;
        }
        total.add(std::acos(std::min(std::max(v, -1.0), 1.0)));
      }
      acc.add(0, total.value());
      s.nan += nan;
    }
    acc.store(s.total);
    s.images += p.n;
    s.count += p.n * hw;
  }

  Value compute(const SumState& s) const override {
    check_sums(s.total, 1, check_.owner());
    if (s.images == 0) check_.fail("no samples");
    const ExactAccumulators acc(s.total, 1, check_.owner());
    const double total = total_of(acc.value(0), s.nan, s.pos_inf, s.neg_inf);
    Value out = Value::map();
    out.set(kSamKey, sum_ ? total : total / static_cast<double>(s.count));
    return out;
  }

 private:
  InputChecker check_;
  bool sum_;
  std::vector<double> sx_, sy_, dot_, pp_, tt_;
};

}  // namespace

ComponentInfo sam_info() {
  return metric<Sam>(
      kSamType,
      "Spectral angle (radians) between predicted and true pixel spectra (C > 1 channels), over "
      "every pixel of every image. Reference: torchmetrics 1.9.0 "
      "torchmetrics.image.SpectralAngleMapper(reduction).set_dtype(torch.float64).",
      {reduction_param({"elementwise_mean", "sum"}, "pixel")}, pair_inputs(", C > 1 bands"),
      {"SAM"}, {{kSamKey, Better::Lower, Plot::None, "radians in [0, pi]; mean over every pixel"}});
}
TALLY_COMPONENT(sam_info)

}  // namespace tally::image
