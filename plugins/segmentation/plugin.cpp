// The segmentation plugin: MeanIoU (mmeval's MeanIoU), DiceScore, GeneralizedDiceScore and
// HausdorffDistance (torchmetrics'). Each metric lives in its own file with its formula and
// reference.
#include <vector>

#include "overlap_common.hpp"
#include "tally/sdk/plugin.hpp"

namespace tally::segmentation {
ComponentInfo mean_iou_info();
}  // namespace tally::segmentation

namespace {

std::vector<tally::ComponentInfo> segmentation_components() {
  using tally::Better;
  using tally::Plot;
  auto dice = tally::segmentation::dice_score_info();
  dice.results = {{"dice_score", Better::Higher, Plot::None,
                   "Dice score in [0, 1] (an array over classes with average none)"}};
  auto gdice = tally::segmentation::generalized_dice_score_info();
  gdice.results = {{"generalized_dice_score", Better::Higher, Plot::None,
                    "generalized Dice score in [0, 1] (an array over classes with per_class)"}};
  auto hd = tally::segmentation::hausdorff_distance_info();
  hd.results = {{"hausdorff_distance", Better::Lower, Plot::None,
                 "mean Hausdorff distance between segment edges (pixels, or spacing units)"}};
  return {tally::segmentation::mean_iou_info(), std::move(dice), std::move(gdice), std::move(hd)};
}

}  // namespace

TALLY_PLUGIN("segmentation", "0.1.0", segmentation_components)
