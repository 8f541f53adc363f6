// Accuracy: top-k accuracy, optionally with score thresholds.
//
// Formula. For sample i with scores s (one row of pred_scores [N, C]) and true class y:
//   rank_i = #{c : s_c > s_y} + #{c > y : s_c == s_y}
//   hit_i(k, thr) = rank_i < k  and  (thr is null or s_y > thr)
//   top{k} = sum_i hit_i(k, thr) / N
// The rank breaks ties exactly as scikit-learn's top_k_accuracy_score (a stable ascending
// argsort, reversed: among equal scores the higher class index ranks first). It is one O(C)
// branch-free counting pass per row, in vector registers, that also checks for NaN
// (row_kernels.hpp): no sort, no allocation per sample, one read of the scores.
// With pred_labels [N] (one label per sample) only top-1 is defined: hit_i = (p_i == y_i).
//
// Reference: mmeval.metrics.Accuracy (key names and the threshold rule: a hit needs the true
// class within the top k AND its score > thr) and, for the values,
// sklearn.metrics.top_k_accuracy_score(y, s, k=k, labels=range(C)) (without thresholds).
// Differences from mmeval, on purpose:
//   - thrs defaults to [null] (no threshold); mmeval's default is 0.0, which silently turns every
//     sample whose true-class score is <= 0 into a miss: raw logits can be negative.
//   - ties follow scikit-learn; mmeval's torch.topk leaves their order unspecified.
//   - a threshold is compared in the scores' precision (float32 scores: the threshold is cast
//     to float32 first), as NumPy 2 and PyTorch compare an array with a Python float.
//   - results are fractions in [0, 1], never percent.
//
// Keys (mmeval's): "top{k}" for each k in topk; with more than one threshold,
// "top{k}_no-thr" and "top{k}_thr-{thr:.2f}", k outer, thr inner.
//
// Example: pred_scores [[0.7, 0.1, 0.1, 0.1], [0.1, 0.3, 0.4, 0.2], [0.3, 0.4, 0.2, 0.1],
// [0.0, 0.0, 0.1, 0.9]], gt_labels [0, 1, 2, 3]:
//   topk [1, 2, 3]           -> {top1: 0.5, top2: 0.75, top3: 1.0}
//   topk 2, thrs [0.1, 0.5]  -> {top2_thr-0.10: 0.75, top2_thr-0.50: 0.5}
//
// State: int64 hit counts per (k, thr) and the sample count, both summed across ranks (exact:
// the result does not depend on the number of ranks).
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common.hpp"
#include "row_kernels.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"
#include "tm_core.hpp"
#include "tm_rates.hpp"
#ifdef TALLY_CLASSIFICATION_CUDA
#include "cuda/gpu_metrics.hpp"
#endif

namespace tally::classification {
namespace {

struct AccuracyState {
  PackedVector<std::int64_t> hits;  // [topk.size() * thrs.size()], k major
  std::int64_t n = 0;
  TALLY_STATE(sum(hits), sum(n))
};

class Accuracy final : public TypedMetric<AccuracyState> {
 public:
  explicit Accuracy(const Params& p)
      : topk_(p.get_size_list("topk")),
        thrs_(read_thrs(p)),
        threads_(read_threads(p)),
        check_(p.owner_or("Accuracy")) {
    if (topk_.empty()) p.fail("topk", "must hold at least one k");
    for (std::size_t i = 0; i < topk_.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j)
        if (topk_[j] == topk_[i]) p.fail("topk", "lists " + std::to_string(topk_[i]) + " twice");
      maxk_ = std::max(maxk_, topk_[i]);
    }
  }

 protected:
  AccuracyState initial_state() const override {
    AccuracyState s;
    s.hits.assign(topk_.size() * thrs_.size(), 0);
    return s;
  }

  void update(AccuracyState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
#ifdef TALLY_CLASSIFICATION_CUDA
    if (gpu::on_cuda(batch))
      return gpu::accuracy_update(check_, topk_, maxk_, thrs_, batch, state.hits, state.n);
#endif
    if (has_scores(batch, check_))
      update_scores(state, batch);
    else
      update_labels(state, batch);
  }

  // A restored state (TypedMetric::check_restored): no k or threshold hits more samples than
  // were counted. At a sync both fields were summed by the engine and hold zeros here.
  void check_rank(const AccuracyState& s, std::size_t) const override {
    for (const std::int64_t h : s.hits)
      if (h > s.n)
        throw RuntimeError("the state counts " + std::to_string(h) + " hits of " +
                           std::to_string(s.n) + " samples");
  }

  Value compute(const AccuracyState& all) const override {
    if (all.hits.size() != topk_.size() * thrs_.size())  // a state restored from another config
      check_.fail_runtime(std::string("the state has ") + std::to_string(all.hits.size()) +
                          " counters, expected " + std::to_string(topk_.size() * thrs_.size()));
    if (all.n == 0) check_.fail("no samples");
    Value out = Value::map();
    for (std::size_t i = 0; i < topk_.size(); ++i) {
      for (std::size_t j = 0; j < thrs_.size(); ++j) {
        std::string key = "top" + std::to_string(topk_[i]);
        if (thrs_.size() > 1) key += thr_suffix(thrs_[j]);
        out.set(std::move(key), safe_ratio(all.hits[i * thrs_.size() + j], all.n));
      }
    }
    return out;
  }

 private:
  void update_scores(AccuracyState& state, const Batch& batch) const {
    const Tensor& scores = check_.score_matrix(batch, kScores);  // NaN: checked by the kernel
    const std::int64_t cols = score_classes(scores, check_);
    // The kernel needs valid labels, so it checks for NaN after them; a bad batch still reports
    // its first NaN before any other value error, as InputChecker::scores() would.
    const Tensor& labels = nan_first(check_, scores, state.n, [&]() -> const Tensor& {
      const Tensor& l = check_.labels(batch, kGtLabels, cols, state.n);
      check_.same_rows(scores, kScores, l, kGtLabels);
      if (maxk_ > cols)
        check_.fail(kScores, "has " + std::to_string(cols) + " columns: top-" +
                                 std::to_string(maxk_) +
                                 " accuracy is unavailable since the number of categories is " +
                                 std::to_string(cols));
      return l;
    });
    const std::int64_t n = scores.size(0);
    const std::size_t nthr = thrs_.size();
    // hist[j * (maxk + 1) + min(rank, maxk)]: samples passing threshold j, by capped rank.
    const auto width = static_cast<std::size_t>(maxk_) + 1;
    const auto cap = static_cast<std::int32_t>(std::min<std::int64_t>(maxk_, INT32_MAX));
    // One histogram per block of rows (threads), added up: integer counts, the same for any
    // number of blocks.
    std::vector<std::vector<std::int64_t>> hists(static_cast<std::size_t>(threads_));
    std::vector<char> nan(static_cast<std::size_t>(threads_), 0);
    visit_floating(scores, [&](const auto* s) {
      using T = std::remove_cv_t<std::remove_pointer_t<decltype(s)>>;
      const ThresholdSet<T> thr(thrs_);
      visit_integral(labels, [&](const auto* y) {
        for_row_blocks(n, cols, threads_, [&](std::size_t blk, std::int64_t lo, std::int64_t hi) {
          auto& hist = hists[blk];
          hist.assign(nthr * width, 0);
          std::int64_t ys[kRowChunk];
          std::int32_t ranks[kRowChunk];
          for (std::int64_t b = lo; b < hi; b += kRowChunk) {
            const std::int64_t m = std::min(kRowChunk, hi - b);
            for (std::int64_t i = 0; i < m; ++i) ys[i] = static_cast<std::int64_t>(y[b + i]);
            if (true_class_ranks(s + b * cols, m, cols, ys, cap, ranks) >= 0) {
              nan[blk] = 1;
              return;
            }
            for (std::int64_t i = 0; i < m; ++i) {
              const T sy = s[(b + i) * cols + ys[i]];
              const auto rank = static_cast<std::size_t>(ranks[i]);
              for (std::size_t j = 0; j < nthr; ++j)
                hist[j * width + rank] += static_cast<std::int64_t>(thr.pass(j, sy));
            }
          }
        });
      });
    });
    if (std::find(nan.begin(), nan.end(), 1) != nan.end()) fail_nan_scores(check_, scores, state.n);
    std::vector<std::int64_t> hist(nthr * width, 0);
    for (const auto& h : hists)
      for (std::size_t i = 0; i < h.size(); ++i) hist[i] += h[i];
    for (std::size_t i = 0; i < topk_.size(); ++i) {
      const auto k = static_cast<std::size_t>(topk_[i]);
      for (std::size_t j = 0; j < nthr; ++j) {
        std::int64_t hits = 0;
        for (std::size_t r = 0; r < k; ++r) hits += hist[j * width + r];
        state.hits[i * nthr + j] += hits;
      }
    }
    state.n += n;
  }

  void update_labels(AccuracyState& state, const Batch& batch) const {
    if (maxk_ != 1)
      check_.fail(kPredLabels, "holds one label per sample, so only top-1 is defined (topk is " +
                                   Value(topk_).to_json() + "); give '" + kScores +
                                   "' for top-k accuracy");
    for (const auto& t : thrs_)
      if (t)
        check_.fail(kPredLabels, "holds labels, not scores: thresholds (thrs) need '" +
                                     std::string(kScores) + "'");
    const Tensor& pred = check_.labels(batch, kPredLabels, -1, state.n);
    const Tensor& gt = check_.labels(batch, kGtLabels, -1, state.n);
    check_.same_rows(pred, kPredLabels, gt, kGtLabels);
    const std::int64_t n = pred.size(0);
    std::int64_t correct = 0;
    visit_integral(pred, [&](const auto* p) {
      visit_integral(gt, [&](const auto* y) {
        for (std::int64_t i = 0; i < n; ++i)
          correct += static_cast<std::int64_t>(static_cast<std::int64_t>(p[i]) ==
                                               static_cast<std::int64_t>(y[i]));
      });
    });
    for (auto& h : state.hits) h += correct;
    state.n += n;
  }

  std::vector<std::int64_t> topk_;
  std::int64_t maxk_ = 0;
  std::vector<std::optional<double>> thrs_;
  int threads_ = 1;
  InputChecker check_;
};

}  // namespace

/// mmeval's Accuracy without `task`; with it, torchmetrics' (tm_rates.cpp): either mode's
/// parameters and fields.
ComponentInfo accuracy_info() {
  std::vector<ParamSpec> params = {
      param("topk", ParamType::IntList,
            "Without task: the k values; an integer or a list. With pred_labels only 1 is defined.")
          .def(Value::Array{Value(1)}),
      param("thrs", ParamType::FloatList,
            "Without task: score thresholds: a hit also needs the true class's score > thr; null "
            "means no threshold. Defaults to [null]; mmeval's default is 0.0, which counts every "
            "sample with a true-class score <= 0 as a miss, wrong for raw logits. Float32 scores "
            "are compared with the threshold cast to float32.")
          .def(Value::Array{Value()})
          .nullable(),
      threads_param()};
  auto tm = tm_rate_params(false);
  tm.front().optional = true;  // task: absent for mmeval's Accuracy
  for (auto& spec : tm) params.push_back(std::move(spec));
  std::vector<InputSpec> inputs = {
      InputSpec{kScores,
                "Without task: class scores [N, C], float32 or float64 (logits or probabilities).",
                false},
      InputSpec{kPredLabels,
                "Without task: predicted class ids [N], any integer dtype; used when pred_scores "
                "is absent (top-1 only).",
                false},
      InputSpec{kGtLabels, "Without task: true class ids [N], any integer dtype, in [0, C).",
                false}};
  for (auto& spec : tm_rate_inputs()) inputs.push_back(std::move(spec));
  auto info = metric<Accuracy>(
      "Accuracy",
      "Top-k accuracy: the fraction of samples whose true class is among the k highest scores "
      "(ties broken as scikit-learn's top_k_accuracy_score) and, with a threshold, whose "
      "true-class score is above it. mmeval's Accuracy; keys top{k}, and top{k}_thr-{thr:.2f} / "
      "top{k}_no-thr with several thresholds. With a `task` parameter it is torchmetrics' "
      "Accuracy instead, on fields preds and target (key accuracy; tm_rates.cpp). Reference "
      "(task): torchmetrics 1.9.0 torchmetrics.functional.accuracy(preds, target, task, "
      "threshold, num_classes, num_labels, average, top_k=top_k, ignore_index=ignore_index).",
      std::move(params), std::move(inputs));
  info.make_metric = [](const Params& p) -> std::unique_ptr<Metric> {
    if (p.has("task")) return make_tm_accuracy(p);
    tm::check_class_counts(p);  // bounded whenever given (test_bounded_cli), before anything else
    for (const char* name : {"num_classes", "num_labels", "ignore_index"})
      if (p.has(name)) p.fail(name, "is a parameter of torchmetrics' Accuracy: give task too");
    return std::make_unique<Accuracy>(p);
  };
  return with_results(info, {{"top*", Better::Higher, Plot::None,
                              "fraction of samples whose true class is in the top k"},
                             {"accuracy", Better::Higher, Plot::None,
                              "torchmetrics' accuracy (with task; array: per class / label)"}});
}
TALLY_COMPONENT(accuracy_info)

}  // namespace tally::classification
