// The classification plugin: Accuracy, SingleLabelMetric (alias SingleLabelPrecisionRecallF1score),
// ConfusionMatrix, MultiLabelMetric (alias MultiLabelPrecisionRecallF1score), AveragePrecision,
// ROCAUC and F1Score. Each metric lives in its own file with its formula and references.
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
  auto multi_label = tally::classification::multi_label_metric_info();
  multi_label.results = prf.results;
  multi_label.results[0].doc = "positive labels of each class";
  multi_label.results[1].doc = "positive labels, summed over the classes";
  auto ap = tally::classification::average_precision_info();
  ap.results = {{"AP_classwise", Better::Higher, Plot::Bars, "average precision per class"},
                {"mAP", Better::Higher, Plot::None, "mean average precision over the classes"}};
  auto auc = tally::classification::roc_auc_info();
  auc.results = {{"AUC_classwise", Better::Higher, Plot::Bars, "ROC AUC per class"},
                 {"AUC", Better::Higher, Plot::None, "area under the ROC curve"}};
  auto f1 = tally::classification::f1_score_info();
  f1.results = {{"*_f1", Better::Higher, Plot::None, "F1 over the cared classes"}};
  return {std::move(accuracy), std::move(prf), std::move(confusion), std::move(multi_label),
          std::move(ap),       std::move(auc), std::move(f1)};
}

}  // namespace

TALLY_PLUGIN("classification", "0.1.0", classification_components)
