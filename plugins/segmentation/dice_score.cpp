// DiceScore: the Dice coefficient 2 |P & T| / (|P| + |T|) of segmentation maps, per image and
// class, averaged as torchmetrics' DiceScore does.
//
// Formula. Per image i and class c (class 0 left out unless include_background, when C > 1):
//   num_ic = 2 |P_ic & T_ic|, den_ic = |P_ic| + |T_ic|, support_ic = |T_ic|
//   aggregation_level samplewise (per image, then nanmean over images):
//     micro    d_i = sum_c num_ic / sum_c den_ic
//     macro    d_i = nanmean_c (num_ic / den_ic)
//     weighted d_i = nansum_c (num_ic / den_ic) (support_ic / sum_c support_ic); NaN when every
//              class of the image is NaN
//     none     d_ic = num_ic / den_ic (an array over classes; a number for one class, as
//              torchmetrics squeezes one-element results)
//     x / 0 is NaN (a class absent from both maps); result = nanmean_i d_i (per class for none)
//   aggregation_level global: the same with num, den and support summed over all images first.
//
// Reference: torchmetrics 1.9.0 torchmetrics.segmentation.DiceScore(num_classes,
// include_background, average, aggregation_level, input_format), float64: torch's default dtype
// float64 and its _safe_divide run on float64 counts (torchmetrics casts the int64 counts with
// .float(), to float32, whatever the default dtype: its values differ from these by float32
// rounding, about 1e-7 relative). Differences: integer one-hot masks must hold 0/1 here
// (torchmetrics multiplies any values); input_format mixed is not offered.
//
// Example: preds [[[0, 1], [1, 1]]], target [[[0, 1], [0, 1]]], num_classes 2,
// input_format index -> dice_score 0.7333333333333334
//
// State: samplewise, per output slot (1, or C for none) the exact sum of the per-image values
// (ExactSum; merged exactly across ranks) and the number of non-NaN values (int64, summed):
// their mean is the nanmean over images, the same bits on any number of ranks. global: per
// class the int64 sums of num, den and support (summed).
#include <cmath>
#include <limits>

#include "overlap_common.hpp"

namespace tally::segmentation {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct DiceState {
  ExactSums sums;                     // samplewise: slots accumulators
  PackedVector<std::int64_t> counts;  // samplewise: non-NaN values per slot
  PackedVector<std::int64_t> totals;  // global: num, den, support per class
  std::int64_t images = 0;
  TALLY_STATE(merge(sums), sum(counts), sum(totals), sum(images))
};

class DiceScore final : public TypedMetric<DiceState> {
 public:
  explicit DiceScore(const Params& p)
      : check_(p.owner_or("DiceScore")),
        k_(p.get_size("num_classes")),
        background_(p.get_bool("include_background")),
        average_(p.get_string("average")),
        global_(p.get_string("aggregation_level") == "global"),
        one_hot_(p.get_string("input_format") == "one-hot") {
    classes_ = !background_ && k_ > 1 ? k_ - 1 : k_;
    slots_ = average_ == "none" ? classes_ : 1;
  }

 protected:
  DiceState initial_state() const override {
    DiceState s;
    if (global_)
      s.totals.assign(static_cast<std::size_t>(3 * classes_), 0);
    else
      s.counts.assign(static_cast<std::size_t>(slots_), 0);
    return s;
  }

  void update(DiceState& s, const Batch& batch) override {
    if (batch.fields().empty()) return;
    read_overlaps(check_, batch, k_, one_hot_, background_, s.images, o_);
    if (o_.images == 0) return;
    const auto c = static_cast<std::size_t>(classes_);
    if (global_) {
      if (s.totals.size() != 3 * c) check_.fail_runtime(std::string("the state is corrupt"));
      for (std::size_t i = 0; i < static_cast<std::size_t>(o_.images); ++i)
        for (std::size_t j = 0; j < c; ++j) {
          s.totals[j] += 2 * o_.inter[i * c + j];
          s.totals[c + j] += o_.pred[i * c + j] + o_.target[i * c + j];
          s.totals[2 * c + j] += o_.target[i * c + j];
        }
    } else {
      if (s.counts.size() != static_cast<std::size_t>(slots_))
        check_.fail_runtime(std::string("the state is corrupt"));
      std::vector<double> values;
      for (std::size_t i = 0; i < static_cast<std::size_t>(o_.images); ++i) {
        const auto d = image_scores(o_.inter.data() + i * c, o_.pred.data() + i * c,
                                    o_.target.data() + i * c, true);
        for (std::size_t j = 0; j < d.size(); ++j) {
          // nanmean over images: NaN values count for nothing.
          const bool nan = std::isnan(d[j]);
          values.push_back(nan ? 0.0 : d[j]);
          s.counts[j] += nan ? 0 : 1;
        }
      }
      add_exact(s.sums, values, static_cast<std::size_t>(slots_), check_.owner());
    }
    s.images += o_.images;
  }

  Value compute(const DiceState& s) const override {
    std::vector<double> out;
    if (global_) {
      const auto c = static_cast<std::size_t>(classes_);
      if (s.totals.size() != 3 * c) check_.fail_runtime(std::string("the state is corrupt"));
      // The sums are counts (num = 2 |P & T| <= 2 pixels), under 2^62 by the engine's check.
      out = image_scores(s.totals.data(), s.totals.data() + c, s.totals.data() + 2 * c, false);
    } else {
      if (s.counts.size() != static_cast<std::size_t>(slots_))
        check_.fail_runtime(std::string("the state is corrupt"));
      const auto sums = exact_values(s.sums, static_cast<std::size_t>(slots_), check_.owner());
      for (std::size_t j = 0; j < sums.size(); ++j)
        out.push_back(s.counts[j] == 0 ? kNaN : sums[j] / static_cast<double>(s.counts[j]));
    }
    Value v = Value::map();
    // torchmetrics squeezes a one-element result to a number (one class left).
    if (average_ == "none" && out.size() != 1)
      v.set("dice_score", Value(out));
    else
      v.set("dice_score", out[0]);
    return v;
  }

 private:
  /// The per-image value(s) of torchmetrics' _dice_score_compute from one image's overlaps
  /// (per_image: |P & T|, |P|, |T|) or from global sums (num, den, support).
  std::vector<double> image_scores(const std::int64_t* a, const std::int64_t* b,
                                   const std::int64_t* t, bool per_image) const {
    const auto c = static_cast<std::size_t>(classes_);
    std::vector<std::int64_t> num(c), den(c), sup(c);
    for (std::size_t j = 0; j < c; ++j) {
      num[j] = per_image ? 2 * a[j] : a[j];
      den[j] = per_image ? b[j] + t[j] : b[j];
      sup[j] = per_image ? t[j] : t[j];
    }
    const auto div = [](double x, double y) { return x / y; };  // 0/0 -> NaN, as true_divide
    if (average_ == "micro") {
      std::int64_t n = 0, d = 0;
      for (std::size_t j = 0; j < c; ++j) n += num[j], d += den[j];
      return {div(static_cast<double>(n), static_cast<double>(d))};
    }
    std::vector<double> dice(c);
    for (std::size_t j = 0; j < c; ++j)
      dice[j] = div(static_cast<double>(num[j]), static_cast<double>(den[j]));
    if (average_ == "none") return dice;
    if (average_ == "macro") {
      double sum = 0;
      std::int64_t n = 0;
      for (const double x : dice)
        if (!std::isnan(x)) sum += x, ++n;
      return {sum / static_cast<double>(n)};  // all NaN: 0/0
    }
    // weighted
    std::int64_t total = 0;
    for (const std::int64_t x : sup) total += x;
    double sum = 0;
    bool all_nan = true;
    for (std::size_t j = 0; j < c; ++j) {
      all_nan &= std::isnan(dice[j]);
      const double w = div(static_cast<double>(sup[j]), static_cast<double>(total));
      const double x = dice[j] * w;
      if (!std::isnan(x)) sum += x;
    }
    return {all_nan ? kNaN : sum};
  }

  InputChecker check_;
  std::int64_t k_;
  bool background_;
  std::string average_;
  bool global_, one_hot_;
  std::int64_t classes_ = 0, slots_ = 1;
  Overlaps o_;
};

}  // namespace

ComponentInfo dice_score_info() {
  return with_results(
      metric<DiceScore>(
          "DiceScore",
          "Dice coefficient 2|P & T| / (|P| + |T|) of segmentation maps per image and class, "
          "averaged (micro, macro, weighted or none) per image and then over images (samplewise) "
          "or "
          "over the summed counts (global); key dice_score. Reference: torchmetrics 1.9.0 "
          "torchmetrics.segmentation.DiceScore(num_classes, include_background, average, "
          "aggregation_level, input_format).",
          {seg_num_classes_param(), include_background_param(true),
           param("average", ParamType::String,
                 "micro (pooled over classes), macro (mean over classes, NaN classes left out), "
                 "weighted (by |T| per class) or none (an array over classes).")
               .def("macro")
               .choices({"micro", "macro", "weighted", "none"}),
           param("aggregation_level", ParamType::String,
                 "samplewise (a score per image, then their nanmean) or global (counts summed over "
                 "all images first).")
               .def("samplewise")
               .choices({"samplewise", "global"}),
           input_format_param()},
          seg_inputs()),
      {{"dice_score", Better::Higher, Plot::None,
        "Dice score in [0, 1] (an array over classes with average none)"}});
}
TALLY_COMPONENT(dice_score_info)

}  // namespace tally::segmentation
