// The text-detection plugin: HmeanIoU (mmeval's, MMOCR's metric for ICDAR-style text detection),
// polygon IoU through GEOS.
#include <vector>

#include "tally/sdk/plugin.hpp"

namespace tally::text_detection {
ComponentInfo hmean_iou_info();
}  // namespace tally::text_detection

namespace {

std::vector<tally::ComponentInfo> text_detection_components() {
  std::vector<tally::ComponentInfo> out;
  out.push_back(tally::text_detection::hmean_iou_info());
  return out;
}

}  // namespace

TALLY_PLUGIN("text_detection", "0.1.0", text_detection_components)
