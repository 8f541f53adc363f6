// Pieces the classification metrics share: the prediction input (scores or labels), the argmax
// kernel, thresholds and their mmeval key suffixes, and the component infos plugin.cpp registers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tally/batch.hpp"
#include "tally/input.hpp"
#include "tally/numpy_math.hpp"
#include "tally/params.hpp"
#include "tally/plugin.hpp"

namespace tally::classification {

inline constexpr const char* kScores = "pred_scores";
inline constexpr const char* kPredLabels = "pred_labels";
inline constexpr const char* kGtLabels = "gt_labels";

// The component infos, one per metric file.
ComponentInfo accuracy_info();
ComponentInfo single_label_metric_info();
ComponentInfo confusion_matrix_info();
ComponentInfo multi_label_metric_info();
ComponentInfo average_precision_info();
ComponentInfo roc_auc_info();
ComponentInfo f1_score_info();

/// Which prediction field a batch carries: `pred_scores` wins when both are present.
/// InputError naming both when it has neither.
inline bool has_scores(const Batch& batch, const InputChecker& check) {
  if (batch.has(kScores)) return true;
  if (batch.has(kPredLabels)) return false;
  std::string have;
  for (const auto& field : batch.fields()) have += (have.empty() ? "" : ", ") + field.first;
  check.fail(std::string("needs field '") + kScores + "' or '" + kPredLabels +
             "' (the batch has: " + (have.empty() ? "no fields" : have) + ")");
}

/// The number of classes (columns) of a checked [N, C] score tensor; InputError when C is 0.
inline std::int64_t score_classes(const Tensor& scores, const InputChecker& check) {
  const std::int64_t c = scores.size(1);
  if (c < 1) check.fail(kScores, "has no classes (" + scores.describe() + ")");
  return c;
}

/// Index of the largest score of a row, the first among equal ones (numpy.argmax). The row holds
/// no NaN (checked before) and at least one element. Two passes the compiler vectorises: a
/// max-reduction, then a search for its first occurrence in blocks of 16 compares (no exit
/// inside a block), finished by a scalar scan of the block that holds it.
template <class T>
inline std::int64_t argmax_row(const T* row, std::int64_t cols) {
  T best = row[0];
#pragma omp simd reduction(max : best)
  for (std::int64_t c = 1; c < cols; ++c) best = row[c] > best ? row[c] : best;
  using Mask = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  constexpr std::int64_t kBlock = 16;
  std::int64_t i = 0;
  for (; i + kBlock <= cols; i += kBlock) {
    Mask m[kBlock];
    for (std::int64_t j = 0; j < kBlock; ++j) m[j] = row[i + j] == best ? -1 : 0;
    Mask any = 0;
    for (std::int64_t j = 0; j < kBlock; ++j) any |= m[j];
    if (any != 0) break;
  }
  while (row[i] != best) ++i;
  return i;
}

/// The `thrs` parameter: null elements mean no threshold. An absent or null value is [null].
/// ConfigError for an empty list, a NaN or a repeated threshold.
inline std::vector<std::optional<double>> read_thrs(const Params& p) {
  if (!p.has("thrs")) return {std::nullopt};
  auto thrs = p.get_optional_double_list("thrs");
  if (thrs.empty()) p.fail("thrs", "must hold at least one threshold (null: no threshold)");
  for (std::size_t i = 0; i < thrs.size(); ++i) {
    if (thrs[i] && std::isnan(*thrs[i])) p.fail("thrs", "must not be NaN");
    for (std::size_t j = 0; j < i; ++j)
      if (thrs[j] == thrs[i]) p.fail("thrs", "lists the same threshold twice");
  }
  return thrs;
}

/// mmeval's key suffix for one of several thresholds: "_no-thr" or "_thr-0.50" (f"{thr:.2f}").
inline std::string thr_suffix(const std::optional<double>& thr) {
  if (!thr) return "_no-thr";
  char buf[64];
  std::snprintf(buf, sizeof buf, "_thr-%.2f", *thr);
  return buf;
}

/// Thresholds for a batch of scores of type T, each in the scores' own precision as NumPy 2 and
/// PyTorch compare a float32 array with a Python float (numpy::weak_scalar): `active` is 0 for
/// "no threshold", so that `pass = !active | (score > value)` needs no branch.
template <class T>
struct ThresholdSet {
  std::vector<T> value;
  std::vector<unsigned char> active;
  explicit ThresholdSet(const std::vector<std::optional<double>>& thrs) {
    for (const auto& t : thrs) {
      value.push_back(t ? numpy::weak_scalar<T>(*t) : T{0});
      active.push_back(t ? 1 : 0);
    }
  }
  bool pass(std::size_t j, T score) const { return !active[j] || score > value[j]; }
};

/// ratio num/den, 0 when den is 0 (scikit-learn's zero_division=0, mmeval's clamp of the
/// denominator to 1).
inline double safe_ratio(std::int64_t num, std::int64_t den) {
  return den == 0 ? 0.0 : static_cast<double>(num) / static_cast<double>(den);
}

}  // namespace tally::classification
