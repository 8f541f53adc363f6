// The classification plugin: Accuracy, SingleLabelMetric (alias SingleLabelPrecisionRecallF1score)
// and ConfusionMatrix. Each metric lives in its own file with its formula and references.
#include <vector>

#include "common.hpp"
#include "tally/plugin.hpp"

namespace {

// A named function rather than a lambda in the macro call: the braces of a vector's
// initializer list would split the macro arguments at their commas.
// What the result keys mean for `tally compare` and the reports (first matching glob wins).
std::vector<tally::ComponentInfo> classification_components() {
  using tally::Better;
  using tally::Plot;
  auto accuracy = tally::classification::accuracy_info();
  accuracy.results = {
      {"top*", Better::Higher, Plot::None, "fraction of samples whose true class is in the top k"}};
  auto prf = tally::classification::single_label_metric_info();
  prf.results = {
      {"support*_classwise", Better::Neither, Plot::Bars, "samples of each true class"},
      {"support*", Better::Neither, Plot::None, "samples evaluated"},
      {"*_classwise", Better::Higher, Plot::Bars, "per class, index = class id"},
      {"*", Better::Higher, Plot::None, "averaged over the classes (macro) or pooled (micro)"}};
  auto confusion = tally::classification::confusion_matrix_info();
  confusion.results = {{"matrix", Better::Neither, Plot::Heatmap,
                        "counts: rows = true class, columns = predicted class"}};
  return {std::move(accuracy), std::move(prf), std::move(confusion)};
}

}  // namespace

TALLY_PLUGIN("classification", "0.1.0", classification_components)
