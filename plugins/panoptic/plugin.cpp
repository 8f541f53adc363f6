// The panoptic plugin: PanopticQuality and ModifiedPanopticQuality (torchmetrics' panoptic
// qualities). Each metric lives in its own file with its formula and reference; the counting they
// share is panoptic_common.cpp.
#include <vector>

#include "tally/sdk/plugin.hpp"

namespace tally::panoptic {
ComponentInfo panoptic_quality_info();
ComponentInfo modified_panoptic_quality_info();
}  // namespace tally::panoptic

namespace {

std::vector<tally::ComponentInfo> panoptic_components() {
  return {tally::panoptic::panoptic_quality_info(),
          tally::panoptic::modified_panoptic_quality_info()};
}

}  // namespace

TALLY_PLUGIN("panoptic", "0.1.0", panoptic_components)
