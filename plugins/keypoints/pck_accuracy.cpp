// PCKAccuracy: the Percentage of Correct Keypoints, normalised by the bounding box (PCK), the head
// (PCKh) or the torso (tPCK).
//
// Formula. With d_ik the normalised distance of keypoint k of instance i (common.hpp: mmeval's
// calc_distances, float32, -1 when the keypoint is invisible or a normaliser component is 0):
//   valid_k = #{i : d_ik != -1},  hits_k = #{i : d_ik != -1 and d_ik < thr}
//   acc_k   = hits_k / valid_k            (-1 when valid_k == 0)
//   PCK     = mean of the acc_k >= 0      (numpy.mean; 0 when no keypoint is valid)
// The distance is compared with float32(thr), as NumPy 2 compares mmeval's float32 distances with
// a Python float.
//
// Reference: mmeval.metrics.PCKAccuracy (mmeval 0.2.1, pck_accuracy.py, keypoint_pck_accuracy),
// values and keys. Keys: "PCK@{thr}", "PCKh@{thr}", "tPCK@{thr}" (thr as Python prints a float),
// in that order, for the items of norm_item; fractions in [0, 1] as in mmeval.
//
// Example (mmeval's docstring): pred_coords = gt_coords, mask all true, thr 0.5, norm_item bbox
//   -> {"PCK@0.5": 1.0}
//
// State: exact int64 counters valid_k and hits_k per normaliser, summed across ranks (CountState,
// common.hpp: the number of keypoints must agree), so the result does not depend on the sharding.
#include "common.hpp"

namespace tally::keypoints {
namespace {

class PCKAccuracy final : public CountMetric {
 public:
  explicit PCKAccuracy(const Params& p)
      : CountMetric(p.owner_or("PCKAccuracy"), 6),
        thr_(p.get_number("thr", kNonNegative)),
        items_(read_norm_items(p)) {}

 protected:
  void count(const Batch& batch, const Coords& c, std::int64_t first,
             std::int64_t* counts) const override {
    count_pck_items(check_, batch, c, first, items_, thr_, counts);
  }

  Value results(const std::vector<std::int64_t>& counts, std::int64_t k,
                std::int64_t /*n*/) const override {
    Value out = Value::map();
    for (int j = 0; j < 3; ++j) {
      if (!items_.on[j]) continue;
      const PckSummary s = pck_summary(&counts[static_cast<std::size_t>(2 * j * k)],
                                       &counts[static_cast<std::size_t>((2 * j + 1) * k)], k);
      out.set(at_key(kNormKeys[j], thr_), s.avg);
    }
    return out;
  }

 private:
  double thr_;
  NormItems items_;
};

}  // namespace

ComponentInfo pck_accuracy_info() {
  return with_results(
      metric<PCKAccuracy>(
          "PCKAccuracy",
          "Percentage of Correct Keypoints: the mean over keypoints of the fraction of visible "
          "instances whose distance, divided by the bbox / head / torso size, is below thr. "
          "mmeval's PCKAccuracy; keys PCK@{thr}, PCKh@{thr}, tPCK@{thr}.",
          {thr_param(0.2), norm_item_param("bbox")}, pck_inputs()),
      {{"*", Better::Higher, Plot::None,
        "mean over keypoints of the fraction within thr x the normaliser"}});
}
TALLY_COMPONENT(pck_accuracy_info)

}  // namespace tally::keypoints
