// The keypoints plugin: PCKAccuracy, MpiiPCKAccuracy, JhmdbPCKAccuracy, KeypointAUC,
// KeypointEndPointError and KeypointNME, mmeval's pose-estimation metrics. Each metric lives in
// its own file with its formula and reference; common.hpp holds the inputs and the distance.
#include <vector>

#include "common.hpp"
#include "tally/sdk/plugin.hpp"

namespace {

std::vector<tally::ComponentInfo> keypoint_components() {
  using tally::Better;
  using tally::Plot;
  namespace kp = tally::keypoints;
  auto pck = kp::pck_accuracy_info();
  pck.results = {{"*", Better::Higher, Plot::None,
                  "mean over keypoints of the fraction within thr x the normaliser"}};
  auto mpii = kp::mpii_pck_accuracy_info();
  mpii.results = {{"*", Better::Higher, Plot::None,
                   "PCKh per joint group and overall in percent; PCK@/tPCK@ as fractions"}};
  auto jhmdb = kp::jhmdb_pck_accuracy_info();
  jhmdb.results = {{"*", Better::Higher, Plot::None, "PCK per joint group, fractions"}};
  auto auc = kp::keypoint_auc_info();
  auc.results = {{"AUC@*", Better::Higher, Plot::None, "area under the PCK curve, in [0, 1]"}};
  auto epe = kp::keypoint_epe_info();
  epe.results = {{"EPE", Better::Lower, Plot::None, "mean keypoint distance, in pixels"}};
  auto nme = kp::keypoint_nme_info();
  nme.results = {{"NME", Better::Lower, Plot::None, "mean normalised keypoint distance"}};
  return {std::move(pck), std::move(mpii), std::move(jhmdb),
          std::move(auc), std::move(epe),  std::move(nme)};
}

}  // namespace

TALLY_PLUGIN("keypoints", "0.1.0", keypoint_components)
