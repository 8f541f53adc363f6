// MpiiPCKAccuracy: PCKh on the 16 MPII keypoints, with MPII's per-joint summary (in percent).
//
// Formula (mmeval's, MATLAB-style 1-based predictions: pred + 1.0, in the predictions' dtype):
//   acc_k    = PCK accuracy of keypoint k at thr, normalised by head_size (see PCKAccuracy)
//   PCKh_k   = 100 acc_k                               (-100 when keypoint k is never valid)
//   count_k  = #{i : mask_ik}  (visibility only),  ratio_k = count_k / sum_{j != 6, 7} count_j
//   Head     = PCKh_9,  Shoulder = 0.5 (PCKh_13 + PCKh_12),  Elbow = 0.5 (PCKh_14 + PCKh_11),
//   Wrist    = 0.5 (PCKh_15 + PCKh_10),  Hip = 0.5 (PCKh_3 + PCKh_2),
//   Knee     = 0.5 (PCKh_4 + PCKh_1),   Ankle = 0.5 (PCKh_5 + PCKh_0)
//   PCKh     = sum_{k != 6, 7} PCKh_k ratio_k          (joints 6, 7, pelvis and thorax, left out)
//   PCKh@0.1 = sum_{k != 6, 7} float32(100 acc_k(0.1)) ratio_k
// where acc_k(0.1) compares the float32 distances with numpy.float64(10 * 0.01) in float64 (the
// 11th value of mmeval's numpy.arange(0, 0.51, 0.01)). The sums are numpy's over 16 values.
// mmeval computes acc_k(0.1) with the head_size array that its first calc_distances call (for
// acc_k) modified in place: zero and negative components were replaced by 1e6 there, so at 0.1
// an instance with a zero head size is NOT masked out but normalised by 1e6 on that axis (and
// counts as correct). tally reproduces this, so PCKh@0.1 is mmeval's value; it matters only for
// data with zero head sizes.
//
// Reference: mmeval.metrics.MpiiPCKAccuracy (mmeval 0.2.1, pck_accuracy.py). Keys, in mmeval's
// order: "PCK@{thr}" (bbox) and "tPCK@{thr}" (torso) when asked for, fractions, computed
// without the +1 shift as mmeval does; then, with norm_item head, Head, Shoulder, Elbow, Wrist,
// Hip, Knee, Ankle, PCKh, PCKh@0.1: these are in PERCENT (0-100), as mmeval and the MPII
// protocol define them. When no keypoint other than 6 and 7 is visible, PCKh and PCKh@0.1 are
// NaN (mmeval returns numpy.ma.masked).
//
// Example (mmeval's docstring): pred = gt - 1 on 16 keypoints, all visible, thr 0.3, head
//   -> {Head: 100.0, Shoulder: 100.0, ..., PCKh: 100.0, PCKh@0.1: 100.0}
//
// State: exact int64 counters (valid, hits at thr, hits at 0.1, visible) per keypoint, summed
// across ranks (CountState, common.hpp: the number of keypoints must agree).
#include "common.hpp"

namespace tally::keypoints {
namespace {

constexpr std::int64_t kMpiiKeypoints = 16;
// Groups 0..5: PCKAccuracy's (bbox, head unused, torso); then, for the head summary on the
// shifted predictions: valid and hits at thr, valid and hits at 0.1 (see the header), visible.
constexpr std::int64_t kValid = 6, kHitsThr = 7, kValid01 = 8, kHits01 = 9, kVisible = 10;

class MpiiPCKAccuracy final : public CountMetric {
 public:
  explicit MpiiPCKAccuracy(const Params& p)
      : CountMetric(p.owner_or("MpiiPCKAccuracy"), 11),
        thr_(p.get_number("thr", kNonNegative)),
        items_(read_norm_items(p)) {}

 protected:
  void check_keypoints(std::int64_t k) const override {
    if (items_.on[1] && k != kMpiiKeypoints)
      check_.fail(kPred, fmt::format("has {} keypoints; the MPII summary (norm_item head) needs "
                                     "the {} MPII keypoints",
                                     k, kMpiiKeypoints));
  }

  void count(const Batch& batch, const Coords& c, std::int64_t first,
             std::int64_t* counts) const override {
    NormItems head_only;
    head_only.on[1] = true;
    count_pck_items(check_, batch, c, first, items_, thr_, counts, head_only);
    if (!items_.on[1]) return;
    const Tensor& norm = read_norm(check_, batch, kHead, c.n, c.d, first);
    const std::vector<float> dist = distances(c, norm, /*shift_pred=*/true);
    const std::int64_t k = c.k;
    count_below<float>(dist, c.n, k, numpy::weak_scalar<float>(thr_), counts + kValid * k,
                       counts + kHitsThr * k);
    const std::vector<float> dist01 = distances(c, norm, /*shift_pred=*/true, /*zero_masks=*/false);
    count_below<double>(dist01, c.n, k, 10 * 0.01, counts + kValid01 * k, counts + kHits01 * k);
    for (std::int64_t i = 0; i < c.n; ++i)
      for (std::int64_t j = 0; j < k; ++j)
        counts[kVisible * k + j] += c.mask[static_cast<std::size_t>(i * k + j)];
  }

  Value results(const std::vector<std::int64_t>& counts, std::int64_t k,
                std::int64_t /*n*/) const override {
    const auto row = [&](std::int64_t g) { return &counts[static_cast<std::size_t>(g * k)]; };
    Value out = Value::map();
    for (int j : {0, 2}) {
      if (!items_.on[j]) continue;
      out.set(at_key(kNormKeys[j], thr_), pck_summary(row(2 * j), row(2 * j + 1), k).avg);
    }
    if (!items_.on[1]) return out;

    const PckSummary at_thr = pck_summary(row(kValid), row(kHitsThr), k);
    const PckSummary at_01 = pck_summary(row(kValid01), row(kHits01), k);
    std::vector<double> pckh(static_cast<std::size_t>(k));
    for (std::size_t j = 0; j < pckh.size(); ++j) pckh[j] = 100. * at_thr.acc[j];
    const auto used = [](std::int64_t j) { return j != 6 && j != 7; };
    std::int64_t visible = 0;
    for (std::int64_t j = 0; j < k; ++j)
      if (used(j)) visible += row(kVisible)[j];

    out.set("Head", pckh[9]);
    out.set("Shoulder", 0.5 * (pckh[13] + pckh[12]));
    out.set("Elbow", 0.5 * (pckh[14] + pckh[11]));
    out.set("Wrist", 0.5 * (pckh[15] + pckh[10]));
    out.set("Hip", 0.5 * (pckh[3] + pckh[2]));
    out.set("Knee", 0.5 * (pckh[4] + pckh[1]));
    out.set("Ankle", 0.5 * (pckh[5] + pckh[0]));
    if (visible == 0) {
      out.set("PCKh", std::numeric_limits<double>::quiet_NaN());
      out.set("PCKh@0.1", std::numeric_limits<double>::quiet_NaN());
      return out;
    }
    const auto total = static_cast<double>(visible);
    std::vector<double> a(static_cast<std::size_t>(k), 0.0), b(static_cast<std::size_t>(k), 0.0);
    for (std::int64_t j = 0; j < k; ++j) {
      if (!used(j)) continue;
      const double ratio = static_cast<double>(row(kVisible)[j]) / total;
      const auto uj = static_cast<std::size_t>(j);
      a[uj] = pckh[uj] * ratio;
      // mmeval stores 100 acc in a float32 array (pckAll) before weighting it.
      b[uj] = static_cast<double>(static_cast<float>(100. * at_01.acc[uj])) * ratio;
    }
    out.set("PCKh", numpy::sum(a));
    out.set("PCKh@0.1", numpy::sum(b));
    return out;
  }

 private:
  double thr_;
  NormItems items_;
};

}  // namespace

ComponentInfo mpii_pck_accuracy_info() {
  return with_results(
      metric<MpiiPCKAccuracy>(
          "MpiiPCKAccuracy",
          "PCKh for the 16 MPII keypoints with MPII's per-joint summary: Head, Shoulder, Elbow, "
          "Wrist, Hip, Knee, Ankle, PCKh and PCKh@0.1, in PERCENT (0-100) as mmeval reports them "
          "(predictions shifted by +1, MATLAB-style). mmeval's MpiiPCKAccuracy; with norm_item "
          "bbox "
          "or torso also PCK@{thr} / tPCK@{thr} (fractions).",
          {thr_param(0.5), norm_item_param("head")}, pck_inputs()),
      {{"*", Better::Higher, Plot::None,
        "PCKh per joint group and overall in percent; PCK@/tPCK@ as fractions"}});
}
TALLY_COMPONENT(mpii_pck_accuracy_info)

}  // namespace tally::keypoints
