// The detection plugin's components, one per file.
#pragma once

#include "tally/sdk/plugin.hpp"

namespace tally::detection {

ComponentInfo coco_detection_info();
ComponentInfo lvis_detection_info();
ComponentInfo voc_mean_ap_info();
ComponentInfo oid_mean_ap_info();
ComponentInfo dota_mean_ap_info();
ComponentInfo proposal_recall_info();
ComponentInfo ava_map_info();

}  // namespace tally::detection
