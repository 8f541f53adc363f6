// What PanopticQuality and ModifiedPanopticQuality share (torchmetrics 1.9's
// functional/detection/_panoptic_quality_common.py): the categories, the per-image counting of
// true positives, false positives, false negatives and IoUs, the state, and the per-class and
// averaged values. The formulas, the reference and the choices are in panoptic_quality.cpp's and
// modified_panoptic_quality.cpp's header comments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"
#include "tally/sdk/value.hpp"

namespace tally::panoptic {

inline constexpr const char* kPred = "pred_panoptic";
inline constexpr const char* kGt = "gt_panoptic";
inline constexpr const char* kCrowd = "gt_crowd";
inline constexpr const char* kThingIds = "thing_ids";
inline constexpr const char* kStuffIds = "stuff_ids";

/// IoU sums travel as exact integers: each IoU (a float32, as torchmetrics computes it, at least
/// 2^-40 for an image of at most 2^40 pixels) is a whole number of 2^-64, cut into 3 limbs of 22
/// bits, each summed as an int64 count.
inline constexpr int kLimbs = 3;
inline constexpr int kLimbBits = 22;

/// The things and stuffs: class index c in [0, size()) is things (ascending) then stuffs
/// (ascending), torchmetrics' continuous ids.
struct Categories {
  std::vector<std::int64_t> things, stuffs;  // sorted, unique, disjoint
  std::int64_t size() const { return static_cast<std::int64_t>(things.size() + stuffs.size()); }
  std::int64_t num_things() const { return static_cast<std::int64_t>(things.size()); }
  /// The class index of category `id`, or -1 when it is neither a thing nor a stuff.
  std::int64_t class_of(std::int64_t id) const;
  bool is_stuff(std::int64_t cls) const { return cls >= num_things(); }
  /// The state's encoding: [number of things, things..., stuffs...].
  std::vector<std::int64_t> encode() const;
  static Categories decode(const std::vector<std::int64_t>& v);
  /// "things [1, 3], stuffs [7]", for messages.
  std::string describe() const;
};

struct PanopticState {
  PackedVector<std::int64_t> tp, fp, fn;  // [C] per class
  PackedVector<std::int64_t> iou;         // [C * kLimbs] the IoU sums, exact (kLimbs above)
  std::int64_t n = 0;                     // images
  // The categories read from the data (thing_ids / stuff_ids) when the parameters give none:
  // Categories::encode(), empty until a rank sees an image; every rank must read the same.
  PackedVector<std::int64_t> categories;
  TALLY_STATE(sum(tp), sum(fp), sum(fn), sum(iou), sum(n),
              agree(categories, PackedVector<std::int64_t>{}))
};

/// The per-class values and their means, as torchmetrics' _panoptic_quality_compute gives them.
struct Qualities {
  std::vector<double> pq, sq;  // [C]
  std::vector<float> rq;       // [C] (float32 in torchmetrics)
  std::vector<float> den;      // [C] tp + 0.5 fp + 0.5 fn (float32)
  /// torch.mean of pq, sq and rq over the classes [begin, end) whose den > 0.
  double mean_pq(std::int64_t begin, std::int64_t end) const;
  double mean_sq(std::int64_t begin, std::int64_t end) const;
  double mean_rq(std::int64_t begin, std::int64_t end) const;
};

class PanopticBase : public TypedMetric<PanopticState> {
 public:
  PanopticBase(const Params& p, bool modified, const char* type);

 protected:
  PanopticState initial_state() const override;
  void update(PanopticState& state, const Batch& batch) override;
  bool reducible() const override { return fixed_.has_value(); }
  void check_rank(const PanopticState& s, std::size_t rank) const override;

  /// The merged state's categories and qualities (InputError when there are no images).
  std::pair<Categories, Qualities> qualities(const PanopticState& all) const;
  const InputChecker& check() const { return check_; }

 private:
  /// The categories of a batch's thing_ids / stuff_ids (read when the parameters give none).
  Categories categories_of(const Batch& batch, std::int64_t first) const;
  void count_image(PanopticState& s, const Categories& cats, const Tensor& pred, const Tensor& gt,
                   const Tensor* crowd, std::int64_t sample);

  bool modified_;
  std::optional<Categories> fixed_;  // from the parameters
  bool allow_unknown_;
  std::optional<std::int64_t> void_category_;
  bool crowd_void_;
  InputChecker check_;
};

/// The parameters both metrics take.
std::vector<ParamSpec> common_params();
/// The inputs both metrics read.
std::vector<InputSpec> common_inputs();

}  // namespace tally::panoptic
