// ProposalRecall: class-agnostic average recall of proposals at several proposal numbers, as
// mmeval's ProposalRecall computes it.
//
// Formula. Per image: proposals sorted by score (np.argsort(scores)[::-1]: descending, equal
// scores in reverse input order), the first proposal_nums[-1] kept; IoU with the ground truth in
// float32 (mmeval's calculate_overlaps, xyxy boxes, +1 on widths with use_legacy_coordinate). For
// each proposal number n, with the first n proposals: repeat once per ground-truth box: take the
// (GT, proposal) pair of highest IoU (first GT row, then first column on ties), record that IoU
// for the step, remove the pair's row and column (their IoUs become -1). Then
//   recall(n, t) = #{recorded IoUs >= t} / #GT,   AR@n = mean over t of recall(n, t)
// (NumPy's pairwise mean over the thresholds).
//
// Reference: mmeval 0.2.1 mmeval.metrics.ProposalRecall (iou_thrs=None -> np.linspace(.5, .95,
// 10), proposal_nums, use_legacy_coordinate); tests/reference/voc.py records the calls.
// Difference: proposals with equal scores keep the order given above; mmeval's quicksort leaves it
// unspecified beyond 16 proposals.
// Keys: "AR@{n}" for n in proposal_nums (fractions).
//
// State: int64 counts of recorded IoUs >= t per (n, t), the number of ground-truth boxes and of
// images, all summed across ranks (reduced to rank 0, checked): exact on any number of ranks.
//
// Example: one image, GT [0, 0, 10, 10], proposals [0, 0, 10, 10] (score .9) and [50, 50, 60, 60]
// (score .8) -> AR@1 = AR@10 = 1.0.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "coco_eval.hpp"
#include "common.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/numpy_math.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"

namespace tally::detection {
namespace {

struct RecallState {
  PackedVector<std::int64_t> hits;  // [proposal_nums x iou_thrs]
  std::int64_t num_gts = 0;
  std::int64_t images = 0;  // images seen on this rank (sample numbers in messages)
  TALLY_STATE(sum(hits), sum(num_gts), sum(images))
};

class ProposalRecall final : public TypedMetric<RecallState> {
 public:
  explicit ProposalRecall(const Params& p) : check_(p.owner()) {
    thrs_ = coco::default_iou_thrs();
    if (p.has("iou_thrs")) {
      thrs_ = p.get_fraction_list("iou_thrs");
    }
    nums_ = p.get_size_list("proposal_nums");
    if (nums_.empty()) p.fail("proposal_nums", "must hold at least one number");
    extra_ = p.get_bool("use_legacy_coordinate") ? 1.0f : 0.0f;
  }

 protected:
  RecallState initial_state() const override {
    RecallState s;
    s.hits.assign(nums_.size() * thrs_.size(), 0);
    return s;
  }

  void update(RecallState& s, const Batch& b) override {
    if (b.fields().empty() || b.size() == 0) return;
    const auto pb = per_image(b, "pred_bboxes", check_);
    const auto gb = per_image(b, "gt_bboxes", check_);
    if (!pb) check_.fail("pred_bboxes", "is missing from the batch");
    if (!gb) check_.fail("gt_bboxes", "is missing from the batch");
    const auto ps = per_image(b, "pred_scores", check_);
    std::vector<float> pf, gf;
    std::vector<double> pd, gd, scores;
    std::vector<float> ious, gt_ious;
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < static_cast<std::size_t>(b.size()); ++i) {
      const auto sample = s.images + static_cast<std::int64_t>(i);
      pf.clear();
      gf.clear();
      pd.clear();
      gd.clear();
      scores.clear();
      bool wide = false;
      const std::int64_t n =
          read_boxes_f32((*pb)[i], "pred_bboxes", sample, -1, check_, pf, pd, wide);
      const std::int64_t g =
          read_boxes_f32((*gb)[i], "gt_bboxes", sample, -1, check_, gf, gd, wide);
      order.resize(static_cast<std::size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      if (ps) {
        read_floats((*ps)[i], "pred_scores", sample, 0, n, check_, scores);
        std::stable_sort(order.begin(), order.end(),
                         [&](std::size_t x, std::size_t y) { return scores[x] < scores[y]; });
        std::reverse(order.begin(), order.end());
      }
      const auto keep =
          static_cast<std::size_t>(std::min<std::int64_t>(n, nums_.back()));  // proposal_nums[-1]
      order.resize(keep);
      const auto G = static_cast<std::size_t>(g);
      s.num_gts += g;
      ious.assign(G * keep, 0.0f);
      for (std::size_t r = 0; r < G; ++r)
        for (std::size_t c = 0; c < keep; ++c)
          ious[r * keep + c] = mmeval_iou(&gf[r * 4], &pf[order[c] * 4], extra_);
      for (std::size_t p = 0; p < nums_.size(); ++p) {
        const std::size_t cols = std::min(keep, static_cast<std::size_t>(nums_[p]));
        gt_ious.assign(G, 0.0f);
        if (cols > 0 && G > 0) {
          std::vector<float> m(G * cols);
          for (std::size_t r = 0; r < G; ++r)
            for (std::size_t c = 0; c < cols; ++c) m[r * cols + c] = ious[r * keep + c];
          for (std::size_t j = 0; j < G; ++j) {
            std::size_t best_row = 0, best_col = 0;
            float best = 0;
            for (std::size_t r = 0; r < G; ++r) {
              std::size_t arg = 0;
              for (std::size_t c = 1; c < cols; ++c)
                if (m[r * cols + c] > m[r * cols + arg]) arg = c;
              const float v = m[r * cols + arg];
              if (r == 0 || v > best) {
                best = v;
                best_row = r;
                best_col = arg;
              }
            }
            gt_ious[j] = best;
            for (std::size_t c = 0; c < cols; ++c) m[best_row * cols + c] = -1;
            for (std::size_t r = 0; r < G; ++r) m[r * cols + best_col] = -1;
          }
        }
        for (std::size_t t = 0; t < thrs_.size(); ++t) {
          std::int64_t hits = 0;
          for (const float v : gt_ious) hits += static_cast<double>(v) >= thrs_[t];
          s.hits[p * thrs_.size() + t] += hits;
        }
      }
    }
    s.images += b.size();
  }

  Value compute(const RecallState& all) const override {
    const auto& hits = all.hits;
    const std::int64_t num_gts = all.num_gts;
    if (hits.size() != nums_.size() * thrs_.size())
      check_.fail_runtime(std::string("the state holds ") + std::to_string(hits.size()) +
                          " counters, expected " + std::to_string(nums_.size() * thrs_.size()));
    Value out = Value::map();
    std::vector<double> recalls(thrs_.size());
    for (std::size_t p = 0; p < nums_.size(); ++p) {
      for (std::size_t t = 0; t < thrs_.size(); ++t)
        recalls[t] = static_cast<double>(hits[p * thrs_.size() + t]) / static_cast<double>(num_gts);
      out.set("AR@" + std::to_string(nums_[p]), numpy::mean(recalls));
    }
    return out;
  }

 private:
  InputChecker check_;
  std::vector<double> thrs_;
  std::vector<std::int64_t> nums_;
  float extra_ = 0.0f;
};

}  // namespace

ComponentInfo proposal_recall_info() {
  auto info = metric<ProposalRecall>(
      "ProposalRecall",
      "Class-agnostic average recall of proposals (mmeval's ProposalRecall): greedy one-to-one "
      "matching by float32 IoU per image, recall per IoU threshold averaged into AR@n for each "
      "proposal number n.",
      {param("iou_thrs", ParamType::FloatList,
             "IoU thresholds; null: np.linspace(.5, 0.95, 10) as mmeval.")
           .def(Value())
           .optional()
           .nullable(),
       param("proposal_nums", ParamType::IntList,
             "Proposal numbers; each image keeps its first proposal_nums[-1] proposals.")
           .def(Value::Array{Value(1), Value(10), Value(100), Value(1000)}),
       param("use_legacy_coordinate", ParamType::Bool,
             "mmdet v1 boxes: width = x2 - x1 + 1, height = y2 - y1 + 1.")
           .def(false)},
      {InputSpec{"pred_bboxes", "Per image [n, 4] float proposals x1, y1, x2, y2.", true},
       InputSpec{"pred_scores", "Per image [n] float scores (optional: without, input order).",
                 false},
       InputSpec{"gt_bboxes", "Per image [g, 4] float boxes x1, y1, x2, y2.", true}});
  info.results = {{"AR@*", Better::Higher, Plot::None, "average recall at n proposals"}};
  return info;
}
TALLY_COMPONENT(proposal_recall_info)

}  // namespace tally::detection
