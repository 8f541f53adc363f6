// Precision and Recall, and with a task Accuracy and F1Score: torchmetrics' four rates of a
// binary, multiclass or multilabel task. Precision and Recall are components of their own;
// Accuracy and F1Score are the mmeval metrics of accuracy.cpp and f1_score.cpp unless a `task`
// parameter is given, and then these (make_tm_accuracy, make_tm_f1_score), on fields preds and
// target.
//
// Formula. With the counts of tm_core.hpp (tp, fp, tn, fn per class; binary: one class):
//   Accuracy   binary (tp + tn) / (tp + tn + fp + fn); multiclass micro sum tp / sum (tp + fn)
//              (the fraction of samples right); multilabel micro (tp + tn) / all of the sums;
//              per class: tp / (tp + fn) multiclass, (tp + tn) / all multilabel
//   Precision  tp / (tp + fp)   (micro: of the sums)
//   Recall     tp / (tp + fn)   (micro: of the sums)
//   F1Score    2 tp / (2 tp + fp + fn)   (FBetaScore with beta 1, as torchmetrics' F1Score)
//   macro, weighted: the per-class values averaged (tm::adjust_weights); none: the array.
// A zero denominator gives 0 (Accuracy) or zero_division (Precision, Recall, F1Score: 0 or 1).
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.accuracy / precision / recall /
// f1_score(preds, target, task=..., threshold=..., num_classes=..., num_labels=..., average=...,
// top_k=..., ignore_index=...[, zero_division=...]) computed in float64 (float64 preds;
// torchmetrics' float32 casts made float64): tests/reference/classification_torchmetrics.py.
//
// Keys: accuracy, precision, recall, f1_score.
//
// Example: task binary, preds [0.1, 0.9, 0.6, 0.4], target [0, 1, 0, 1]
//   -> {accuracy: 0.5}, {precision: 0.5}, {recall: 0.5}, {f1_score: 0.5}
//
// State: the confusion counts of tm_core.hpp (int64, summed across ranks: exact).
#include "tm_rates.hpp"
#include <array>

#include "common.hpp"
#include "tm_core.hpp"

namespace tally::classification {
namespace {

using namespace tm;

enum class Rate { Accuracy, Precision, Recall, F1 };

struct Counts {
  double tp, fp, tn, fn;
};

double rate_of(Rate r, const Counts& c, bool multiclass, double zero_division) {
  switch (r) {
    case Rate::Accuracy:
      return multiclass ? safe_divide(c.tp, c.tp + c.fn)
                        : safe_divide(c.tp + c.tn, c.tp + c.tn + c.fp + c.fn);
    case Rate::Precision:
      return safe_divide(c.tp, c.tp + c.fp, zero_division);
    case Rate::Recall:
      return safe_divide(c.tp, c.tp + c.fn, zero_division);
    case Rate::F1:
      return safe_divide(2 * c.tp, 2 * c.tp + c.fp + c.fn, zero_division);
  }
  return 0.0;
}

/// The component's name and the result's key of each rate, indexed by Rate.
struct RateNames {
  const char* type;
  const char* key;
};
constexpr std::array<RateNames, 4> kRateNames = {{{"Accuracy", "accuracy"},
                                                  {"Precision", "precision"},
                                                  {"Recall", "recall"},
                                                  {"F1Score", "f1_score"}}};
constexpr const RateNames& names_of(Rate r) { return kRateNames[static_cast<std::size_t>(r)]; }

template <Rate kRate>
class RateMetric final : public CountMetric {
 public:
  explicit RateMetric(const Params& p)
      : CountMetric(p, names_of(kRate).type, stat_score_options(), SigmoidOver::All) {
    if (kRate != Rate::Accuracy) {
      zero_division_ = p.get_double("zero_division");
      if (zero_division_ != 0.0 && zero_division_ != 1.0)
        p.fail("zero_division", fmt::format("must be 0 or 1, got {}", zero_division_));
    }
  }

 protected:
  Value compute(const CountState& state) const override {
    const Stats s = stats_of(tp_, checked(state));
    const bool multiclass = tp_.task == Task::Multiclass;
    Value out = Value::map();
    if (tp_.task == Task::Binary || tp_.average == Average::Micro) {
      const Counts sum{static_cast<double>(total_of(s.tp)), static_cast<double>(total_of(s.fp)),
                       static_cast<double>(total_of(s.tn)), static_cast<double>(total_of(s.fn))};
      out.set(names_of(kRate).key, rate_of(kRate, sum, multiclass, zero_division_));
      return out;
    }
    std::vector<double> score(s.size());
    for (std::size_t c = 0; c < s.size(); ++c)
      score[c] = rate_of(kRate,
                         {static_cast<double>(s.tp[c]), static_cast<double>(s.fp[c]),
                          static_cast<double>(s.tn[c]), static_cast<double>(s.fn[c])},
                         multiclass, zero_division_);
    out.set(names_of(kRate).key, adjust_weights(score, tp_, s));
    return out;
  }

 private:
  double zero_division_ = 0.0;
};

ParamSpec zero_division_param() {
  return param("zero_division", ParamType::Float,
               "The score where its denominator is 0 (no predicted or no true positives): 0 or 1.")
      .def(0.0);
}

std::vector<ParamSpec> rate_params(bool zero_division) {
  auto params = task_params(stat_score_options());
  if (zero_division) params.push_back(zero_division_param());
  return params;
}

std::string rate_doc(const char* name, const char* formula, const char* fn) {
  return fmt::format(
      "torchmetrics' {} {} of a binary, multiclass or multilabel task; key {}. Reference: "
      "torchmetrics 1.9.0 torchmetrics.functional.{}(preds, target, task, threshold, "
      "num_classes, num_labels, average, top_k=top_k, ignore_index=ignore_index, "
      "zero_division=zero_division).",
      name, formula, fn, fn);
}

}  // namespace

std::vector<ParamSpec> tm_rate_params(bool zero_division) {
  auto params = rate_params(zero_division);
  for (auto& spec : params)
    if (spec.name != "task") spec.doc = "With task: " + spec.doc;
  return params;
}

std::vector<InputSpec> tm_rate_inputs() {
  auto inputs = task_inputs();
  for (auto& spec : inputs) {
    spec.required = false;
    spec.doc = "With task: " + spec.doc;
  }
  return inputs;
}

std::unique_ptr<Metric> make_tm_accuracy(const Params& p) {
  return std::make_unique<RateMetric<Rate::Accuracy>>(p);
}

std::unique_ptr<Metric> make_tm_f1_score(const Params& p) {
  return std::make_unique<RateMetric<Rate::F1>>(p);
}

ComponentInfo precision_info() {
  return with_results(
      metric<RateMetric<Rate::Precision>>("Precision",
                                          rate_doc("Precision", "tp / (tp + fp)", "precision"),
                                          rate_params(true), task_inputs()),
      {{"precision", Better::Higher, Plot::None, "tp / (tp + fp) (array: per class)"}});
}
TALLY_COMPONENT(precision_info)

ComponentInfo recall_info() {
  return with_results(
      metric<RateMetric<Rate::Recall>>("Recall", rate_doc("Recall", "tp / (tp + fn)", "recall"),
                                       rate_params(true), task_inputs()),
      {{"recall", Better::Higher, Plot::None, "tp / (tp + fn) (array: per class)"}});
}
TALLY_COMPONENT(recall_info)

}  // namespace tally::classification
