// What AveragePrecision and ROCAUC share: the per-sample state (scores and labels, packed), the
// input checks, and the binary curve both integrate.
//
// Inputs (field pred_scores, field gt_labels):
//   binary       scores [N] (float), labels [N] of 0/1 (integer or bool): class 1's score;
//   multi-class  scores [N, C], labels [N] class ids in [0, C): one-vs-rest (or one-vs-one);
//   multi-label  scores [N, C], labels [N, C] 0/1 indicator, or per-sample lists of class ids.
//
// The binary curve follows scikit-learn's _binary_clf_curve: samples sorted by decreasing score,
// one point per DISTINCT score (tied samples enter together), with the cumulative counts of
// positives (tp) and negatives (fp) at that point. The counts are integers and depend only on the
// multiset of (score, label) pairs, so the curve, and every number computed from it in a fixed
// order, is the same bit for bit whatever the order of the samples, the ranks or the batches.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"
#include "label_rows.hpp"
#include "tally/metric.hpp"
#include "tally/state.hpp"

namespace tally::classification {

enum class RankKind : std::int8_t { None = 0, Binary = 1, ClassIds = 2, Indicator = 3 };

inline const char* rank_kind_name(RankKind k) {
  switch (k) {
    case RankKind::Binary:
      return "binary (scores [N])";
    case RankKind::ClassIds:
      return "multi-class (class ids [N])";
    case RankKind::Indicator:
      return "multi-label (indicator [N, C] or lists of class ids)";
    default:
      return "none";
  }
}

/// The inputs of AveragePrecision and ROCAUC.
inline std::vector<InputSpec> ranking_inputs() {
  return {InputSpec{kScores,
                    "Scores [N, C] (or [N] for binary: the score of class 1), float32 or float64, "
                    "finite.",
                    true},
          InputSpec{kGtLabels,
                    "Class ids [N] (multi-class), a 0/1 indicator [N, C] (integer or bool), or "
                    "per-sample lists of class ids (ragged); 0/1 labels [N] with binary scores.",
                    true}};
}

/// Every sample's scores and labels, in the order seen. Scores keep the input's precision:
/// float32 while every batch is float32, float64 (converted exactly) once one is float64.
struct RankingState {
  PackedVector<float> s32;         // [n x cols] row-major, or empty
  PackedVector<double> s64;        // [n x cols] row-major, or empty
  PackedVector<std::int32_t> ids;  // Binary: 0/1, ClassIds: the class, one per sample
  PackedVector<std::uint8_t> hot;  // Indicator: [n x cols] of 0/1
  std::int64_t cols = 0;           // 1 for binary
  std::int8_t kind = 0;            // RankKind
  std::int64_t n = 0;
  MSGPACK_DEFINE(s32, s64, ids, hot, cols, kind, n)
};

/// Appends a checked batch to the state. InputError for bad inputs (NaN or infinite scores, as
/// scikit-learn refuses them; labels not matching the scores' shape; a change of format).
inline void ranking_update(RankingState& st, const Batch& batch, const InputChecker& check) {
  if (batch.fields().empty()) return;
  const Tensor& s = check.tensor(batch, kScores);
  if (!is_floating(s.dtype()))
    check.fail(kScores, "must hold float32 or float64 scores, got " + s.describe());
  if (s.dim() != 1 && s.dim() != 2)
    check.fail(kScores, "must be [N] (binary) or [N, C], got " + s.describe());
  const std::int64_t n = s.size(0);
  const std::int64_t cols = s.dim() == 1 ? 1 : s.size(1);
  if (cols < 1) check.fail(kScores, "has no classes (" + s.describe() + ")");
  visit_floating(s, [&](const auto* x) {
    const std::int64_t m = s.numel();
    for (std::int64_t k = 0; k < m; ++k)
      if (!std::isfinite(x[k]))
        check.fail(kScores, "sample " + std::to_string(st.n + k / cols) +
                                (s.dim() == 2 ? ": score of class " + std::to_string(k % cols)
                                              : std::string(": score")) +
                                " is " + (std::isnan(x[k]) ? "NaN" : "infinite") +
                                " (scikit-learn refuses non-finite scores)");
  });

  RankKind kind;
  if (s.dim() == 1) {
    kind = RankKind::Binary;
  } else if (batch.has(kGtLabels) && !batch.is_ragged(kGtLabels) &&
             batch.tensor(kGtLabels).dim() == 1) {
    kind = RankKind::ClassIds;
  } else {
    kind = RankKind::Indicator;
  }
  const auto prev = static_cast<RankKind>(st.kind);
  if (prev != RankKind::None && (prev != kind || st.cols != cols))
    check.fail(std::string("inputs changed format between batches: ") + rank_kind_name(prev) +
               " with " + std::to_string(st.cols) + " score columns, then " + rank_kind_name(kind) +
               " with " + std::to_string(cols));

  if (kind == RankKind::Binary) {
    const Tensor& y = check.tensor(batch, kGtLabels);
    if (y.dim() != 1 || !(is_integral(y.dtype()) || y.dtype() == DType::Bool))
      check.fail(kGtLabels, "must be 0/1 labels [N] (integer or bool) for binary scores [N], got " +
                                y.describe());
    check.same_rows(s, kScores, y, kGtLabels);
    visit_int_or_bool(y, [&](const auto* v) {
      for (std::int64_t i = 0; i < n; ++i) {
        const auto x = static_cast<std::int64_t>(v[i]);
        if (x != 0 && x != 1)
          check.fail(kGtLabels, "sample " + std::to_string(st.n + i) + ": label " +
                                    std::to_string(x) +
                                    " is not 0 or 1 (binary scores [N] are the scores of class 1)");
      }
      for (std::int64_t i = 0; i < n; ++i) st.ids.push_back(static_cast<std::int32_t>(v[i]));
    });
  } else {
    if (cols > std::numeric_limits<std::int32_t>::max())
      check.fail(kScores, "has too many columns (" + s.describe() + ")");
    const LabelRows rows = LabelRows::read(batch, kGtLabels, cols, check, st.n);
    if (rows.rows() != n)
      check.fail(kScores, "has " + std::to_string(n) + " rows, '" + kGtLabels + "' has " +
                              std::to_string(rows.rows()));
    if (kind == RankKind::ClassIds) {
      visit_integral(batch.tensor(kGtLabels), [&](const auto* v) {
        for (std::int64_t i = 0; i < n; ++i) st.ids.push_back(static_cast<std::int32_t>(v[i]));
      });
    } else {
      const std::size_t at = st.hot.size();
      st.hot.resize(at + static_cast<std::size_t>(n * cols));
      for (std::int64_t i = 0; i < n; ++i)
        rows.fill(i, st.hot.data() + at + static_cast<std::size_t>(i * cols));
    }
  }

  // Scores last: nothing above may leave the state half-appended.
  const auto count = static_cast<std::size_t>(n * cols);
  if (s.dtype() == DType::F32 && st.s64.empty()) {
    const float* x = s.data_as<float>();
    st.s32.insert(st.s32.end(), x, x + count);
  } else {
    if (!st.s32.empty()) {
      st.s64.assign(st.s32.begin(), st.s32.end());
      st.s32.clear();
      st.s32.shrink_to_fit();
    }
    visit_floating(s, [&](const auto* x) { st.s64.insert(st.s64.end(), x, x + count); });
  }
  st.kind = static_cast<std::int8_t>(kind);
  st.cols = cols;
  st.n += n;
}

/// Every rank's state concatenated, scores as float64 (exact for float32 input).
struct RankingData {
  RankKind kind = RankKind::None;
  std::int64_t n = 0;
  std::int64_t cols = 0;
  std::vector<double> scores;     // [n x cols]
  std::vector<std::int32_t> ids;  // Binary, ClassIds
  std::vector<std::uint8_t> hot;  // Indicator
  bool positive(std::int64_t i, std::int64_t c) const {
    if (kind == RankKind::Indicator) return hot[static_cast<std::size_t>(i * cols + c)] != 0;
    if (kind == RankKind::Binary) return ids[static_cast<std::size_t>(i)] == 1;
    return ids[static_cast<std::size_t>(i)] == c;
  }
  double score(std::int64_t i, std::int64_t c) const {
    return scores[static_cast<std::size_t>(i * cols + c)];
  }
};

inline RankingData ranking_gather(const std::vector<RankingState>& states,
                                  const InputChecker& check) {
  RankingData d;
  for (std::size_t r = 0; r < states.size(); ++r) {
    const RankingState& s = states[r];
    const auto kind = static_cast<RankKind>(s.kind);
    if (kind == RankKind::None || s.n == 0) continue;
    const auto cells = state_cells(s.n, s.cols, check.owner(), r);
    const bool ok =
        (s.s32.size() == cells && s.s64.empty()) || (s.s64.size() == cells && s.s32.empty());
    const bool labels_ok = kind == RankKind::Indicator
                               ? s.hot.size() == cells && s.ids.empty()
                               : s.ids.size() == static_cast<std::size_t>(s.n) && s.hot.empty();
    if (!ok || !labels_ok || kind < RankKind::Binary || kind > RankKind::Indicator)
      throw RuntimeError(check.owner() + ": the state of rank " + std::to_string(r) +
                         " is inconsistent");
    if (d.kind == RankKind::None) {
      d.kind = kind;
      d.cols = s.cols;
    } else if (d.kind != kind || d.cols != s.cols) {
      check.fail(std::string("ranks disagree on the inputs: ") + rank_kind_name(d.kind) + " with " +
                 std::to_string(d.cols) + " score columns on an earlier rank, " +
                 rank_kind_name(kind) + " with " + std::to_string(s.cols) + " on rank " +
                 std::to_string(r));
    }
    d.scores.insert(d.scores.end(), s.s32.begin(), s.s32.end());
    d.scores.insert(d.scores.end(), s.s64.begin(), s.s64.end());
    d.ids.insert(d.ids.end(), s.ids.begin(), s.ids.end());
    d.hot.insert(d.hot.end(), s.hot.begin(), s.hot.end());
    // Labels index score columns (ROC-AUC counts per class): each must be in range.
    const std::int32_t id_end =
        kind == RankKind::Binary
            ? 2
            : static_cast<std::int32_t>(std::min<std::int64_t>(s.cols, INT32_MAX));
    for (const std::int32_t y : s.ids)
      if (y < 0 || y >= id_end)
        corrupt_state(
            check.owner(), r,
            "label " + std::to_string(y) + " outside [0, " + std::to_string(id_end) + ")");
    add_count(d.n, s.n, check.owner(), r);
  }
  if (d.n == 0) check.fail("no samples");
  return d;
}

// 128-bit integers for the exact ROC area (__extension__: a GCC/Clang type, fine under -pedantic).
__extension__ typedef __int128 Int128;

/// One point per distinct score, in decreasing score order: cumulative positives and negatives.
struct BinaryCurve {
  std::vector<std::int64_t> tps, fps;
  std::int64_t positives() const { return tps.empty() ? 0 : tps.back(); }
  std::int64_t negatives() const { return fps.empty() ? 0 : fps.back(); }
};

/// `items` holds (score, is positive); reordered in place.
inline BinaryCurve binary_curve(std::vector<std::pair<double, bool>>& items) {
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  BinaryCurve c;
  std::int64_t tp = 0, fp = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    tp += items[i].second ? 1 : 0;
    fp += items[i].second ? 0 : 1;
    if (i + 1 == items.size() || items[i + 1].first != items[i].first) {
      c.tps.push_back(tp);
      c.fps.push_back(fp);
    }
  }
  return c;
}

/// Area under the ROC curve (trapezoids through (0, 0) and every point, as scikit-learn's
/// roc_curve + auc), computed exactly: 2 P N AUC = sum (fp_i - fp_{i-1}) (tp_i + tp_{i-1}) is an
/// integer, so AUC is one division. NaN when the samples hold one class only (scikit-learn's
/// UndefinedMetricWarning and NaN).
inline double roc_auc(const BinaryCurve& c) {
  const std::int64_t p = c.positives(), n = c.negatives();
  if (p == 0 || n == 0) return std::numeric_limits<double>::quiet_NaN();
  Int128 twice_area = 0;
  std::int64_t tp0 = 0, fp0 = 0;
  for (std::size_t i = 0; i < c.tps.size(); ++i) {
    twice_area += static_cast<Int128>(c.fps[i] - fp0) * (c.tps[i] + tp0);
    tp0 = c.tps[i];
    fp0 = c.fps[i];
  }
  const auto den = static_cast<Int128>(2) * p * n;
  return static_cast<double>(static_cast<long double>(twice_area) / static_cast<long double>(den));
}

/// Average precision as scikit-learn's average_precision_score: sum over the points of
/// (R_i - R_{i-1}) P_i with R_i = tp_i / P and P_i = tp_i / (tp_i + fp_i); 0 when there are no
/// positives (scikit-learn sets the recall to 1 everywhere then, and warns).
inline double average_precision(const BinaryCurve& c) {
  const std::int64_t p = c.positives();
  if (p == 0) return 0.0;
  long double sum = 0;
  std::int64_t tp0 = 0;
  for (std::size_t i = 0; i < c.tps.size(); ++i) {
    if (c.tps[i] != tp0)
      sum += static_cast<long double>(c.tps[i] - tp0) * static_cast<long double>(c.tps[i]) /
             static_cast<long double>(c.tps[i] + c.fps[i]);
    tp0 = c.tps[i];
  }
  return static_cast<double>(sum / static_cast<long double>(p));
}

/// The curve of class c against the rest (binary data: class 1 against class 0).
inline BinaryCurve one_vs_rest_curve(const RankingData& d, std::int64_t c) {
  std::vector<std::pair<double, bool>> items(static_cast<std::size_t>(d.n));
  for (std::int64_t i = 0; i < d.n; ++i)
    items[static_cast<std::size_t>(i)] = {d.score(i, c), d.positive(i, c)};
  return binary_curve(items);
}

/// Positives of class c.
inline std::int64_t positives(const RankingData& d, std::int64_t c) {
  std::int64_t p = 0;
  for (std::int64_t i = 0; i < d.n; ++i) p += d.positive(i, c) ? 1 : 0;
  return p;
}

/// Mean of xs in order (long double accumulator).
inline double mean_of(const std::vector<double>& xs) {
  long double s = 0;
  for (double x : xs) s += x;
  return static_cast<double>(s / static_cast<long double>(xs.size()));
}

}  // namespace tally::classification
