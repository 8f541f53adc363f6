// AveragePrecision: average precision per class, and its mean over the classes (mAP), for
// multi-label, multi-class (one-vs-rest) and binary scores.
//
// Formula, per class c (scores s[:, c], positives y == c or the indicator Y[:, c]): samples sorted
// by decreasing score, one point per distinct score (tied samples enter together), with the
// cumulative counts tp_i and fp_i; P = the number of positives;
//   AP_c = sum_i (R_i - R_{i-1}) * P_i,   R_i = tp_i / P,  P_i = tp_i / (tp_i + fp_i),  R_{-1} = 0
//   AP_c = 0 when class c has no positives.
//   mAP  = the mean of AP_c over all C classes (absent classes count, with AP 0).
//
// Reference: sklearn.metrics.average_precision_score(Y, s, average='macro' | None) on the
// indicator matrix Y (multi-class: label_binarize(y, classes=range(C)); binary: 1-D scores of
// class 1), ties as scikit-learn (one point per distinct score). On untied scores this is
// mmeval.metrics.AveragePrecision (whose argsort order splits ties, and which reports percent,
// rounded, in float32): the same values as fractions, and the same keys (mAP, AP_classwise).
//
// Example (mmeval's docstring): scores [[0.9, 0.8, 0.3, 0.2], [0.1, 0.2, 0.2, 0.1],
// [0.7, 0.5, 0.9, 0.3], [0.8, 0.1, 0.1, 0.2]], labels [[0, 1], [1], [2], [0]]
//   -> {mAP: 0.708333...};  average none -> {AP_classwise: [1.0, 0.8333..., 1.0, 0.0]}
//
// With a `task` parameter (binary, multiclass or multilabel) AveragePrecision is torchmetrics'
// instead, on fields preds and target: tm_average_precision.cpp.
//
// State: every sample's scores (float32 or float64, as given) and labels (class ids or a 0/1
// byte per class), packed, concatenated in rank order at a sync, and the sample count, summed
// (ranking.hpp); sorted at compute time. The result depends only on the set of (score, label)
// pairs, so it is the same bit for bit on any number of ranks.
#include <string>
#include <vector>

#include "common.hpp"
#include "curve_core.hpp"
#include "ranking.hpp"

namespace tally::classification {
namespace {

class AveragePrecision final : public TypedMetric<RankingState> {
 public:
  explicit AveragePrecision(const Params& p)
      : check_(p.owner_or("AveragePrecision")), dense_(label_format_of(p)) {
    const std::string avg = p.has("average") ? p.get_string("average") : "none";
    if (avg != "macro" && avg != "none")
      p.fail("average",
             "must be macro or none without a task (micro and weighted are "
             "torchmetrics' averages: give task), got '" +
                 avg + "'");
    // Size parameters are bounded whenever given (test_bounded_inputs), before anything else.
    for (const char* name : {"num_classes", "num_labels"})
      if (p.has(name)) p.get_size(name);
    for (const char* name : {"thresholds", "num_classes", "num_labels", "ignore_index"})
      if (p.has(name))
        p.fail(name, "is a parameter of torchmetrics' AveragePrecision: give task too");
    per_class_ = avg == "none";
  }

 protected:
  void update(RankingState& state, const Batch& batch) override {
    ranking_update(state, batch, check_, dense_);
  }

  Value compute(const RankingState& all) const override {
    const RankingData d = ranking_data(all, check_);
    std::vector<double> ap;
    CurveBuilder curve;
    for (std::int64_t c = 0; c < d.cols; ++c)
      ap.push_back(average_precision(one_vs_rest_curve(d, c, curve)));
    Value out = Value::map();
    if (per_class_)
      out.set("AP_classwise", Value(ap));
    else
      out.set("mAP", mean_of(ap));
    return out;
  }

 private:
  InputChecker check_;
  DenseLabels dense_;
  bool per_class_ = false;
};

}  // namespace

ComponentInfo average_precision_info() {
  std::vector<ParamSpec> params = {
      param("average", ParamType::String,
            "Without task: macro, mAP, the mean over all classes; none (or null, as mmeval's "
            "None): AP_classwise, one value per class. With task: torchmetrics' average, macro, "
            "weighted or none (multilabel also micro).")
          .def("macro")
          .nullable()
          .choices({"micro", "macro", "weighted", "none"}),
      label_format_param()};
  for (auto& spec : tm_average_precision_params()) params.push_back(std::move(spec));
  // Either mode's fields: checked by the mode's metric when a batch comes.
  std::vector<InputSpec> inputs = ranking_inputs();
  for (auto& spec : tm::task_inputs({.labels = false})) inputs.push_back(std::move(spec));
  for (auto& spec : inputs) {
    spec.required = false;
    spec.doc = (spec.name == kScores || spec.name == kGtLabels ? "Without task: " : "With task: ") +
               spec.doc;
  }
  auto info = metric<AveragePrecision>(
      "AveragePrecision",
      "Average precision per class and its mean (mAP), as scikit-learn's "
      "average_precision_score (tied scores form one point), for multi-label, multi-class "
      "(one-vs-rest) and binary scores. mmeval's AveragePrecision keys (mAP, AP_classwise) as "
      "fractions, not percent. A class with no positives has AP 0. "
      "With a `task` parameter it is torchmetrics' AveragePrecision instead (exact or binned, "
      "key average_precision; tm_average_precision.cpp). "
      "Reference (task): torchmetrics 1.9.0 torchmetrics.functional.average_precision(preds, "
      "target, task, thresholds=thresholds, num_classes=num_classes, num_labels=num_labels, "
      "average=average, ignore_index=ignore_index).",
      std::move(params), std::move(inputs));
  info.make_metric = [](const Params& p) -> std::unique_ptr<Metric> {
    if (p.has("task")) return make_tm_average_precision(p);
    return std::make_unique<AveragePrecision>(p);
  };
  return with_results(
      info, {{"AP_classwise", Better::Higher, Plot::Bars, "average precision per class"},
             {"mAP", Better::Higher, Plot::None, "mean average precision over the classes"},
             {"average_precision", Better::Higher, Plot::None,
              "torchmetrics' average precision (with task; array: per class / label)"}});
}
TALLY_COMPONENT(average_precision_info)

}  // namespace tally::classification
