// KeypointAUC: the area under the curve of PCK accuracy against the threshold.
//
// Formula. With a fixed normaliser f (norm_factor, both axes) and T = num_thrs thresholds
// t_i = i / T (i = 0 .. T-1):
//   d_jk   = float32(|| (pred_jk - gt_jk) / f ||)  (common.hpp; -1 when invisible; f < 0 is
//            replaced by 1e6, as mmeval's calc_distances does; f == 0 is refused, see below)
//   avg_i  = PCK accuracy at t_i: the mean over keypoints with a valid distance of the fraction
//            below float32(t_i) (0 when no keypoint is valid)
//   AUC@T  = sum_i (1 / T) avg_i                   (accumulated in this order, from 0)
//
// Reference: mmeval.metrics.KeypointAUC (mmeval 0.2.1, keypoint_auc.py, keypoint_auc_accuracy).
// Key: "AUC@{num_thrs}", a fraction in [0, 1]. The coordinates must be 2-D (mmeval tiles the
// normaliser to [N, 2]).
//
// Example (mmeval's docstring): norm_factor 20, num_thrs 4, pred [[10, 4], [10, 18], [0, 0],
// [40, 40], [20, 10]], gt [[10, 0], [10, 10], [0, -1], [30, 30], [0, 10]], mask [1, 1, 0, 1, 1]
//   -> {"AUC@4": 0.375}
//
// State: exact int64 counters: valid keypoints and hits per threshold, per keypoint, summed across
// ranks (CountState, common.hpp: the number of keypoints must agree).
#include "common.hpp"

namespace tally::keypoints {
namespace {

class KeypointAUC final : public CountMetric {
 public:
  explicit KeypointAUC(const Params& p)
      : CountMetric(p.owner_or("KeypointAUC"), 1 + p.get_size("num_thrs", 1, 100000)),
        norm_factor_(p.get_number("norm_factor")),
        num_thrs_(p.get_size("num_thrs", 1, 100000)) {
    // mmeval masks every keypoint out at the first threshold, then (its calc_distances having
    // replaced the 0 by 1e6 in place) counts every keypoint as correct at the others: AUC
    // (T - 1) / T, a number that means nothing. (A negative factor is mmeval's too: the
    // distances of its absolute value.)
    if (norm_factor_ == 0.0)
      p.fail("norm_factor", "must not be 0 (mmeval's result would be (num_thrs - 1) / num_thrs)");
  }

 protected:
  std::int64_t coord_dims() const override { return 2; }

  void count(const Batch& /*batch*/, const Coords& c, std::int64_t /*first*/,
             std::int64_t* counts) const override {
    // mmeval: np.tile(np.array([[norm_factor, norm_factor]]), (N, 1)), a float64 array.
    const Tensor norm = Tensor::from_vector<double>(
        std::vector<double>(static_cast<std::size_t>(c.n * 2), norm_factor_), {c.n, 2});
    const std::vector<float> dist = distances(c, norm);
    for (std::int64_t t = 0; t < num_thrs_; ++t) {
      const double thr = 1.0 * static_cast<double>(t) / static_cast<double>(num_thrs_);
      count_below<float>(dist, c.n, c.k, numpy::weak_scalar<float>(thr), t == 0 ? counts : nullptr,
                         counts + (1 + t) * c.k);
    }
  }

  Value results(const std::vector<std::int64_t>& counts, std::int64_t k,
                std::int64_t /*n*/) const override {
    double auc = 0;
    for (std::int64_t t = 0; t < num_thrs_; ++t) {
      const PckSummary s =
          pck_summary(counts.data(), &counts[static_cast<std::size_t>((1 + t) * k)], k);
      auc += 1.0 / static_cast<double>(num_thrs_) * s.avg;
    }
    Value out = Value::map();
    out.set(fmt::format("AUC@{}", num_thrs_), auc);
    return out;
  }

 private:
  double norm_factor_;
  std::int64_t num_thrs_;
};

}  // namespace

ComponentInfo keypoint_auc_info() {
  return with_results(
      metric<KeypointAUC>(
          "KeypointAUC",
          "Area under the PCK-accuracy curve over num_thrs thresholds i / num_thrs, distances "
          "divided by a fixed norm_factor. mmeval's KeypointAUC; key AUC@{num_thrs}, a fraction. "
          "2-D coordinates.",
          {param("norm_factor", ParamType::Float,
                 "The normaliser, in pixels, of both axes (mmeval's default 30). A negative value "
                 "is replaced by 1e6, as mmeval does; 0 is refused (mmeval's result for 0 is "
                 "(num_thrs - 1) / num_thrs).")
               .def(30.0),
           param("num_thrs", ParamType::Int, "Number of thresholds (0, 1/T, ..., (T-1)/T).")
               .def(20)},
          {pred_input(), gt_input(), mask_input()}),
      {{"AUC@*", Better::Higher, Plot::None, "area under the PCK curve, in [0, 1]"}});
}
TALLY_COMPONENT(keypoint_auc_info)

}  // namespace tally::keypoints
