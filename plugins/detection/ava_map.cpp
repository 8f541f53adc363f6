// AVAMeanAP: frame-level mAP of spatio-temporal action detection on AVA (mmeval's AVAMeanAP: the
// PASCAL evaluator of the TF Object Detection API, at IoU 0.5).
//
// Ground truth, label map and exclusions come from AVA's files (parameters): ann_file, the CSV
// rows "video_id, timestamp, x1, y1, x2, y2, action_id[, person_id]" (coordinates normalised);
// label_file, the .pbtxt label map (lines "  name: \"...\"" and "  id: N" / "  label_id: N");
// exclude_file, "video_id, timestamp" rows of frames left out. A frame is (video_id, timestamp).
// Each sample of the data is one frame's predictions: video_id (text), timestamp (integer),
// pred_bboxes [n, 4] (x1, y1, x2, y2), pred_scores [n], pred_labels [n] (the index l of mmeval's
// `outputs` list: action id l + 1, or custom_classes[l]).
//
// As mmeval (ava_eval over results2csv's file):
//   - predictions pass through its CSV: coordinates and scores rounded to 3 decimals ("{:.3f}",
//     parsed back); actions outside the label map (or custom_classes) are dropped, as are
//     ground-truth rows of such actions and every frame of exclude_file;
//   - per frame, the predictions (of all samples of that frame, in dataset order) are sorted by
//     score, stably; boxes with x2 <= x1 or y2 <= y1 are dropped; per class, each prediction
//     takes its highest-IoU ground-truth box of the class (the first of equal IoUs, in the
//     annotation file's order sorted by descending person_id), a true positive when IoU >= 0.5
//     and that box is not taken yet;
//   - per class with ground truth: precision and recall down the predictions by score, AP = the
//     area under the precision envelope at the recall steps (0 without predictions); mAP@0.5IOU =
//     the mean over those classes (numpy.nanmean).
// Differences: predictions of one class with equal (rounded) scores are taken in dataset order;
// mmeval's np.argsort (quicksort) leaves their order unspecified (the reference data has no such
// ties). mmeval with verbose=False counts the predictions of excluded frames as false positives
// (its `if self.verbose and ...` guard); tally always leaves them out, as mmeval's default does.
//
// Reference: mmeval 0.2.1 mmeval.metrics.AVAMeanAP(ann_file, label_file, exclude_file,
// custom_classes)(predictions) (tests/reference/ava.py).
//
// Example: ann_file tests/data/ava/doc_gt.csv (frame "vid", 902: box 0.1, 0.2, 0.5, 0.9 of
// action 1), label map of action 1; that box predicted for label 0, score 0.9 -> mAP@0.5IOU 1.0.
//
// State: per prediction kept, its frame (an index into the annotation file's frames, -1 for a
// frame without ground truth), class, rounded score and box, concatenated across ranks in rank
// order (dataset order); rank 0 groups them by frame. The ground truth is read on every rank from
// the same file. The same result on any number of ranks.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common.hpp"
#include "param_files.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/numpy_math.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"

namespace tally::detection {
namespace {

constexpr const char* kVideo = "video_id";
constexpr const char* kTimestamp = "timestamp";
constexpr const char* kBoxes = "pred_bboxes";
constexpr const char* kScores = "pred_scores";
constexpr const char* kLabels = "pred_labels";
constexpr std::uintmax_t kAnnotationMaxBytes = std::uintmax_t{1} << 30;

/// mmeval's image key: f'{video_id}, {int(timestamp): 04d}'.
std::string frame_key(std::string_view video, std::int64_t timestamp) {
  return fmt::format("{}, {: 04d}", video, timestamp);
}

/// A number as it comes back from mmeval's CSV: f'{x:.3f}' parsed by float().
double through_csv(double x) { return std::strtod(fmt::format("{:.3f}", x).c_str(), nullptr); }

struct Category {
  std::int64_t id = 0;
  std::string name;
};

/// One frame of the annotation file: its boxes [y1, x1, y2, x2] and their class indices (id - 1)
/// in mmeval's order (sorted by descending person_id, stably).
struct GtFrame {
  std::vector<std::array<double, 4>> boxes;
  std::vector<std::int32_t> cls;
};

struct AvaState {
  PackedVector<std::int64_t> frame;  // per prediction: GT frame index, or -1
  PackedVector<std::int32_t> cls;    // per prediction: class index (action id - 1)
  PackedVector<double> score;        // per prediction, rounded as mmeval's CSV
  PackedVector<double> box;          // per prediction: y1, x1, y2, x2, rounded
  std::int64_t frames = 0;           // samples seen
  TALLY_STATE(concat(frame), concat(cls), concat(score), concat(box), sum(frames))
};

class AvaMeanAp final : public TypedMetric<AvaState> {
 public:
  explicit AvaMeanAp(const Params& p) : check_(p.owner_or("AVAMeanAP")) {
    (void)p.get_size("num_classes");  // mmeval's, unused (the label map decides): still bounded
    load_label_map(p);
    if (p.has("custom_classes")) {
      for (const std::int64_t c : p.get_int_list("custom_classes")) {
        if (!whitelist_.count(c))
          p.fail("custom_classes", fmt::format("holds {}, which the label map does not list", c));
        custom_.push_back(c);
      }
      if (custom_.empty()) p.fail("custom_classes", "is empty");
      const std::unordered_set<std::int64_t> keep(custom_.begin(), custom_.end());
      whitelist_ = keep;
      std::erase_if(categories_, [&](const Category& c) { return !keep.count(c.id); });
    }
    num_class_ = 0;
    for (const Category& c : categories_) num_class_ = std::max(num_class_, c.id);
    if (p.has("exclude_file")) load_exclusions(p);
    load_ground_truth(p);
    classwise_ = p.get_bool("classwise");
  }

 protected:
  void update(AvaState& s, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    const Text& videos = batch.single_text(kVideo);
    const Tensor& ts = check_.tensor(batch, kTimestamp);
    if (ts.dim() != 1 || !is_integral(ts.dtype()))
      check_.fail(kTimestamp, "must be integers [N] (the frame's second), got " + ts.describe());
    const PerSample boxes(batch, kBoxes, check_), scores(batch, kScores, check_),
        labels(batch, kLabels, check_);
    for (std::int64_t i = 0; i < batch.size(); ++i) {
      const std::int64_t sample = s.frames + i;
      const std::string where = "sample " + std::to_string(sample) + " ";
      std::int64_t t = 0;
      visit_integral(ts, [&](const auto* v) { t = static_cast<std::int64_t>(v[i]); });
      const std::string key = frame_key(videos[i][0], t);
      if (excluded_.count(key)) continue;
      const auto it = gt_index_.find(key);
      const std::int64_t frame = it == gt_index_.end() ? -1 : it->second;
      const Tensor b = boxes[i], sc = scores[i], lb = labels[i];
      // An empty list ([] in JSON: a [0] tensor) is a frame without predictions.
      if (b.numel() != 0 && (b.dim() != 2 || b.size(1) != 4))
        check_.fail(kBoxes, where + "must be [n, 4] (x1, y1, x2, y2), got " + b.describe());
      const std::int64_t n = b.numel() == 0 ? 0 : b.size(0);
      if (sc.dim() != 1 || sc.size(0) != n)
        check_.fail(kScores, where + "must be [" + std::to_string(n) + "], got " + sc.describe());
      if (lb.dim() != 1 || lb.size(0) != n || (n > 0 && !is_integral(lb.dtype())))
        check_.fail(kLabels,
                    where + "must be integers [" + std::to_string(n) + "], got " + lb.describe());
      const std::vector<double> xy = floats(b, kBoxes, where), score = floats(sc, kScores, where);
      std::vector<std::int64_t> label(static_cast<std::size_t>(n));
      if (n > 0)
        visit_integral(lb, [&](const auto* v) {
          for (std::int64_t k = 0; k < n; ++k) label[static_cast<std::size_t>(k)] = v[k];
        });
      for (std::int64_t k = 0; k < n; ++k) {
        const std::int64_t l = label[static_cast<std::size_t>(k)];
        if (l < 0) check_.fail(kLabels, where + "holds " + std::to_string(l) + ": labels are >= 0");
        std::int64_t action = l + 1;  // results2csv
        if (!custom_.empty()) {
          if (l >= static_cast<std::int64_t>(custom_.size()))
            check_.fail(kLabels, where + fmt::format("holds {}: custom_classes has {} classes", l,
                                                     custom_.size()));
          action = custom_[static_cast<std::size_t>(l)];
        }
        if (!whitelist_.count(action)) continue;  // read_csv's class_whitelist
        const auto at = static_cast<std::size_t>(4 * k);
        s.frame.push_back(frame);
        s.cls.push_back(static_cast<std::int32_t>(action - 1));
        s.score.push_back(through_csv(score[static_cast<std::size_t>(k)]));
        // CSV columns x1, y1, x2, y2; the evaluator's boxes [y1, x1, y2, x2].
        for (const std::size_t c : {std::size_t{1}, std::size_t{0}, std::size_t{3}, std::size_t{2}})
          s.box.push_back(through_csv(xy[at + c]));
      }
    }
    s.frames += batch.size();
  }

  void check_rank(const AvaState& s, std::size_t rank) const override {
    const std::size_t n = s.frame.size();
    if (s.cls.size() != n || s.score.size() != n || s.box.size() != 4 * n)
      check_.fail_runtime(fmt::format(
          "rank {}'s state is corrupt: per-prediction arrays of different lengths", rank));
    for (std::size_t k = 0; k < n; ++k)
      if (s.frame[k] < -1 || s.frame[k] >= static_cast<std::int64_t>(gt_.size()) || s.cls[k] < 0 ||
          s.cls[k] >= num_class_)
        check_.fail_runtime(
            fmt::format("rank {}'s state is corrupt: prediction {} is out of range", rank, k));
  }

  Value compute(const AvaState& s) const override {
    check_rank(s, 0);
    const std::size_t n = s.frame.size();
    // Predictions grouped by frame (dataset order within), then by score within each frame.
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return s.frame[a] < s.frame[b]; });
    std::vector<char> tp(n, 0);
    std::vector<char> valid(n, 1);
    for (std::size_t k = 0; k < n; ++k)
      valid[k] = s.box[4 * k] < s.box[4 * k + 2] && s.box[4 * k + 1] < s.box[4 * k + 3];
    std::vector<char> taken;
    for (std::size_t lo = 0; lo < n;) {
      std::size_t hi = lo;
      while (hi < n && s.frame[order[hi]] == s.frame[order[lo]]) ++hi;
      const std::int64_t f = s.frame[order[lo]];
      if (f >= 0) {
        std::stable_sort(order.begin() + static_cast<std::ptrdiff_t>(lo),
                         order.begin() + static_cast<std::ptrdiff_t>(hi),
                         [&](std::size_t a, std::size_t b) { return s.score[a] > s.score[b]; });
        const GtFrame& g = gt_[static_cast<std::size_t>(f)];
        taken.assign(g.boxes.size(), 0);
        for (std::size_t q = lo; q < hi; ++q) {
          const std::size_t k = order[q];
          if (!valid[k]) continue;
          // The highest IoU among the ground truth of the class (the first of equal ones).
          std::ptrdiff_t best = -1;
          double best_iou = 0.0;
          for (std::size_t j = 0; j < g.boxes.size(); ++j) {
            if (g.cls[j] != s.cls[k]) continue;
            const double v = iou(&s.box[4 * k], g.boxes[j]);
            if (best < 0 || v > best_iou) {
              best = static_cast<std::ptrdiff_t>(j);
              best_iou = v;
            }
          }
          if (best >= 0 && best_iou >= 0.5 && !taken[static_cast<std::size_t>(best)]) {
            tp[k] = 1;
            taken[static_cast<std::size_t>(best)] = 1;
          }
        }
      }
      lo = hi;
    }
    // Per class: its valid predictions by descending score (ties in dataset order).
    std::vector<std::vector<std::size_t>> per_class(static_cast<std::size_t>(num_class_));
    for (std::size_t k = 0; k < n; ++k)
      if (valid[k]) per_class[static_cast<std::size_t>(s.cls[k])].push_back(k);
    std::vector<double> ap(static_cast<std::size_t>(num_class_),
                           std::numeric_limits<double>::quiet_NaN());
    std::vector<double> precision, recall, terms;
    for (std::size_t c = 0; c < per_class.size(); ++c) {
      const std::int64_t num_gt = gt_count_[c];
      if (num_gt == 0) continue;
      auto& idx = per_class[c];
      std::stable_sort(idx.begin(), idx.end(),
                       [&](std::size_t a, std::size_t b) { return s.score[a] > s.score[b]; });
      if (idx.empty()) {
        ap[c] = 0.0;
        continue;
      }
      // metrics.compute_average_precision over [0, recall..., 1] and [0, precision..., 0].
      precision.assign(1, 0.0);
      recall.assign(1, 0.0);
      std::int64_t cum_tp = 0, cum_fp = 0;
      for (const std::size_t k : idx) {
        (tp[k] ? cum_tp : cum_fp) += 1;
        precision.push_back(static_cast<double>(cum_tp) / static_cast<double>(cum_tp + cum_fp));
        recall.push_back(static_cast<double>(cum_tp) / static_cast<double>(num_gt));
      }
      precision.push_back(0.0);
      recall.push_back(1.0);
      for (std::size_t i = precision.size() - 1; i-- > 0;)
        precision[i] = std::max(precision[i], precision[i + 1]);
      terms.clear();
      for (std::size_t i = 1; i < recall.size(); ++i)
        if (recall[i] != recall[i - 1]) terms.push_back((recall[i] - recall[i - 1]) * precision[i]);
      ap[c] = numpy::sum(terms.data(), terms.size());
    }
    Value out = Value::map();
    out.set("mAP@0.5IOU", numpy::nanmean(ap));
    if (classwise_) {
      Value::Map by_name;
      for (const Category& cat : categories_)
        by_name.emplace_back(cat.name, ap[static_cast<std::size_t>(cat.id - 1)]);
      out.set("AP@0.5IOU_classwise", Value(std::move(by_name)));
    }
    return out;
  }

 private:
  /// np_box_ops.iou of one [y1, x1, y2, x2] pair.
  static double iou(const double* a, const std::array<double, 4>& b) {
    const double h = std::max(0.0, std::min(a[2], b[2]) - std::max(a[0], b[0]));
    const double w = std::max(0.0, std::min(a[3], b[3]) - std::max(a[1], b[1]));
    const double inter = h * w;
    const double area_a = (a[2] - a[0]) * (a[3] - a[1]);
    const double area_b = (b[2] - b[0]) * (b[3] - b[1]);
    return inter / (area_a + area_b - inter);
  }

  std::vector<double> floats(const Tensor& t, const char* field, const std::string& where) const {
    std::vector<double> out(static_cast<std::size_t>(t.numel()));
    const auto load = [&](const auto* v) {
      for (std::size_t k = 0; k < out.size(); ++k) out[k] = static_cast<double>(v[k]);
    };
    if (is_floating(t.dtype()))
      visit_floating(t, load);
    else if (is_integral(t.dtype()))
      visit_integral(t, load);
    else
      check_.fail(field, where + "must hold numbers, got " + t.describe());
    for (const double v : out)
      if (!std::isfinite(v)) check_.fail(field, where + "holds NaN or an infinity");
    return out;
  }

  /// read_label: a line starting "  name:" names the next id; "  id:" or "  label_id:" adds it.
  void load_label_map(const Params& p) {
    const std::string text = read_param_file(p, "label_file");
    std::string name;
    std::size_t line_no = 0;
    for (std::size_t pos = 0; pos <= text.size();) {
      const std::size_t end = std::min(text.find('\n', pos), text.size());
      const std::string_view line(text.data() + pos, end - pos);
      ++line_no;
      if (line.starts_with("  name:")) {
        const std::size_t q0 = line.find('"'), q1 = line.find('"', q0 + 1);
        if (q0 == std::string_view::npos || q1 == std::string_view::npos)
          p.fail("label_file",
                 fmt::format("line {}: expected name: \"...\", found '{}'", line_no, line));
        name = std::string(line.substr(q0 + 1, q1 - q0 - 1));
      } else if (line.starts_with("  id:") || line.starts_with("  label_id:")) {
        std::string_view v = line.substr(line.find(':') + 1);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\r')) v.remove_suffix(1);
        v = v.substr(v.rfind(' ') == std::string_view::npos ? 0 : v.rfind(' ') + 1);
        std::int64_t id = 0;
        const auto [stop, ec] = std::from_chars(v.data(), v.data() + v.size(), id);
        if (v.empty() || ec != std::errc() || stop != v.data() + v.size() || id < 1 ||
            id > (1 << 20))
          p.fail("label_file",
                 fmt::format("line {}: expected an id from 1 to 2^20, found '{}'", line_no, line));
        categories_.push_back({id, name});
        whitelist_.insert(id);
      }
      pos = end + 1;
    }
    if (categories_.empty()) p.fail("label_file", "lists no class (no \"  id: N\" line)");
  }

  void load_exclusions(const Params& p) {
    const auto rows = parse_csv(read_param_file(p, "exclude_file", kAnnotationMaxBytes));
    for (std::size_t r = 0; r < rows.size(); ++r) {
      if (rows[r].size() != 2)
        p.fail("exclude_file", fmt::format("row {}: expected 2 columns (video_id, timestamp), "
                                           "found {}",
                                           r + 1, rows[r].size()));
      excluded_.insert(
          frame_key(rows[r][0], parse_int(p, "exclude_file", r, "timestamp", rows[r][1])));
    }
  }

  /// read_csv(ann_file, class_whitelist): rows per frame, sorted by descending 8th column (the
  /// person id; 1.0 without it), stably; the frames in order of first appearance.
  void load_ground_truth(const Params& p) {
    const auto rows = parse_csv(read_param_file(p, "ann_file", kAnnotationMaxBytes));
    struct Row {
      double order_key;
      std::int32_t cls;
      std::array<double, 4> box;
    };
    std::vector<std::vector<Row>> frames;
    std::vector<std::string> keys;
    std::unordered_map<std::string, std::int64_t> index;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const auto& row = rows[r];
      if (row.size() != 7 && row.size() != 8)
        p.fail("ann_file",
               fmt::format("row {}: expected 7 or 8 columns, found {}", r + 1, row.size()));
      const std::string key = frame_key(row[0], parse_int(p, "ann_file", r, "timestamp", row[1]));
      std::array<double, 4> xy{};
      for (std::size_t c = 0; c < 4; ++c) xy[c] = parse_float(p, "ann_file", r, row[2 + c]);
      const std::int64_t action = parse_int(p, "ann_file", r, "action_id", row[6]);
      if (!whitelist_.count(action)) continue;
      const double order_key = row.size() == 8 ? parse_float(p, "ann_file", r, row[7]) : 1.0;
      const auto [it, fresh] = index.emplace(key, static_cast<std::int64_t>(frames.size()));
      if (fresh) {
        frames.emplace_back();
        keys.push_back(key);
      }
      frames[static_cast<std::size_t>(it->second)].push_back(
          {order_key, static_cast<std::int32_t>(action - 1), {xy[1], xy[0], xy[3], xy[2]}});
    }
    gt_count_.assign(static_cast<std::size_t>(num_class_), 0);
    for (std::size_t f = 0; f < frames.size(); ++f) {
      if (excluded_.count(keys[f])) continue;
      auto& fr = frames[f];
      std::stable_sort(fr.begin(), fr.end(),
                       [](const Row& a, const Row& b) { return a.order_key > b.order_key; });
      GtFrame g;
      for (const Row& row : fr) {
        g.boxes.push_back(row.box);
        g.cls.push_back(row.cls);
        ++gt_count_[static_cast<std::size_t>(row.cls)];
      }
      gt_index_.emplace(keys[f], static_cast<std::int64_t>(gt_.size()));
      gt_.push_back(std::move(g));
    }
  }

  /// Column `column` of a CSV row: a decimal integer (as Python's int() reads it: spaces around
  /// it and a '+' allowed) that fits in int64; a longer one is refused, not saturated (two
  /// timestamps of 23 digits would name one frame).
  static std::int64_t parse_int(const Params& p, const char* param, std::size_t row,
                                const char* column, const std::string& text) {
    std::string_view t(text);
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t' || t.back() == '\r'))
      t.remove_suffix(1);
    if (t.size() > 1 && t.front() == '+' && t[1] != '-') t.remove_prefix(1);
    std::int64_t v = 0;
    const char* end = t.data() + t.size();
    const auto [stop, ec] = std::from_chars(t.data(), end, v);
    if (ec == std::errc::result_out_of_range)
      p.fail(param, fmt::format("row {} column {}: the integer '{}' is out of range (expected "
                                "[{}, {}])",
                                row + 1, column, text, std::numeric_limits<std::int64_t>::min(),
                                std::numeric_limits<std::int64_t>::max()));
    if (t.empty() || ec != std::errc() || stop != end)
      p.fail(param, fmt::format("row {} column {}: expected an integer, found '{}'", row + 1,
                                column, text));
    return v;
  }

  static double parse_float(const Params& p, const char* param, std::size_t row,
                            const std::string& text) {
    char* stop = nullptr;
    const double v = std::strtod(text.c_str(), &stop);
    if (text.empty() || *stop != '\0' || !std::isfinite(v))
      p.fail(param, fmt::format("row {}: expected a number, found '{}'", row + 1, text));
    return v;
  }

  InputChecker check_;
  std::vector<Category> categories_;
  std::unordered_set<std::int64_t> whitelist_;
  std::vector<std::int64_t> custom_;
  std::int64_t num_class_ = 0;
  std::unordered_set<std::string> excluded_;
  std::vector<GtFrame> gt_;
  std::unordered_map<std::string, std::int64_t> gt_index_;
  std::vector<std::int64_t> gt_count_;
  bool classwise_ = false;
};

}  // namespace

ComponentInfo ava_map_info() {
  auto c = metric<AvaMeanAp>(
      "AVAMeanAP",
      "Frame-level mAP of spatio-temporal action detection on AVA at IoU 0.5 (the PASCAL "
      "evaluator of the TF Object Detection API), ground truth, label map and exclusions from "
      "AVA's files; key mAP@0.5IOU (classwise: AP@0.5IOU_classwise by class name). Reference: "
      "mmeval 0.2.1 AVAMeanAP(ann_file, label_file, exclude_file, custom_classes)(predictions).",
      {param("ann_file", ParamType::Path,
             "AVA ground truth CSV: video_id, timestamp, x1, y1, x2, y2, action_id[, person_id] "
             "(coordinates normalised to [0, 1]); at most 1 GiB."),
       param("label_file", ParamType::Path,
             "AVA label map (.pbtxt): '  name: \"...\"' and '  id: N' (or '  label_id: N') lines; "
             "only its actions are evaluated."),
       param("exclude_file", ParamType::Path,
             "Optional CSV of frames (video_id, timestamp) left out of ground truth and "
             "predictions.")
           .optional(),
       param("num_classes", ParamType::Int,
             "mmeval's num_classes, accepted for its configs; the label map (or custom_classes) "
             "decides the classes evaluated.")
           .def(81),
       param("custom_classes", ParamType::IntList,
             "Optional: evaluate only these action ids (from the label map); prediction label l "
             "is then the action custom_classes[l].")
           .optional(),
       param("classwise", ParamType::Bool, "Also give each class's AP, by name.").def(false)},
      {InputSpec{kVideo, "The frame's video id, one string per sample.", true},
       InputSpec{kTimestamp, "The frame's timestamp (second), an integer per sample.", true},
       InputSpec{kBoxes, "Predicted person boxes [n, 4]: x1, y1, x2, y2 (normalised).", true},
       InputSpec{kScores, "Their action scores [n].", true},
       InputSpec{kLabels,
                 "Their action labels [n]: index l of mmeval's outputs (action id l + 1, or "
                 "custom_classes[l]).",
                 true}});
  c.results = {{"mAP@0.5IOU", Better::Higher, Plot::None, "mean AP over classes with ground truth"},
               {"AP@0.5IOU_classwise", Better::Higher, Plot::None, "per class name"}};
  return c;
}
TALLY_COMPONENT(ava_map_info)

}  // namespace tally::detection
