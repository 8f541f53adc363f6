// RelativeAverageSpectralError: RASE, the relative average spectral error of a multi-band image,
// with torchmetrics' sliding window.
//
// Formula. With U the ws x ws mean filter over each band, the image padded symmetrically (edge
// rows repeated: torchmetrics' _uniform_filter), and N images of C bands, H x W pixels:
//   rmse_map[c, h, w]  = mean over images of sqrt(U((t - p)^2))
//   target_mean[h, w]  = mean over bands of mean over images of U(t) / ws^2
//   rase_map[h, w]     = 100 / target_mean * sqrt(mean over bands of rmse_map^2)
//   rase               = mean of rase_map[s:-s, s:-s], s = round(ws / 2) (Python's round)
// The extra / ws^2 in target_mean is torchmetrics' (U already divides by ws^2): kept, so the
// values equal torchmetrics' and are ws^2 times the textbook RASE. One value for the dataset,
// over every image at once (not per image).
//
// Reference: torchmetrics 1.9.0 torchmetrics.image.RelativeAverageSpectralError(window_size)
// .set_dtype(torch.float64), updated with float64 tensors [N, C, H, W]. Differences: NaN or
// infinite pixels are input errors, and so are images of another size than the earlier ones
// (torchmetrics fails to concatenate them).
//
// Example: preds [1, 1, 16, 16] all 0.75 but the first 100 pixels (C order) 0, target [1, 1, 16,
// 16] all 1 -> 3710.0596909023234 (torchmetrics).
//
// State: per image, the maps sqrt(U((t - p)^2)) and U(t) / ws^2 (2 C H W values), concatenated
// in rank order = dataset order and added in that order at compute (as torchmetrics keeps every
// image: an exact fixed-size sum would need a 67-word accumulator per pixel); the band count and
// image size, which every rank must share.
#include <cmath>
#include <string>
#include <vector>

#include "common.hpp"

namespace tally::image {
namespace {

constexpr const char* kRaseType = "RelativeAverageSpectralError";
constexpr const char* kRaseKey = "relative_average_spectral_error";

struct RaseState {
  PackedVector<double> rmse, tmean;
  std::int64_t images = 0;
  std::int64_t c = -1, h = -1, w = -1;
  TALLY_STATE(concat(rmse), concat(tmean), sum(images), agree(c, -1), agree(h, -1), agree(w, -1))
};

/// Python's round(ws / 2): halves to even.
std::int64_t round_half(std::int64_t ws) {
  if (ws % 2 == 0) return ws / 2;
  const std::int64_t k = ws / 2;  // ws / 2 = k + 0.5
  return k % 2 == 0 ? k : k + 1;
}

class Rase final : public TypedMetric<RaseState> {
 public:
  explicit Rase(const Params& p)
      : check_(p.owner_or(kRaseType)), ws_(p.get_size("window_size", 1, 1 << 12)) {
    ones_.assign(static_cast<std::size_t>(ws_), 1.0);
    inv_.assign(static_cast<std::size_t>(ws_), 1.0 / static_cast<double>(ws_ * ws_));
  }

 protected:
  void update(RaseState& s, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    const auto [p, t] = read_pair(check_, batch, s.images);
    if (p.n == 0) return;
    const std::int64_t crop = round_half(ws_);
    if (crop >= p.h || crop >= p.w)
      check_.fail(kPreds, "round(window_size / 2) = " + std::to_string(crop) +
                              " must be smaller than the image size " + std::to_string(p.h) + "x" +
                              std::to_string(p.w));
    if (s.c >= 0 && (s.c != p.c || s.h != p.h || s.w != p.w))
      check_.fail(kPreds, "images are " + std::to_string(p.c) + "x" + std::to_string(p.h) + "x" +
                              std::to_string(p.w) + " but earlier ones " + std::to_string(s.c) +
                              "x" + std::to_string(s.h) + "x" + std::to_string(s.w) +
                              ": RASE needs one image size");
    s.c = p.c, s.h = p.h, s.w = p.w;
    const std::int64_t hw = p.plane_size(), pad = ws_ / 2;
    for (std::int64_t i = 0; i < p.n; ++i)
      for (std::int64_t ch = 0; ch < p.c; ++ch) {
        const double* x = p.plane(i, ch, sx_);
        const double* y = t.plane(i, ch, sy_);
        err_.resize(static_cast<std::size_t>(hw));
        for (std::int64_t k = 0; k < hw; ++k)
          err_[static_cast<std::size_t>(k)] = (y[k] - x[k]) * (y[k] - x[k]);
        filter_plane(err_.data(), p.h, p.w, inv_, ones_, Pad::Symmetric, pad, pad, p.h, p.w, out_);
        for (const double v : out_) s.rmse.push_back(std::sqrt(v));
        filter_plane(y, p.h, p.w, inv_, ones_, Pad::Symmetric, pad, pad, p.h, p.w, out_);
        for (const double v : out_) s.tmean.push_back(v / static_cast<double>(ws_ * ws_));
      }
    s.images += p.n;
  }

  Value compute(const RaseState& s) const override {
    if (s.images == 0) check_.fail("no samples");
    const std::int64_t chw = s.c * s.h * s.w;
    if (s.c < 1 || s.h < 1 || s.w < 1 || s.h > (1 << 30) / s.w ||
        s.rmse.size() != static_cast<std::size_t>(s.images * chw) ||
        s.tmean.size() != s.rmse.size())
      check_.fail_runtime(std::string("the state is corrupt"));
    const auto n = static_cast<double>(s.images);
    const std::int64_t hw = s.h * s.w;
    std::vector<double> rmse(static_cast<std::size_t>(chw), 0.0), tm(rmse);
    for (std::int64_t i = 0; i < s.images; ++i)
      for (std::int64_t k = 0; k < chw; ++k) {
        rmse[static_cast<std::size_t>(k)] += s.rmse[static_cast<std::size_t>(i * chw + k)];
        tm[static_cast<std::size_t>(k)] += s.tmean[static_cast<std::size_t>(i * chw + k)];
      }
    const std::int64_t crop = round_half(ws_);
    CompensatedSum total;
    std::int64_t count = 0;
    for (std::int64_t r = crop; r < s.h - crop; ++r)
      for (std::int64_t c = crop; c < s.w - crop; ++c) {
        double mean_t = 0.0, sq = 0.0;
        for (std::int64_t ch = 0; ch < s.c; ++ch) {
          const auto k = static_cast<std::size_t>(ch * hw + r * s.w + c);
          const double rm = rmse[k] / n;
          mean_t += tm[k] / n;
          sq += rm * rm;
        }
        mean_t /= static_cast<double>(s.c);
        total.add(100 / mean_t * std::sqrt(sq / static_cast<double>(s.c)));
        ++count;
      }
    Value out = Value::map();
    // An empty crop (round(ws / 2) = 0, or more than half the image): torch's mean of nothing.
    out.set(kRaseKey, count == 0 ? std::numeric_limits<double>::quiet_NaN()
                                 : total.value() / static_cast<double>(count));
    return out;
  }

 private:
  InputChecker check_;
  std::int64_t ws_;
  std::vector<double> ones_, inv_, sx_, sy_, err_, out_;
};

}  // namespace

ComponentInfo rase_info() {
  return metric<Rase>(
      kRaseType,
      "RASE with a sliding window over the whole dataset (one image size): 100 / the windowed "
      "target mean times the root mean square over bands of the windowed RMSE, averaged over "
      "the cropped map (torchmetrics' scaling, ws^2 times the textbook value). Reference: "
      "torchmetrics 1.9.0 torchmetrics.image.RelativeAverageSpectralError(window_size)"
      ".set_dtype(torch.float64).",
      {param("window_size", ParamType::Int, "Side of the sliding window.").def(8)},
      pair_inputs(", every image of one size"), {"RASE"},
      {{kRaseKey, Better::Lower, Plot::None, "0 is perfect"}});
}
TALLY_COMPONENT(rase_info)

}  // namespace tally::image
