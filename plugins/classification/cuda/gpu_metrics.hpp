// The GPU path of the classification metrics: when a batch's inputs live in CUDA memory, the
// metric's update() hands the batch to one of these functions instead of its CPU loop. They run
// the same checks (same InputErrors, in the same order, naming the metric, the field and the
// sample), count with the kernels of kernels.hpp without copying the batch to the host, and add
// the counts into the metric's host state, which then packs and syncs as usual. The state is
// left unchanged when the batch is refused.
//
// Plain C++ (no CUDA header): the metric files include it under TALLY_CLASSIFICATION_CUDA.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/input.hpp"

namespace tally::classification::gpu {

/// Whether the metric's inputs in `batch` -- pred_scores (else pred_labels) and gt_labels --
/// include a CUDA tensor: the update then takes the GPU path (which refuses a mix of devices).
bool on_cuda(const Batch& batch);

/// Accuracy: `hits` holds topk.size() * thrs.size() counters, k major; `n` the samples seen.
void accuracy_update(const InputChecker& check, const std::vector<std::int64_t>& topk,
                     std::int64_t maxk, const std::vector<std::optional<double>>& thrs,
                     const Batch& batch, std::vector<std::int64_t>& hits, std::int64_t& n);

/// The counters of SingleLabelMetric's state: support [C], tp and predicted [thrs x C].
struct SingleLabelCounters {
  std::int64_t* support = nullptr;
  std::int64_t* tp = nullptr;
  std::int64_t* predicted = nullptr;
};

/// SingleLabelMetric. `num_classes` is the parameter (0: not given). `size_state(c)` is the
/// metric's own check-and-size step for a batch of c classes (it may throw, as on the CPU path)
/// and returns the counters to add to; it is called once the batch has passed every other check.
void single_label_update(const InputChecker& check, const std::vector<std::optional<double>>& thrs,
                         std::int64_t num_classes, const Batch& batch, std::int64_t& n,
                         const std::function<SingleLabelCounters(std::int64_t)>& size_state);

/// ConfusionMatrix: `counts` holds k * k counters, row = true class.
void confusion_matrix_update(const InputChecker& check, std::int64_t k, const Batch& batch,
                             std::vector<std::int64_t>& counts, std::int64_t& n);

}  // namespace tally::classification::gpu
