// Pieces the nominal-association metrics share: the contingency table of two categorical series
// (torchmetrics' confmat: rows = target, columns = preds), read from [N] class ids or [N, C]
// scores (argmax) with torchmetrics' NaN handling, and the chi-squared statistic of the table
// (torchmetrics.functional.nominal.utils), computed in float64 from exact int64 counts.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"

namespace tally::nominal {

inline constexpr const char* kPreds = "preds";
inline constexpr const char* kTarget = "target";
inline constexpr const char* kRatings = "ratings";

/// The table is num_classes^2 int64 counts, summed across ranks: 2048 classes is 32 MiB.
inline constexpr std::int64_t kMaxClasses = 2048;

// ---- parameters and inputs ----------------------------------------------------------------------

inline ParamSpec num_classes_param() {
  return param("num_classes", ParamType::Int,
               "Number of categories of preds and target (torchmetrics' num_classes): class ids "
               "lie in [0, num_classes); the state is a num_classes x num_classes table (at most "
               "2048).");
}
inline ParamSpec bias_correction_param() {
  return param("bias_correction", ParamType::Bool,
               "Bergsma's bias correction of phi^2 and of the table's dimensions (and Yates' "
               "continuity correction of a 2x2 table), as torchmetrics.")
      .def(true);
}
inline std::vector<ParamSpec> nan_params() {
  return {param("nan_strategy", ParamType::String,
                "What a NaN in float preds/target means: replace (by nan_replace_value) or drop "
                "(the sample).")
              .def("replace")
              .choices({"replace", "drop"}),
          param("nan_replace_value", ParamType::Float,
                "The class id a NaN stands for when nan_strategy is replace (truncated to an "
                "integer, as torchmetrics' .long()).")
              .def(0.0)};
}

/// The parameters of an association of two series (CramersV, TschuprowsT,
/// PearsonsContingencyCoefficient, TheilsU): num_classes, bias_correction where the metric has
/// it, and the NaN handling.
struct AssociationParams {
  bool bias_correction = false;  // the metric offers bias_correction
};
inline std::vector<ParamSpec> association_params(AssociationParams what = {}) {
  std::vector<ParamSpec> out{num_classes_param()};
  if (what.bias_correction) out.push_back(bias_correction_param());
  for (auto& p : nan_params()) out.push_back(std::move(p));
  return out;
}
inline std::vector<InputSpec> pair_inputs() {
  return {InputSpec{kPreds,
                    "First categorical series: [N] class ids (integer, or float with NaN handled "
                    "by nan_strategy; floats are truncated) or [N, C] scores (argmax).",
                    true},
          InputSpec{kTarget, "Second categorical series (table rows), as preds.", true}};
}

// ---- the contingency table
// ------------------------------------------------------------------------

/// counts[target * K + preds], summed across ranks (exact; its size is fixed by num_classes).
struct TableState {
  PackedVector<std::int64_t> counts;
  TALLY_STATE(sum(counts))
};

/// The class ids of one categorical input, one per sample, -1 for a sample dropped (a NaN under
/// nan_strategy drop).
inline void read_categories(const InputChecker& check, const Tensor& t, const char* field,
                            std::int64_t num_classes, bool drop_nan, double nan_value,
                            std::int64_t first, std::vector<std::int64_t>& out) {
  if (t.dim() != 1 && t.dim() != 2)
    check.fail(field, "must be [N] class ids or [N, C] scores, got " + t.describe());
  const std::int64_t n = t.size(0);
  out.assign(static_cast<std::size_t>(n), 0);
  const auto bad_id = [&](std::int64_t i, const std::string& what) {
    check.fail(field, "sample " + std::to_string(first + i) + ": " + what + " is outside [0, " +
                          std::to_string(num_classes) + ")");
  };
  if (t.dim() == 2) {
    // torch.argmax(1): the first of equal maxima.
    const std::int64_t c = t.size(1);
    if (c < 1) check.fail(field, "has no columns (" + t.describe() + ")");
    const auto argmax = [&](const auto* v) {
      for (std::int64_t i = 0; i < n; ++i) {
        const auto* row = v + i * c;
        std::int64_t best = 0;
        for (std::int64_t j = 1; j < c; ++j)
          if (row[j] > row[best]) best = j;
        if (best >= num_classes) bad_id(i, "the argmax " + std::to_string(best));
        out[static_cast<std::size_t>(i)] = best;
      }
    };
    if (is_floating(t.dtype())) {
      check.check_no_nan(t, field, first);
      visit_floating(t, argmax);
    } else if (is_integral(t.dtype())) {
      visit_integral(t, argmax);
    } else {
      check.fail(field, "must hold numbers, got " + t.describe());
    }
    return;
  }
  if (is_integral(t.dtype())) {
    check.check_class_ids(t, field, num_classes, first);
    visit_integral(t, [&](const auto* v) {
      for (std::int64_t i = 0; i < n; ++i)
        out[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(v[i]);
    });
    return;
  }
  if (!is_floating(t.dtype()))
    check.fail(field, "must hold class ids (integer or float), got " + t.describe());
  visit_floating(t, [&](const auto* v) {
    for (std::int64_t i = 0; i < n; ++i) {
      double x = static_cast<double>(v[i]);
      if (std::isnan(x)) {
        if (drop_nan) {
          out[static_cast<std::size_t>(i)] = -1;
          continue;
        }
        x = nan_value;
      }
      // torch's .long() truncates toward zero; its result for values past int64 is undefined,
      // so those are errors here.
      const double id = std::trunc(x);
      if (!(id >= 0.0 && id < static_cast<double>(num_classes)))
        bad_id(i, (std::isnan(static_cast<double>(v[i])) ? "NaN, replaced by " : "class id ") +
                      std::to_string(x));
      out[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(id);
    }
  });
}

/// The metrics of two categorical series over a contingency table; Derived::value(table) gives
/// the number, stored under `key`.
class TableMetric : public TypedMetric<TableState> {
 public:
  TableMetric(const Params& p, const char* type, std::string key)
      : check_(p.owner_or(type)),
        key_(std::move(key)),
        k_(p.get_size("num_classes", 1, kMaxClasses,
                      "the state is a num_classes x num_classes table of counts")),
        drop_(p.get_string("nan_strategy") == "drop"),
        nan_value_(p.get_double("nan_replace_value")) {}

 protected:
  TableState initial_state() const override {
    TableState s;
    s.counts.assign(static_cast<std::size_t>(k_ * k_), 0);
    return s;
  }

  void update(TableState& s, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Tensor& p = check_.tensor(batch, kPreds);
    const Tensor& t = check_.tensor(batch, kTarget);
    check_.same_rows(p, kPreds, t, kTarget);
    read_categories(check_, p, kPreds, k_, drop_, nan_value_, seen_, preds_);
    read_categories(check_, t, kTarget, k_, drop_, nan_value_, seen_, target_);
    if (s.counts.size() != static_cast<std::size_t>(k_ * k_))
      check_.fail_runtime(std::string("the restored state is corrupt: ") +
                          std::to_string(s.counts.size()) + " counts, expected " +
                          std::to_string(k_ * k_));
    for (std::size_t i = 0; i < preds_.size(); ++i)
      if (preds_[i] >= 0 && target_[i] >= 0)
        ++s.counts[static_cast<std::size_t>(target_[i] * k_ + preds_[i])];
    seen_ += static_cast<std::int64_t>(preds_.size());
  }

  Value compute(const TableState& s) const override {
    if (s.counts.size() != static_cast<std::size_t>(k_ * k_))
      check_.fail_runtime(std::string("the state is corrupt"));
    Value out = Value::map();
    out.set(key_, value(s.counts));
    return out;
  }

  virtual double value(const PackedVector<std::int64_t>& counts) const = 0;

  InputChecker check_;
  std::string key_;
  std::int64_t k_;
  bool drop_;
  double nan_value_;
  std::int64_t seen_ = 0;  // samples of this rank so far, for messages
  std::vector<std::int64_t> preds_, target_;
};

/// The table without its empty rows and columns (torchmetrics' _drop_empty_rows_and_cols), as
/// float64 (exact: counts under 2^53), rows x cols, row-major.
struct Table {
  std::int64_t rows = 0, cols = 0;
  std::vector<double> obs, row_sums, col_sums;
  double total = 0;
};

inline Table nonempty_table(const PackedVector<std::int64_t>& counts, std::int64_t k) {
  std::vector<std::int64_t> rs(static_cast<std::size_t>(k), 0), cs(static_cast<std::size_t>(k), 0);
  for (std::int64_t r = 0; r < k; ++r)
    for (std::int64_t c = 0; c < k; ++c) {
      const std::int64_t v = counts[static_cast<std::size_t>(r * k + c)];
      rs[static_cast<std::size_t>(r)] += v;
      cs[static_cast<std::size_t>(c)] += v;
    }
  std::vector<std::int64_t> keep_r, keep_c;
  for (std::int64_t i = 0; i < k; ++i) {
    if (rs[static_cast<std::size_t>(i)] != 0) keep_r.push_back(i);
    if (cs[static_cast<std::size_t>(i)] != 0) keep_c.push_back(i);
  }
  Table t;
  t.rows = static_cast<std::int64_t>(keep_r.size());
  t.cols = static_cast<std::int64_t>(keep_c.size());
  std::int64_t total = 0;
  for (const std::int64_t r : keep_r) {
    t.row_sums.push_back(static_cast<double>(rs[static_cast<std::size_t>(r)]));
    total += rs[static_cast<std::size_t>(r)];
    for (const std::int64_t c : keep_c)
      t.obs.push_back(static_cast<double>(counts[static_cast<std::size_t>(r * k + c)]));
  }
  for (const std::int64_t c : keep_c)
    t.col_sums.push_back(static_cast<double>(cs[static_cast<std::size_t>(c)]));
  t.total = static_cast<double>(total);
  return t;
}

/// Pearson's chi-squared statistic of independence of a table without empty rows or columns
/// (torchmetrics' _compute_chi_squared): sum (n_rc - e_rc)^2 / e_rc, e_rc = n_r. n_.c / n; 0 when
/// the degrees of freedom (r - 1)(c - 1) are 0; with bias_correction and one degree of freedom,
/// Yates' correction (each n_rc moved 0.5 towards e_rc).
inline double chi_squared(const Table& t, bool bias_correction) {
  // torchmetrics' df = numel - sum(shape) + ndim - 1: 1 for the empty table.
  const std::int64_t df = t.rows * t.cols - (t.rows + t.cols) + 1;
  if (df == 0) return 0.0;
  double chi2 = 0.0;
  for (std::int64_t r = 0; r < t.rows; ++r)
    for (std::int64_t c = 0; c < t.cols; ++c) {
      const double e = t.row_sums[static_cast<std::size_t>(r)] *
                       t.col_sums[static_cast<std::size_t>(c)] / t.total;
      double o = t.obs[static_cast<std::size_t>(r * t.cols + c)];
      if (df == 1 && bias_correction) {
        const double diff = e - o;
        o += diff > 0 ? 0.5 : (diff < 0 ? -0.5 : 0.0);
      }
      chi2 += (o - e) * (o - e) / e;
    }
  return chi2;
}

/// torch.max / torch.min of two numbers: NaN if either is NaN.
inline double nan_max(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? a + b : std::max(a, b);
}
inline double nan_min(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? a + b : std::min(a, b);
}
/// torch.clamp(x, 0, 1): NaN stays NaN.
inline double clamp01(double x) { return std::isnan(x) ? x : std::clamp(x, 0.0, 1.0); }

/// Bergsma's bias-corrected phi^2 and table dimensions (torchmetrics'
/// _compute_bias_corrected_values).
struct Corrected {
  double phi2, rows, cols;
};
inline Corrected bias_corrected(double phi2, std::int64_t rows, std::int64_t cols, double n) {
  const auto r = static_cast<double>(rows), c = static_cast<double>(cols);
  return {nan_max(0.0, phi2 - (r - 1) * (c - 1) / (n - 1)), r - (r - 1) * (r - 1) / (n - 1),
          c - (c - 1) * (c - 1) / (n - 1)};
}

}  // namespace tally::nominal
