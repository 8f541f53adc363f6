// Label formats the multi-label metrics accept, read row by row as indicator rows:
//   class ids   a dense [N] integer tensor: one class per sample;
//   indicator   a dense [N, C] integer or bool tensor of 0/1 (one-hot / multi-hot);
//   index lists a ragged field: per sample a 1-D integer tensor of class ids (may be empty,
//               repeats allowed), mmeval's "label-format" multi-label targets; or, with
//               label_format: index, a dense [N, L] integer tensor of L class ids per sample
//               (lists of equal length, which the jsonl reader gives as a dense field: read as
//               indicators they would be a silent wrong result where L = C).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/params.hpp"

namespace tally::classification {

/// Calls `f(const T* data)` for an integer or bool tensor (bool as `const bool*`).
template <class F>
decltype(auto) visit_int_or_bool(const Tensor& t, F&& f) {
  if (t.dtype() == DType::Bool) return std::forward<F>(f)(t.data_as<bool>());
  return visit_integral(t, std::forward<F>(f));
}

/// How a dense [N, L] integer field of labels is read (the metrics' `label_format`): as 0/1
/// indicators of L = C classes (mmeval's one-hot format), or as L class ids per sample.
enum class DenseLabels { Indicator, ClassIds };

/// The `label_format` parameter of the multi-label metrics, and its value.
inline ParamSpec label_format_param() {
  return param("label_format", ParamType::String,
               "How a dense [N, L] integer label field is read: onehot, 0/1 per class (L = the "
               "number of classes); index, L class ids per sample (lists of class ids that all "
               "have the same length, as the jsonl reader makes them a dense field). Ragged "
               "lists and [N] class ids are read as such either way.")
      .def("onehot")
      .choices({"onehot", "index"});
}
inline DenseLabels label_format_of(const Params& p) {
  return p.get_string("label_format") == "index" ? DenseLabels::ClassIds : DenseLabels::Indicator;
}

class LabelRows {
 public:
  enum class Kind { ClassIds, Indicator, IndexLists, DenseIndexLists };

  /// The number of columns the field implies: C for a dense [N, C] indicator field, -1 otherwise
  /// (also when the field is missing or of another shape; read() reports those).
  static std::int64_t implied_classes(const Batch& batch, const char* field,
                                      DenseLabels dense = DenseLabels::Indicator) {
    if (dense == DenseLabels::ClassIds) return -1;
    if (!batch.has(field) || batch.is_ragged(field)) return -1;
    const Tensor& t = batch.tensor(field);
    return t.dim() == 2 ? t.size(1) : -1;
  }

  /// Reads and checks `field` of `batch` for `classes` classes. `first_sample` numbers samples in
  /// messages. InputError for a missing field, a wrong dtype or shape, an id outside
  /// [0, classes), an indicator value other than 0 or 1.
  static LabelRows read(const Batch& batch, const char* field, std::int64_t classes,
                        const InputChecker& check, std::int64_t first_sample,
                        DenseLabels dense = DenseLabels::Indicator) {
    LabelRows r;
    r.classes_ = classes;
    if (batch.has(field) && batch.is_ragged(field)) {
      r.kind_ = Kind::IndexLists;
      r.lists_ = &batch.ragged(field);
      for (std::size_t i = 0; i < r.lists_->size(); ++i) {
        const Tensor& t = (*r.lists_)[i];
        const std::string sample = "sample " + std::to_string(first_sample + std::int64_t(i));
        if (t.is_cuda()) check.fail(field, sample + ": is a CUDA tensor; expected a CPU tensor");
        if (!is_integral(t.dtype()) || t.dim() > 1)
          check.fail(field,
                     sample + ": expected a 1-D integer list of class ids, got " + t.describe());
        visit_integral(t, [&](const auto* ids) {
          for (std::int64_t k = 0; k < t.numel(); ++k) {
            const auto id = static_cast<std::int64_t>(ids[k]);
            if (id < 0 || id >= classes)
              check.fail(field, sample + ": class id " + std::to_string(id) + " is outside [0, " +
                                    std::to_string(classes) + ")");
          }
        });
      }
      return r;
    }
    const Tensor& t = check.tensor(batch, field);
    r.dense_ = &t;
    if (t.dim() == 1) {
      if (!is_integral(t.dtype()))
        check.fail(field, "must hold integer class ids [N] or a 0/1 indicator [N, C], got " +
                              t.describe());
      check.check_class_ids(t, field, classes, first_sample);
      r.kind_ = Kind::ClassIds;
      return r;
    }
    if (t.dim() != 2 || !(is_integral(t.dtype()) || t.dtype() == DType::Bool))
      check.fail(field,
                 "must be integer class ids [N], a 0/1 indicator [N, C] (integer or "
                 "bool) or per-sample lists of class ids, got " +
                     t.describe());
    if (dense == DenseLabels::ClassIds) {
      if (!is_integral(t.dtype()))
        check.fail(field,
                   "must hold integer class ids with label_format: index, got " + t.describe());
      visit_integral(t, [&](const auto* ids) {
        const std::int64_t per = t.size(1);
        for (std::int64_t k = 0; k < t.numel(); ++k) {
          const auto id = static_cast<std::int64_t>(ids[k]);
          if (id < 0 || id >= classes)
            check.fail(field, "sample " + std::to_string(first_sample + k / per) + ": class id " +
                                  std::to_string(id) + " is outside [0, " +
                                  std::to_string(classes) + ")");
        }
      });
      r.kind_ = Kind::DenseIndexLists;
      return r;
    }
    if (t.size(1) != classes)
      check.fail(field, "has " + std::to_string(t.size(1)) + " columns, expected " +
                            std::to_string(classes) + " classes (" + t.describe() + ")");
    visit_int_or_bool(t, [&](const auto* v) {
      const std::int64_t n = t.numel();
      for (std::int64_t k = 0; k < n; ++k) {
        const auto x = static_cast<std::int64_t>(v[k]);
        if (x != 0 && x != 1)
          check.fail(field, "sample " + std::to_string(first_sample + k / classes) +
                                ": indicator of class " + std::to_string(k % classes) + " is " +
                                std::to_string(x) + ", expected 0 or 1");
      }
    });
    r.kind_ = Kind::Indicator;
    return r;
  }

  Kind kind() const { return kind_; }
  std::int64_t rows() const {
    return kind_ == Kind::IndexLists ? static_cast<std::int64_t>(lists_->size()) : dense_->size(0);
  }

  /// Writes row i as C bytes of 0/1.
  void fill(std::int64_t i, std::uint8_t* row) const {
    const auto c = static_cast<std::size_t>(classes_);
    switch (kind_) {
      case Kind::ClassIds:
        std::memset(row, 0, c);
        visit_integral(*dense_,
                       [&](const auto* ids) { row[static_cast<std::size_t>(ids[i])] = 1; });
        break;
      case Kind::Indicator:
        visit_int_or_bool(*dense_, [&](const auto* v) {
          const auto* src = v + i * classes_;
          for (std::size_t k = 0; k < c; ++k) row[k] = static_cast<std::uint8_t>(src[k] != 0);
        });
        break;
      case Kind::DenseIndexLists: {
        std::memset(row, 0, c);
        const std::int64_t per = dense_->size(1);
        visit_integral(*dense_, [&](const auto* ids) {
          for (std::int64_t k = 0; k < per; ++k)
            row[static_cast<std::size_t>(ids[i * per + k])] = 1;
        });
        break;
      }
      case Kind::IndexLists: {
        std::memset(row, 0, c);
        const Tensor& t = (*lists_)[static_cast<std::size_t>(i)];
        visit_integral(t, [&](const auto* ids) {
          for (std::int64_t k = 0; k < t.numel(); ++k) row[static_cast<std::size_t>(ids[k])] = 1;
        });
        break;
      }
    }
  }

 private:
  Kind kind_ = Kind::ClassIds;
  std::int64_t classes_ = 0;
  const Tensor* dense_ = nullptr;
  const Batch::Ragged* lists_ = nullptr;
};

}  // namespace tally::classification
