// KeypointEndPointError: the mean Euclidean distance between predicted and true keypoints.
//
// Formula. d_ik = float32(|| pred_ik - gt_ik ||) for the visible keypoints (mmeval's
// calc_distances with a float32 normaliser of ones: the arithmetic in the wider of the two
// coordinate dtypes, the distance stored as float32);
//   EPE = float32 sum of the d_ik, keypoint-major over the dataset (numpy's pairwise sum of
//         distances.T[distances.T != -1]), divided by max(1, their number) in float32.
// The sum is done once, at compute, over the distances of every rank in dataset order, so it
// reproduces mmeval's float32 result bit for bit on any number of ranks.
//
// Reference: mmeval.metrics.KeypointEndPointError (mmeval 0.2.1, keypoint_epe.py). Key: "EPE", in
// the units of the coordinates (0 when no keypoint is visible, as mmeval).
//
// Example (mmeval's docstring): pred [[10, 4], [10, 18], [0, 0], [40, 40], [20, 10]],
// gt [[10, 0], [10, 10], [0, -1], [30, 30], [0, 10]], mask [1, 1, 0, 1, 1]
//   -> {"EPE": 11.535533905029297}
//
// State: the float32 distance of every keypoint (-1 when invisible): 4 bytes per keypoint,
// concatenated across ranks in rank order (DistanceState, common.hpp).
#include "common.hpp"

namespace tally::keypoints {
namespace {

class KeypointEndPointError final : public DistanceMetric {
 public:
  explicit KeypointEndPointError(const Params& p)
      : DistanceMetric(p.owner_or("KeypointEndPointError")) {}

 protected:
  const char* key() const override { return "EPE"; }

  std::vector<float> batch_distances(const Batch& /*batch*/, const Coords& c,
                                     std::int64_t /*first*/) const override {
    // mmeval: np.ones((N, D), dtype=np.float32).
    const Tensor ones = Tensor::from_vector<float>(
        std::vector<float>(static_cast<std::size_t>(c.n * c.d), 1.0f), {c.n, c.d});
    return distances(c, ones);
  }
};

}  // namespace

ComponentInfo keypoint_epe_info() {
  return with_results(
      metric<KeypointEndPointError>(
          "KeypointEndPointError",
          "End-point error of keypoints: the mean Euclidean distance between predicted and true "
          "coordinates over the visible keypoints (float32, as mmeval). mmeval's "
          "KeypointEndPointError; key EPE, lower is better.",
          {}, {pred_input(), gt_input(), mask_input()}),
      {{"EPE", Better::Lower, Plot::None, "mean keypoint distance, in pixels"}});
}
TALLY_COMPONENT(keypoint_epe_info)

}  // namespace tally::keypoints
