// The image-quality plugin: torchmetrics 1.9's image metrics on [N, C, H, W] float images
// (MultiScaleStructuralSimilarityIndexMeasure, ...), each in its own file with its formula and
// reference.
#include <vector>

#include "common.hpp"
#include "tally/sdk/plugin.hpp"

namespace {

std::vector<tally::ComponentInfo> image_components() {
  using namespace tally::image;
  return {ms_ssim_info(), uqi_info(), sam_info(),      ergas_info(), rase_info(),
          tv_info(),      scc_info(), d_lambda_info(), vif_info()};
}

}  // namespace

TALLY_PLUGIN("image", "0.1.0", image_components)
