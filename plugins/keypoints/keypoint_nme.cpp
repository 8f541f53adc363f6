// KeypointNME: the normalised mean error of keypoints.
//
// Formula. Per instance i, a normaliser s_i:
//   norm_mode use_norm_item:     s_i = the field named by norm_item ([N] or [N, 1], e.g. box_size)
//   norm_mode keypoint_distance: s_i = || gt_i,a - gt_i,b ||, (a, b) = keypoint_indices (in the
//                                gt dtype: the inter-ocular distance of face datasets)
//   d_ik = float32(|| (pred_ik - gt_ik) / s_i ||) for the visible keypoints (common.hpp:
//          s_i == 0 masks instance i out, s_i < 0 becomes 1e6, as mmeval's calc_distances)
//   NME  = float32 sum of the d_ik, keypoint-major over the dataset (numpy's pairwise sum), divided
//          by max(1, their number) in float32.
//
// Reference: mmeval.metrics.KeypointNME (mmeval 0.2.1, keypoint_nme.py). Key: "NME" (0 when no
// keypoint is valid, as mmeval). Without keypoint_indices, dataset_name picks mmeval's
// DEFAULT_KEYPOINT_INDICES (horse10 [0, 1], 300w [36, 45], coco_wholebody_face [36, 45],
// cofw [8, 9], wflw [60, 72]). 2-D coordinates.
//
// Example (mmeval's docstring): 2 instances of 19 keypoints, pred 0, gt 0.5, box_size 0 and 20,
// norm_mode use_norm_item, norm_item box_size -> {"NME": 0.0353553406894207} (float32; the first
// instance is masked out by its zero box; the docstring prints an older float64 value).
//
// State: the float32 distance of every keypoint (-1 when not counted): 4 bytes per keypoint,
// concatenated across ranks in rank order (DistanceState, common.hpp).
#include <array>

#include "common.hpp"

namespace tally::keypoints {
namespace {

struct DefaultIndices {
  const char* dataset;
  std::int64_t a, b;
};
constexpr std::array<DefaultIndices, 5> kDefaults = {{{"horse10", 0, 1},
                                                      {"300w", 36, 45},
                                                      {"coco_wholebody_face", 36, 45},
                                                      {"cofw", 8, 9},
                                                      {"wflw", 60, 72}}};

class KeypointNME final : public DistanceMetric {
 public:
  explicit KeypointNME(const Params& p) : DistanceMetric(p.owner_or("KeypointNME")) {
    const std::string mode = p.get_string("norm_mode");
    if (mode == "use_norm_item") {
      use_item_ = true;
      if (!p.has("norm_item") || p.get_string("norm_item").empty())
        p.fail("norm_item",
               "is required with norm_mode use_norm_item: the field holding the normaliser");
      item_ = p.get_string("norm_item");
    } else if (mode == "keypoint_distance") {
      if (p.has("keypoint_indices")) {
        const auto idx = p.get_int_list("keypoint_indices");
        if (idx.size() != 2)
          p.fail("keypoint_indices",
                 fmt::format("must be a pair of keypoint indices, got {} values", idx.size()));
        for (auto i : idx)
          if (i < 0) p.fail("keypoint_indices", fmt::format("must be >= 0, got {}", i));
        a_ = idx[0];
        b_ = idx[1];
      } else if (p.has("dataset_name")) {
        const std::string name = p.get_string("dataset_name");
        bool found = false;
        for (const auto& d : kDefaults)
          if (name == d.dataset) a_ = d.a, b_ = d.b, found = true;
        if (!found)
          p.fail("dataset_name",
                 "has no default keypoint_indices (horse10, 300w, coco_wholebody_face, cofw, "
                 "wflw); give keypoint_indices, got '" +
                     name + "'");
      } else {
        p.fail("keypoint_indices",
               "is required with norm_mode keypoint_distance (or dataset_name, for mmeval's "
               "defaults)");
      }
    } else {
      p.fail("norm_mode", "must be use_norm_item or keypoint_distance, got '" + mode + "'");
    }
  }

 protected:
  const char* key() const override { return "NME"; }
  std::int64_t coord_dims() const override { return 2; }

  void check_keypoints(std::int64_t k, std::int64_t /*first*/) const override {
    if (!use_item_ && (a_ >= k || b_ >= k))
      check_.fail(kGt, fmt::format("has {} keypoints; keypoint_indices [{}, {}] are outside "
                                   "[0, {})",
                                   k, a_, b_, k));
  }

  std::vector<float> batch_distances(const Batch& batch, const Coords& c,
                                     std::int64_t first) const override {
    if (use_item_) {
      const Tensor& t = float_field(check_, batch, item_.c_str());
      if (!((t.dim() == 1 && t.size(0) == c.n) ||
            (t.dim() == 2 && t.size(0) == c.n && t.size(1) == 1)))
        check_.fail(item_,
                    fmt::format("must be [N] or [N, 1] with N = {}, got {}", c.n, t.describe()));
      check_no_nan(check_, t, item_.c_str(), first, 1, 0, "the normaliser");
      // mmeval: np.tile(norm_item, [1, 2]), in the field's dtype.
      return visit_floating(t, [&](const auto* s) {
        using T = std::remove_cv_t<std::remove_pointer_t<decltype(s)>>;
        std::vector<T> tiled(static_cast<std::size_t>(c.n * 2));
        for (std::int64_t i = 0; i < c.n; ++i) tiled[2 * i] = tiled[2 * i + 1] = s[i];
        return distances(c, Tensor::from_vector<T>(tiled, {c.n, 2}));
      });
    }
    // mmeval: np.linalg.norm(gt[:, a] - gt[:, b], axis=1) in the gt dtype, tiled to [N, 2].
    return visit_floating(*c.gt, [&](const auto* g) {
      using T = std::remove_cv_t<std::remove_pointer_t<decltype(g)>>;
      std::vector<T> tiled(static_cast<std::size_t>(c.n * 2));
      for (std::int64_t i = 0; i < c.n; ++i) {
        const T* row = g + i * c.k * 2;
        const T dx = row[a_ * 2] - row[b_ * 2];
        const T dy = row[a_ * 2 + 1] - row[b_ * 2 + 1];
        tiled[2 * i] = tiled[2 * i + 1] = std::sqrt(T(0) + dx * dx + dy * dy);
      }
      return distances(c, Tensor::from_vector<T>(tiled, {c.n, 2}));
    });
  }

 private:
  bool use_item_ = false;
  std::string item_;
  std::int64_t a_ = 0, b_ = 0;
};

}  // namespace

ComponentInfo keypoint_nme_info() {
  return with_results(
      metric<KeypointNME>(
          "KeypointNME",
          "Normalised mean error of keypoints: the mean over visible keypoints of the distance "
          "divided by a per-instance normaliser (a field, or the distance between two ground-truth "
          "keypoints). mmeval's KeypointNME; key NME, lower is better. 2-D coordinates.",
          {param(
               "norm_mode", ParamType::String,
               "use_norm_item: the normaliser is the field named by norm_item; keypoint_distance: "
               "the distance between the ground-truth keypoints keypoint_indices.")
               .choices({"use_norm_item", "keypoint_distance"}),
           param("norm_item", ParamType::String,
                 "With use_norm_item: the batch field holding the normaliser, [N] or [N, 1] float "
                 "(e.g. box_size).")
               .optional(),
           param("keypoint_indices", ParamType::IntList,
                 "With keypoint_distance: the pair of keypoints whose ground-truth distance "
                 "normalises (e.g. [36, 45], the outer eye corners of 300W).")
               .optional(),
           param("dataset_name", ParamType::String,
                 "With keypoint_distance and no keypoint_indices: take mmeval's default pair for "
                 "this dataset.")
               .optional()
               .choices({"horse10", "300w", "coco_wholebody_face", "cofw", "wflw"})},
          {pred_input(),
           gt_input(),
           mask_input(),
           {"<norm_item>", "With use_norm_item: the field named by norm_item, [N] or [N, 1] float.",
            false}}),
      {{"NME", Better::Lower, Plot::None, "mean normalised keypoint distance"}});
}
TALLY_COMPONENT(keypoint_nme_info)

}  // namespace tally::keypoints
