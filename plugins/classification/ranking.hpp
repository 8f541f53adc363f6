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
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <boost/sort/spreadsort/integer_sort.hpp>

#include "common.hpp"
#include "label_rows.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"

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

/// Scores of one precision (a field of RankingState): at a sync, every rank's values in rank order,
/// remembering how many each rank gave. A rank keeps float32 scores until it sees float64 ones,
/// so ranks may hold different precisions, and each rank's scores must still meet its labels.
/// Packs as the PackedVector it is.
template <class T>
struct RankScores : PackedVector<T> {
  /// The number of values each rank gave, in rank order, once a later rank's were merged in (not
  /// packed); empty: every value came from one rank.
  std::vector<std::size_t> parts;

  void merge(const RankScores& later) {
    if (parts.empty()) parts.push_back(this->size());
    parts.push_back(later.size());
    this->insert(this->end(), later.begin(), later.end());
  }

  // Packed as the PackedVector it is (its `parts` are not state).
  void tally_pack(StateWriter& out) const {
    internal::write(out, static_cast<const PackedVector<T>&>(*this));
  }
  void tally_unpack(StateReader& in) {
    parts.clear();
    internal::read(in, static_cast<PackedVector<T>&>(*this));
  }
};

/// Every sample's scores and labels, in the order seen. Scores keep the input's precision:
/// float32 while every batch is float32, float64 (converted exactly) once one is float64.
/// At a sync the ranks' samples are concatenated in rank order and their counts summed; the
/// format (kind, cols) must agree between the ranks that saw data.
struct RankingState {
  RankScores<float> s32;           // [n x cols] row-major, or empty
  RankScores<double> s64;          // [n x cols] row-major, or empty
  PackedVector<std::int32_t> ids;  // Binary: 0/1, ClassIds: the class, one per sample
  PackedVector<std::uint8_t> hot;  // Indicator: [n x cols] of 0/1
  std::int64_t cols = 0;           // 1 for binary
  std::int8_t kind = 0;            // RankKind
  std::int64_t n = 0;
  TALLY_STATE(merge(s32), merge(s64), concat(ids), concat(hot), agree(cols, 0), agree(kind, 0),
              sum(n))
};

/// Appends n checked labels (0/1 or class ids below 2^31) as int32.
template <class T>
void append_ids(PackedVector<std::int32_t>& ids, const T* v, std::int64_t n) {
  const std::size_t at = ids.size();
  ids.resize(at + static_cast<std::size_t>(n));
  std::int32_t* out = ids.data() + at;
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<std::int32_t>(v[i]);
}

/// Appends a checked batch to the state. InputError for bad inputs (NaN or infinite scores, as
/// scikit-learn refuses them; labels not matching the scores' shape; a change of format).
inline void ranking_update(RankingState& st, const Batch& batch, const InputChecker& check,
                           DenseLabels dense = DenseLabels::Indicator) {
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
    // x - x is 0 for a finite x and NaN for NaN or an infinity: a branch-free pass first.
    bool finite = true;
    for (std::int64_t k = 0; k < m; ++k) finite &= (x[k] - x[k]) == 0;
    if (finite) return;
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
      bool binary = true;
      for (std::int64_t i = 0; i < n; ++i)
        binary &= static_cast<std::uint64_t>(static_cast<std::int64_t>(v[i])) <= 1;
      for (std::int64_t i = 0; !binary && i < n; ++i) {
        const auto x = static_cast<std::int64_t>(v[i]);
        if (x != 0 && x != 1)
          check.fail(kGtLabels, "sample " + std::to_string(st.n + i) + ": label " +
                                    std::to_string(x) +
                                    " is not 0 or 1 (binary scores [N] are the scores of class 1)");
      }
      append_ids(st.ids, v, n);
    });
  } else {
    if (cols > std::numeric_limits<std::int32_t>::max())
      check.fail(kScores, "has too many columns (" + s.describe() + ")");
    const LabelRows rows = LabelRows::read(batch, kGtLabels, cols, check, st.n, dense);
    if (rows.rows() != n)
      check.fail(kScores, "has " + std::to_string(n) + " rows, '" + kGtLabels + "' has " +
                              std::to_string(rows.rows()));
    if (kind == RankKind::ClassIds) {
      visit_integral(batch.tensor(kGtLabels), [&](const auto* v) { append_ids(st.ids, v, n); });
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

/// One sample of RankingData: its scores (float32 or float64 as the state kept them, read as
/// float64: exact) and its labels.
struct RankingRow {
  const float* s32;         // [cols], or null
  const double* s64;        // [cols] when s32 is null
  const std::int32_t* id;   // Binary, ClassIds
  const std::uint8_t* hot;  // Indicator: [cols]
  RankKind kind;
  double score(std::int64_t c) const { return s32 != nullptr ? s32[c] : s64[c]; }
  std::int32_t label() const { return *id; }
  bool positive(std::int64_t c) const {
    if (kind == RankKind::Indicator) return hot[c] != 0;
    if (kind == RankKind::Binary) return *id == 1;
    return *id == c;
  }
};

/// The samples of one rank, in a merged state.
struct RankingPart {
  const float* s32;         // [n x cols], or null
  const double* s64;        // [n x cols] when s32 is null
  const std::int32_t* ids;  // Binary, ClassIds: [n]
  const std::uint8_t* hot;  // Indicator: [n x cols]
  std::int64_t n;
};

/// Every rank's samples, checked, in rank order: views of the merged state (no copy of the
/// scores; the state outlives it).
struct RankingData {
  RankKind kind = RankKind::None;
  std::int64_t n = 0;
  std::int64_t cols = 0;
  std::vector<RankingPart> parts;  // the ranks with samples, in rank order

  /// f(const RankingRow&) for every sample, in order.
  template <class F>
  void for_each_row(F&& f) const {
    for (const RankingPart& p : parts) {
      RankingRow row{p.s32, p.s64, p.ids, p.hot, kind};
      const auto step = static_cast<std::size_t>(cols);
      for (std::int64_t i = 0; i < p.n; ++i) {
        f(static_cast<const RankingRow&>(row));
        if (row.s32 != nullptr) row.s32 += step;
        if (row.s64 != nullptr) row.s64 += step;
        if (row.id != nullptr) ++row.id;
        if (row.hot != nullptr) row.hot += step;
      }
    }
  }
};

/// Checks the merged state `st` (every rank's samples; the local state in a world of one) and
/// splits it into the ranks' parts. InputError when it holds no sample; RuntimeError when it is
/// inconsistent (a corrupt state).
inline RankingData ranking_data(const RankingState& st, const InputChecker& check) {
  const auto corrupt = [&](const std::string& what) {
    check.fail_runtime(std::string("the state is corrupt: ") + what);
  };
  RankingData d;
  if (st.n == 0) check.fail("no samples");
  d.kind = static_cast<RankKind>(st.kind);
  d.cols = st.cols;
  d.n = st.n;
  if (d.kind < RankKind::Binary || d.kind > RankKind::Indicator || d.cols < 1 ||
      (d.kind == RankKind::Binary && d.cols != 1))
    corrupt("format " + std::to_string(st.kind) + " with " + std::to_string(st.cols) +
            " score columns");
  std::int64_t cells64 = 0;
  if (__builtin_mul_overflow(st.n, st.cols, &cells64))
    corrupt(std::to_string(st.n) + " samples of " + std::to_string(st.cols) + " columns");
  const auto cells = static_cast<std::size_t>(cells64);
  const bool labels_ok = d.kind == RankKind::Indicator
                             ? st.hot.size() == cells && st.ids.empty()
                             : st.ids.size() == static_cast<std::size_t>(st.n) && st.hot.empty();
  if (st.s32.size() + st.s64.size() != cells || !labels_ok)
    corrupt("its scores or labels are not " + std::to_string(st.n) + " samples of " +
            std::to_string(st.cols) + " columns");
  // Each rank's part: its scores in one precision, and as many labels.
  const std::vector<std::size_t> one32{st.s32.size()}, one64{st.s64.size()};
  const auto& p32 = st.s32.parts.empty() ? one32 : st.s32.parts;
  const auto& p64 = st.s64.parts.empty() ? one64 : st.s64.parts;
  if (p32.size() != p64.size()) corrupt("the ranks' float32 and float64 scores do not pair up");
  const auto step = static_cast<std::size_t>(st.cols);
  std::size_t at32 = 0, at64 = 0, at_label = 0;
  for (std::size_t r = 0; r < p32.size(); ++r) {
    const std::size_t c = p32[r] + p64[r];
    if ((p32[r] != 0 && p64[r] != 0) || c % step != 0)
      corrupt("rank " + std::to_string(r) + " holds " + std::to_string(p32[r]) + " float32 and " +
              std::to_string(p64[r]) + " float64 scores");
    const auto n = static_cast<std::int64_t>(c / step);
    if (n > 0) {
      const bool hot = d.kind == RankKind::Indicator;
      d.parts.push_back({p32[r] != 0 ? st.s32.data() + at32 : nullptr,
                         p64[r] != 0 ? st.s64.data() + at64 : nullptr,
                         hot ? nullptr : st.ids.data() + at_label,
                         hot ? st.hot.data() + at_label : nullptr, n});
      at_label += hot ? c : static_cast<std::size_t>(n);
    }
    at32 += p32[r];
    at64 += p64[r];
  }
  // Labels index score columns (ROC-AUC counts per class): each must be in range.
  const std::int32_t id_end =
      d.kind == RankKind::Binary
          ? 2
          : static_cast<std::int32_t>(std::min<std::int64_t>(st.cols, INT32_MAX));
  for (const std::int32_t y : st.ids)
    if (y < 0 || y >= id_end)
      corrupt("label " + std::to_string(y) + " outside [0, " + std::to_string(id_end) + ")");
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

/// Builds the binary curve of (score, is positive) samples: each score becomes a 64-bit key whose
/// unsigned order is the order of the doubles (-0.0 taken as 0.0), positives and negatives apart,
/// each set sorted by Boost's spreadsort (a radix sort: 10 M keys in about 0.3 s here, 2.5x
/// std::sort of (score, label) pairs), then both walked from the largest score down, each distinct
/// score one point. Reusable: finish() leaves it empty for the next curve.
class CurveBuilder {
 public:
  void reserve(std::size_t n) {
    pos_.reserve(n);
    neg_.reserve(n);
  }
  /// `score` is finite (ranking_update refuses NaN and infinities).
  void add(double score, bool positive) { (positive ? pos_ : neg_).push_back(key(score)); }

  BinaryCurve finish() {
    boost::sort::spreadsort::integer_sort(pos_.begin(), pos_.end());
    boost::sort::spreadsort::integer_sort(neg_.begin(), neg_.end());
    BinaryCurve c;
    std::size_t i = pos_.size(), j = neg_.size();  // unread: [0, i) and [0, j)
    std::int64_t tp = 0, fp = 0;
    while (i > 0 || j > 0) {
      const std::uint64_t k = i == 0   ? neg_[j - 1]
                              : j == 0 ? pos_[i - 1]
                                       : std::max(pos_[i - 1], neg_[j - 1]);
      for (; i > 0 && pos_[i - 1] == k; --i) ++tp;
      for (; j > 0 && neg_[j - 1] == k; --j) ++fp;
      c.tps.push_back(tp);
      c.fps.push_back(fp);
    }
    pos_.clear();
    neg_.clear();
    return c;
  }

 private:
  static std::uint64_t key(double x) {
    const auto bits = std::bit_cast<std::uint64_t>(x + 0.0);  // -0.0 + 0.0 is +0.0
    return (bits >> 63) != 0 ? ~bits : bits | (std::uint64_t{1} << 63);
  }
  std::vector<std::uint64_t> pos_, neg_;
};

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
inline BinaryCurve one_vs_rest_curve(const RankingData& d, std::int64_t c, CurveBuilder& b) {
  b.reserve(static_cast<std::size_t>(d.n));
  d.for_each_row([&](const RankingRow& r) { b.add(r.score(c), r.positive(c)); });
  return b.finish();
}

/// Positives of class c.
inline std::int64_t positives(const RankingData& d, std::int64_t c) {
  std::int64_t p = 0;
  d.for_each_row([&](const RankingRow& r) { p += r.positive(c) ? 1 : 0; });
  return p;
}

/// Mean of xs in order (long double accumulator).
inline double mean_of(const std::vector<double>& xs) {
  long double s = 0;
  for (double x : xs) s += x;
  return static_cast<double>(s / static_cast<long double>(xs.size()));
}

}  // namespace tally::classification
