// What VOCMeanAP, OIDMeanAP and DOTAMeanAP share (ports of mmeval's VOCMeanAP and the metrics
// derived from it): their common parameters and result specs, scale ranges as mmeval names them,
// calculate_average_precision, and the last step of compute_metric / _aggregate_results: per class,
// every image's entries sorted by score, the precision / recall curves from their TP / FP bits,
// float32 AP per (threshold, range), the class means and the result keys.
//
// The state both keep: per entry (a prediction, or a row mmeval adds) its class, score and 2 bits
// per (threshold, range) pair k = i * S + s: TP at bit k, FP at bit I * S + k, in words() uint64
// words; ground-truth counts per (class, range). An entry with neither bit set in a pair adds
// nothing to that pair's curve (it repeats the point before it), so it stands for a prediction
// mmeval leaves out of that pair's list.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tally/sdk/error.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/numpy_math.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/value.hpp"

namespace tally::detection::voc {

/// One end of a scale range: null (no bound) or a number; `is_int` keeps Python's repr.
struct Bound {
  std::optional<double> v;
  bool is_int = false;
  std::string repr() const {
    if (!v) return "None";
    if (is_int) return std::to_string(static_cast<std::int64_t>(*v));
    std::string s = fmt::format("{}", *v);
    if (s.find_first_of(".en") == std::string::npos) s += ".0";
    return s;
  }
  /// min_scale ** 2 (Python int or float), or nothing.
  std::optional<double> area() const {
    if (!v) return std::nullopt;
    return *v * *v;
  }
};

using ScaleRange = std::array<Bound, 2>;

struct Scales {
  std::vector<ScaleRange> ranges;
  std::size_t full = 0;  // the index of (None, None)
};

/// The parameter "scale_ranges" (a list of [min, max], null: no bound), with (None, None)
/// appended when it is missing, as mmeval's VOCMeanAP does.
inline Scales read_scale_ranges(const Params& p) {
  Scales out;
  if (p.has("scale_ranges")) {
    const Value& v = p.get("scale_ranges");
    if (!v.is_array()) p.fail("scale_ranges", "must be a list of [min, max] pairs");
    for (const auto& r : v.as_array()) {
      if (!r.is_array() || r.size() != 2)
        p.fail("scale_ranges", "must be a list of [min, max] pairs (null: no bound)");
      ScaleRange b;
      for (std::size_t i = 0; i < 2; ++i) {
        const Value& e = r.as_array()[i];
        if (e.is_null()) continue;
        if (!e.is_number()) p.fail("scale_ranges", "bounds must be numbers or null");
        b[i] = Bound{
            p.check_number("scale_ranges", e.as_double(), kNonNegativeOrInf,
                           fmt::format("element {} {}", out.ranges.size(), i == 0 ? "min" : "max")),
            e.is_int()};
      }
      if (b[0].v && b[1].v)
        p.check_range("scale_ranges", *b[0].v, *b[1].v, kNonNegativeOrInf,
                      fmt::format("element {}", out.ranges.size()));
      out.ranges.push_back(b);
    }
  }
  const auto is_full = [](const ScaleRange& b) { return !b[0].v && !b[1].v; };
  if (std::none_of(out.ranges.begin(), out.ranges.end(), is_full)) out.ranges.push_back({});
  out.full = static_cast<std::size_t>(std::find_if(out.ranges.begin(), out.ranges.end(), is_full) -
                                      out.ranges.begin());
  return out;
}

/// filter_by_bboxes_area for one box: area >= min and area < max, the area (x2 - x1 + extra) *
/// (y2 - y1 + extra) in float32 (`f`) or float64 (`d`, when `wide`), as the box array's dtype.
inline bool area_in_range(const float* f, const double* d, bool wide, double extra,
                          const ScaleRange& r) {
  const auto lo = r[0].area(), hi = r[1].area();
  if (wide) {
    const double a = (d[2] - d[0] + extra) * (d[3] - d[1] + extra);
    return (!lo || a >= *lo) && (!hi || a < *hi);
  }
  const auto e = static_cast<float>(extra);
  const float a = (f[2] - f[0] + e) * (f[3] - f[1] + e);
  return (!lo || a >= static_cast<float>(*lo)) && (!hi || a < static_cast<float>(*hi));
}

/// calculate_average_precision(recalls, precisions, mode): 'area' (NumPy's pairwise sum of the
/// envelope's steps) or '11points'.
inline double average_precision(const std::vector<double>& rec, const std::vector<double>& prec,
                                bool mode_11) {
  const std::size_t n = rec.size();
  if (!mode_11) {
    std::vector<double> mrec(n + 2), mpre(n + 2);
    mrec[0] = 0;
    mpre[0] = 0;
    for (std::size_t i = 0; i < n; ++i) mrec[i + 1] = rec[i], mpre[i + 1] = prec[i];
    mrec[n + 1] = 1;
    mpre[n + 1] = 0;
    for (std::size_t i = n + 1; i > 0; --i) mpre[i - 1] = std::max(mpre[i - 1], mpre[i]);
    std::vector<double> terms;
    for (std::size_t i = 0; i + 1 < n + 2; ++i)
      if (mrec[i + 1] != mrec[i]) terms.push_back((mrec[i + 1] - mrec[i]) * mpre[i + 1]);
    return numpy::sum(terms);
  }
  double ap = 0.0;
  for (int t = 0; t < 11; ++t) {
    const double thr = static_cast<double>(t) * 0.1;  // np.arange(0, 1 + 1e-3, 0.1)
    double best = 0;
    bool any = false;
    for (std::size_t i = 0; i < n; ++i)
      if (rec[i] >= thr) {
        best = any ? std::max(best, prec[i]) : prec[i];
        any = true;
      }
    ap += best;
  }
  return ap / 11.0;
}

/// How the merged state becomes results.
struct ApConfig {
  std::vector<double> thrs;
  Scales scales;
  std::size_t num_classes = 0;
  bool mode_11 = false, drop_class_ap = true, classwise = false;
  std::string owner;  // for messages

  /// uint64 words of TP / FP bits per entry.
  std::size_t words() const { return (2 * thrs.size() * scales.ranges.size() + 63) / 64; }
};

/// The merged state's entries (class, score, words() bit words each) and ground-truth counts
/// [num_classes x ranges] as results: "AP{round(100 t)}" per threshold, "mAP" and "mAP@(s0, s1)"
/// per extra range (in mmeval's order), and "AP{t}_classwise" with `classwise`. Each class's
/// entries are sorted by score, ties in state order (dataset order).
inline Value compute_map(const ApConfig& cfg, const std::vector<std::int32_t>& cls,
                         const std::vector<double>& score, const std::vector<std::uint64_t>& bits,
                         const std::vector<std::int64_t>& num_gts) {
  const std::size_t I = cfg.thrs.size(), S = cfg.scales.ranges.size(), W = cfg.words();
  const std::size_t C = cfg.num_classes, full = cfg.scales.full;
  if (num_gts.size() != C * S || cls.size() != score.size() || bits.size() != score.size() * W)
    tally::throw_owned<RuntimeError>(cfg.owner, std::string("the state is inconsistent"));
  for (const auto c : cls)
    if (c < 0 || static_cast<std::size_t>(c) >= C)
      tally::throw_owned<RuntimeError>(cfg.owner, std::string("the state is corrupt: class ") +
                                                      std::to_string(c) + " outside [0, " +
                                                      std::to_string(C) + ")");
  struct Det {
    double score;
    const std::uint64_t* bits;
  };
  std::vector<std::vector<Det>> by_class(C);
  for (std::size_t d = 0; d < cls.size(); ++d)
    by_class[static_cast<std::size_t>(cls[d])].push_back({score[d], &bits[d * W]});
  // ap[c][i][s] as float32, as mmeval stores it.
  std::vector<float> ap(C * I * S, 0.0f);
  const double eps = std::numeric_limits<float>::epsilon();
  std::vector<double> prec, rec;
  for (std::size_t c = 0; c < C; ++c) {
    auto& dets = by_class[c];
    std::stable_sort(dets.begin(), dets.end(),
                     [](const Det& a, const Det& b) { return a.score > b.score; });
    const std::size_t nd = dets.size();
    for (std::size_t i = 0; i < I; ++i)
      for (std::size_t sc = 0; sc < S; ++sc) {
        const std::size_t k = i * S + sc, fk = I * S + k;
        prec.resize(nd);
        rec.resize(nd);
        double tp = 0, fp = 0;
        const double ngt = std::max(static_cast<double>(num_gts[c * S + sc]), eps);
        for (std::size_t d = 0; d < nd; ++d) {
          tp += static_cast<double>((dets[d].bits[k / 64] >> (k % 64)) & 1);
          fp += static_cast<double>((dets[d].bits[fk / 64] >> (fk % 64)) & 1);
          prec[d] = tp / std::max(tp + fp, eps);
          rec[d] = tp / ngt;
        }
        ap[(c * I + i) * S + sc] = static_cast<float>(average_precision(rec, prec, cfg.mode_11));
      }
  }
  Value out = Value::map();
  const auto class_mean = [&](std::size_t i, std::size_t sc) {
    std::vector<float> aps;
    for (std::size_t c = 0; c < C; ++c)
      if (num_gts[c * S + sc] > 0 || !cfg.drop_class_ap) aps.push_back(ap[(c * I + i) * S + sc]);
    if (aps.empty()) return std::numeric_limits<double>::quiet_NaN();
    return static_cast<double>(numpy::mean(aps));
  };
  const auto pct = [&](std::size_t i) {
    return std::to_string(static_cast<std::int64_t>(std::nearbyint(cfg.thrs[i] * 100)));
  };
  for (std::size_t i = 0; i < I; ++i) out.set("AP" + pct(i), class_mean(i, full));
  for (std::size_t sc = 0; sc < S; ++sc) {
    std::vector<double> per_iou(I);
    for (std::size_t i = 0; i < I; ++i) per_iou[i] = class_mean(i, sc);
    const double m = numpy::mean(per_iou);
    const auto& r = cfg.scales.ranges[sc];
    out.set(sc == full ? std::string("mAP") : "mAP@(" + r[0].repr() + ", " + r[1].repr() + ")", m);
  }
  if (cfg.classwise) {
    for (std::size_t i = 0; i < I; ++i) {
      Value::Array per_class;
      for (std::size_t c = 0; c < C; ++c)
        per_class.emplace_back(static_cast<double>(ap[(c * I + i) * S + full]));
      out.set("AP" + pct(i) + "_classwise", Value(std::move(per_class)));
    }
  }
  return out;
}

/// The parameters the three metrics share, before their own: iou_thrs, scale_ranges (`area`
/// says how a box's area is taken), num_classes, eval_mode (default `mode`, `mode_doc`).
inline std::vector<ParamSpec> head_params(const char* area, const char* mode,
                                          const char* mode_doc) {
  return {
      param("iou_thrs", ParamType::FloatList, "IoU thresholds.").def(Value::Array{Value(0.5)}),
      param("scale_ranges", ParamType::Any,
            fmt::format("Extra [min, max] scale ranges ({}; area in [min^2, max^2)); null "
                        "bounds are open. The full range is always evaluated (key mAP).",
                        area))
          .optional(),
      param("num_classes", ParamType::Int, "Number of classes: labels lie in [0, num_classes)."),
      param("eval_mode", ParamType::String, mode_doc).def(mode).choices({"area", "11points"})};
}

/// mmdet v1's box size (VOCMeanAP, OIDMeanAP).
inline ParamSpec legacy_coordinate_param() {
  return param("use_legacy_coordinate", ParamType::Bool,
               "mmdet v1 boxes: width = x2 - x1 + 1, height = y2 - y1 + 1.")
      .def(false);
}

/// The parameters the three metrics share, after their own: drop_class_ap, classwise.
inline std::vector<ParamSpec> tail_params() {
  return {param("drop_class_ap", ParamType::Bool,
                "Leave classes without ground truth out of the mean (mmeval's default).")
              .def(true),
          param("classwise", ParamType::Bool, "Also return AP{t}_classwise: the AP of each class.")
              .def(false)};
}

/// `head`, then `own`, then `tail`.
inline std::vector<ParamSpec> params(std::vector<ParamSpec> head, std::vector<ParamSpec> own,
                                     std::vector<ParamSpec> tail) {
  head.insert(head.end(), own.begin(), own.end());
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

/// Their result keys: AP{t}_classwise bars, the rest fractions.
inline std::vector<ResultSpec> result_specs() {
  return {{"*_classwise", Better::Higher, Plot::Bars, "AP per class, index = class id"},
          {"*", Better::Higher, Plot::None, "mean average precision (fraction)"}};
}

}  // namespace tally::detection::voc
