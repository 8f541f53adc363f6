// The classification plugin: Accuracy, SingleLabelMetric (alias SingleLabelPrecisionRecallF1score),
// ConfusionMatrix, MultiLabelMetric (alias MultiLabelPrecisionRecallF1score), AveragePrecision,
// ROCAUC, F1Score and PrecisionRecallF1score (mmeval's factory of the two); and torchmetrics'
// task-based StatScores, Specificity, FBetaScore, HammingDistance, JaccardIndex, ExactMatch,
// MatthewsCorrCoef, CohenKappa and CalibrationError (tm_core.hpp). Each metric lives in its own
// file with its formula and references.
#include <vector>

#include "common.hpp"
#include "curve_core.hpp"
#include "tally/sdk/plugin.hpp"

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
                {"mAP", Better::Higher, Plot::None, "mean average precision over the classes"},
                {"average_precision", Better::Higher, Plot::None,
                 "torchmetrics' average precision (with task; array: per class / label)"}};
  auto auc = tally::classification::roc_auc_info();
  auc.results = {{"AUC_classwise", Better::Higher, Plot::Bars, "ROC AUC per class"},
                 {"AUC", Better::Higher, Plot::None, "area under the ROC curve"}};
  auto f1 = tally::classification::f1_score_info();
  f1.results = {{"*_f1", Better::Higher, Plot::None, "F1 over the cared classes"}};
  std::vector<tally::ComponentInfo> out;
  // mmeval's factory: SingleLabelMetric or MultiLabelMetric by `task`, with their result keys.
  auto prf_factory = tally::classification::precision_recall_f1score_info();
  prf_factory.results = prf.results;
  for (auto* c : {&accuracy, &prf, &confusion, &multi_label, &ap, &auc, &f1, &prf_factory})
    out.push_back(std::move(*c));
  // torchmetrics' task-based metrics: scalars (arrays with average none).
  using namespace tally::classification;
  const auto with = [&](tally::ComponentInfo c, std::vector<tally::ResultSpec> r) {
    c.results = std::move(r);
    out.push_back(std::move(c));
  };
  with(stat_scores_info(), {{"tp", Better::Higher, Plot::None, "true positives"},
                            {"fp", Better::Lower, Plot::None, "false positives"},
                            {"tn", Better::Higher, Plot::None, "true negatives"},
                            {"fn", Better::Lower, Plot::None, "false negatives"},
                            {"support", Better::Neither, Plot::None, "tp + fn"}});
  with(specificity_info(),
       {{"specificity", Better::Higher, Plot::None, "tn / (tn + fp) (array: per class)"}});
  with(fbeta_score_info(),
       {{"fbeta_score", Better::Higher, Plot::None, "F-beta (array: per class)"}});
  with(hamming_distance_info(), {{"hamming_distance", Better::Lower, Plot::None,
                                  "fraction of wrong labels (array: per class)"}});
  with(jaccard_index_info(), {{"jaccard_index", Better::Higher, Plot::None,
                               "intersection over union (array: per class)"}});
  with(exact_match_info(),
       {{"exact_match", Better::Higher, Plot::None, "fraction of samples with every label right"}});
  with(matthews_corrcoef_info(), {{"matthews_corrcoef", Better::Higher, Plot::None,
                                   "Matthews correlation coefficient, in [-1, 1]"}});
  with(cohen_kappa_info(),
       {{"cohen_kappa", Better::Higher, Plot::None, "agreement beyond chance, at most 1"}});
  with(calibration_error_info(), {{"calibration_error", Better::Lower, Plot::None,
                                   "gap between confidence and accuracy over the bins"}});
  // torchmetrics' curves: arrays (arrays of arrays per class / label), no scalar direction.
  with(precision_recall_curve_info(),
       {{"precision", Better::Neither, Plot::None, "precision at each threshold (curve)"},
        {"recall", Better::Neither, Plot::None, "recall at each threshold (curve)"},
        {"thresholds", Better::Neither, Plot::None, "the thresholds, increasing"}});
  with(roc_info(),
       {{"fpr", Better::Neither, Plot::None, "false positive rate at each threshold (curve)"},
        {"tpr", Better::Neither, Plot::None, "true positive rate at each threshold (curve)"},
        {"thresholds", Better::Neither, Plot::None, "the thresholds, decreasing"}});
  with(auroc_info(), {{"auroc", Better::Higher, Plot::None,
                       "area under the ROC curve (array: per class / label)"}});
  // Operating points and areas of the curves (curve_core.hpp).
  const tally::ResultSpec threshold = {"threshold", Better::Neither, Plot::None,
                                       "the threshold of that point (array: per class / label)"};
  with(precision_at_fixed_recall_info(),
       {{"precision", Better::Higher, Plot::None, "best precision at the minimum recall"},
        threshold});
  with(recall_at_fixed_precision_info(),
       {{"recall", Better::Higher, Plot::None, "best recall at the minimum precision"}, threshold});
  with(sensitivity_at_specificity_info(),
       {{"sensitivity", Better::Higher, Plot::None, "best sensitivity at the minimum specificity"},
        threshold});
  with(specificity_at_sensitivity_info(),
       {{"specificity", Better::Higher, Plot::None, "best specificity at the minimum sensitivity"},
        threshold});
  with(logauc_info(), {{"logauc", Better::Higher, Plot::None,
                        "ROC area over fpr_range on a log axis (array: per class / label)"}});
  return out;
}

}  // namespace

TALLY_PLUGIN("classification", "0.1.0", classification_components)
