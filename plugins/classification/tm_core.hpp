// The core of the torchmetrics-style, task-based classification metrics (StatScores, Specificity,
// FBetaScore, HammingDistance, JaccardIndex, ExactMatch, MatthewsCorrCoef, CohenKappa,
// CalibrationError): their parameters (task, threshold, num_classes, num_labels, average, top_k,
// ignore_index, named and defaulted as torchmetrics 1.9's), the reading of `preds` / `target` as
// torchmetrics formats them, and one confusion-count state that every count metric shares.
//
// Inputs, as torchmetrics' update(preds, target):
//   binary      preds [N] (or any shape) float probabilities / logits, or 0/1 integer labels;
//               target of the same shape, 0/1 (or ignore_index). Elements are flattened.
//   multiclass  preds [N, C] float scores (argmax; top_k) or [N] integer class ids in [0, C);
//               target [N] class ids in [0, C) (or ignore_index).
//   multilabel  preds [N, L] float probabilities / logits or 0/1 integers; target [N, L], 0/1
//               (or ignore_index).
// Float preds with any value outside [0, 1] in a batch are logits: the batch gets a sigmoid
// first, as torchmetrics' normalize_logits_if_needed does for each update() call. (The decision
// is per batch, as torchmetrics' is per update: a data set that mixes probabilities and logits
// gives batch-size dependent results there too.) Then pred = p > threshold, compared in the
// scores' own precision (a float32 tensor against a Python float, as torch does).
//
// Which elements decide the sigmoid: torchmetrics' stat-score path (StatScores, Specificity,
// FBetaScore, HammingDistance, ExactMatch and every multilabel metric) looks at all of the batch;
// its binary confusion-matrix path (binary JaccardIndex, MatthewsCorrCoef, CohenKappa,
// CalibrationError) drops the ignore_index elements first. Both are reproduced (SigmoidOver).
//
// ignore_index: elements whose target equals it are left out of every count (torchmetrics
// removes them, or marks them -1 so that no count takes them).
//
// top_k > 1 (multiclass, stat-score metrics): as torchmetrics 1.9's _refine_preds_oh, a sample's
// prediction is its target when the target is among the k highest scores, else its argmax; ties
// in the scores rank the lower class id first (torch.topk leaves their order open).
//
// The state: int64 counts, summed across ranks (exact; its size fixed by the parameters):
//   binary      4 cells, index 2 * target + pred (torchmetrics' [[tn, fp], [fn, tp]])
//   multiclass  C * C cells, index target * C + pred (the confusion matrix)
//   multilabel  4 L cells, index 4 l + 2 * target + pred (one 2 x 2 matrix a label)
// plus the number of samples seen (ignored ones included).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/numpy_math.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"
#include "tally/sdk/value.hpp"

namespace tally::classification::tm {

inline constexpr const char* kPreds = "preds";
inline constexpr const char* kTarget = "target";

/// The most classes of a multiclass count state: C * C int64 cells (128 MiB at 4096).
inline constexpr std::int64_t kMaxClasses = 4096;

enum class Task { Binary, Multiclass, Multilabel };
enum class Average { Micro, Macro, Weighted, None };

/// Which elements decide whether a batch of float preds are logits (see the file comment).
enum class SigmoidOver { All, Kept };

/// The task parameters of one metric, checked.
struct TaskParams {
  Task task = Task::Binary;
  double threshold = 0.5;
  std::int64_t classes = 1;  // multiclass: num_classes; multilabel: num_labels; binary: 1
  std::int64_t top_k = 1;
  std::optional<std::int64_t> ignore_index;
  Average average = Average::Micro;

  bool multilabel() const { return task == Task::Multilabel; }
  /// The number of cells of the count state.
  std::int64_t cells() const {
    return task == Task::Binary ? 4 : task == Task::Multiclass ? classes * classes : 4 * classes;
  }
};

/// What a metric takes of the shared parameters.
struct TaskOptions {
  std::vector<std::string> tasks = {"binary", "multiclass", "multilabel"};
  bool threshold = true;
  std::optional<std::string> average;  // the default of `average`; none: no such parameter
  bool top_k = false;
  bool multidim_average = false;
};

/// The options of torchmetrics' stat-score family (StatScores, Specificity, FBetaScore,
/// HammingDistance): `average` micro by default, `top_k`, `multidim_average`.
inline TaskOptions stat_score_options() {
  TaskOptions o;
  o.average = "micro";
  o.top_k = true;
  o.multidim_average = true;
  return o;
}

inline std::vector<ParamSpec> task_params(const TaskOptions& o) {
  std::string tasks;
  for (const auto& t : o.tasks) tasks += (tasks.empty() ? "" : ", ") + t;
  std::vector<ParamSpec> out;
  out.push_back(param("task", ParamType::String, "The task (torchmetrics' `task`): " + tasks + ".")
                    .choices(o.tasks));
  if (o.threshold)
    out.push_back(param("threshold", ParamType::Float,
                        "Binary and multilabel: a float pred above it is positive (after a "
                        "sigmoid when the batch holds values outside [0, 1]). In [0, 1].")
                      .def(0.5));
  if (std::find(o.tasks.begin(), o.tasks.end(), "multiclass") != o.tasks.end())
    out.push_back(param("num_classes", ParamType::Int,
                        "Multiclass: the number of classes C (at least 2, at most 4096).")
                      .optional()
                      .nullable());
  if (std::find(o.tasks.begin(), o.tasks.end(), "multilabel") != o.tasks.end())
    out.push_back(param("num_labels", ParamType::Int,
                        "Multilabel: the number of labels L (at least 2, at most 2^20).")
                      .optional()
                      .nullable());
  if (o.average)
    out.push_back(param("average", ParamType::String,
                        "Multiclass and multilabel: micro (pooled counts), macro (mean over the "
                        "classes; multiclass leaves out classes with no tp, fp or fn), weighted "
                        "(by support, tp + fn) or none (an array, one value a class).")
                      .def(*o.average)
                      .choices({"micro", "macro", "weighted", "none"}));
  if (o.multidim_average)
    out.push_back(param("multidim_average", ParamType::String,
                        "global: every element counted together (samplewise is not supported).")
                      .def("global")
                      .choices({"global"}));
  if (o.top_k)
    out.push_back(param("top_k", ParamType::Int,
                        "Multiclass with float scores: a sample counts as predicting its target "
                        "when the target is among its k highest scores (torchmetrics 1.9).")
                      .def(1));
  out.push_back(param("ignore_index", ParamType::Int,
                      "Target value whose elements are left out of every count.")
                    .optional()
                    .nullable());
  return out;
}

/// Checks num_classes and num_labels against their bounds where given (a task or not).
inline void check_class_counts(const Params& p) {
  if (p.has("num_classes"))
    p.get_size("num_classes", 2, kMaxClasses, "the state holds num_classes^2 int64 counts");
  if (p.has("num_labels")) p.get_size("num_labels", 2, kMaxSize);
}

inline TaskParams read_task(const Params& p, const TaskOptions& o) {
  TaskParams t;
  const std::string task = p.get_string("task");
  t.task = task == "binary"       ? Task::Binary
           : task == "multiclass" ? Task::Multiclass
                                  : Task::Multilabel;
  if (o.threshold) {
    t.threshold = p.get_fraction("threshold");
  }
  // The class counts are checked whenever given, also by a task that does not read them
  // (torchmetrics ignores them there): a count beyond the bounds is a mistake in any config.
  const std::int64_t num_classes =
      p.has("num_classes")
          ? p.get_size("num_classes", 2, kMaxClasses, "the state holds num_classes^2 int64 counts")
          : 0;
  const std::int64_t num_labels = p.has("num_labels") ? p.get_size("num_labels", 2, kMaxSize) : 0;
  if (t.task == Task::Multiclass) {
    if (!p.has("num_classes")) p.fail("num_classes", "is required for task multiclass");
    t.classes = num_classes;
  } else if (t.task == Task::Multilabel) {
    if (!p.has("num_labels")) p.fail("num_labels", "is required for task multilabel");
    t.classes = num_labels;
  }
  if (o.average) {
    const std::string a = p.get_string("average");
    t.average = a == "micro"      ? Average::Micro
                : a == "macro"    ? Average::Macro
                : a == "weighted" ? Average::Weighted
                                  : Average::None;
  }
  if (o.top_k) {
    t.top_k = p.get_size("top_k", 1, kMaxClasses);
    if (t.task == Task::Multiclass && t.top_k > t.classes)
      p.fail("top_k", fmt::format("must be at most num_classes ({}), got {}", t.classes, t.top_k));
    if (t.task != Task::Multiclass) t.top_k = 1;  // torchmetrics reads it for multiclass only
  }
  if (p.has("ignore_index")) t.ignore_index = p.get_int("ignore_index");
  return t;
}

/// Whether a metric takes hard labels as preds, or only scores (the curves and their areas).
struct TaskInputs {
  bool labels = true;
};

/// The component doc's tail: the inputs of each task.
inline std::vector<InputSpec> task_inputs(TaskInputs what = {}) {
  const bool labels_allowed = what.labels;
  return {InputSpec{kPreds,
                    std::string("Predictions: binary [N] probabilities or logits") +
                        (labels_allowed ? " (or 0/1 labels)" : "") + "; multiclass [N, C] scores" +
                        (labels_allowed ? " (or [N] class ids)" : "") +
                        "; multilabel [N, L] probabilities or logits" +
                        (labels_allowed ? " (or 0/1 labels)" : "") + ".",
                    true},
          InputSpec{kTarget,
                    "True labels, any integer dtype: binary 0/1 of preds' shape; multiclass [N] "
                    "class ids; multilabel [N, L] 0/1. ignore_index marks elements to leave out.",
                    true}};
}

// ---- reading a batch ------------------------------------------------------------------------

/// One batch as torchmetrics formats it: for every element kept (target != ignore_index), its
/// cell of the count state (see the file comment); and the number of samples (rows).
struct Formatted {
  std::int64_t samples = 0;
  std::vector<std::int64_t> cells;  // one per kept element
  // Multiclass / multilabel exact match: whether each sample matches on every kept element.
  std::vector<unsigned char> sample_match;
};

inline const Tensor& target_tensor(const InputChecker& check, const Batch& batch) {
  const Tensor& t = check.tensor(batch, kTarget);
  if (!is_integral(t.dtype())) check.fail(kTarget, "must hold integer labels, got " + t.describe());
  return t;
}

/// The target values as int64, each checked: 0/1 (binary, multilabel) or a class id in [0, C)
/// (multiclass), or ignore_index.
inline std::vector<std::int64_t> read_target(const InputChecker& check, const TaskParams& tp,
                                             const Tensor& t, std::int64_t cols,
                                             std::int64_t first) {
  const std::int64_t n = t.numel();
  std::vector<std::int64_t> y(static_cast<std::size_t>(n));
  visit_integral(t, [&](const auto* v) {
    for (std::int64_t i = 0; i < n; ++i)
      y[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(v[i]);
  });
  const std::int64_t limit = tp.task == Task::Multiclass ? tp.classes : 2;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t v = y[static_cast<std::size_t>(i)];
    if ((v >= 0 && v < limit) || (tp.ignore_index && v == *tp.ignore_index)) continue;
    check.fail(kTarget,
               fmt::format("sample {}{}: {} {} is not {}{}", first + i / cols,
                           cols > 1 ? fmt::format(", label {}", i % cols) : std::string(),
                           tp.task == Task::Multiclass ? "class id" : "label", v,
                           tp.task == Task::Multiclass ? fmt::format("in [0, {})", tp.classes)
                                                       : std::string("0 or 1"),
                           tp.ignore_index ? fmt::format(" (or ignore_index {})", *tp.ignore_index)
                                           : std::string()));
  }
  return y;
}

/// Whether element i is kept (its target is not ignore_index).
inline bool kept(const TaskParams& tp, std::int64_t y) {
  return !(tp.ignore_index && y == *tp.ignore_index);
}

/// Binary and multilabel preds as 0/1 labels: thresholded float preds (sigmoid first when the
/// elements `over` selects hold a value outside [0, 1]) or checked 0/1 integers.
inline std::vector<unsigned char> binary_preds(const InputChecker& check, const TaskParams& tp,
                                               const Tensor& p, const std::vector<std::int64_t>& y,
                                               std::int64_t cols, std::int64_t first,
                                               SigmoidOver over) {
  const std::int64_t n = p.numel();
  std::vector<unsigned char> out(static_cast<std::size_t>(n));
  if (is_floating(p.dtype())) {
    check.check_no_nan(p, kPreds, first);
    visit_floating(p, [&](const auto* s) {
      using T = std::remove_cv_t<std::remove_reference_t<decltype(*s)>>;
      bool logits = false;
      for (std::int64_t i = 0; i < n; ++i)
        if (over == SigmoidOver::All || kept(tp, y[static_cast<std::size_t>(i)]))
          logits |= !(s[i] >= T{0} && s[i] <= T{1});
      const T thr = numpy::weak_scalar<T>(tp.threshold);
      for (std::int64_t i = 0; i < n; ++i) {
        const T v = logits ? T{1} / (T{1} + std::exp(-s[i])) : s[i];
        out[static_cast<std::size_t>(i)] = v > thr ? 1 : 0;
      }
    });
  } else if (is_integral(p.dtype())) {
    visit_integral(p, [&](const auto* s) {
      for (std::int64_t i = 0; i < n; ++i) {
        const auto v = static_cast<std::int64_t>(s[i]);
        if (v != 0 && v != 1)
          check.fail(
              kPreds,
              fmt::format("sample {}{}: label {} is not 0 or 1 (integer preds are labels; "
                          "give float preds for probabilities)",
                          first + i / cols,
                          cols > 1 ? fmt::format(", label {}", i % cols) : std::string(), v));
        out[static_cast<std::size_t>(i)] = static_cast<unsigned char>(v);
      }
    });
  } else {
    check.fail(kPreds, "must hold float scores or integer labels, got " + p.describe());
  }
  return out;
}

/// Multiclass preds as one class a sample: the argmax of [N, C] scores (the first of equal
/// maxima, as torch.argmax), refined for top_k > 1; or checked [N] class ids.
inline std::vector<std::int64_t> multiclass_preds(const InputChecker& check, const TaskParams& tp,
                                                  const Tensor& p,
                                                  const std::vector<std::int64_t>& y,
                                                  std::int64_t first) {
  const std::int64_t n = p.size(0);
  const std::int64_t c = tp.classes;
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  if (p.dim() == 2) {
    check.check_no_nan(p, kPreds, first);
    visit_floating(p, [&](const auto* s) {
      for (std::int64_t i = 0; i < n; ++i) {
        const auto* row = s + i * c;
        std::int64_t best = 0;
        for (std::int64_t k = 1; k < c; ++k)
          if (row[k] > row[best]) best = k;
        out[static_cast<std::size_t>(i)] = best;
        const std::int64_t t = y[static_cast<std::size_t>(i)];
        if (tp.top_k > 1 && t >= 0 && t < c) {
          // The target's rank: classes scoring higher, or equal with a lower id.
          std::int64_t above = 0;
          for (std::int64_t k = 0; k < c; ++k)
            above += (row[k] > row[t] || (row[k] == row[t] && k < t)) ? 1 : 0;
          if (above < tp.top_k) out[static_cast<std::size_t>(i)] = t;
        }
      }
    });
  } else {
    if (tp.top_k > 1)
      check.fail(kPreds, "must be [N, C] float scores when top_k > 1, got " + p.describe());
    visit_integral(p, [&](const auto* s) {
      for (std::int64_t i = 0; i < n; ++i) {
        const auto v = static_cast<std::int64_t>(s[i]);
        if (v < 0 || v >= c)
          check.fail(kPreds,
                     fmt::format("sample {}: class id {} is outside [0, {})", first + i, v, c));
        out[static_cast<std::size_t>(i)] = v;
      }
    });
  }
  return out;
}

/// Reads one batch of `preds` and `target` for task `tp` (shapes, dtypes and values checked:
/// InputError naming the field) into the cells of its kept elements. `first` numbers the
/// batch's first sample in messages.
inline Formatted format_batch(const InputChecker& check, const TaskParams& tp, const Batch& batch,
                              std::int64_t first, SigmoidOver over, bool want_matches = false) {
  Formatted f;
  const Tensor& p = check.tensor(batch, kPreds);
  const Tensor& t = target_tensor(check, batch);
  if (tp.task == Task::Multiclass) {
    if (t.dim() != 1) check.fail(kTarget, "must be 1-D [N] class ids, got " + t.describe());
    if (p.dim() == 2) {
      if (!is_floating(p.dtype()))
        check.fail(kPreds, "must hold float scores when [N, C], got " + p.describe());
      if (p.size(1) != tp.classes)
        check.fail(kPreds, fmt::format("has {} columns ({}), but num_classes is {}", p.size(1),
                                       p.describe(), tp.classes));
    } else if (p.dim() == 1) {
      if (!is_integral(p.dtype()))
        check.fail(kPreds, "must hold integer class ids when [N], got " + p.describe());
    } else {
      check.fail(kPreds, "must be [N, C] float scores or [N] class ids, got " + p.describe());
    }
    check.same_rows(p, kPreds, t, kTarget);
    f.samples = t.size(0);
    const auto y = read_target(check, tp, t, 1, first);
    const auto pred = multiclass_preds(check, tp, p, y, first);
    f.cells.reserve(y.size());
    if (want_matches) f.sample_match.assign(y.size(), 1);
    for (std::size_t i = 0; i < y.size(); ++i) {
      if (!kept(tp, y[i])) continue;
      f.cells.push_back(y[i] * tp.classes + pred[i]);
      if (want_matches) f.sample_match[i] = y[i] == pred[i] ? 1 : 0;
    }
    return f;
  }
  std::int64_t cols = 1;
  if (tp.task == Task::Multilabel) {
    if (p.dim() != 2 || p.size(1) != tp.classes)
      check.fail(kPreds, fmt::format("must be [N, {}] (num_labels columns), got {}", tp.classes,
                                     p.describe()));
    cols = tp.classes;
  } else if (p.dim() < 1) {
    check.fail(kPreds, "must have a sample dimension, got " + p.describe());
  }
  if (p.shape() != t.shape())
    check.fail(kTarget, fmt::format("has shape {}, 'preds' has {}: they must be equal",
                                    t.describe(), p.describe()));
  f.samples = t.size(0);
  if (tp.task == Task::Binary && f.samples > 0) cols = t.numel() / f.samples;
  const auto y = read_target(check, tp, t, cols, first);
  const auto pred = binary_preds(check, tp, p, y, cols, first, over);
  f.cells.reserve(y.size());
  if (want_matches) f.sample_match.assign(static_cast<std::size_t>(f.samples), 1);
  const bool ml = tp.task == Task::Multilabel;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (!kept(tp, y[i])) continue;
    const std::int64_t label = ml ? static_cast<std::int64_t>(i) % cols : 0;
    f.cells.push_back(4 * label + 2 * y[i] + pred[i]);
    if (want_matches && y[i] != pred[i]) f.sample_match[i / static_cast<std::size_t>(cols)] = 0;
  }
  return f;
}

// ---- the count state and what the metrics read from it ----------------------------------------

struct CountState {
  PackedVector<std::int64_t> counts;  // TaskParams::cells() cells (see the file comment)
  std::int64_t n = 0;                 // samples seen, ignored ones included
  TALLY_STATE(sum(counts), sum(n))
};

/// Per-class tp, fp, tn, fn (binary: one class) from the counts.
struct Stats {
  std::vector<std::int64_t> tp, fp, tn, fn;
  std::size_t size() const { return tp.size(); }
};

inline Stats stats_of(const TaskParams& tp, const PackedVector<std::int64_t>& m) {
  Stats s;
  const auto k = static_cast<std::size_t>(tp.classes);
  if (tp.task == Task::Multiclass) {
    std::int64_t total = 0;
    std::vector<std::int64_t> row(k, 0), col(k, 0);
    for (std::size_t t = 0; t < k; ++t)
      for (std::size_t q = 0; q < k; ++q) {
        row[t] += m[t * k + q];
        col[q] += m[t * k + q];
        total += m[t * k + q];
      }
    for (std::size_t c = 0; c < k; ++c) {
      const std::int64_t d = m[c * k + c];
      s.tp.push_back(d);
      s.fp.push_back(col[c] - d);
      s.fn.push_back(row[c] - d);
      s.tn.push_back(total - row[c] - col[c] + d);
    }
    return s;
  }
  for (std::size_t l = 0; l < (tp.task == Task::Binary ? 1 : k); ++l) {
    s.tn.push_back(m[4 * l]);
    s.fp.push_back(m[4 * l + 1]);
    s.fn.push_back(m[4 * l + 2]);
    s.tp.push_back(m[4 * l + 3]);
  }
  return s;
}

/// torchmetrics' _safe_divide: num / den, zero_division where den is 0.
inline double safe_divide(double num, double den, double zero_division = 0.0) {
  return den == 0.0 ? zero_division : num / den;
}

inline std::int64_t total_of(const std::vector<std::int64_t>& v) {
  std::int64_t s = 0;
  for (const auto x : v) s += x;
  return s;
}

/// torchmetrics' _adjust_weights_safe_divide: per-class scores to one value (macro: classes
/// with no tp, fp or fn left out, multiclass only; weighted: by tp + fn) or the array (none).
inline Value adjust_weights(const std::vector<double>& score, const TaskParams& tp,
                            const Stats& s) {
  if (tp.average == Average::None) return Value(score);
  std::vector<double> w(score.size(), 1.0);
  for (std::size_t c = 0; c < score.size(); ++c) {
    if (tp.average == Average::Weighted)
      w[c] = static_cast<double>(s.tp[c] + s.fn[c]);
    else if (!tp.multilabel() && s.tp[c] + s.fp[c] + s.fn[c] == 0)
      w[c] = 0.0;
  }
  double wsum = 0.0;
  for (const double x : w) wsum += x;
  double out = 0.0;
  for (std::size_t c = 0; c < score.size(); ++c) out += safe_divide(w[c] * score[c], wsum);
  return Value(out);
}

/// The base of the metrics whose state is the confusion counts: reads the batches; compute()
/// is the metric's reduction of the merged counts.
class CountMetric : public TypedMetric<CountState> {
 public:
  CountMetric(const Params& p, const char* type, const TaskOptions& o, SigmoidOver over)
      : check_(p.owner_or(type)), tp_(read_task(p, o)), over_(over) {}

 protected:
  CountState initial_state() const override {
    CountState s;
    s.counts.assign(static_cast<std::size_t>(tp_.cells()), 0);
    return s;
  }

  void update(CountState& s, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Formatted f = format_batch(check_, tp_, batch, s.n, over_);
    for (const std::int64_t c : f.cells) ++s.counts[static_cast<std::size_t>(c)];
    s.n += f.samples;
  }

  /// The merged counts, checked: a state of another configuration is corrupt; no samples is an
  /// InputError.
  const PackedVector<std::int64_t>& checked(const CountState& s) const {
    if (s.counts.size() != static_cast<std::size_t>(tp_.cells()))
      tally::throw_owned<RuntimeError>(
          check_.owner(),
          fmt::format("the state has {} counts, expected {}", s.counts.size(), tp_.cells()));
    if (s.n == 0) check_.fail("no samples");
    return s.counts;
  }

  InputChecker check_;
  TaskParams tp_;
  SigmoidOver over_;
};

}  // namespace tally::classification::tm
