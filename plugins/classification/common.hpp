// Pieces the classification metrics share: the prediction input (scores or labels), the NaN error
// of the row kernels, thresholds and their mmeval key suffixes, and the component infos plugin.cpp
// registers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "row_kernels.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/numpy_math.hpp"
#include "tally/sdk/parallel.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"

namespace tally::classification {

inline constexpr const char* kScores = "pred_scores";
inline constexpr const char* kPredLabels = "pred_labels";
inline constexpr const char* kGtLabels = "gt_labels";

// The component infos, one per metric file.
ComponentInfo accuracy_info();
ComponentInfo single_label_metric_info();
ComponentInfo confusion_matrix_info();
ComponentInfo multi_label_metric_info();

/// The result keys of SingleLabelMetric and MultiLabelMetric (and mmeval's factory of both): the
/// support (what it counts: `per_class`, `total`), then precision, recall and F1 per class and
/// averaged.
inline std::vector<ResultSpec> prf_results(const char* per_class, const char* total) {
  return {{"support*_classwise", Better::Neither, Plot::Bars, per_class},
          {"support*", Better::Neither, Plot::None, total},
          {"*_classwise", Better::Higher, Plot::Bars, "per class, index = class id"},
          {"*", Better::Higher, Plot::None, "averaged over the classes (macro) or pooled (micro)"}};
}

/// Which prediction field a batch carries: `pred_scores` wins when both are present.
/// InputError naming both when it has neither.
inline bool has_scores(const Batch& batch, const InputChecker& check) {
  if (batch.has(kScores)) return true;
  if (batch.has(kPredLabels)) return false;
  std::string have;
  for (const auto& field : batch.fields())
    have += fmt::format("{}{}", have.empty() ? "" : ", ", field.first);
  check.fail(fmt::format("needs field '{}' or '{}' (the batch has: {})", kScores, kPredLabels,
                         have.empty() ? "no fields" : have));
}

/// The number of classes (columns) of a checked [N, C] score tensor; InputError when C is 0.
inline std::int64_t score_classes(const Tensor& scores, const InputChecker& check) {
  const std::int64_t c = scores.size(1);
  if (c < 1) check.fail(kScores, "has no classes (" + scores.describe() + ")");
  return c;
}

/// After a kernel reported a NaN in the score matrix `scores` (field pred_scores): the
/// InputError naming the first one (check_no_nan finds it again).
[[noreturn]] inline void fail_nan_scores(const InputChecker& check, const Tensor& scores,
                                         std::int64_t first_sample) {
  check.check_no_nan(scores, kScores, first_sample);
  check.fail_runtime(
      fmt::format("a kernel found a NaN in '{}' that the check did not find", kScores));
}

/// f(), but when it throws an InputError, the error of the first NaN in `scores` instead if it
/// holds one: for checks that must run before the kernel that looks for NaN.
template <class F>
decltype(auto) nan_first(const InputChecker& check, const Tensor& scores, std::int64_t first_sample,
                         F&& f) {
  try {
    return f();
  } catch (const InputError&) {
    check.check_no_nan(scores, kScores, first_sample);
    throw;
  }
}

/// Row chunk of the score kernels (row_kernels.hpp): its outputs stay in a few stack arrays and
/// the rows it read are still in the cache when the caller looks at their true-class scores.
inline constexpr std::int64_t kRowChunk = 64;

/// The `threads` parameter of the score-row metrics (Accuracy, SingleLabelMetric,
/// ConfusionMatrix): a batch's rows are cut into contiguous blocks, one a thread, each counted on
/// its own and the counts added up: integers, so the same state for any number of threads.
inline ParamBuilder threads_param() {
  return param("threads", ParamType::Int,
               "Threads over a batch's score rows (contiguous blocks of at least 2^16 scores, "
               "each counted on its own, the integer counts added: the same results for any "
               "number). 1: the caller's thread only.")
      .def(1);
}
inline int read_threads(const Params& p) { return static_cast<int>(p.get_size("threads", 1, 256)); }

/// Runs f(block, begin, end) over [0, rows) in at most `threads` contiguous blocks of at least
/// 2^16 scores each (a thread costs tens of microseconds to start). f's exceptions: the lowest
/// block's, as a sequential loop would throw it.
template <class F>
void for_row_blocks(std::int64_t rows, std::int64_t cols, int threads, F&& f) {
  constexpr std::int64_t kMinScores = std::int64_t{1} << 16;
  const std::int64_t by_size =
      std::max<std::int64_t>(1, rows * std::max<std::int64_t>(cols, 1) / kMinScores);
  const auto blocks = static_cast<std::size_t>(std::clamp<std::int64_t>(
      std::min<std::int64_t>(threads, by_size), 1, std::max<std::int64_t>(rows, 1)));
  parallel_for(blocks, static_cast<int>(blocks), [&](std::size_t b) {
    const auto nb = static_cast<std::int64_t>(blocks);
    const auto k = static_cast<std::int64_t>(b);
    f(b, rows * k / nb, rows * (k + 1) / nb);
  });
}

/// Every row's argmax (row_argmax) on `threads` threads; false when a row holds a NaN.
template <class T>
bool row_argmax_threaded(const T* s, std::int64_t rows, std::int64_t cols, std::int64_t* out,
                         int threads) {
  std::vector<char> nan(static_cast<std::size_t>(std::max(threads, 1)), 0);
  for_row_blocks(rows, cols, threads, [&](std::size_t b, std::int64_t begin, std::int64_t end) {
    nan[b] = row_argmax(s + begin * cols, end - begin, cols, out + begin) >= 0;
  });
  return std::find(nan.begin(), nan.end(), 1) == nan.end();
}

/// The `thrs` parameter: null elements mean no threshold. An absent or null value is [null].
/// ConfigError for an empty list, a NaN or a repeated threshold.
inline std::vector<std::optional<double>> read_thrs(const Params& p) {
  if (!p.has("thrs")) return {std::nullopt};
  auto thrs = p.get_optional_double_list("thrs");
  if (thrs.empty()) p.fail("thrs", "must hold at least one threshold (null: no threshold)");
  for (std::size_t i = 0; i < thrs.size(); ++i) {
    if (thrs[i]) p.check_number("thrs", *thrs[i], kFinite, fmt::format("element {}", i));
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
