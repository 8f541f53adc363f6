// GeneralizedDiceScore: the generalized Dice score of segmentation maps (Sudre et al. 2017), per
// image, averaged over images, as torchmetrics' GeneralizedDiceScore.
//
// Formula. Per image i and class c (class 0 left out unless include_background, when C > 1),
// I = |P & T|, S = |P| + |T|, and a class weight from the target's size t = |T|:
//   w_c = 1 / t^2 (square), 1 / t (simple), 1 (linear); w_c = 0 where t = 0 (see below)
//   per_class false: g_i = sum_c 2 I_c w_c / sum_c S_c w_c
//   per_class true:  g_ic = 2 I_c w_c / (S_c w_c)
//   x / 0 is 0 (torchmetrics' _safe_divide); result = sum_i g_i / N (per_class: an array over
//   classes; a number for one class, as torchmetrics squeezes one-element results).
//
// Reference: torchmetrics 1.9.0 torchmetrics.segmentation.GeneralizedDiceScore(num_classes,
// include_background, per_class, weight_type, input_format) (float64 default dtype), updated with
// one image at a time. Difference: torchmetrics replaces an infinite weight (t = 0) by a maximum
// over the images of its update() batch, indexed through a transposed copy
// (torch.max(weights, 0).values.repeat(N, 1).T.flatten()), so with several images in a batch its
// value depends on how the data is batched; with one image a batch (and in tally, always) that
// weight is 0. Where every class is in every target the two agree for any batching. Integer
// one-hot masks must hold 0/1 here.
//
// Example: preds [[[0, 1], [1, 1]]], target [[[0, 1], [0, 1]]], num_classes 2,
// input_format index -> generalized_dice_score 0.75
//
// State: per output slot (1, or C for per_class) the exact sum of the per-image scores
// (ExactSum; merged exactly across ranks) and the number of images (int64, summed).
#include <cmath>
#include <limits>

#include "overlap_common.hpp"

namespace tally::segmentation {
namespace {

struct GeneralizedDiceState {
  ExactSums sums;
  std::int64_t images = 0;
  TALLY_STATE(merge(sums), sum(images))
};

class GeneralizedDiceScore final : public TypedMetric<GeneralizedDiceState> {
 public:
  explicit GeneralizedDiceScore(const Params& p)
      : check_(p.owner_or("GeneralizedDiceScore")),
        k_(p.get_size("num_classes")),
        background_(p.get_bool("include_background")),
        per_class_(p.get_bool("per_class")),
        weight_(p.get_string("weight_type")),
        one_hot_(p.get_string("input_format") == "one-hot") {
    classes_ = !background_ && k_ > 1 ? k_ - 1 : k_;
    slots_ = per_class_ ? classes_ : 1;
  }

 protected:
  void update(GeneralizedDiceState& s, const Batch& batch) override {
    if (batch.fields().empty()) return;
    read_overlaps(check_, batch, k_, one_hot_, background_, s.images, o_);
    if (o_.images == 0) return;
    const auto c = static_cast<std::size_t>(classes_);
    std::vector<double> values;
    std::vector<double> num(c), den(c);
    for (std::size_t i = 0; i < static_cast<std::size_t>(o_.images); ++i) {
      for (std::size_t j = 0; j < c; ++j) {
        const std::int64_t t = o_.target[i * c + j];
        double w = 1.0;
        if (weight_ == "square")
          w = 1.0 / static_cast<double>(t * t);  // int64 t^2 as torch's target_sum**2
        else if (weight_ == "simple")
          w = 1.0 / static_cast<double>(t);
        if (std::isinf(w)) w = 0.0;
        num[j] = 2.0 * static_cast<double>(o_.inter[i * c + j]) * w;
        den[j] = static_cast<double>(o_.pred[i * c + j] + t) * w;
      }
      if (per_class_) {
        for (std::size_t j = 0; j < c; ++j) values.push_back(den[j] != 0 ? num[j] / den[j] : 0.0);
      } else {
        double n = 0, d = 0;
        for (std::size_t j = 0; j < c; ++j) n += num[j], d += den[j];
        values.push_back(d != 0 ? n / d : 0.0);
      }
    }
    add_exact(s.sums, values, static_cast<std::size_t>(slots_), check_.owner());
    s.images += o_.images;
  }

  Value compute(const GeneralizedDiceState& s) const override {
    const auto sums = exact_values(s.sums, static_cast<std::size_t>(slots_), check_.owner());
    std::vector<double> out;
    // No images: 0 / 0 = NaN, as torchmetrics' score / samples.
    for (const double x : sums) out.push_back(x / static_cast<double>(s.images));
    Value v = Value::map();
    // torchmetrics squeezes a one-element result to a number (one class left).
    if (per_class_ && out.size() != 1)
      v.set("generalized_dice_score", Value(out));
    else
      v.set("generalized_dice_score", out[0]);
    return v;
  }

 private:
  InputChecker check_;
  std::int64_t k_;
  bool background_, per_class_;
  std::string weight_;
  bool one_hot_;
  std::int64_t classes_ = 0, slots_ = 1;
  Overlaps o_;
};

}  // namespace

ComponentInfo generalized_dice_score_info() {
  return with_results(
      metric<GeneralizedDiceScore>(
          "GeneralizedDiceScore",
          "Generalized Dice score: per image sum_c 2 w_c |P & T| / sum_c w_c (|P| + |T|) with "
          "class weights from the target's size (square, simple, linear), averaged over images; "
          "key "
          "generalized_dice_score. Reference: torchmetrics 1.9.0 "
          "torchmetrics.segmentation.GeneralizedDiceScore(num_classes, include_background, "
          "per_class, weight_type, input_format), one image an update.",
          {seg_num_classes_param(), include_background_param(true),
           param("per_class", ParamType::Bool, "An array of per-class scores instead of one score.")
               .def(false),
           param("weight_type", ParamType::String,
                 "Class weights: square (1 / |T|^2), simple (1 / |T|) or linear (1).")
               .def("square")
               .choices({"square", "simple", "linear"}),
           input_format_param()},
          seg_inputs()),
      {{"generalized_dice_score", Better::Higher, Plot::None,
        "generalized Dice score in [0, 1] (an array over classes with per_class)"}});
}
TALLY_COMPONENT(generalized_dice_score_info)

}  // namespace tally::segmentation
