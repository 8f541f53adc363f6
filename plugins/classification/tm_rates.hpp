// torchmetrics' Accuracy and F1Score (tm_rates.cpp): what accuracy.cpp and f1_score.cpp make
// when a `task` parameter is given.
#pragma once

#include <memory>
#include <vector>

#include "tally/sdk/metric.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"

namespace tally::classification {

/// The task parameters of torchmetrics' Accuracy (zero_division false) or F1Score (true), each
/// documented as read with task only.
std::vector<ParamSpec> tm_rate_params(bool zero_division);
/// torchmetrics' fields preds and target, optional (the mmeval mode reads others), documented as
/// read with task.
std::vector<InputSpec> tm_rate_inputs();
std::unique_ptr<Metric> make_tm_accuracy(const Params& p);
std::unique_ptr<Metric> make_tm_f1_score(const Params& p);

}  // namespace tally::classification
