// ConfusionMatrix: the K x K counts of (true class, predicted class).
//
// Formula. The prediction of a sample is p = argmax(s) (the first index among equal scores, as
// numpy.argmax) or the given pred_label; then
//   matrix[y][p] = #{samples with true class y and prediction p}
// rows are the true class, columns the prediction; every row sums to the support of its class.
//
// Reference: sklearn.metrics.confusion_matrix(y, p, labels=range(K)) (same orientation); the
// result of mmpretrain's ConfusionMatrix. Counts are exact int64.
//
// Key: "matrix", an array of K arrays of K integers.
//
// Example: num_classes 3, pred_labels [0, 2, 1, 2], gt_labels [0, 1, 1, 2]
//   -> {matrix: [[1, 0, 0], [0, 1, 1], [0, 0, 1]]}
//
// State: one flat int64 counter of K * K cells (index y * K + p, computed in 64 bits whatever
// the label dtype) and the sample count, both summed across ranks (exact on any number of
// ranks).
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common.hpp"
#include "row_kernels.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"
#ifdef TALLY_CLASSIFICATION_CUDA
#include "cuda/gpu_metrics.hpp"
#endif

namespace tally::classification {
namespace {

constexpr std::int64_t kMaxClasses = 16384;

struct ConfusionState {
  PackedVector<std::int64_t> counts;  // [K * K], row = true class
  std::int64_t n = 0;
  TALLY_STATE(sum(counts), sum(n))
};

class ConfusionMatrix final : public TypedMetric<ConfusionState> {
 public:
  explicit ConfusionMatrix(const Params& p)
      // The matrix is state on every rank and travels at each sync as one msgpack bin (< 4 GiB).
      : k_(p.get_size("num_classes", 1, kMaxClasses,
                      "the matrix holds num_classes^2 int64 counters: 2 GiB at 16384")),
        threads_(read_threads(p)),
        check_(p.owner_or("ConfusionMatrix")) {}

 protected:
  ConfusionState initial_state() const override {
    ConfusionState s;
    s.counts.assign(static_cast<std::size_t>(k_ * k_), 0);
    return s;
  }

  void update(ConfusionState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
#ifdef TALLY_CLASSIFICATION_CUDA
    if (gpu::on_cuda(batch))
      return gpu::confusion_matrix_update(check_, k_, batch, state.counts, state.n);
#endif
    std::int64_t* counts = state.counts.data();
    const std::int64_t k = k_;
    std::int64_t n = 0;
    if (has_scores(batch, check_)) {
      const Tensor& scores = check_.score_matrix(batch, kScores);  // NaN: checked by the kernel
      const std::int64_t cols = score_classes(scores, check_);
      n = scores.size(0);
      // Every prediction first, in the pass that checks for NaN (before the other checks, as
      // InputChecker::scores() would): a NaN anywhere in the batch leaves the state untouched.
      std::vector<std::int64_t> pred(static_cast<std::size_t>(n));
      visit_floating(scores, [&](const auto* s) {
        if (!row_argmax_threaded(s, n, cols, pred.data(), threads_))
          fail_nan_scores(check_, scores, state.n);
      });
      if (cols != k)
        check_.fail(kScores, "has " + std::to_string(cols) + " columns, but num_classes is " +
                                 std::to_string(k));
      const Tensor& gt = check_.labels(batch, kGtLabels, k, state.n);
      check_.same_rows(scores, kScores, gt, kGtLabels);
      visit_integral(gt, [&](const auto* y) {
        for (std::int64_t i = 0; i < n; ++i)
          ++counts[static_cast<std::int64_t>(y[i]) * k + pred[static_cast<std::size_t>(i)]];
      });
    } else {
      const Tensor& pred = check_.labels(batch, kPredLabels, k, state.n);
      const Tensor& gt = check_.labels(batch, kGtLabels, k, state.n);
      check_.same_rows(pred, kPredLabels, gt, kGtLabels);
      n = pred.size(0);
      visit_integral(pred, [&](const auto* p) {
        visit_integral(gt, [&](const auto* y) {
          for (std::int64_t i = 0; i < n; ++i)
            ++counts[static_cast<std::int64_t>(y[i]) * k + static_cast<std::int64_t>(p[i])];
        });
      });
    }
    state.n += n;
  }

  Value compute(const ConfusionState& all) const override {
    const auto cells = static_cast<std::size_t>(k_ * k_);
    if (all.counts.size() != cells)  // a state restored from another configuration
      check_.fail_runtime(std::string("the state has ") + std::to_string(all.counts.size()) +
                          " cells, expected " + std::to_string(cells));
    if (all.n == 0) check_.fail("no samples");
    const auto& total = all.counts;
    Value::Array rows;
    rows.reserve(static_cast<std::size_t>(k_));
    const auto k = static_cast<std::size_t>(k_);
    for (std::size_t y = 0; y < k; ++y)
      rows.emplace_back(
          std::vector<std::int64_t>(total.begin() + static_cast<std::ptrdiff_t>(y * k),
                                    total.begin() + static_cast<std::ptrdiff_t>((y + 1) * k)));
    Value out = Value::map();
    out.set("matrix", Value(std::move(rows)));
    return out;
  }

 private:
  std::int64_t k_;
  int threads_ = 1;
  InputChecker check_;
};

}  // namespace

ComponentInfo confusion_matrix_info() {
  return with_results(
      metric<ConfusionMatrix>(
          "ConfusionMatrix",
          "The confusion matrix: matrix[y][p] counts the samples of true class y predicted as p "
          "(argmax of the scores, or the given labels), as scikit-learn's confusion_matrix(y, p, "
          "labels=range(num_classes)). Key: matrix, num_classes arrays of num_classes integers.",
          {param("num_classes", ParamType::Int,
                 "Number of classes K (the matrix is K x K); pred_scores must have K columns."),
           threads_param()},
          {InputSpec{kScores,
                     "Class scores [N, K], float32 or float64; the prediction is the argmax.",
                     false},
           InputSpec{kPredLabels,
                     "Predicted class ids [N], any integer dtype, in [0, K); used when pred_scores "
                     "is absent.",
                     false},
           InputSpec{kGtLabels, "True class ids [N], any integer dtype, in [0, K).", true}}),
      {{"matrix", Better::Neither, Plot::Heatmap,
        "counts: rows = true class, columns = predicted class"}});
}
TALLY_COMPONENT(confusion_matrix_info)

}  // namespace tally::classification
