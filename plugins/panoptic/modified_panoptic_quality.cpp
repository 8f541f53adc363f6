// ModifiedPanopticQuality: PQ-dagger of Porzi et al. 2019 ("Seamless Scene Segmentation"), as
// torchmetrics 1.9's torchmetrics.detection.ModifiedPanopticQuality computes it.
//
// Formula. Things as in PanopticQuality (panoptic_quality.cpp). A stuff class c has no matching,
// false positives nor false negatives: every pair of a predicted and a ground-truth segment of c
// with IoU > 0 (float32; void points left out of the union as in PanopticQuality) adds its IoU to
// IoU_c, and every ground-truth segment of c counts one in |S_c|; PQ_c = IoU_c / |S_c|. pq is the
// mean of PQ_c over the classes with TP + FP/2 + FN/2 > 0 (|S_c| > 0 for a stuff), as torchmetrics
// computes it (its state holds |S_c| in true_positives and reuses PanopticQuality's compute()).
//
// Reference: torchmetrics 1.9.0's ModifiedPanopticQuality (compute(): the scalar), reproduced
// operation for operation (float32 IoUs, float64 PQ, torch.mean in ATen's order); equal bit for
// bit on tests/reference/panoptic.py's data. Keys: pq; pq_things and pq_stuff, the same mean over
// the thing (stuff) classes only (NaN without any).
//
// Inputs, void and crowd: as PanopticQuality (panoptic_quality.cpp); crowd 'void' makes the ground
// truth's crowd points void, which is equal to torchmetrics on maps with those points void.
//
// Example (torchmetrics' docstring): things {0, 1}, stuffs {6, 7}, one map of 6 points,
// preds [[0, 0], [0, 1], [6, 0], [7, 0], [0, 2], [1, 0]], target [[0, 1], [0, 0], [6, 0], [7, 0],
// [6, 0], [255, 0]] -> pq 0.7667.
//
// State: as PanopticQuality's, exact integer counts summed across ranks.
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "panoptic_common.hpp"

namespace tally::panoptic {
namespace {

class ModifiedPanopticQuality final : public PanopticBase {
 public:
  explicit ModifiedPanopticQuality(const Params& p)
      : PanopticBase(p, true, "ModifiedPanopticQuality") {}

 protected:
  Value compute(const PanopticState& all) const override {
    const auto [cats, q] = qualities(all);
    const std::int64_t c = cats.size(), t = cats.num_things();
    Value out = Value::map();
    out.set("pq", q.mean_pq(0, c));
    out.set("pq_things", q.mean_pq(0, t));
    out.set("pq_stuff", q.mean_pq(t, c));
    return out;
  }
};

}  // namespace

ComponentInfo modified_panoptic_quality_info() {
  ComponentInfo info = metric<ModifiedPanopticQuality>(
      "ModifiedPanopticQuality",
      "Modified panoptic quality (PQ-dagger, Porzi et al. 2019) of panoptic maps, as "
      "torchmetrics 1.9 ModifiedPanopticQuality: things as PanopticQuality, a stuff class's PQ "
      "the sum of its IoUs > 0 over its number of ground-truth segments. pq, pq_things, "
      "pq_stuff; fractions in [0, 1].",
      common_params(), common_inputs());
  info.results = {{"*", Better::Higher, Plot::None, "fraction in [0, 1]"}};
  return info;
}
TALLY_COMPONENT(modified_panoptic_quality_info)

}  // namespace tally::panoptic
