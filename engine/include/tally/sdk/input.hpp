// Input checks for metric plugins: fetch a batch field and check its device, dtype, shape and
// values, with one-line InputErrors that name the metric, the field and, for bad values, the
// sample:
//
//   metric 'Accuracy': field 'gt_labels' sample 17: class id 12 is outside [0, 10)
//   metric 'Accuracy': field 'pred_scores' has 99 rows, 'gt_labels' has 100
//
// Header-only (inline functions and templates): it adds nothing to libtally's ABI.
//
//   tally::InputChecker check{params.owner()};            // "metric 'top5' (Accuracy)"
//   const tally::Tensor& s = check.scores(batch, "pred_scores", seen);
//   const tally::Tensor& y = check.labels(batch, "gt_labels", s.size(1), seen);
//   check.same_rows(s, "pred_scores", y, "gt_labels");
//   tally::visit_floating(s, [&](const auto* scores) {
//     tally::visit_integral(y, [&](const auto* labels) { ... });
//   });
//
// Sample numbers in messages are `first_sample` + the row in the batch: a metric passes the
// number of samples it has already seen on this rank, so the number points into the rank's shard.
// When the engine reads the shards (Evaluator::read_all), it adds the shard's first index to every
// "sample N" of a message from add(): the message names the sample's index in the dataset.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/tensor.hpp"

namespace tally {

namespace detail {

/// Whether xs[0, n) holds a NaN (x != x only for NaN). For float, blocks of 16 independent
/// compares with no exit inside a block: GCC vectorises them at -O2, where a plain
/// `any |= x != x` loop stays scalar. For double on baseline x86-64 GCC vectorises neither form,
/// and the plain loop is the faster scalar code.
template <class T>
inline bool any_nan(const T* xs, std::int64_t n) {
  std::int64_t i = 0;
  if constexpr (sizeof(T) == 4) {
    constexpr std::int64_t kBlock = 16;
    for (; i + kBlock <= n; i += kBlock) {
      std::int32_t m[kBlock];
      for (std::int64_t j = 0; j < kBlock; ++j) m[j] = xs[i + j] != xs[i + j] ? -1 : 0;
      std::int32_t any = 0;
      for (std::int64_t j = 0; j < kBlock; ++j) any |= m[j];
      if (any != 0) return true;
    }
  }
  bool nan = false;
  for (; i < n; ++i) nan |= xs[i] != xs[i];
  return nan;
}

}  // namespace detail

/// Calls `f(const T* data)` with the data of an integer tensor (U8, I8, U16, I16, I32, U32, I64),
/// T being its element type. Throws InputError for other dtypes; prefer InputChecker::labels()
/// for a message that names the metric and the field.
template <class F>
decltype(auto) visit_integral(const Tensor& t, F&& f) {
  switch (t.dtype()) {
    case DType::U8:
      return std::forward<F>(f)(t.data_as<std::uint8_t>());
    case DType::I8:
      return std::forward<F>(f)(t.data_as<std::int8_t>());
    case DType::U16:
      return std::forward<F>(f)(t.data_as<std::uint16_t>());
    case DType::I16:
      return std::forward<F>(f)(t.data_as<std::int16_t>());
    case DType::I32:
      return std::forward<F>(f)(t.data_as<std::int32_t>());
    case DType::U32:
      return std::forward<F>(f)(t.data_as<std::uint32_t>());
    case DType::I64:
      return std::forward<F>(f)(t.data_as<std::int64_t>());
    default:
      break;
  }
  throw InputError(std::string("expected an integer tensor, got ") + t.describe());
}

/// Calls `f(const T* data)` with the data of an F32 or F64 tensor.
template <class F>
decltype(auto) visit_floating(const Tensor& t, F&& f) {
  switch (t.dtype()) {
    case DType::F32:
      return std::forward<F>(f)(t.data_as<float>());
    case DType::F64:
      return std::forward<F>(f)(t.data_as<double>());
    default:
      break;
  }
  throw InputError(std::string("expected a float32 or float64 tensor, got ") + t.describe());
}

/// Throws E ("<owner>: <message>") with `owner` in its context: the message names its component,
/// so the engine does not name it again.
template <class E>
[[noreturn]] void throw_owned(const std::string& owner, std::string_view message) {
  throw E(owner + ": " + std::string(message), ErrorContext{.owner = owner});
}

/// Checks the inputs of one component and words its errors. `owner` is Params::owner(), e.g.
/// "metric 'prf' (SingleLabelMetric)"; messages are "<owner>: field '<name>' ...".
class InputChecker {
 public:
  InputChecker() = default;
  explicit InputChecker(std::string owner) : owner_(std::move(owner)) {}

  const std::string& owner() const noexcept { return owner_; }

  /// InputError "<owner>: <message>".
  [[noreturn]] void fail(std::string_view message) const {
    throw InputError(owner_ + ": " + std::string(message), ErrorContext{.owner = owner_});
  }
  /// InputError "<owner>: field '<field>' <message>".
  [[noreturn]] void fail(std::string_view field, std::string_view message) const {
    throw InputError(owner_ + ": field '" + std::string(field) + "' " + std::string(message),
                     ErrorContext{.owner = owner_, .field = std::string(field)});
  }
  /// RuntimeError "<owner>: <message>" (a state no run can have made, a library that failed).
  [[noreturn]] void fail_runtime(std::string_view message) const {
    throw_owned<RuntimeError>(owner_, message);
  }
  /// ConfigError "<owner>: <message>" (parameters that do not go together).
  [[noreturn]] void fail_config(std::string_view message) const {
    throw_owned<ConfigError>(owner_, message);
  }

  /// The dense field `field` of `batch`. InputError when it is missing (listing the fields the
  /// batch has), ragged, or on a GPU.
  const Tensor& tensor(const Batch& batch, std::string_view field) const {
    if (!batch.has(field)) {
      std::string have;
      for (const auto& [name, value] : batch.fields()) {
        (void)value;
        have += (have.empty() ? "" : ", ") + name;
      }
      fail(field,
           "is missing from the batch (it has: " + (have.empty() ? "no fields" : have) + ")");
    }
    if (batch.is_ragged(field)) fail(field, "must be a dense tensor, got a ragged field");
    const Tensor& t = batch.tensor(field);
    if (t.is_cuda())
      fail(field, "is a CUDA tensor (" + t.describe() +
                      "); GPU tensors need the CUDA build of this plugin");
    return t;
  }

  /// InputError unless `t` has `want` dimensions; `layout` names them for the message ("[N, C]").
  void dims(const Tensor& t, std::string_view field, std::int64_t want,
            std::string_view layout) const {
    if (t.dim() != want)
      fail(field, "must be " + std::to_string(want) + "-D " + std::string(layout) + ", got " +
                      t.describe());
  }

  /// InputError unless the two tensors have the same number of rows (leading dimension).
  void same_rows(const Tensor& a, std::string_view field_a, const Tensor& b,
                 std::string_view field_b) const {
    const std::int64_t na = a.dim() > 0 ? a.size(0) : 0;
    const std::int64_t nb = b.dim() > 0 ? b.size(0) : 0;
    if (na != nb)
      fail(field_a, "has " + std::to_string(na) + " rows, '" + std::string(field_b) + "' has " +
                        std::to_string(nb));
  }

  /// The field `field` as class ids: a 1-D [N] tensor of any integer dtype whose values lie in
  /// [0, num_classes); num_classes < 0 means no upper bound (the ids must still be >= 0).
  const Tensor& labels(const Batch& batch, std::string_view field, std::int64_t num_classes,
                       std::int64_t first_sample = 0) const {
    const Tensor& t = tensor(batch, field);
    if (!is_integral(t.dtype())) fail(field, "must hold integer class ids, got " + t.describe());
    dims(t, field, 1, "[N]");
    check_class_ids(t, field, num_classes, first_sample);
    return t;
  }

  /// InputError naming the first id of the integer tensor `t` outside [0, num_classes)
  /// (num_classes < 0: outside [0, inf)).
  void check_class_ids(const Tensor& t, std::string_view field, std::int64_t num_classes,
                       std::int64_t first_sample = 0) const {
    const std::int64_t n = t.numel();
    // An unsigned comparison folds both bounds into one: a negative id becomes huge.
    const auto limit = static_cast<std::uint64_t>(num_classes < 0 ? INT64_MAX : num_classes);
    visit_integral(t, [&](const auto* ids) {
      bool bad = false;
      for (std::int64_t i = 0; i < n; ++i)
        bad |= static_cast<std::uint64_t>(static_cast<std::int64_t>(ids[i])) >= limit;
      if (!bad) return;
      for (std::int64_t i = 0; i < n; ++i) {
        const auto id = static_cast<std::int64_t>(ids[i]);
        if (static_cast<std::uint64_t>(id) < limit) continue;
        fail(field, "sample " + std::to_string(first_sample + i) + ": class id " +
                        std::to_string(id) + " is outside [0, " +
                        (num_classes < 0 ? std::string("inf") : std::to_string(num_classes)) + ")");
      }
    });
  }

  /// The field `field` as class scores: a 2-D [N, C] float32 or float64 tensor with no NaN
  /// (infinities are allowed: a masked logit is -inf).
  const Tensor& scores(const Batch& batch, std::string_view field,
                       std::int64_t first_sample = 0) const {
    const Tensor& t = score_matrix(batch, field);
    check_no_nan(t, field, first_sample);
    return t;
  }

  /// As scores() without the NaN check, for a kernel that checks for NaN in its own pass over
  /// the scores (one read of them instead of two) and calls check_no_nan() when it finds one.
  const Tensor& score_matrix(const Batch& batch, std::string_view field) const {
    const Tensor& t = tensor(batch, field);
    if (!is_floating(t.dtype()))
      fail(field, "must hold float32 or float64 scores, got " + t.describe());
    dims(t, field, 2, "[N, C]");
    return t;
  }

  /// InputError naming the first NaN of the float tensor `t` (row = sample, column = class).
  void check_no_nan(const Tensor& t, std::string_view field, std::int64_t first_sample = 0) const {
    const std::int64_t n = t.numel();
    const std::int64_t cols = t.dim() >= 2 ? t.numel() / std::max<std::int64_t>(t.size(0), 1) : 1;
    visit_floating(t, [&](const auto* xs) {
      if (!detail::any_nan(xs, n)) return;
      for (std::int64_t i = 0; i < n; ++i) {
        if (!std::isnan(xs[i])) continue;
        fail(field, "sample " + std::to_string(first_sample + i / cols) +
                        (t.dim() >= 2 ? ": score of class " + std::to_string(i % cols)
                                      : std::string(": score")) +
                        " is NaN");
      }
    });
  }

 private:
  std::string owner_;
};

/// A field read one tensor per sample (an image's boxes, scores, labels, masks): ragged (one
/// tensor per sample) or dense [N, ...], whose sample i is the [...] tensor of row i. Whether a
/// reader makes a field ragged or dense can depend on the data (the jsonl reader makes a field
/// dense when every line has the same shape, as a detector capped at K boxes gives), so a metric
/// that reads one tensor per sample reads it through this class and gets the same tensors either
/// way. A dense sample is a view that keeps the field's memory alive.
class PerSample {
 public:
  PerSample() = default;
  /// The field `field` of `batch`: InputError (naming the owner and the field) when it is
  /// missing, a text field, or a dense tensor with no sample dimension.
  PerSample(const Batch& batch, std::string_view field, const InputChecker& check) {
    if (!batch.has(field)) (void)check.tensor(batch, field);  // the "is missing" message
    if (batch.is_text(field))
      check.fail(field, "must hold one tensor per sample, got a text field (strings)");
    if (batch.is_ragged(field)) {
      ragged_ = &batch.ragged(field);
      size_ = static_cast<std::int64_t>(ragged_->size());
      return;
    }
    const Tensor& t = batch.tensor(field);
    if (t.dim() < 1) check.fail(field, "must have a leading sample dimension, got " + t.describe());
    dense_ = std::make_shared<const Tensor>(t);
    size_ = t.size(0);
    row_shape_.assign(t.shape().begin() + 1, t.shape().end());
    row_bytes_ = dtype_size(t.dtype());
    for (const auto d : row_shape_) row_bytes_ *= static_cast<std::size_t>(d);
  }

  /// The field `field` when the batch has it, else an empty optional.
  static std::optional<PerSample> if_present(const Batch& batch, std::string_view field,
                                             const InputChecker& check) {
    if (!batch.has(field)) return std::nullopt;
    return PerSample(batch, field, check);
  }

  std::int64_t size() const noexcept { return size_; }
  bool is_ragged() const noexcept { return ragged_ != nullptr; }

  /// Sample i (0 <= i < size(); unchecked).
  Tensor operator[](std::int64_t i) const {
    if (ragged_ != nullptr) return (*ragged_)[static_cast<std::size_t>(i)];
    const auto* base = static_cast<const char*>(dense_->data());
    return Tensor::view(base + static_cast<std::size_t>(i) * row_bytes_, dense_->dtype(),
                        row_shape_, dense_->device(), dense_);
  }
  Tensor operator[](std::size_t i) const { return (*this)[static_cast<std::int64_t>(i)]; }

 private:
  const Batch::Ragged* ragged_ = nullptr;
  std::shared_ptr<const Tensor> dense_;
  std::vector<std::int64_t> row_shape_;
  std::size_t row_bytes_ = 0;
  std::int64_t size_ = 0;
};

}  // namespace tally
