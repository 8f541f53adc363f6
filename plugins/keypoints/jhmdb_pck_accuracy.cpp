// JhmdbPCKAccuracy: PCK on the 15 JHMDB keypoints, with JHMDB's per-joint summary.
//
// Formula. acc_k and the mean PCK as PCKAccuracy (common.hpp) for the bbox and torso
// normalisers; then, for each of them (suffix S = "PCK" for bbox, "tPCK" for torso):
//   Head S = acc_2,  Sho S = 0.5 acc_3 + 0.5 acc_4,  Elb S = 0.5 acc_7 + 0.5 acc_8,
//   Wri S = 0.5 acc_11 + 0.5 acc_12,  Hip S = 0.5 acc_5 + 0.5 acc_6,
//   Knee S = 0.5 acc_9 + 0.5 acc_10,  Ank S = 0.5 acc_13 + 0.5 acc_14,  Mean S = the mean PCK
// (a keypoint never valid has acc_k = -1, which mmeval averages in as it is).
//
// Reference: mmeval.metrics.JhmdbPCKAccuracy (mmeval 0.2.1, pck_accuracy.py). Keys in mmeval's
// order: "PCK@{thr}" (bbox), "PCKh@{thr}" (head), then "Head PCK" ... "Mean PCK" (bbox), then
// "Head tPCK" ... "Mean tPCK" (torso; "tPCK@{thr}" is dropped, as mmeval drops it). Fractions.
//
// Example (mmeval's docstring): pred = gt, all visible, thr 0.2, norm_item torso
//   -> {Head tPCK: 1.0, Sho tPCK: 1.0, ..., Mean tPCK: 1.0}
//
// State: exact int64 counters valid_k and hits_k per normaliser, summed across ranks (CountState,
// common.hpp: the number of keypoints must agree).
#include "common.hpp"

namespace tally::keypoints {
namespace {

constexpr std::int64_t kJhmdbKeypoints = 15;

class JhmdbPCKAccuracy final : public CountMetric {
 public:
  explicit JhmdbPCKAccuracy(const Params& p)
      : CountMetric(p.owner_or("JhmdbPCKAccuracy"), 6),
        thr_(p.get_number("thr", kNonNegative)),
        items_(read_norm_items(p)) {}

 protected:
  void check_keypoints(std::int64_t k) const override {
    if ((items_.on[0] || items_.on[2]) && k < kJhmdbKeypoints)
      check_.fail(kPred, fmt::format("has {} keypoints; the JHMDB summary (norm_item bbox or "
                                     "torso) needs the {} JHMDB keypoints",
                                     k, kJhmdbKeypoints));
  }

  void count(const Batch& batch, const Coords& c, std::int64_t first,
             std::int64_t* counts) const override {
    count_pck_items(check_, batch, c, first, items_, thr_, counts);
  }

  Value results(const std::vector<std::int64_t>& counts, std::int64_t k,
                std::int64_t /*n*/) const override {
    const auto row = [&](std::int64_t g) { return &counts[static_cast<std::size_t>(g * k)]; };
    PckSummary s[3];
    for (int j = 0; j < 3; ++j)
      if (items_.on[j]) s[j] = pck_summary(row(2 * j), row(2 * j + 1), k);
    Value out = Value::map();
    for (int j : {0, 1})
      if (items_.on[j]) out.set(at_key(kNormKeys[j], thr_), s[j].avg);
    for (int j : {0, 2}) {
      if (!items_.on[j]) continue;
      const std::vector<double>& a = s[j].acc;
      const std::string suffix = j == 0 ? " PCK" : " tPCK";
      out.set("Head" + suffix, a[2]);
      out.set("Sho" + suffix, 0.5 * a[3] + 0.5 * a[4]);
      out.set("Elb" + suffix, 0.5 * a[7] + 0.5 * a[8]);
      out.set("Wri" + suffix, 0.5 * a[11] + 0.5 * a[12]);
      out.set("Hip" + suffix, 0.5 * a[5] + 0.5 * a[6]);
      out.set("Knee" + suffix, 0.5 * a[9] + 0.5 * a[10]);
      out.set("Ank" + suffix, 0.5 * a[13] + 0.5 * a[14]);
      out.set("Mean" + suffix, s[j].avg);
    }
    return out;
  }

 private:
  double thr_;
  NormItems items_;
};

}  // namespace

ComponentInfo jhmdb_pck_accuracy_info() {
  return with_results(
      metric<JhmdbPCKAccuracy>(
          "JhmdbPCKAccuracy",
          "PCK for the 15 JHMDB keypoints with JHMDB's per-joint summary (Head, Sho, Elb, Wri, "
          "Hip, "
          "Knee, Ank, Mean) for the bbox (PCK) and torso (tPCK) normalisers. mmeval's "
          "JhmdbPCKAccuracy; fractions.",
          {thr_param(0.5), norm_item_param("bbox")}, pck_inputs()),
      {{"*", Better::Higher, Plot::None, "PCK per joint group, fractions"}});
}
TALLY_COMPONENT(jhmdb_pck_accuracy_info)

}  // namespace tally::keypoints
