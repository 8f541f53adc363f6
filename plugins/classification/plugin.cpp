// The classification plugin: Accuracy, SingleLabelMetric (alias SingleLabelPrecisionRecallF1score)
// and ConfusionMatrix. Each metric lives in its own file with its formula and references.
#include <vector>

#include "common.hpp"
#include "tally/plugin.hpp"

namespace {

// A named function rather than a lambda in the macro call: the braces of a vector's
// initializer list would split the macro arguments at their commas.
std::vector<tally::ComponentInfo> classification_components() {
  return {tally::classification::accuracy_info(), tally::classification::single_label_metric_info(),
          tally::classification::confusion_matrix_info()};
}

}  // namespace

TALLY_PLUGIN("classification", "0.1.0", classification_components)
