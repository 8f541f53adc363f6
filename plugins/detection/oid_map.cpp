// OIDMeanAP: Open Images mean average precision, with the class hierarchy (a box of a class is
// also a box of each of its ancestors), group-of boxes and image-level labels, as mmeval's
// OIDMeanAP computes it (a VOCMeanAP whose per-image matching knows group-of boxes).
//
// Formula, per image: ground truth cast to float32; with get_supercategory each box is repeated
// for each ancestor class of its class (after all the image's boxes, in box order, ancestors in
// class-id order). Allowed classes = the classes of those boxes + the image-level labels. The
// predictions: with filter_labels, those of a class not allowed are dropped; with
// get_supercategory, for each predicted class L (ascending) and each allowed ancestor A of L
// (ascending), every prediction of class L is repeated as class A (after all the predictions).
// Then per class and (threshold t_i, range r): VOCMeanAP's matching of the predictions against the
// non-group-of boxes (float32 IoU >= t_i; area filters in float32 / float64 as mmeval's arrays);
// with use_group_of, each prediction that is not a TP there and whose best float32 IoF
// (intersection / prediction area) with a group-of box is >= iof_thrs[i] leaves the list; each
// group-of box becomes one entry instead: a TP scored with the highest score of the predictions
// it took (0 if none above 0), or an FP of score 0 when it took none. Then VOCMeanAP's PR curves
// (every image's entries of the class sorted by score), float32 AP ('area' or '11points') and
// means; the ground-truth count of a class includes its group-of boxes.
//
// Reference: mmeval 0.2.1 mmeval.metrics.OIDMeanAP (iou_thrs, iof_thrs, scale_ranges,
// num_classes, eval_mode, use_legacy_coordinate, drop_class_ap, classwise, use_group_of,
// get_supercategory, filter_labels, class_relation_matrix from get_relation_matrix(hierarchy_file,
// label_file)); tests/reference/oid.py records the calls.
// Differences:
// - The hierarchy: mmeval takes a matrix (class_relation_matrix or dataset_meta) and offers
//   get_relation_matrix(hierarchy_file, label_file) to build it; tally takes the two files and
//   builds the same matrix (Open Images' JSON hierarchy: nested "LabelName" / "Subcategory", a
//   node without "LabelName" skipped with its subtree, other keys ("Part") ignored; the CSV of
//   class descriptions: column 0 the label name, row i = class id i). Without files, the identity
//   (no hierarchy: mmeval's class_relation_matrix=np.eye(num_classes)). Stricter: the CSV must have
//   num_classes rows, no duplicate names and at least 2 columns a row; a "Subcategory" must be a
//   list of objects; an unknown label name is an error naming it (mmeval: KeyError).
// - use_group_of with more than one (threshold, range) pair: mmeval 0.2.1 re-filters the already
//   filtered prediction array once per pair in _calculate_image_tpfp, so it raises (IndexError,
//   ValueError) on data with group-of boxes, or mixes up the scores of its entries. tally
//   evaluates each pair as mmeval evaluates a single pair (checked against mmeval's own code run
//   with that bookkeeping fixed, see tests/reference/oid.py). As mmeval, the range check of a
//   group-of box takes the box of the same index among ALL the class's boxes of the image
//   (mmeval indexes filter_by_bboxes_area(gt_bboxes) by the group-of index), and area filters
//   other than the ground-truth counts ignore use_legacy_coordinate.
// - As VOCMeanAP: entries with equal scores keep their input order (dataset order; the group-of
//   entries after the image's predictions), mmeval's np.argsort leaves it unspecified; a label
//   outside [0, num_classes) is an error; classwise gives "AP{t}_classwise" arrays.
// Keys: "AP{round(100 t)}" per threshold, "mAP", "mAP@(s0, s1)" per extra range (VOCMeanAP's).
//
// State: VOCMeanAP's (voc_common.hpp): per entry (each prediction after the label processing, and
// each group-of box's entry, one per distinct score it takes over the pairs) its class, score and
// TP / FP bits per pair, concatenated in rank order; ground-truth counts per (class, range) and
// the image count, summed. The same result on any number of ranks.
//
// Example: one image, a group-of ground-truth box [0, 0, 100, 100] class 0, predictions
// [10, 10, 20, 20] score .9 and [30, 30, 40, 40] score .8 class 0 (both inside it), num_classes 1
// -> {AP50: 1.0, mAP: 1.0} (one TP for the group; with use_group_of false, 0.0).
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "param_files.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"
#include "voc_common.hpp"

namespace tally::detection {
namespace {

struct OidState {
  PackedVector<std::int32_t> cls;      // per entry
  PackedVector<double> score;          // per entry
  PackedVector<std::uint64_t> bits;    // per entry: words(); TP bit k, FP bit I*S + k
  PackedVector<std::int64_t> num_gts;  // [num_classes x scales]
  std::int64_t images = 0;
  TALLY_STATE(concat(cls), concat(score), concat(bits), sum(num_gts), sum(images))
};

constexpr int kHierarchyMaxDepth = 256;

/// get_relation_matrix(hierarchy_file, label_file) as, per class, its ancestors (ascending,
/// itself left out): row c of the matrix is 1 at c and at these.
std::vector<std::vector<std::int32_t>> load_hierarchy(const Params& p, std::int64_t num_classes) {
  const auto rows = parse_csv(read_param_file(p, "label_file"));
  std::unordered_map<std::string, std::int32_t> index;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].size() < 2)
      p.fail("label_file", fmt::format("row {}: expected 2 columns (label name, display name), "
                                       "found {}",
                                       r + 1, rows[r].size()));
    if (!index.emplace(rows[r][0], static_cast<std::int32_t>(r)).second)
      p.fail("label_file",
             fmt::format("row {}: label name '{}' is listed twice", r + 1, rows[r][0]));
  }
  if (static_cast<std::int64_t>(rows.size()) != num_classes)
    p.fail("label_file",
           fmt::format("has {} classes (rows), num_classes is {}", rows.size(), num_classes));
  nlohmann::json root;
  try {
    const nlohmann::json::parser_callback_t depth_limit = [](int depth,
                                                             nlohmann::json::parse_event_t,
                                                             nlohmann::json&) {
      if (depth > kHierarchyMaxDepth)
        throw std::runtime_error(fmt::format("nested deeper than {} levels", kHierarchyMaxDepth));
      return true;
    };
    root = nlohmann::json::parse(read_param_file(p, "hierarchy_file"), depth_limit);
  } catch (const nlohmann::json::exception& e) {
    p.fail("hierarchy_file", std::string("is not valid JSON: ") + e.what());
  } catch (const std::runtime_error& e) {
    p.fail("hierarchy_file", e.what());
  }
  std::vector<std::vector<std::int32_t>> up(static_cast<std::size_t>(num_classes));
  // _convert_hierarchy_tree: each child's class gets every class on its path from the root.
  const auto walk = [&](const auto& self, const nlohmann::json& node,
                        const std::vector<std::int32_t>& parents,
                        const std::string& where) -> void {
    if (!node.is_object())
      p.fail("hierarchy_file", where + ": expected an object, found " + node.type_name());
    const auto sub = node.find("Subcategory");
    if (sub == node.end()) return;
    if (!sub->is_array())
      p.fail("hierarchy_file",
             where + ": \"Subcategory\" must be a list, found " + sub->type_name());
    for (std::size_t k = 0; k < sub->size(); ++k) {
      const auto& child = (*sub)[k];
      const std::string at = where + ".Subcategory[" + std::to_string(k) + "]";
      if (!child.is_object())
        p.fail("hierarchy_file", at + ": expected an object, found " + child.type_name());
      const auto name = child.find("LabelName");
      if (name == child.end()) continue;
      if (!name->is_string()) p.fail("hierarchy_file", at + ": \"LabelName\" must be a string");
      const auto it = index.find(name->get<std::string>());
      if (it == index.end())
        p.fail("hierarchy_file",
               at + ": label name '" + name->get<std::string>() + "' is not in label_file");
      std::vector<std::int32_t> path{it->second};
      for (const auto a : parents) {
        path.push_back(a);
        up[static_cast<std::size_t>(it->second)].push_back(a);
      }
      self(self, child, path, at);
    }
  };
  walk(walk, root, {}, "root");
  for (std::size_t c = 0; c < up.size(); ++c) {
    auto& v = up[c];
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    v.erase(std::remove(v.begin(), v.end(), static_cast<std::int32_t>(c)), v.end());
  }
  return up;
}

/// mmeval's calculate_overlaps, mode 'iof', for one (prediction, box) pair in float32: the
/// intersection over the prediction's area (eps 1e-6).
float mmeval_iof(const float* a, const float* b, float extra) {
  const float area_a = (a[2] - a[0] + extra) * (a[3] - a[1] + extra);
  const float x_start = std::max(a[0], b[0]), y_start = std::max(a[1], b[1]);
  const float x_end = std::min(a[2], b[2]), y_end = std::min(a[3], b[3]);
  const float w = std::max(x_end - x_start + extra, 0.0f);
  const float h = std::max(y_end - y_start + extra, 0.0f);
  return (w * h) / std::max(area_a, static_cast<float>(1e-6));
}

class OIDMeanAP final : public TypedMetric<OidState> {
 public:
  explicit OIDMeanAP(const Params& p) : check_(p.owner()) {
    cfg_.thrs = p.get_fraction_list("iou_thrs");
    iof_thrs_ = p.get_fraction_list("iof_thrs");
    if (iof_thrs_.size() != cfg_.thrs.size())
      p.fail("iof_thrs", fmt::format("must have one threshold per IoU threshold ({}), found {}",
                                     cfg_.thrs.size(), iof_thrs_.size()));
    num_classes_ = p.get_size("num_classes");
    cfg_.num_classes = static_cast<std::size_t>(num_classes_);
    cfg_.scales = voc::read_scale_ranges(p);
    cfg_.mode_11 = p.get_string("eval_mode") == "11points";
    cfg_.drop_class_ap = p.get_bool("drop_class_ap");
    cfg_.classwise = p.get_bool("classwise");
    cfg_.owner = check_.owner();
    extra_ = p.get_bool("use_legacy_coordinate") ? 1.0 : 0.0;
    use_group_of_ = p.get_bool("use_group_of");
    get_supercategory_ = p.get_bool("get_supercategory");
    filter_labels_ = p.get_bool("filter_labels");
    if (2 * cfg_.thrs.size() * cfg_.scales.ranges.size() > 64 * 64)
      p.fail("iou_thrs", "too many thresholds x scale ranges");
    const bool h = p.has("hierarchy_file"), l = p.has("label_file");
    if (h != l)
      p.fail(h ? "label_file" : "hierarchy_file",
             "is missing: the class hierarchy needs hierarchy_file and label_file");
    if (h)
      up_ = load_hierarchy(p, num_classes_);
    else
      up_.assign(static_cast<std::size_t>(num_classes_), {});
  }

 protected:
  OidState initial_state() const override {
    OidState s;
    s.num_gts.assign(cfg_.num_classes * cfg_.scales.ranges.size(), 0);
    return s;
  }

  void update(OidState& s, const Batch& b) override {
    if (b.fields().empty() || b.size() == 0) return;
    const auto pb = required_per_image(b, "pred_bboxes", check_);
    const auto ps = required_per_image(b, "pred_scores", check_);
    const auto pl = required_per_image(b, "pred_labels", check_);
    const auto gb = required_per_image(b, "gt_bboxes", check_);
    const auto gl = required_per_image(b, "gt_labels", check_);
    const auto gg = per_image(b, "gt_is_group_of", check_);
    const auto il = per_image(b, "gt_image_level_labels", check_);
    Img img;
    for (std::size_t i = 0; i < static_cast<std::size_t>(b.size()); ++i) {
      const std::int64_t sample = s.images + static_cast<std::int64_t>(i);
      img.clear();
      const std::int64_t n =
          read_boxes_f32(pb[i], "pred_bboxes", sample, -1, check_, img.pf, img.pd, img.p_wide);
      read_floats(ps[i], "pred_scores", sample, 0, n, check_, img.score);
      img.p_wide = img.p_wide || is_wide(ps[i]);
      read_ints(pl[i], "pred_labels", sample, n, check_, img.plabel);
      check_labels(img.plabel, "pred_labels", sample);
      bool g_wide = false;
      const std::int64_t g =
          read_boxes_f32(gb[i], "gt_bboxes", sample, -1, check_, img.gf, img.gd, g_wide);
      read_ints(gl[i], "gt_labels", sample, g, check_, img.glabel);
      check_labels(img.glabel, "gt_labels", sample);
      if (gg) {
        read_ints((*gg)[i], "gt_is_group_of", sample, g, check_, img.gflag);
        for (const auto f : img.gflag)
          if (f != 0 && f != 1)
            check_.fail(
                "gt_is_group_of",
                sample_str(sample) + ": flags must be 0 / 1 (or bool), found " + std::to_string(f));
      } else {
        img.gflag.assign(static_cast<std::size_t>(g), 0);
      }
      if (il) {
        read_ints((*il)[i], "gt_image_level_labels", sample, -1, check_, img.image_labels);
        check_labels(img.image_labels, "gt_image_level_labels", sample);
      }
      add_image(s, img);
    }
    s.images += b.size();
  }

  void check_rank(const OidState& s, std::size_t) const override {
    if (s.cls.size() != s.score.size() || s.bits.size() != s.score.size() * cfg_.words())
      throw RuntimeError(fmt::format("{} classes, {} scores and {} bit words for {} per entry",
                                     s.cls.size(), s.score.size(), s.bits.size(), cfg_.words()));
  }

  Value compute(const OidState& all) const override {
    return voc::compute_map(cfg_, all.cls, all.score, all.bits, all.num_gts);
  }

 private:
  struct Img {
    std::vector<float> pf, gf;
    std::vector<double> pd, gd, score;
    std::vector<std::int64_t> plabel, glabel, gflag, image_labels;
    bool p_wide = false;
    void clear() {
      pf.clear(), gf.clear(), pd.clear(), gd.clear(), score.clear();
      plabel.clear(), glabel.clear(), gflag.clear(), image_labels.clear();
      p_wide = false;
    }
  };

  void check_labels(const std::vector<std::int64_t>& labels, std::string_view field,
                    std::int64_t sample) const {
    for (const auto l : labels)
      if (l < 0 || l >= num_classes_)
        check_.fail(field, sample_str(sample) + ": class id " + std::to_string(l) +
                               " is outside [0, " + std::to_string(num_classes_) + ")");
  }

  /// OIDMeanAP.add and compute_metric's per-image part for one image: the label processing, the
  /// matching per class, and the entries and counts it adds to the state.
  void add_image(OidState& s, const Img& img) const {
    const std::size_t I = cfg_.thrs.size(), S = cfg_.scales.ranges.size(), W = cfg_.words();
    // Ground truth (float32 boxes), extended with the ancestors' copies.
    struct Gt {
      const float* f;
      std::int64_t label;
      bool group;
    };
    std::vector<Gt> gts;
    for (std::size_t j = 0; j < img.glabel.size(); ++j)
      gts.push_back({&img.gf[j * 4], img.glabel[j], img.gflag[j] != 0});
    if (get_supercategory_)
      for (std::size_t j = 0; j < img.glabel.size(); ++j)
        for (const auto a : up_[static_cast<std::size_t>(img.glabel[j])])
          gts.push_back({&img.gf[j * 4], a, img.gflag[j] != 0});
    for (const auto& gt : gts)
      for (std::size_t sc = 0; sc < S; ++sc)
        if (voc::area_in_range(gt.f, nullptr, false, extra_, cfg_.scales.ranges[sc]))
          ++s.num_gts[static_cast<std::size_t>(gt.label) * S + sc];
    std::vector<std::int64_t> allowed;
    for (const auto& gt : gts) allowed.push_back(gt.label);
    allowed.insert(allowed.end(), img.image_labels.begin(), img.image_labels.end());
    std::sort(allowed.begin(), allowed.end());
    allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
    const auto is_allowed = [&](std::int64_t c) {
      return std::binary_search(allowed.begin(), allowed.end(), c);
    };
    // _process_prediction: (original prediction, class) in mmeval's order.
    std::vector<std::pair<std::size_t, std::int64_t>> preds;
    for (std::size_t d = 0; d < img.plabel.size(); ++d)
      if (!filter_labels_ || is_allowed(img.plabel[d])) preds.emplace_back(d, img.plabel[d]);
    if (get_supercategory_) {
      std::vector<std::int64_t> labels = img.plabel;
      std::sort(labels.begin(), labels.end());
      labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
      for (const auto l : labels)
        for (const auto a : up_[static_cast<std::size_t>(l)])
          if (is_allowed(a))
            for (std::size_t d = 0; d < img.plabel.size(); ++d)
              if (img.plabel[d] == l) preds.emplace_back(d, a);
    }
    // The entries of the predictions, in that order; their bits set per class below.
    const std::size_t at = s.cls.size();
    s.bits.resize((at + preds.size()) * W, 0);
    for (const auto& [d, c] : preds) {
      s.cls.push_back(static_cast<std::int32_t>(c));
      s.score.push_back(img.score[d]);
    }
    // Per class: the positions of its predictions (in `preds`) and of its boxes (in `gts`).
    std::vector<std::size_t> by_p(preds.size()), by_g(gts.size());
    std::iota(by_p.begin(), by_p.end(), 0);
    std::iota(by_g.begin(), by_g.end(), 0);
    std::stable_sort(by_p.begin(), by_p.end(), [&](std::size_t a, std::size_t b) {
      return preds[a].second < preds[b].second;
    });
    std::stable_sort(by_g.begin(), by_g.end(),
                     [&](std::size_t a, std::size_t b) { return gts[a].label < gts[b].label; });
    std::size_t pi = 0, gi = 0;
    ClassWork w;
    std::vector<Row> rows;
    while (pi < by_p.size() || gi < by_g.size()) {
      const std::int64_t c = std::min(pi < by_p.size() ? preds[by_p[pi]].second : INT64_MAX,
                                      gi < by_g.size() ? gts[by_g[gi]].label : INT64_MAX);
      w.p.clear();
      w.g.clear();
      for (; pi < by_p.size() && preds[by_p[pi]].second == c; ++pi) w.p.push_back(by_p[pi]);
      for (; gi < by_g.size() && gts[by_g[gi]].label == c; ++gi) w.g.push_back(by_g[gi]);
      std::vector<const float*> all, normal, group;
      for (const auto j : w.g) {
        all.push_back(gts[j].f);
        (use_group_of_ && gts[j].group ? group : normal).push_back(gts[j].f);
      }
      match_class(img, preds, w.p, normal, group, all, s.bits.data() + at * W, I, S, W, c, rows);
    }
    for (const auto& r : rows) {
      s.cls.push_back(static_cast<std::int32_t>(r.cls));
      s.score.push_back(r.score);
      s.bits.insert(s.bits.end(), r.bits.begin(), r.bits.end());
    }
  }

  struct ClassWork {
    std::vector<std::size_t> p, g;
  };
  /// A group-of box's entry.
  struct Row {
    std::int64_t cls;
    double score;
    std::vector<std::uint64_t> bits;
  };

  /// OIDMeanAP._calculate_image_tpfp for class c of one image: VOCMeanAP's matching against the
  /// normal boxes, then the group-of boxes; sets the bits of the class's predictions (`pos` in
  /// `preds`, bits at bits[pos * W]) and appends the group-of boxes' entries.
  void match_class(const Img& img, const std::vector<std::pair<std::size_t, std::int64_t>>& preds,
                   const std::vector<std::size_t>& pos, const std::vector<const float*>& normal,
                   const std::vector<const float*>& group, const std::vector<const float*>& all,
                   std::uint64_t* bits, std::size_t I, std::size_t S, std::size_t W, std::int64_t c,
                   std::vector<Row>& rows) const {
    const auto fe = static_cast<float>(extra_);
    const std::size_t np = pos.size();
    const auto box = [&](std::size_t p) { return &img.pf[preds[pos[p]].first * 4]; };
    const auto dbox = [&](std::size_t p) { return &img.pd[preds[pos[p]].first * 4]; };
    const auto score = [&](std::size_t p) { return img.score[preds[pos[p]].first]; };
    const auto bit = [&](std::size_t p, std::size_t k) -> std::uint64_t& {
      return bits[pos[p] * W + k / 64];
    };
    const auto set = [&](std::size_t p, std::size_t k) {
      bit(p, k) |= std::uint64_t{1} << (k % 64);
    };
    const auto get = [&](std::size_t p, std::size_t k) {
      return ((bit(p, k) >> (k % 64)) & 1) != 0;
    };
    const auto clear = [&](std::size_t p, std::size_t k) {
      bit(p, k) &= ~(std::uint64_t{1} << (k % 64));
    };
    // Predictions in decreasing score (stable: no ties in mmeval's well-defined cases).
    std::vector<std::size_t> order(np);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return score(a) > score(b); });
    // VOCMeanAP._calculate_image_tpfp with no ignored boxes: the ground truth array is float64
    // there (concatenated with an empty float64 array), the predictions' as theirs.
    if (normal.empty()) {
      for (std::size_t p = 0; p < np; ++p)
        for (std::size_t sc = 0; sc < S; ++sc)
          if (voc::area_in_range(box(p), dbox(p), img.p_wide, 0.0, cfg_.scales.ranges[sc]))
            for (std::size_t i = 0; i < I; ++i) set(p, I * S + i * S + sc);
    } else if (np > 0) {
      std::vector<float> best(np);
      std::vector<std::size_t> arg(np);
      for (std::size_t p = 0; p < np; ++p)
        for (std::size_t j = 0; j < normal.size(); ++j) {
          const float v = mmeval_iou(box(p), normal[j], fe);
          if (j == 0 || v > best[p]) best[p] = v, arg[p] = j;
        }
      std::vector<double> nd(normal.size() * 4);
      for (std::size_t j = 0; j < normal.size(); ++j)
        for (std::size_t e = 0; e < 4; ++e) nd[j * 4 + e] = normal[j][e];
      std::vector<std::uint8_t> covered(normal.size()), out(normal.size());
      for (std::size_t i = 0; i < I; ++i) {
        const auto thr = static_cast<float>(cfg_.thrs[i]);
        for (std::size_t sc = 0; sc < S; ++sc) {
          const auto& range = cfg_.scales.ranges[sc];
          std::fill(covered.begin(), covered.end(), 0);
          for (std::size_t j = 0; j < normal.size(); ++j)
            out[j] = !voc::area_in_range(normal[j], &nd[j * 4], true, 0.0, range);
          const std::size_t k = i * S + sc;
          for (const std::size_t p : order) {
            if (best[p] >= thr) {
              const std::size_t m = arg[p];
              if (out[m]) continue;
              if (!covered[m]) {
                set(p, k);
                covered[m] = 1;
              } else {
                set(p, I * S + k);
              }
            } else if (voc::area_in_range(box(p), dbox(p), img.p_wide, 0.0, range)) {
              set(p, I * S + k);
            }
          }
        }
      }
    }
    if (group.empty()) return;
    // The group-of boxes: best IoF of each prediction, then per pair the predictions they take.
    std::vector<float> best(np);
    std::vector<std::size_t> arg(np);
    for (std::size_t p = 0; p < np; ++p)
      for (std::size_t j = 0; j < group.size(); ++j) {
        const float v = mmeval_iof(box(p), group[j], fe);
        if (j == 0 || v > best[p]) best[p] = v, arg[p] = j;
      }
    const std::size_t G = group.size(), K = I * S;
    std::vector<double> row_score(G * K, 0.0);  // pred_bboxes_group's score column
    std::vector<std::uint8_t> took(G * K, 0);   // tp_group
    std::vector<std::uint8_t> matched(np);      // match_group_of
    for (std::size_t i = 0; i < I; ++i) {
      const auto thr = static_cast<float>(iof_thrs_[i]);
      for (std::size_t sc = 0; sc < S; ++sc) {
        const std::size_t k = i * S + sc;
        const auto& range = cfg_.scales.ranges[sc];
        std::fill(matched.begin(), matched.end(), 0);
        for (const std::size_t p : order) {
          if (get(p, k)) continue;  // a TP on a normal box
          if (best[p] < thr) continue;
          const std::size_t m = arg[p];
          // As mmeval: the range check takes box m of ALL the class's boxes.
          if (!voc::area_in_range(all[m], nullptr, false, 0.0, range)) continue;
          took[m * K + k] = 1;
          matched[p] = 1;
          if (row_score[m * K + k] < score(p)) row_score[m * K + k] = score(p);
        }
        for (std::size_t p = 0; p < np; ++p)
          if (matched[p]) clear(p, K + k);  // leaves this pair's list (it is no TP)
      }
    }
    // One entry per group-of box and distinct score over the pairs: TP where it took a
    // prediction, else FP.
    for (std::size_t m = 0; m < G; ++m) {
      const std::size_t first = rows.size();
      for (std::size_t k = 0; k < K; ++k) {
        const double sv = row_score[m * K + k];
        std::size_t e = first;
        while (e < rows.size() && rows[e].score != sv) ++e;
        if (e == rows.size()) rows.push_back({c, sv, std::vector<std::uint64_t>(W, 0)});
        const std::size_t bitk = took[m * K + k] ? k : K + k;
        rows[e].bits[bitk / 64] |= std::uint64_t{1} << (bitk % 64);
      }
    }
  }

  InputChecker check_;
  voc::ApConfig cfg_;
  std::vector<double> iof_thrs_;
  std::vector<std::vector<std::int32_t>> up_;  // per class: its ancestors
  std::int64_t num_classes_ = 0;
  double extra_ = 0.0;
  bool use_group_of_ = true, get_supercategory_ = true, filter_labels_ = true;
};

}  // namespace

ComponentInfo oid_mean_ap_info() {
  auto info = metric<OIDMeanAP>(
      "OIDMeanAP",
      "Open Images mAP (VOC-style AP at IoU thresholds and box-area ranges) with the class "
      "hierarchy (boxes and predictions also count for ancestor classes), group-of boxes and "
      "image-level labels, as mmeval's OIDMeanAP. Keys AP{100 t}, mAP, mAP@(s0, s1).",
      voc::params(
          voc::head_params("box sides", "area", "'area' (VOC2012) or '11points' (VOC2007)."),
          {param("iof_thrs", ParamType::FloatList,
                 "IoF thresholds (intersection over the prediction's area) for group-of boxes, one "
                 "per IoU threshold.")
               .def(Value::Array{Value(0.5)}),
           param("hierarchy_file", ParamType::Path,
                 "Open Images class hierarchy JSON (bbox_labels_600_hierarchy.json format: nested "
                 "LabelName / Subcategory). With label_file; without both: no hierarchy.")
               .optional(),
           param(
               "label_file", ParamType::Path,
               "CSV mapping label names to class ids (class-descriptions-boxable.csv format: row i "
               "= class i, column 0 the label name); num_classes rows.")
               .optional(),
           param("use_group_of", ParamType::Bool,
                 "Group-of boxes: one TP (or FP) per box, whatever number of predictions it takes.")
               .def(true),
           param("get_supercategory", ParamType::Bool,
                 "Boxes and predictions also count for every ancestor class.")
               .def(true),
           param("filter_labels", ParamType::Bool,
                 "Drop predictions of classes neither in the image's boxes nor its image-level "
                 "labels.")
               .def(true),
           voc::legacy_coordinate_param()},
          voc::tail_params()),
      {InputSpec{"pred_bboxes", "Per image [n, 4] float boxes x1, y1, x2, y2.", true},
       InputSpec{"pred_scores", "Per image [n] float scores (NaN is an error).", true},
       InputSpec{"pred_labels", "Per image [n] int class ids in [0, num_classes).", true},
       InputSpec{"gt_bboxes", "Per image [g, 4] float boxes x1, y1, x2, y2 (read as float32).",
                 true},
       InputSpec{"gt_labels", "Per image [g] int class ids.", true},
       InputSpec{"gt_is_group_of", "Per image [g] bool / 0-1 group-of flags (optional: none).",
                 false},
       InputSpec{"gt_image_level_labels",
                 "Per image [k] int class ids verified present (optional).", false}});
  info.results = voc::result_specs();
  return info;
}
TALLY_COMPONENT(oid_mean_ap_info)

}  // namespace tally::detection
