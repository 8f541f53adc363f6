// The segmentation plugin: MeanIoU (mmeval's MeanIoU). Each metric lives in its own file with its
// formula and reference.
#include <vector>

#include "tally/plugin.hpp"

namespace tally::segmentation {
ComponentInfo mean_iou_info();
}  // namespace tally::segmentation

namespace {

std::vector<tally::ComponentInfo> segmentation_components() {
  return {tally::segmentation::mean_iou_info()};
}

}  // namespace

TALLY_PLUGIN("segmentation", "0.1.0", segmentation_components)
