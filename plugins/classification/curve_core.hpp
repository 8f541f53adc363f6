// The core of torchmetrics' classification curves (PrecisionRecallCurve, ROC): their parameters
// (task, num_classes, num_labels, thresholds, ignore_index, as torchmetrics 1.9's), the reading
// of `preds` / `target` as torchmetrics' _*_precision_recall_curve_format does, and one state
// for both modes; and what the metrics built on the curves share (AUROC, AveragePrecision with a
// task, LogAUC, PrecisionAtFixedRecall, RecallAtFixedPrecision, SensitivityAtSpecificity,
// SpecificityAtSensitivity): the curves per class / label (pr_curves, roc_curves), micro-averaged
// (micro_pr, micro_roc) and macro-averaged (macro_curve), torchmetrics' interp and trapz, the
// positives that weight average "weighted", and the reduction over the classes (average_scores).
//
// Inputs, as torchmetrics' update(preds, target) (preds must be float scores):
//   binary      preds [N] (or any shape, flattened) probabilities or logits; target 0/1 of the
//               same shape. Elements whose target is ignore_index are dropped, then the batch
//               gets a sigmoid when a kept pred lies outside [0, 1].
//   multiclass  preds [N, C], target [N] class ids. Rows whose target is ignore_index are
//               dropped, then the batch gets a softmax over the classes when a kept score lies
//               outside [0, 1].
//   multilabel  preds [N, L], target [N, L] 0/1. The batch gets a sigmoid when any pred (ignored
//               ones included, as torchmetrics) lies outside [0, 1]; ignored elements are left
//               out of their label's curve.
// As torchmetrics decides the sigmoid / softmax per update() call, tally decides it per batch.
//
// thresholds (torchmetrics' argument):
//   null      exact curves: one point per distinct score (torchmetrics' _binary_clf_curve, as
//             scikit-learn's). State: every kept score (float64) and its label, concatenated
//             across ranks in rank order; the curve depends only on the multiset of (score,
//             label) pairs, so it is identical bit for bit on any number of ranks.
//   int T     T >= 2 thresholds linspace(0, 1, T) (computed as torch.linspace in float64);
//   list      the given thresholds in [0, 1], in the given order (as float64).
//             Binned: pred = score >= threshold. State: int64 counts [T, K, 2, 2] (K = 1
//             binary, C, or L; cell 2 * target + pred, torchmetrics' layout), summed across
//             ranks: exact, of a size fixed by the parameters.
//
// The reference runs torchmetrics 1.9.0 with torch's default dtype float64 (so linspace, the
// list thresholds and the cumulative counts are float64); torchmetrics as it ships builds its
// thresholds in float32 (linspace(0, 1, 100) holds float32 roundings of k / 99), recorded in the
// expected json as a cross-check.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tm_core.hpp"

namespace tally::classification {
// AveragePrecision with a `task` (torchmetrics' semantics, tm_average_precision.cpp): the
// parameters it adds to average_precision.cpp's, and the metric.
std::vector<ParamSpec> tm_average_precision_params();
std::unique_ptr<Metric> make_tm_average_precision(const Params& p);
}  // namespace tally::classification

namespace tally::classification::curves {

using tm::kPreds;
using tm::kTarget;
using tm::Task;
using tm::TaskParams;

/// The most thresholds x classes of a binned state: 4 int64 cells each (128 MiB).
inline constexpr std::int64_t kMaxBinnedCells = std::int64_t{1} << 22;

inline tm::TaskOptions task_options() {
  tm::TaskOptions o;
  o.threshold = false;
  return o;
}

inline std::vector<ParamSpec> curve_params() {
  auto out = tm::task_params(task_options());
  out.insert(out.end() - 1,
             param("thresholds", ParamType::Any,
                   "null: exact curves (every distinct score a threshold); an integer T >= 2: "
                   "linspace(0, 1, T); a list of floats in [0, 1]: those. Binned modes keep "
                   "int64 counts per threshold (a fixed-size state).")
                 .optional()
                 .nullable());
  return out;
}

/// PrecisionRecallCurve's and ROC's parameters: curve_params() and `average` (multiclass).
inline std::vector<ParamSpec> curve_params_with_average() {
  auto out = curve_params();
  out.push_back(param("average", ParamType::String,
                      "Multiclass only: null, one curve per class; micro, one curve of every "
                      "(sample, class) score against the one-hot target; macro, every class's "
                      "points pooled, the other axis averaged over the classes by linear "
                      "interpolation (torchmetrics 1.9's average).")
                    .optional()
                    .nullable()
                    .choices({"micro", "macro"}));
  return out;
}

/// The parameters of the operating-point metrics: curve_params() and their bound `name` (a
/// float in [0, 1], required).
inline std::vector<ParamSpec> operating_point_params(const char* name, std::string doc) {
  auto out = curve_params();
  out.push_back(param(name, ParamType::Float, std::move(doc)));
  return out;
}

/// torch.linspace(0, 1, steps) in float64: the first half from 0 up, the second from 1 down
/// (ATen's RangeFactories kernel), so that both ends are exact.
inline std::vector<double> linspace01(std::int64_t steps) {
  std::vector<double> out(static_cast<std::size_t>(steps));
  const double step = 1.0 / static_cast<double>(steps - 1);
  const std::int64_t half = steps / 2;
  for (std::int64_t i = 0; i < steps; ++i)
    out[static_cast<std::size_t>(i)] =
        i < half ? step * static_cast<double>(i) : 1.0 - step * static_cast<double>(steps - i - 1);
  return out;
}

struct CurveParams {
  TaskParams tp;
  bool binned = false;
  std::vector<double> thresholds;  // binned: as given
  std::vector<double> sorted;      // binned: ascending
  std::vector<std::int64_t> perm;  // sorted[j] = thresholds[perm[j]]
  /// Curves: 1 (binary), C or L.
  std::int64_t curves() const { return tp.task == Task::Binary ? 1 : tp.classes; }
};

inline CurveParams read_curve_params(const Params& p) {
  CurveParams c;
  c.tp = tm::read_task(p, task_options());
  const Value& t = p.get("thresholds");
  if (t.is_int()) {
    const std::int64_t n = t.as_int();
    if (n < 2 || n > kMaxSize)
      p.fail("thresholds", fmt::format("an integer must be in [2, {}], got {}", kMaxSize, n));
    c.thresholds = linspace01(n);
  } else if (t.is_array()) {
    c.thresholds = p.get_fraction_list("thresholds");
  } else if (!t.is_null()) {
    p.fail("thresholds",
           "must be null (exact), an integer (linspace(0, 1, T)) or a list of floats, got " +
               t.to_json());
  }
  c.binned = !c.thresholds.empty();
  if (c.binned) {
    const auto n = static_cast<std::int64_t>(c.thresholds.size());
    if (n > kMaxBinnedCells / c.curves())
      p.fail("thresholds", fmt::format("{} thresholds x {} curves is more than the {} count "
                                       "cells a binned state may hold",
                                       n, c.curves(), kMaxBinnedCells));
    c.perm.resize(c.thresholds.size());
    for (std::int64_t i = 0; i < n; ++i) c.perm[static_cast<std::size_t>(i)] = i;
    std::stable_sort(c.perm.begin(), c.perm.end(), [&](std::int64_t a, std::int64_t b) {
      return c.thresholds[static_cast<std::size_t>(a)] < c.thresholds[static_cast<std::size_t>(b)];
    });
    for (const auto i : c.perm) c.sorted.push_back(c.thresholds[static_cast<std::size_t>(i)]);
  }
  return c;
}

/// The `average` of PrecisionRecallCurve and ROC: "" (per class), micro or macro; multiclass
/// only (torchmetrics ignores it for binary and multilabel tasks: tally refuses it there).
inline std::string curve_average(const Params& p, const CurveParams& cp) {
  if (!p.has("average")) return "";
  const std::string a = p.get_string("average");
  if (cp.tp.task != Task::Multiclass)
    p.fail("average",
           "applies to task multiclass only (torchmetrics 1.9 averages multiclass "
           "curves only), got " +
               a);
  return a;
}

/// Exact mode: the kept scores (float64, after any sigmoid / softmax) and labels, concatenated
/// across ranks. binary: scores [m], labels [m] 0/1; multiclass: scores [m x C], labels [m]
/// class ids; multilabel: scores [m x L], labels [m x L] 0/1 or -1 (ignored).
/// Binned mode: counts [T x K x 4], cell ((t K + k) 4 + 2 target + pred), summed.
struct CurveState {
  PackedVector<double> scores;
  PackedVector<std::int32_t> labels;
  PackedVector<std::int64_t> counts;
  std::int64_t n = 0;  // samples seen (ignored ones included)
  TALLY_STATE(concat(scores), concat(labels), sum(counts), sum(n))
};

/// One curve's points, one per distinct score in decreasing score order: the cumulative
/// positives and negatives at or above it, and the score (torchmetrics' _binary_clf_curve).
struct ExactCurve {
  std::vector<std::int64_t> tps, fps;
  std::vector<double> thresholds;
};

/// The curve of (score, positive) pairs; sorting makes it independent of their order.
inline ExactCurve exact_curve(std::vector<std::pair<double, bool>>& pairs) {
  std::sort(pairs.begin(), pairs.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  ExactCurve c;
  std::int64_t tp = 0, fp = 0;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    (pairs[i].second ? tp : fp) += 1;
    if (i + 1 == pairs.size() || pairs[i + 1].first != pairs[i].first) {
      c.tps.push_back(tp);
      c.fps.push_back(fp);
      c.thresholds.push_back(pairs[i].first);
    }
  }
  return c;
}

/// ROC curves, one per class / label (torchmetrics' _binary_roc_compute; see roc.cpp): exact,
/// a point (0, 0) at threshold 1 first and then one per distinct score, decreasing; binned, the
/// thresholds in reversed order.
struct RocCurves {
  std::vector<std::vector<double>> fpr, tpr, thresholds;  // thresholds: exact mode only
};

/// num / den, 0 when den is 0 (torchmetrics' _safe_divide).
inline double ratio_or_zero(std::int64_t num, std::int64_t den) {
  return den == 0 ? 0.0 : static_cast<double>(num) / static_cast<double>(den);
}

/// torch.trapz(y, x): the trapezoids summed in order.
inline double trapz(const std::vector<double>& x, const std::vector<double>& y) {
  double s = 0.0;
  for (std::size_t i = 1; i < x.size(); ++i) s += (x[i] - x[i - 1]) * (y[i] + y[i - 1]);
  return s / 2.0;
}

/// torchmetrics.utilities.compute.interp(x, xp, fp): per x, the segment i = (the number of xp at
/// or below x) - 1, clamped to [0, |xp| - 2] (xp need not be sorted: NaN counts nowhere), and
/// m_i x + b_i with m_i = (fp_{i+1} - fp_i) / (xp_{i+1} - xp_i) (0 where xp repeats,
/// _safe_divide) and b_i = fp_i - m_i xp_i. Needs |xp| >= 2.
inline std::vector<double> interp(const std::vector<double>& x, const std::vector<double>& xp,
                                  const std::vector<double>& fp) {
  const std::size_t n = xp.size() - 1;
  std::vector<double> m(n), b(n), sorted;
  for (std::size_t i = 0; i < n; ++i) {
    const double dx = xp[i + 1] - xp[i];
    m[i] = dx != 0.0 ? (fp[i + 1] - fp[i]) / dx : 0.0;
    b[i] = fp[i] - m[i] * xp[i];
  }
  for (const double v : xp)
    if (!std::isnan(v)) sorted.push_back(v);
  std::sort(sorted.begin(), sorted.end());
  std::vector<double> out(x.size());
  for (std::size_t j = 0; j < x.size(); ++j) {
    const auto at_or_below = static_cast<std::ptrdiff_t>(
        std::upper_bound(sorted.begin(), sorted.end(), x[j]) - sorted.begin());
    const auto i = static_cast<std::size_t>(
        std::clamp<std::ptrdiff_t>(at_or_below - 1, 0, static_cast<std::ptrdiff_t>(n) - 1));
    out[j] = m[i] * x[j] + b[i];
  }
  return out;
}

/// torch.sort of values: ascending with NaN last, or descending with NaN first.
inline void sort_values(std::vector<double>& v, bool descending = false) {
  const auto nan_first = std::stable_partition(
      v.begin(), v.end(), [&](double x) { return descending ? std::isnan(x) : !std::isnan(x); });
  if (descending)
    std::sort(nan_first, v.end(), std::greater<>());
  else
    std::sort(v.begin(), nan_first);
}

/// Curves as arrays, one per class / label (or one: binary, or averaged).
struct Curves {
  std::vector<std::vector<double>> x, y, thresholds;
};

/// torchmetrics' multiclass average "macro" of PR and ROC curves: the x values of every curve
/// pooled and sorted (NaN last), y the mean over the curves of interp(x, x_k, y_k) (summed in
/// class order, then divided), the thresholds pooled and sorted (ROC: descending).
inline Curves macro_curve(const Curves& c, bool descending_thresholds) {
  Curves out;
  out.x.resize(1);
  out.y.resize(1);
  out.thresholds.resize(1);
  auto& x = out.x[0];
  for (const auto& v : c.x) x.insert(x.end(), v.begin(), v.end());
  sort_values(x);
  out.y[0].assign(x.size(), 0.0);
  for (std::size_t k = 0; k < c.x.size(); ++k) {
    const auto add = interp(x, c.x[k], c.y[k]);
    for (std::size_t i = 0; i < x.size(); ++i) out.y[0][i] += add[i];
  }
  for (double& v : out.y[0]) v /= static_cast<double>(c.x.size());
  for (const auto& v : c.thresholds)
    out.thresholds[0].insert(out.thresholds[0].end(), v.begin(), v.end());
  sort_values(out.thresholds[0], descending_thresholds);
  return out;
}

/// torchmetrics' _sensitivity_at_specificity / _specificity_at_sensitivity: among the points
/// whose cond_i >= min_cond, the first of the largest value_i (torch.argmax) and its threshold;
/// (0, 1e6) when there is none.
inline std::pair<double, double> best_where(const std::vector<double>& value,
                                            const std::vector<double>& cond,
                                            const std::vector<double>& thresholds,
                                            double min_cond) {
  std::size_t best = value.size();
  for (std::size_t i = 0; i < value.size(); ++i)
    if (cond[i] >= min_cond && (best == value.size() || value[i] > value[best])) best = i;
  if (best == value.size()) return {0.0, 1e6};
  return {value[best], thresholds[best]};
}

/// A 0-1 bound of a metric (min_recall, ...): a float in [0, 1].
inline double unit_param(const Params& p, const char* name) { return p.get_fraction(name); }

/// torchmetrics' _reduce_average_precision / _reduce_logauc / AUROC's reduction of per-curve
/// scores: none, the array; macro, the mean of the non-NaN ones; weighted, the non-NaN ones
/// weighted by w_k / sum of their w (0 when that sum is 0, _safe_divide).
inline Value average_scores(const std::vector<double>& res, const std::vector<double>& w,
                            const std::string& average) {
  if (average == "none") return Value(res);
  double sum = 0.0, wsum = 0.0;
  std::size_t kept = 0;
  const bool weighted = average == "weighted";
  for (std::size_t k = 0; k < res.size(); ++k)
    if (!std::isnan(res[k])) {
      sum += res[k];
      if (weighted) wsum += w[k];
      ++kept;
    }
  if (average == "macro") return Value(sum / static_cast<double>(kept));
  double out = 0.0;
  for (std::size_t k = 0; k < res.size(); ++k)
    if (!std::isnan(res[k])) out += res[k] * (wsum == 0.0 ? 0.0 : w[k] / wsum);
  return Value(out);
}

/// The base of the curve metrics: reads the batches into either state; compute() builds the
/// curves (exact_pairs, binned counts) and the metric turns them into its arrays.
class CurveMetric : public TypedMetric<CurveState> {
 public:
  CurveMetric(const Params& p, const char* type)
      : check_(p.owner_or(type)), cp_(read_curve_params(p)) {}

 protected:
  CurveState initial_state() const override {
    CurveState s;
    if (cp_.binned)
      s.counts.assign(static_cast<std::size_t>(4 * cp_.curves()) * cp_.thresholds.size(), 0);
    return s;
  }

  void update(CurveState& s, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Tensor& p = check_.tensor(batch, kPreds);
    const Tensor& t = tm::target_tensor(check_, batch);
    if (!is_floating(p.dtype()))
      check_.fail(kPreds,
                  "must hold float probabilities or logits (torchmetrics' curves take "
                  "no labels), got " +
                      p.describe());
    const TaskParams& tp = cp_.tp;
    std::int64_t cols = 1;
    if (tp.task == Task::Multiclass) {
      if (p.dim() != 2 || p.size(1) != tp.classes)
        check_.fail(kPreds, fmt::format("must be [N, {}] (num_classes columns), got {}", tp.classes,
                                        p.describe()));
      if (t.dim() != 1) check_.fail(kTarget, "must be 1-D [N] class ids, got " + t.describe());
      check_.same_rows(p, kPreds, t, kTarget);
      cols = tp.classes;
    } else {
      if (tp.task == Task::Multilabel) {
        if (p.dim() != 2 || p.size(1) != tp.classes)
          check_.fail(kPreds, fmt::format("must be [N, {}] (num_labels columns), got {}",
                                          tp.classes, p.describe()));
        cols = tp.classes;
      } else if (p.dim() < 1) {
        check_.fail(kPreds, "must have a sample dimension, got " + p.describe());
      }
      if (p.shape() != t.shape())
        check_.fail(kTarget, fmt::format("has shape {}, 'preds' has {}: they must be equal",
                                         t.describe(), p.describe()));
    }
    check_.check_no_nan(p, kPreds, s.n);
    const std::int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const std::int64_t label_cols = tp.task == Task::Multiclass ? 1
                                    : rows > 0                  ? t.numel() / rows
                                                                : 1;
    const auto y = tm::read_target(check_, tp, t, label_cols, s.n);

    // The kept scores in float64, row-major, and their labels (see CurveState).
    std::vector<double> x;
    std::vector<std::int32_t> lab;
    visit_floating(p, [&](const auto* v) {
      const std::int64_t m = p.numel();
      if (tp.task == Task::Multilabel) {
        x.assign(v, v + m);
        lab.resize(static_cast<std::size_t>(m));
        for (std::size_t i = 0; i < y.size(); ++i)
          lab[i] = tm::kept(tp, y[i]) ? static_cast<std::int32_t>(y[i]) : -1;
      } else if (!tp.ignore_index) {  // every element kept: one copy
        x.assign(v, v + m);
        lab.assign(y.begin(), y.end());
      } else {
        for (std::size_t i = 0; i < y.size(); ++i) {
          if (!tm::kept(tp, y[i])) continue;
          x.insert(x.end(), v + static_cast<std::int64_t>(i) * cols,
                   v + static_cast<std::int64_t>(i + 1) * cols);
          lab.push_back(static_cast<std::int32_t>(y[i]));
        }
      }
    });
    normalize(x, cols);

    if (!cp_.binned) {
      s.scores.insert(s.scores.end(), x.begin(), x.end());
      s.labels.insert(s.labels.end(), lab.begin(), lab.end());
    } else {
      add_binned(s, x, lab, cols);
    }
    s.n += rows;
  }

  /// torchmetrics' normalize_logits_if_needed: a sigmoid (binary, multilabel) or a row softmax
  /// (multiclass, as torch's: exp(x - max) times 1 / sum) when a score lies outside [0, 1].
  void normalize(std::vector<double>& x, std::int64_t cols) const {
    bool logits = false;
    for (const double v : x) logits |= !(v >= 0.0 && v <= 1.0);
    if (!logits) return;
    if (cp_.tp.task != Task::Multiclass) {
      for (double& v : x) v = 1.0 / (1.0 + std::exp(-v));
      return;
    }
    const auto c = static_cast<std::size_t>(cols);
    for (std::size_t r = 0; r + c <= x.size(); r += c) {
      double mx = x[r];
      for (std::size_t k = 1; k < c; ++k) mx = std::max(mx, x[r + k]);
      double sum = 0.0;
      for (std::size_t k = 0; k < c; ++k) sum += (x[r + k] = std::exp(x[r + k] - mx));
      const double inv = 1.0 / sum;
      for (std::size_t k = 0; k < c; ++k) x[r + k] *= inv;
    }
  }

  /// Binned counts: each score's number of thresholds at or below it (a binary search in the
  /// sorted thresholds) into a histogram per (curve, target), then suffix sums give, for every
  /// threshold, how many scores reach it (pred 1) and how many do not (pred 0).
  void add_binned(CurveState& s, const std::vector<double>& x, const std::vector<std::int32_t>& lab,
                  std::int64_t cols) const {
    const auto nt = cp_.sorted.size();
    const auto k_all = static_cast<std::size_t>(cp_.curves());
    std::vector<std::int64_t> hist(k_all * 2 * (nt + 1), 0);
    const auto bin = [&](double v) {
      return static_cast<std::size_t>(std::upper_bound(cp_.sorted.begin(), cp_.sorted.end(), v) -
                                      cp_.sorted.begin());
    };
    const auto c = static_cast<std::size_t>(cols);
    for (std::size_t i = 0; i < x.size(); ++i) {
      std::size_t k = 0;
      std::int32_t y = 0;
      if (cp_.tp.task == Task::Binary) {
        y = lab[i];
      } else if (cp_.tp.task == Task::Multiclass) {
        k = i % c;
        y = lab[i / c] == static_cast<std::int32_t>(k) ? 1 : 0;
      } else {
        k = i % c;
        y = lab[i];
        if (y < 0) continue;
      }
      ++hist[(k * 2 + static_cast<std::size_t>(y)) * (nt + 1) + bin(x[i])];
    }
    for (std::size_t k = 0; k < k_all; ++k)
      for (std::size_t y = 0; y < 2; ++y) {
        const std::int64_t* h = hist.data() + (k * 2 + y) * (nt + 1);
        std::int64_t total = 0;
        for (std::size_t j = 0; j <= nt; ++j) total += h[j];
        // above: scores whose bin is > j, i.e. at or above sorted threshold j.
        std::int64_t above = total - h[0];
        for (std::size_t j = 0; j < nt; ++j) {
          const auto t = static_cast<std::size_t>(cp_.perm[j]);
          std::int64_t* cell = s.counts.data() + (t * k_all + k) * 4 + 2 * y;
          cell[1] += above;
          cell[0] += total - above;
          above -= h[j + 1];
        }
      }
  }

  /// The merged state checked against the parameters (a state of another configuration is
  /// corrupt: RuntimeError); no samples at all is an InputError.
  void checked(const CurveState& s) const {
    const auto corrupt = [&](const std::string& what) {
      check_.fail_runtime(std::string("the state is corrupt: ") + what);
    };
    if (s.n == 0) check_.fail("no samples");
    const auto k = static_cast<std::size_t>(cp_.curves());
    if (cp_.binned) {
      if (s.counts.size() != 4 * k * cp_.thresholds.size())
        corrupt(
            fmt::format("{} counts, expected {}", s.counts.size(), 4 * k * cp_.thresholds.size()));
      return;
    }
    const std::size_t per_label = cp_.tp.task == Task::Multilabel ? k : 1;
    if (s.scores.size() != s.labels.size() / per_label * k || s.labels.size() % per_label != 0)
      corrupt(fmt::format("{} scores and {} labels for {} curves", s.scores.size(), s.labels.size(),
                          k));
    for (const std::int32_t y : s.labels)
      if (y < (cp_.tp.task == Task::Multilabel ? -1 : 0) ||
          y >= (cp_.tp.task == Task::Multiclass ? static_cast<std::int32_t>(k) : 2))
        corrupt(fmt::format("label {}", y));
  }

  /// Exact mode: the (score, positive) pairs of curve k. InputError when there are none (every
  /// target of that curve was ignore_index: torchmetrics fails on an empty curve).
  std::vector<std::pair<double, bool>> exact_pairs(const CurveState& s, std::int64_t k) const {
    std::vector<std::pair<double, bool>> out;
    const auto kk = static_cast<std::size_t>(k);
    const auto c = static_cast<std::size_t>(cp_.curves());
    if (cp_.tp.task == Task::Binary) {
      out.reserve(s.scores.size());
      for (std::size_t i = 0; i < s.scores.size(); ++i)
        out.emplace_back(s.scores[i], s.labels[i] == 1);
    } else if (cp_.tp.task == Task::Multiclass) {
      out.reserve(s.labels.size());
      for (std::size_t i = 0; i < s.labels.size(); ++i)
        out.emplace_back(s.scores[i * c + kk], s.labels[i] == static_cast<std::int32_t>(k));
    } else {
      for (std::size_t i = kk; i < s.labels.size(); i += c)
        if (s.labels[i] >= 0) out.emplace_back(s.scores[i], s.labels[i] == 1);
    }
    if (out.empty())
      check_.fail(kTarget, cp_.tp.task == Task::Multilabel
                               ? fmt::format("label {}: every target is ignore_index, its curve "
                                             "has no point",
                                             k)
                               : std::string("every target is ignore_index: the curve has no "
                                             "point"));
    return out;
  }

  /// Binned mode: the count of curve k at threshold t (given order), cell 2 * target + pred.
  std::int64_t count(const CurveState& s, std::size_t t, std::int64_t k, int cell) const {
    return s.counts[(t * static_cast<std::size_t>(cp_.curves()) + static_cast<std::size_t>(k)) * 4 +
                    static_cast<std::size_t>(cell)];
  }

  /// One exact ROC curve (torchmetrics' _binary_roc_compute): (0, 0) at threshold 1, then one
  /// point per distinct score, decreasing (fpr all 0 when there is no negative, tpr all 0 when
  /// there is no positive).
  static void exact_roc(const ExactCurve& c, std::vector<double>& f, std::vector<double>& t,
                        std::vector<double>& th) {
    const std::int64_t pos = c.tps.back(), neg = c.fps.back();
    f.push_back(0.0);
    t.push_back(0.0);
    th.push_back(1.0);
    for (std::size_t i = 0; i < c.tps.size(); ++i) {
      f.push_back(ratio_or_zero(neg <= 0 ? 0 : c.fps[i], neg));
      t.push_back(ratio_or_zero(pos <= 0 ? 0 : c.tps[i], pos));
      th.push_back(c.thresholds[i]);
    }
  }

  /// One binned ROC curve from cell(j, q) (threshold j in the given order, cell q = 2 target +
  /// pred), in reversed threshold order.
  template <class Cell>
  void binned_roc(const Cell& cell, std::vector<double>& f, std::vector<double>& t) const {
    for (std::size_t j = cp_.thresholds.size(); j-- > 0;) {
      const std::int64_t tn = cell(j, 0), fp = cell(j, 1), fn = cell(j, 2), tp = cell(j, 3);
      t.push_back(ratio_or_zero(tp, tp + fn));
      f.push_back(ratio_or_zero(fp, fp + tn));
    }
  }

  /// One exact precision-recall curve (torchmetrics' _binary_precision_recall_curve_compute):
  /// increasing thresholds, recall 1 everywhere when `all_negative`, then precision 1, recall 0.
  static void exact_pr(const ExactCurve& c, bool all_negative, std::vector<double>& p,
                       std::vector<double>& r, std::vector<double>& th) {
    const auto pos = static_cast<double>(c.tps.back());
    for (std::size_t i = c.tps.size(); i-- > 0;) {
      const auto tp = static_cast<double>(c.tps[i]);
      p.push_back(tp / (tp + static_cast<double>(c.fps[i])));
      r.push_back(all_negative ? 1.0 : tp / pos);
      th.push_back(c.thresholds[i]);
    }
    p.push_back(1.0);
    r.push_back(0.0);
  }

  /// One binned precision-recall curve from cell(j, q): NaN for 0 / 0, then precision 1, recall 0.
  template <class Cell>
  void binned_pr(const Cell& cell, std::vector<double>& p, std::vector<double>& r) const {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (std::size_t j = 0; j < cp_.thresholds.size(); ++j) {
      const std::int64_t tp = cell(j, 3), fp = cell(j, 1), fn = cell(j, 2);
      p.push_back(tp + fp == 0 ? nan : static_cast<double>(tp) / static_cast<double>(tp + fp));
      r.push_back(tp + fn == 0 ? nan : static_cast<double>(tp) / static_cast<double>(tp + fn));
    }
    p.push_back(1.0);
    r.push_back(0.0);
  }

  /// The ROC curves of a checked state (see RocCurves).
  RocCurves roc_curves(const CurveState& s) const {
    const auto k_all = static_cast<std::size_t>(cp_.curves());
    RocCurves out;
    out.fpr.resize(k_all);
    out.tpr.resize(k_all);
    out.thresholds.resize(k_all);
    for (std::size_t k = 0; k < k_all; ++k) {
      const auto kk = static_cast<std::int64_t>(k);
      if (cp_.binned) {
        binned_roc([&](std::size_t j, int q) { return count(s, j, kk, q); }, out.fpr[k],
                   out.tpr[k]);
        continue;
      }
      auto pairs = exact_pairs(s, kk);
      exact_roc(exact_curve(pairs), out.fpr[k], out.tpr[k], out.thresholds[k]);
    }
    return out;
  }

  /// The precision-recall curves of a checked state: x precision, y recall, thresholds (exact:
  /// per curve; binned: empty, the thresholds are cp_.thresholds).
  Curves pr_curves(const CurveState& s) const {
    const auto k_all = static_cast<std::size_t>(cp_.curves());
    Curves out;
    out.x.resize(k_all);
    out.y.resize(k_all);
    out.thresholds.resize(k_all);
    for (std::size_t k = 0; k < k_all; ++k) {
      const auto kk = static_cast<std::int64_t>(k);
      if (cp_.binned) {
        binned_pr([&](std::size_t j, int q) { return count(s, j, kk, q); }, out.x[k], out.y[k]);
        continue;
      }
      auto pairs = exact_pairs(s, kk);
      // torchmetrics' test: every target 0 (multiclass: every kept target is class 0, for every
      // class's curve).
      bool all_negative = true;
      if (cp_.tp.task == Task::Multiclass)
        all_negative =
            std::all_of(s.labels.begin(), s.labels.end(), [](std::int32_t y) { return y == 0; });
      else
        for (const auto& pr : pairs) all_negative &= !pr.second;
      exact_pr(exact_curve(pairs), all_negative, out.x[k], out.y[k], out.thresholds[k]);
    }
    return out;
  }

  /// Every kept element as one binary curve (torchmetrics' micro average): multiclass, each
  /// sample's score of every class against the one-hot target; multilabel, every kept element.
  std::vector<std::pair<double, bool>> pooled_pairs(const CurveState& s) const {
    if (cp_.tp.task != Task::Multiclass) {
      std::vector<std::pair<double, bool>> out;
      for (std::size_t i = 0; i < s.labels.size(); ++i)
        if (s.labels[i] >= 0) out.emplace_back(s.scores[i], s.labels[i] == 1);
      if (out.empty()) check_.fail(kTarget, "every target is ignore_index: no curve");
      return out;
    }
    std::vector<std::pair<double, bool>> out;
    const auto c = static_cast<std::size_t>(cp_.curves());
    out.reserve(s.scores.size());
    for (std::size_t i = 0; i < s.scores.size(); ++i)
      out.emplace_back(s.scores[i], s.labels[i / c] == static_cast<std::int32_t>(i % c));
    return out;
  }

  /// Binned micro average: the counts of threshold j summed over the curves.
  std::int64_t pooled_count(const CurveState& s, std::size_t j, int cell) const {
    std::int64_t sum = 0;
    for (std::int64_t k = 0; k < cp_.curves(); ++k) sum += count(s, j, k, cell);
    return sum;
  }

  /// The micro-averaged ROC curve (one curve; thresholds empty when binned).
  RocCurves micro_roc(const CurveState& s) const {
    RocCurves out;
    out.fpr.resize(1);
    out.tpr.resize(1);
    out.thresholds.resize(1);
    if (cp_.binned) {
      binned_roc([&](std::size_t j, int q) { return pooled_count(s, j, q); }, out.fpr[0],
                 out.tpr[0]);
    } else {
      auto pairs = pooled_pairs(s);
      exact_roc(exact_curve(pairs), out.fpr[0], out.tpr[0], out.thresholds[0]);
    }
    return out;
  }

  /// The micro-averaged precision-recall curve (one curve; thresholds empty when binned).
  Curves micro_pr(const CurveState& s) const {
    Curves out;
    out.x.resize(1);
    out.y.resize(1);
    out.thresholds.resize(1);
    if (cp_.binned) {
      binned_pr([&](std::size_t j, int q) { return pooled_count(s, j, q); }, out.x[0], out.y[0]);
    } else {
      auto pairs = pooled_pairs(s);
      bool all_negative = true;
      for (const auto& pr : pairs) all_negative &= !pr.second;
      exact_pr(exact_curve(pairs), all_negative, out.x[0], out.y[0], out.thresholds[0]);
    }
    return out;
  }

  /// Each curve's positives, torchmetrics' weights of average "weighted": exact, among the kept
  /// targets; binned, at the first threshold (state[0][:, 1, :].sum(-1)).
  std::vector<double> positives(const CurveState& s) const {
    const auto k_all = static_cast<std::size_t>(cp_.curves());
    std::vector<double> w(k_all, 0.0);
    for (std::size_t k = 0; k < k_all; ++k) {
      const auto kk = static_cast<std::int64_t>(k);
      if (cp_.binned)
        w[k] = static_cast<double>(count(s, 0, kk, 2) + count(s, 0, kk, 3));
      else if (cp_.tp.task == Task::Multiclass)
        w[k] = static_cast<double>(std::count(s.labels.begin(), s.labels.end(), kk));
      else
        for (std::size_t i = k; i < s.labels.size(); i += k_all) w[k] += s.labels[i] == 1;
    }
    return w;
  }

  /// Curves of one array each (binary) or an array of arrays (one per class / label).
  Value pack(std::vector<std::vector<double>> per_curve) const {
    if (cp_.tp.task == Task::Binary) return Value(per_curve.front());
    Value out = Value::array();
    for (auto& v : per_curve) out.push_back(Value(v));
    return out;
  }

  /// One value per curve: a scalar (binary) or an array (one per class / label).
  Value per_curve(const std::vector<double>& v) const {
    return cp_.tp.task == Task::Binary ? Value(v.front()) : Value(v);
  }

  /// The result of the operating-point metrics (PrecisionAtFixedRecall, ...): {key: value,
  /// threshold: t} per curve, as torchmetrics' (value, threshold) tuple.
  Value operating_point(const char* key, const std::vector<std::pair<double, double>>& best) const {
    std::vector<double> v, t;
    for (const auto& [a, b] : best) {
      v.push_back(a);
      t.push_back(b);
    }
    Value out = Value::map();
    out.set(key, per_curve(v));
    out.set("threshold", per_curve(t));
    return out;
  }

  /// SensitivityAtSpecificity (sensitivity_first) and SpecificityAtSensitivity: per ROC curve,
  /// the best sensitivity (tpr) where the specificity (1 - fpr) reaches min_value, or the other
  /// way round, and its threshold.
  Value roc_operating_point(const CurveState& s, double min_value, bool sensitivity_first) const {
    checked(s);
    const RocCurves c = roc_curves(s);
    const std::vector<double> binned(cp_.thresholds.rbegin(), cp_.thresholds.rend());
    std::vector<std::pair<double, double>> best;
    for (std::size_t k = 0; k < c.fpr.size(); ++k) {
      const auto& t = cp_.binned ? binned : c.thresholds[k];
      std::vector<double> spec;
      for (const double f : c.fpr[k]) spec.push_back(1 - f);
      best.push_back(sensitivity_first ? best_where(c.tpr[k], spec, t, min_value)
                                       : best_where(spec, c.tpr[k], t, min_value));
    }
    return operating_point(sensitivity_first ? "sensitivity" : "specificity", best);
  }

  /// The thresholds of binned results (one array for every curve, as torchmetrics returns).
  Value binned_thresholds(bool reversed) const {
    std::vector<double> t = cp_.thresholds;
    if (reversed) std::reverse(t.begin(), t.end());
    return Value(t);
  }

  InputChecker check_;
  CurveParams cp_;
};

}  // namespace tally::classification::curves
