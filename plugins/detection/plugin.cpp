// The detection plugin: COCODetection, LVISDetection, VOCMeanAP, OIDMeanAP, DOTAMeanAP,
// AVAMeanAP and ProposalRecall. Each metric lives in its own file with its formula and references;
// tally_support/mask.hpp (plugins/support) is the port of pycocotools' maskApi.c.
#include <vector>

#include "detection.hpp"
#include "tally/sdk/plugin.hpp"

namespace {

std::vector<tally::ComponentInfo> detection_components() {
  return {tally::detection::coco_detection_info(), tally::detection::lvis_detection_info(),
          tally::detection::voc_mean_ap_info(),    tally::detection::oid_mean_ap_info(),
          tally::detection::dota_mean_ap_info(),   tally::detection::ava_map_info(),
          tally::detection::proposal_recall_info()};
}

}  // namespace

TALLY_PLUGIN("detection", "0.1.0", detection_components)
