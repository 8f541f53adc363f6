// HmeanIoU: text-detection precision, recall and their harmonic mean (hmean) by polygon IoU, at
// each of a range of score thresholds, and the best of them (mmeval's HmeanIoU, MMOCR's metric
// for ICDAR-style benchmarks).
//
// Per image (mmeval's compute_metric, in this order):
//   1. predictions scoring below the lowest threshold are dropped, and so is a prediction whose
//      intersection with an ignored ground-truth polygon, divided by (its own area + 1e-5), is
//      above ignore_precision_thr;
//   2. IoU of every kept ground-truth polygon (ignore flag false) with every kept prediction:
//      area(gt n pred) / area(gt u pred) (0 when the union is empty), each polygon made valid
//      first (polygon.buffer(0) when it is not valid, e.g. self-intersecting);
//   3. for each threshold t: the predictions scoring >= t; a pair matches when its IoU is above
//      match_iou_thr; hits = the matches of `strategy`: vanilla (in (gt, pred) order, a pair whose
//      gt and pred are both still free is taken) or max_matching (the largest matching: scipy's
//      maximum_bipartite_matching).
// Over the dataset, for each t: recall = hits / gts (1 without any gt), precision = hits / preds
// (0 without predictions; 1 without gts and predictions), hmean = 2 p r / (p + r) (0 when p + r is
// 0). The thresholds are numpy.arange(start, stop, step) of pred_score_thrs (numpy's values:
// start + i * ((start + step) - start)); scores are compared as float32 (mmeval casts them);
// polygon coordinates are rounded to float32 too (mmeval's poly2shapely).
//
// Results: hmean, precision, recall of the threshold with the best hmean (the first of equal
// ones) and that threshold (best_score_thr); per threshold, score_thrs, hmean_per_thr,
// precision_per_thr and recall_per_thr.
//
// Reference: mmeval 0.2.1 mmeval.metrics.HmeanIoU(match_iou_thr, ignore_precision_thr,
// pred_score_thrs, strategy)(pred_polygons, pred_scores, gt_polygons, gt_ignore_flags) with
// shapely 2.2 (tests/reference/hmean_iou.py). tally computes the areas with GEOS, the library
// under shapely (Debian's 3.11 here, shapely's wheel bundles 3.14): the same algorithms.
//
// Example: gt one unit square; predictions the same square twice, scores 1 and 0.5;
// pred_score_thrs {start: 0.5, stop: 0.7, step: 0.1} -> hmean 1.0 (at 0.6: one prediction, one
// hit; at 0.5: precision 0.5, hmean 0.6666666666666666).
//
// Inputs, one entry per image: pred_polygons [n, 2k] (n polygons of k points, x1 y1 x2 y2 ...),
// or a flat [sum of 2 k_i] list with pred_polygon_lengths [n] (the coordinates of each polygon,
// for polygons with different numbers of points); pred_scores [n]; gt_polygons (and
// gt_polygon_lengths) likewise; gt_ignore_flags [m] (optional: none ignored).
//
// State: per threshold the hits and the predictions counted, and the ground-truth count: int64
// sums, computed image by image as the batches come; exact on any number of ranks.
#include <geos_c.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"

namespace tally::text_detection {
namespace {

constexpr const char* kPredPolygons = "pred_polygons";
constexpr const char* kPredLengths = "pred_polygon_lengths";
constexpr const char* kPredScores = "pred_scores";
constexpr const char* kGtPolygons = "gt_polygons";
constexpr const char* kGtLengths = "gt_polygon_lengths";
constexpr const char* kGtIgnore = "gt_ignore_flags";

// ---- GEOS ---------------------------------------------------------------------------------------

/// A GEOS context of its own (the reentrant API), whose errors are kept for the message.
class Geos {
 public:
  Geos() : ctx_(GEOS_init_r()) {
    if (ctx_ == nullptr) throw RuntimeError("HmeanIoU: GEOS could not start");
    GEOSContext_setErrorMessageHandler_r(ctx_, &Geos::on_error, this);
    GEOSContext_setNoticeMessageHandler_r(ctx_, &Geos::on_notice, nullptr);
  }
  ~Geos() { GEOS_finish_r(ctx_); }
  Geos(const Geos&) = delete;
  Geos& operator=(const Geos&) = delete;

  GEOSContextHandle_t get() const noexcept { return ctx_; }
  const std::string& last_error() const noexcept { return error_; }

 private:
  static void on_error(const char* message, void* self) {
    static_cast<Geos*>(self)->error_ = message != nullptr ? message : "";
  }
  static void on_notice(const char*, void*) {}

  GEOSContextHandle_t ctx_;
  std::string error_;
};

/// An owned geometry.
class Geometry {
 public:
  Geometry() = default;
  Geometry(GEOSContextHandle_t ctx, GEOSGeometry* g) : ctx_(ctx), g_(g) {}
  Geometry(Geometry&& o) noexcept : ctx_(o.ctx_), g_(std::exchange(o.g_, nullptr)) {}
  Geometry& operator=(Geometry&& o) noexcept {
    if (this != &o) {
      reset();
      ctx_ = o.ctx_;
      g_ = std::exchange(o.g_, nullptr);
    }
    return *this;
  }
  ~Geometry() { reset(); }
  const GEOSGeometry* get() const noexcept { return g_; }
  explicit operator bool() const noexcept { return g_ != nullptr; }

 private:
  void reset() {
    if (g_ != nullptr) GEOSGeom_destroy_r(ctx_, g_);
    g_ = nullptr;
  }
  GEOSContextHandle_t ctx_ = nullptr;
  GEOSGeometry* g_ = nullptr;
};

/// One polygon as mmeval holds it: the raw shapely polygon (for its area) and its valid form
/// (buffer(0) of an invalid one).
struct Polygon {
  Geometry raw;
  Geometry valid;                         // empty: raw is valid, use it
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // the bounding box of its coordinates
  const GEOSGeometry* usable() const { return valid ? valid.get() : raw.get(); }
  /// Whether the two boxes share no area: then so do the polygons (buffer(0) stays inside them).
  bool apart(const Polygon& o) const {
    return x1 <= o.x0 || o.x1 <= x0 || y1 <= o.y0 || o.y1 <= y0;
  }
};

// ---- the metric -----------------------------------------------------------------------------

struct HmeanState {
  PackedVector<std::int64_t> hits;   // per threshold
  PackedVector<std::int64_t> preds;  // per threshold
  std::int64_t gts = 0;
  TALLY_STATE(sum(hits), sum(preds), sum(gts))
};

class HmeanIoU final : public TypedMetric<HmeanState> {
 public:
  explicit HmeanIoU(const Params& p)
      : check_(p.owner_or("HmeanIoU")),
        match_iou_thr_(p.get_fraction("match_iou_thr")),
        ignore_precision_thr_(p.get_fraction("ignore_precision_thr")),
        max_matching_(p.get_string("strategy") == "max_matching") {
    const Value& r = p.get("pred_score_thrs");
    if (!r.is_map())
      p.fail("pred_score_thrs", "must be a map {start, stop, step}, got " + r.to_json());
    double start = 0.0, stop = 0.0, step = 0.0;
    int seen = 0;
    for (const auto& [k, v] : r.as_map()) {
      if (k != "start" && k != "stop" && k != "step")
        p.fail("pred_score_thrs", "has the unknown key '" + k + "' (expected start, stop, step)");
      if (!v.is_number())
        p.fail("pred_score_thrs", "." + k + " must be a number, got " + v.to_json());
      (k == "start" ? start : k == "stop" ? stop : step) = v.as_double();
      ++seen;
    }
    if (seen != 3) p.fail("pred_score_thrs", "needs start, stop and step, got " + r.to_json());
    if (!(step > 0.0) || !std::isfinite(start) || !std::isfinite(stop))
      p.fail("pred_score_thrs", "needs finite start and stop and a step > 0, got " + r.to_json());
    // numpy.arange(start, stop, step): ceil((stop - start) / step) values start + i * delta, delta
    // = (start + step) - start (numpy fills from its first two values).
    const double count = std::ceil((stop - start) / step);
    if (!(count >= 1.0) || count > 10000.0)
      p.fail("pred_score_thrs", "gives " + std::to_string(count) +
                                    " thresholds (numpy.arange(start, stop, step)); expected 1 "
                                    "to 10000");
    const double delta = (start + step) - start;
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(count); ++i)
      thresholds_.push_back(i == 0 ? start : start + static_cast<double>(i) * delta);
  }

 protected:
  HmeanState initial_state() const override {
    HmeanState s;
    s.hits.assign(thresholds_.size(), 0);
    s.preds.assign(thresholds_.size(), 0);
    return s;
  }

  void update(HmeanState& s, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    const PerSample pred_polys(batch, kPredPolygons, check_);
    const PerSample scores(batch, kPredScores, check_);
    const PerSample gt_polys(batch, kGtPolygons, check_);
    const auto pred_lengths = PerSample::if_present(batch, kPredLengths, check_);
    const auto gt_lengths = PerSample::if_present(batch, kGtLengths, check_);
    const auto ignore = PerSample::if_present(batch, kGtIgnore, check_);
    for (std::int64_t i = 0; i < batch.size(); ++i) {
      const std::int64_t sample = images_ + i;
      read_polygons(pred_polys[i],
                    pred_lengths ? std::optional(pred_lengths->operator[](i)) : std::nullopt,
                    kPredPolygons, kPredLengths, sample, preds_);
      read_polygons(gt_polys[i],
                    gt_lengths ? std::optional(gt_lengths->operator[](i)) : std::nullopt,
                    kGtPolygons, kGtLengths, sample, gts_);
      read_scores(scores[i], sample);
      read_ignore(ignore ? std::optional(ignore->operator[](i)) : std::nullopt, sample);
      evaluate_image(s, sample);
    }
    images_ += batch.size();
  }

  Value compute(const HmeanState& s) const override {
    std::vector<double> precision(thresholds_.size()), recall(thresholds_.size()),
        hmean(thresholds_.size());
    std::size_t best = 0;
    double best_hmean = -1.0;
    for (std::size_t t = 0; t < thresholds_.size(); ++t) {
      const auto hits = static_cast<double>(s.hits[t]);
      // mmeval's compute_hmean.
      if (s.gts == 0) {
        recall[t] = 1.0;
        precision[t] = s.preds[t] > 0 ? 0.0 : 1.0;
      } else {
        recall[t] = hits / static_cast<double>(s.gts);
        precision[t] = s.preds[t] == 0 ? 0.0 : hits / static_cast<double>(s.preds[t]);
      }
      const double denom = recall[t] + precision[t];
      hmean[t] = denom == 0.0 ? 0.0 : 2.0 * precision[t] * recall[t] / denom;
      if (hmean[t] > best_hmean) {
        best_hmean = hmean[t];
        best = t;
      }
    }
    Value out = Value::map();
    out.set("hmean", hmean[best]);
    out.set("precision", precision[best]);
    out.set("recall", recall[best]);
    out.set("best_score_thr", thresholds_[best]);
    out.set("score_thrs", Value(thresholds_));
    out.set("hmean_per_thr", Value(hmean));
    out.set("precision_per_thr", Value(precision));
    out.set("recall_per_thr", Value(recall));
    return out;
  }

 private:
  /// One image's polygons: [n, 2k], [n, k, 2] or, with a lengths tensor, flat coordinates cut by
  /// the lengths (coordinates a polygon). Each polygon as shapely builds it (float32 coordinates,
  /// the ring closed) and made valid where it is not.
  void read_polygons(const Tensor& t, const std::optional<Tensor>& lengths, const char* field,
                     const char* lengths_field, std::int64_t sample, std::vector<Polygon>& out) {
    out.clear();
    const std::string where = "sample " + std::to_string(sample) + " ";
    if (t.is_cuda()) check_.fail(field, where + "is a CUDA tensor");
    if (!is_floating(t.dtype()) && !is_integral(t.dtype()))
      check_.fail(field, where + "must hold numbers, got " + t.describe());
    coords_.resize(static_cast<std::size_t>(t.numel()));
    const auto load = [&](const auto* v) {
      for (std::int64_t k = 0; k < t.numel(); ++k)
        coords_[static_cast<std::size_t>(k)] = static_cast<double>(static_cast<float>(v[k]));
    };
    if (is_floating(t.dtype()))
      visit_floating(t, load);
    else
      visit_integral(t, load);
    for (std::size_t k = 0; k < coords_.size(); ++k)
      if (!std::isfinite(coords_[k]))
        check_.fail(field, where + "holds a NaN or infinite coordinate (or one beyond float32)");
    std::vector<std::int64_t> cuts;  // coordinates of each polygon
    if (lengths) {
      const Tensor& l = *lengths;
      if (l.dim() != 1 || !is_integral(l.dtype()))
        check_.fail(lengths_field, where + "must be a 1-D integer list [n], got " + l.describe());
      if (t.dim() != 1)
        check_.fail(field, where + "must be flat [sum of lengths] when '" + lengths_field +
                               "' is given, got " + t.describe());
      std::int64_t total = 0;
      visit_integral(l, [&](const auto* v) {
        for (std::int64_t k = 0; k < l.numel(); ++k) {
          const auto n = static_cast<std::int64_t>(v[k]);
          if (n < 6 || n % 2 != 0 || n > t.numel())
            check_.fail(lengths_field, where + "polygon " + std::to_string(k) + " has " +
                                           std::to_string(n) +
                                           " coordinates: a polygon needs an even number, at "
                                           "least 6 (3 points)");
          total += n;
          cuts.push_back(n);
        }
      });
      if (total != t.numel())
        check_.fail(lengths_field, where + "sums to " + std::to_string(total) + " but '" + field +
                                       "' holds " + std::to_string(t.numel()) + " coordinates");
    } else {
      const bool flat_pairs = t.dim() == 3 && t.size(2) == 2;
      if (!(t.dim() == 2 || flat_pairs) && !(t.dim() == 1 && t.numel() == 0))
        check_.fail(field, where + "must be [n, 2k] or [n, k, 2] (n polygons of k points; '" +
                               lengths_field + "' for polygons of different sizes), got " +
                               t.describe());
      const std::int64_t n = t.dim() == 1 ? 0 : t.size(0);
      const std::int64_t per = n == 0 ? 0 : t.numel() / n;
      if (n > 0 && (per < 6 || per % 2 != 0))
        check_.fail(field, where + "has polygons of " + std::to_string(per) +
                               " coordinates: a polygon needs an even number, at least 6 (3 "
                               "points), got " +
                               t.describe());
      cuts.assign(static_cast<std::size_t>(n), per);
    }
    const GEOSContextHandle_t ctx = geos_.get();
    std::size_t at = 0;
    for (const std::int64_t n : cuts) {
      const double* c = coords_.data() + at;
      at += static_cast<std::size_t>(n);
      const auto points = static_cast<unsigned>(n / 2);
      // shapely closes the ring when its last point is not its first.
      const bool closed = c[0] == c[n - 2] && c[1] == c[n - 1];
      const unsigned size = points + (closed ? 0u : 1u);
      if (size < 4)
        check_.fail(field, where +
                               "has a closed ring of 3 points (a ring needs 4 coordinates "
                               "with the closing one; shapely rejects it)");
      Polygon p;
      p.x0 = p.x1 = c[0];
      p.y0 = p.y1 = c[1];
      for (unsigned k = 1; k < points; ++k) {
        p.x0 = std::min(p.x0, c[2 * k]);
        p.x1 = std::max(p.x1, c[2 * k]);
        p.y0 = std::min(p.y0, c[2 * k + 1]);
        p.y1 = std::max(p.y1, c[2 * k + 1]);
      }
      GEOSCoordSequence* seq = GEOSCoordSeq_create_r(ctx, size, 2);
      for (unsigned k = 0; k < points; ++k)
        GEOSCoordSeq_setXY_r(ctx, seq, k, c[2 * k], c[2 * k + 1]);
      if (!closed) GEOSCoordSeq_setXY_r(ctx, seq, points, c[0], c[1]);
      GEOSGeometry* ring = GEOSGeom_createLinearRing_r(ctx, seq);
      if (ring == nullptr) fail_geos("building a polygon of " + where.substr(0, where.size() - 1));
      GEOSGeometry* poly = GEOSGeom_createPolygon_r(ctx, ring, nullptr, 0);
      p.raw = Geometry(ctx, poly);
      const char valid = GEOSisValid_r(ctx, poly);
      if (valid == 2) fail_geos("checking a polygon");
      if (valid == 0) {
        p.valid = Geometry(ctx, GEOSBuffer_r(ctx, poly, 0.0, 16));  // shapely's buffer(0)
        if (!p.valid) fail_geos("buffer(0) of an invalid polygon");
      }
      out.push_back(std::move(p));
    }
  }

  void read_scores(const Tensor& t, std::int64_t sample) {
    const std::string where = "sample " + std::to_string(sample) + " ";
    if (t.dim() != 1 || static_cast<std::size_t>(t.numel()) != preds_.size())
      check_.fail(kPredScores, where + "must be [" + std::to_string(preds_.size()) +
                                   "] (one score a predicted polygon), got " + t.describe());
    scores_.resize(preds_.size());
    const auto load = [&](const auto* v) {
      for (std::size_t k = 0; k < scores_.size(); ++k)
        scores_[k] = static_cast<double>(static_cast<float>(v[k]));  // mmeval: dtype=np.float32
    };
    if (is_floating(t.dtype()))
      visit_floating(t, load);
    else if (is_integral(t.dtype()))
      visit_integral(t, load);
    else
      check_.fail(kPredScores, where + "must hold numbers, got " + t.describe());
    for (const double v : scores_)
      if (std::isnan(v)) check_.fail(kPredScores, where + "holds NaN");
  }

  void read_ignore(const std::optional<Tensor>& t, std::int64_t sample) {
    ignore_.assign(gts_.size(), 0);
    if (!t) return;
    const std::string where = "sample " + std::to_string(sample) + " ";
    if (t->dim() != 1 || static_cast<std::size_t>(t->numel()) != gts_.size())
      check_.fail(kGtIgnore, where + "must be [" + std::to_string(gts_.size()) +
                                 "] (one flag a ground-truth polygon), got " + t->describe());
    if (t->dtype() == DType::Bool) {
      const bool* v = t->data_as<bool>();
      for (std::size_t k = 0; k < ignore_.size(); ++k) ignore_[k] = v[k] ? 1 : 0;
    } else if (is_integral(t->dtype())) {
      visit_integral(*t, [&](const auto* v) {
        for (std::size_t k = 0; k < ignore_.size(); ++k) {
          if (v[k] != 0 && v[k] != 1)
            check_.fail(kGtIgnore, where + "holds " + std::to_string(static_cast<long long>(v[k])) +
                                       ": flags are 0/1 or booleans");
          ignore_[k] = v[k] != 0 ? 1 : 0;
        }
      });
    } else {
      check_.fail(kGtIgnore, where + "must be booleans or 0/1 integers, got " + t->describe());
    }
  }

  double area(const GEOSGeometry* g) {
    double a = 0.0;
    if (GEOSArea_r(geos_.get(), g, &a) == 0) fail_geos("an area");
    return a;
  }

  double overlay_area(const GEOSGeometry* a, const GEOSGeometry* b, bool intersection) {
    const GEOSContextHandle_t ctx = geos_.get();
    Geometry g(ctx, intersection ? GEOSIntersection_r(ctx, a, b) : GEOSUnion_r(ctx, a, b));
    if (!g) fail_geos(intersection ? "a polygon intersection" : "a polygon union");
    return area(g.get());
  }

  void evaluate_image(HmeanState& s, std::int64_t sample) {
    (void)sample;
    const double lowest = *std::min_element(thresholds_.begin(), thresholds_.end());
    // 1. predictions kept: scoring at least the lowest threshold, not mostly inside an ignored gt.
    kept_.clear();
    for (std::size_t p = 0; p < preds_.size(); ++p) {
      if (scores_[p] < lowest) continue;
      bool dropped = false;
      for (std::size_t g = 0; g < gts_.size() && !dropped; ++g) {
        // Disjoint boxes: no intersection, a precision of 0 (not above a threshold >= 0).
        if (!ignore_[g] || (ignore_precision_thr_ >= 0.0 && gts_[g].apart(preds_[p]))) continue;
        const double inter = overlay_area(gts_[g].usable(), preds_[p].usable(), true);
        dropped = inter / (area(preds_[p].raw.get()) + 1e-5) > ignore_precision_thr_;
      }
      if (!dropped) kept_.push_back(p);
    }
    kept_gts_.clear();
    for (std::size_t g = 0; g < gts_.size(); ++g)
      if (!ignore_[g]) kept_gts_.push_back(g);
    s.gts += static_cast<std::int64_t>(kept_gts_.size());
    // 2. which (gt, pred) pairs have an IoU above match_iou_thr.
    const std::size_t m = kept_gts_.size(), n = kept_.size();
    above_.assign(m * n, 0);
    for (std::size_t a = 0; a < m; ++a)
      for (std::size_t b = 0; b < n; ++b) {
        const Polygon& gp = gts_[kept_gts_[a]];
        const Polygon& pp = preds_[kept_[b]];
        // Disjoint boxes: IoU 0, not above a threshold >= 0 (the overlays are the cost here).
        if (match_iou_thr_ >= 0.0 && gp.apart(pp)) continue;
        const GEOSGeometry* g = gp.usable();
        const GEOSGeometry* p = pp.usable();
        const double inter = overlay_area(g, p, true);
        const double uni = overlay_area(g, p, false);
        const double iou = uni != 0.0 ? inter / uni : 0.0;
        above_[a * n + b] = iou > match_iou_thr_ ? 1 : 0;
      }
    // 3. per threshold: the predictions at or above it, matched.
    for (std::size_t t = 0; t < thresholds_.size(); ++t) {
      active_.assign(n, 0);
      std::int64_t count = 0;
      for (std::size_t b = 0; b < n; ++b)
        if (!(scores_[kept_[b]] < thresholds_[t])) {
          active_[b] = 1;
          ++count;
        }
      s.preds[t] += count;
      s.hits[t] += max_matching_ ? max_matching(m, n) : vanilla(m, n);
    }
  }

  /// mmeval's _vanilla_matching: the pairs in row-major order, each taken when its gt and its
  /// prediction are both unmatched.
  std::int64_t vanilla(std::size_t m, std::size_t n) {
    used_pred_.assign(n, 0);
    std::int64_t hits = 0;
    for (std::size_t a = 0; a < m; ++a)
      for (std::size_t b = 0; b < n; ++b)
        if (active_[b] && above_[a * n + b] && !used_pred_[b]) {
          used_pred_[b] = 1;
          ++hits;
          break;  // this gt is matched: the rest of its row is skipped
        }
    return hits;
  }

  /// The size of a maximum matching (what scipy's maximum_bipartite_matching counts): augmenting
  /// paths from each gt (Kuhn's algorithm; every maximum matching has this size).
  std::int64_t max_matching(std::size_t m, std::size_t n) {
    match_of_pred_.assign(n, -1);
    std::int64_t hits = 0;
    for (std::size_t a = 0; a < m; ++a) {
      visited_.assign(n, 0);
      if (augment(a, n)) ++hits;
    }
    return hits;
  }

  bool augment(std::size_t a, std::size_t n) {
    for (std::size_t b = 0; b < n; ++b) {
      if (!active_[b] || !above_[a * n + b] || visited_[b]) continue;
      visited_[b] = 1;
      if (match_of_pred_[b] < 0 || augment(static_cast<std::size_t>(match_of_pred_[b]), n)) {
        match_of_pred_[b] = static_cast<std::int64_t>(a);
        return true;
      }
    }
    return false;
  }

  [[noreturn]] void fail_geos(const std::string& what) const {
    check_.fail_runtime(std::string("GEOS failed at ") + what +
                        (geos_.last_error().empty() ? "" : ": " + geos_.last_error()));
  }

  InputChecker check_;
  double match_iou_thr_, ignore_precision_thr_;
  bool max_matching_;
  std::vector<double> thresholds_;
  std::int64_t images_ = 0;
  Geos geos_;
  std::vector<Polygon> preds_, gts_;
  std::vector<double> coords_, scores_;
  std::vector<char> ignore_, above_, active_, used_pred_, visited_;
  std::vector<std::size_t> kept_, kept_gts_;
  std::vector<std::int64_t> match_of_pred_;
};

}  // namespace

ComponentInfo hmean_iou_info() {
  auto c = metric<HmeanIoU>(
      "HmeanIoU",
      "Text-detection hmean (harmonic mean of precision and recall) by polygon IoU at each score "
      "threshold, and the best; ignored ground truth drops the predictions it covers. Keys "
      "hmean, precision, recall, best_score_thr (the best threshold), score_thrs, "
      "hmean_per_thr, precision_per_thr, recall_per_thr. Reference: mmeval 0.2.1 "
      "HmeanIoU(match_iou_thr, ignore_precision_thr, pred_score_thrs, strategy)(pred_polygons, "
      "pred_scores, gt_polygons, gt_ignore_flags).",
      {param("match_iou_thr", ParamType::Float, "A pair matches when its IoU is above this.")
           .def(0.5),
       param("ignore_precision_thr", ParamType::Float,
             "A prediction whose area lies more than this fraction inside an ignored ground-truth "
             "polygon is dropped.")
           .def(0.5),
       param("pred_score_thrs", ParamType::Any,
             "The score thresholds searched: {start, stop, step}, as numpy.arange(start, stop, "
             "step) (mmeval's dict).")
           .def(Value::Map{{"start", 0.3}, {"stop", 0.9}, {"step", 0.1}}),
       param("strategy", ParamType::String,
             "vanilla (a pair is taken, in (gt, prediction) order, when both are free: the "
             "academic convention) or max_matching (the largest matching).")
           .def("vanilla")
           .choices({"vanilla", "max_matching"})},
      {InputSpec{kPredPolygons,
                 "Predicted polygons per image: [n, 2k] (x1, y1, x2, y2, ...) or [n, k, 2]; flat "
                 "with pred_polygon_lengths for polygons of different sizes.",
                 true},
       InputSpec{kPredLengths,
                 "Optional: the number of coordinates of each predicted polygon [n] (pred_polygons "
                 "then flat).",
                 false},
       InputSpec{kPredScores, "A score per predicted polygon [n].", true},
       InputSpec{kGtPolygons, "Ground-truth polygons per image, as pred_polygons.", true},
       InputSpec{kGtLengths, "Optional: the number of coordinates of each ground-truth polygon.",
                 false},
       InputSpec{kGtIgnore,
                 "Optional: per ground-truth polygon, whether it is ignored (booleans or 0/1); "
                 "none ignored when absent.",
                 false}});
  c.results = {{"hmean", Better::Higher, Plot::None, "at the best threshold"},
               {"precision", Better::Higher, Plot::None, "at the best threshold"},
               {"recall", Better::Higher, Plot::None, "at the best threshold"},
               {"best_score_thr", Better::Neither, Plot::None, "the threshold with the best hmean"},
               {"score_thrs", Better::Neither, Plot::None, "the thresholds searched"},
               {"*_per_thr", Better::Higher, Plot::None, "one value a threshold"}};
  return c;
}
TALLY_COMPONENT(hmean_iou_info)

}  // namespace tally::text_detection
