// SpectralDistortionIndex: D_lambda (Alparone et al. 2008), how much the relations between the
// bands of a fused image differ from those of the reference.
//
// Formula. With Q(a, b) torchmetrics' UQI of two bands (11 x 11 Gaussian window, sigma 1.5; see
// uqi.cpp) averaged over every valid position of every image of the dataset, and L bands:
//   m1[k][r] = Q(target_k, target_r), m2[k][r] = Q(preds_k, preds_r)   (k != r; symmetric)
//   d_lambda = (1 / (L (L - 1)) sum_{k != r} |m1 - m2|^p)^(1/p)      (L = 1: 0)
// One value for the dataset (torchmetrics' reductions of that scalar leave it unchanged).
//
// Reference: torchmetrics 1.9.0 torchmetrics.image.SpectralDistortionIndex(p, reduction)
// .set_dtype(torch.float64), updated with float64 tensors [N, C, H, W], with its band-pair
// matrices m1, m2 made float64 (torchmetrics allocates them with torch.zeros, float32, and so
// rounds every Q to float32); torchmetrics as it is agrees to about 1e-6 (both values are in
// tests/reference/expected_image.json). Differences: preds and target must have one shape
// (torchmetrics checks only N and C) and every image one size (torchmetrics concatenates them);
// images under 11 x 11 are input errors (torchmetrics: NaN); NaN or infinite pixels are input
// errors. torchmetrics marks it higher_is_better; it is a distortion (0 is best), so tally says
// lower is better.
//
// Example: target [1, 3, 11, 11] with element k of each band (C order) = ((3 k + 1) % 11) / 10,
// preds the same but band 1 = ((5 k + 4) % 11) / 10 -> 0.617402314129184... (torchmetrics,
// float64: 0.6174023141291848).
//
// State: for each band pair, the exact sums of Q's map over target and over preds (ExactSum,
// merged exactly), the count of images; the band count and image size, which every rank shares.
#include <cmath>
#include <string>
#include <vector>

#include "common.hpp"

namespace tally::image {
namespace {

constexpr const char* kDLambdaType = "SpectralDistortionIndex";
constexpr const char* kDLambdaKey = "spectral_distortion_index";
constexpr std::int64_t kWin = 11;

struct DLambdaState {
  ExactSums total;  // 2 per band pair (k < r, row by row): target's, then preds'
  std::int64_t images = 0;
  std::int64_t nan = 0, pos_inf = 0, neg_inf = 0;  // over every pair: any poisons the result
  std::int64_t c = -1, h = -1, w = -1;
  TALLY_STATE(merge(total), sum(images), sum(nan), sum(pos_inf), sum(neg_inf), agree(c, -1),
              agree(h, -1), agree(w, -1))
};

class DLambda final : public TypedMetric<DLambdaState> {
 public:
  explicit DLambda(const Params& p)
      : check_(p.owner_or(kDLambdaType)), p_(p.get_int("p")), window_(kWin, 1.5, 1.5) {
    if (p_ < 1 || p_ > 64)
      p.fail("p", "must be at least 1 (and at most 64), got " + std::to_string(p_));
  }

 protected:
  void update(DLambdaState& s, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    const auto [p, t] = read_pair(check_, batch, s.images);
    if (p.n == 0) return;
    if (p.h < kWin || p.w < kWin)
      check_.fail(kPreds, "images of " + std::to_string(p.h) + "x" + std::to_string(p.w) +
                              " are smaller than the 11x11 window of its UQI");
    if (p.c > 256) check_.fail(kPreds, "has " + std::to_string(p.c) + " bands, more than 256");
    if (s.c >= 0 && (s.c != p.c || s.h != p.h || s.w != p.w))
      check_.fail(kPreds, "images are " + std::to_string(p.c) + "x" + std::to_string(p.h) + "x" +
                              std::to_string(p.w) + " but earlier ones " + std::to_string(s.c) +
                              "x" + std::to_string(s.h) + "x" + std::to_string(s.w) +
                              ": D_lambda needs one image size");
    s.c = p.c, s.h = p.h, s.w = p.w;
    const std::int64_t pairs = p.c * (p.c - 1) / 2;
    ExactAccumulators acc(s.total, static_cast<std::size_t>(2 * pairs), check_.owner());
    for (std::int64_t i = 0; i < p.n; ++i) {
      std::size_t at = 0;
      for (std::int64_t k = 0; k < p.c; ++k)
        for (std::int64_t r = k + 1; r < p.c; ++r, at += 2) {
          add_counted(acc, at, window_.map_sum(t.plane(i, k, a_), t.plane(i, r, b_), p.h, p.w),
                      s.nan, s.pos_inf, s.neg_inf);
          add_counted(acc, at + 1, window_.map_sum(p.plane(i, k, a_), p.plane(i, r, b_), p.h, p.w),
                      s.nan, s.pos_inf, s.neg_inf);
        }
    }
    acc.store(s.total);
    s.images += p.n;
  }

  Value compute(const DLambdaState& s) const override {
    if (s.images == 0) check_.fail("no samples");
    if (s.c < 1 || s.c > 256 || s.h < kWin || s.w < kWin)
      check_.fail_runtime(std::string("the state is corrupt"));
    const std::int64_t l = s.c, pairs = l * (l - 1) / 2;
    check_sums(s.total, static_cast<std::size_t>(2 * pairs), check_.owner());
    Value out = Value::map();
    if (l == 1) {
      out.set(kDLambdaKey, 0.0);
      return out;
    }
    const ExactAccumulators acc(s.total, static_cast<std::size_t>(2 * pairs), check_.owner());
    const double count =
        static_cast<double>(s.images) * static_cast<double>((s.h - kWin + 1) * (s.w - kWin + 1));
    const bool poisoned = s.nan > 0 || s.pos_inf > 0 || s.neg_inf > 0;
    double sum = 0.0;
    for (std::int64_t q = 0; q < pairs; ++q) {
      const double m1 = acc.value(static_cast<std::size_t>(2 * q)) / count;
      const double m2 = acc.value(static_cast<std::size_t>(2 * q + 1)) / count;
      sum += 2 * std::pow(std::abs(m1 - m2), static_cast<double>(p_));  // (k, r) and (r, k)
    }
    const double v =
        std::pow(1.0 / static_cast<double>(l * (l - 1)) * sum, 1.0 / static_cast<double>(p_));
    out.set(kDLambdaKey, poisoned ? std::numeric_limits<double>::quiet_NaN() : v);
    return out;
  }

 private:
  InputChecker check_;
  std::int64_t p_;
  UqiWindow window_;
  std::vector<double> a_, b_;
};

}  // namespace

ComponentInfo d_lambda_info() {
  return metric<DLambda>(
      kDLambdaType,
      "Spectral distortion index D_lambda: the p-mean difference between the band-pair UQIs of "
      "target and of preds, over the whole dataset (one image size). Reference: torchmetrics "
      "1.9.0 torchmetrics.image.SpectralDistortionIndex(p, reduction).set_dtype(torch.float64) "
      "with its float32 band-pair matrices made float64.",
      {param("p", ParamType::Int, "The order of the mean of the differences.").def(1),
       reduction_param({"elementwise_mean", "sum", "none"}, "dataset")},
      pair_inputs(", every image of one size"), {"D_lambda"},
      {{kDLambdaKey, Better::Lower, Plot::None, "0 is perfect"}});
}
TALLY_COMPONENT(d_lambda_info)

}  // namespace tally::image
