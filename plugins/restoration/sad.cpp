// SAD: sum of absolute differences of alpha mattes (mmeval's SumAbsoluteDifferences).
//
// Formula. For image i: SAD_i = sum_k |pred_k - gt_k| / norm_const over every pixel (numpy's
// pairwise sum, as np.abs(prediction - groundtruth).sum()); result sad = mean_i SAD_i.
//
// Reference: mmeval 0.2.1 mmeval.metrics.SumAbsoluteDifferences(norm_const=1000)(predictions,
// groundtruths), bit for bit on float64 mattes (tests/reference/matting.py).
//
// Example: pred_alpha 32x32 zeros, gt_alpha 32x32 ones -> sad 1.024 (1024 / norm_const 1000).
//
// State: one float64 per image, concatenated across ranks in rank order and averaged in dataset
// order at compute (PerSampleState), so any number of ranks gives the same bits.
#include "matting.hpp"

namespace tally::restoration {
namespace {

class Sad final : public MattingMetric {
 public:
  static constexpr MattingIdentity kIdentity{
      .name = "SAD",
      .key = "sad",
      .key_doc = "sum over pixels / norm_const, mean over images",
      .trimap = false};
  explicit Sad(const Params& p) : MattingMetric(p, kIdentity), norm_(norm_const(p)) {}

 protected:
  double value(const MattingImage& img) override {
    return numpy_sum_of(img.numel, terms_,
                        [&](std::int64_t k) { return std::abs(img.pred[k] - img.gt[k]); }) /
           norm_;
  }

 private:
  double norm_;
  std::vector<double> terms_;
};

}  // namespace

ComponentInfo sad_info() {
  return matting_component<Sad>(
      "Sum of absolute differences of alpha mattes over every pixel, divided by norm_const, "
      "averaged over images; key sad. Reference: mmeval 0.2.1 "
      "SumAbsoluteDifferences(norm_const)(predictions, groundtruths).",
      {norm_const_param()}, {"SumAbsoluteDifferences"});
}
TALLY_COMPONENT(sad_info)

}  // namespace tally::restoration
