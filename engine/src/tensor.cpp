#include "tally/sdk/tensor.hpp"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tally {

const char* dtype_name(DType t) noexcept {
  switch (t) {
    case DType::Bool:
      return "bool";
    case DType::U8:
      return "u8";
    case DType::I8:
      return "i8";
    case DType::U16:
      return "u16";
    case DType::I16:
      return "i16";
    case DType::I32:
      return "i32";
    case DType::U32:
      return "u32";
    case DType::I64:
      return "i64";
    case DType::F32:
      return "f32";
    case DType::F64:
      return "f64";
  }
  return "?";
}

std::size_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::Bool:
    case DType::U8:
    case DType::I8:
      return 1;
    case DType::U16:
    case DType::I16:
      return 2;
    case DType::I32:
    case DType::U32:
    case DType::F32:
      return 4;
    case DType::I64:
    case DType::F64:
      return 8;
  }
  return 0;
}

namespace {
std::int64_t checked_numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0)
      throw InputError(
          fmt::format("tensor shape [{}] has a negative dimension", fmt::join(shape, ", ")));
    if (d != 0 && n > INT64_MAX / d)
      throw InputError(fmt::format("tensor shape [{}] overflows 64 bits", fmt::join(shape, ", ")));
    n *= d;
  }
  return n;
}
}  // namespace

Tensor Tensor::zeros(DType dtype, std::vector<std::int64_t> shape) {
  const auto n = checked_numel(shape);
  const std::size_t bytes = static_cast<std::size_t>(n) * dtype_size(dtype);
  // calloc: large zeroed blocks come straight from the kernel's zero pages.
  void* p = std::calloc(bytes == 0 ? 1 : bytes, 1);
  if (p == nullptr)
    throw RuntimeError(fmt::format("out of memory allocating a tensor of {} bytes", bytes));
  Tensor t;
  t.holder_ = std::shared_ptr<void>(p, std::free);
  t.data_ = p;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::view(const void* data, DType dtype, std::vector<std::int64_t> shape, Device device,
                    std::shared_ptr<const void> keepalive) {
  const auto n = checked_numel(shape);
  if (data == nullptr && n != 0) throw InputError("Tensor::view of a null pointer");
  Tensor t;
  t.holder_ = std::move(keepalive);
  // Views are read through const accessors by metrics; mutable_data on a view is the caller's
  // responsibility, as with any borrowed buffer.
  t.data_ = const_cast<void*>(data);
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.device_ = device;
  return t;
}

std::int64_t Tensor::size(std::int64_t i) const {
  const auto d = dim();
  const auto j = i < 0 ? i + d : i;
  if (j < 0 || j >= d)
    throw InputError(fmt::format("dimension {} is out of range for {}", i, describe()));
  return shape_[static_cast<std::size_t>(j)];
}

std::int64_t Tensor::numel() const noexcept {
  std::int64_t n = 1;
  for (auto d : shape_) n *= d;
  return n;
}

Tensor Tensor::slice(std::int64_t begin, std::int64_t end) const {
  if (shape_.empty()) throw InputError("cannot slice a 0-d tensor");
  if (begin < 0 || end < begin || end > shape_[0])
    throw InputError(fmt::format("slice [{}, {}) is out of range for {}", begin, end, describe()));
  std::int64_t row = 1;
  for (std::size_t i = 1; i < shape_.size(); ++i) row *= shape_[i];
  Tensor t = *this;
  t.shape_[0] = end - begin;
  t.data_ = static_cast<char*>(data_) + static_cast<std::size_t>(begin * row) * dtype_size(dtype_);
  return t;
}

Tensor Tensor::clone() const {
  if (is_cuda()) throw InputError("Tensor::clone of a CUDA tensor needs the CUDA build");
  Tensor t = zeros(dtype_, shape_);
  if (nbytes() != 0) std::memcpy(t.data_, data_, nbytes());
  return t;
}

std::string Tensor::describe() const {
  return fmt::format("{}[{}]{}", dtype_name(dtype_), fmt::join(shape_, ", "),
                     is_cuda() ? fmt::format(" on cuda:{}", device_.index) : "");
}

void Tensor::check_dtype(DType want) const {
  if (want != dtype_)
    throw InputError(fmt::format("tensor {} read as {}", describe(), dtype_name(want)));
}

}  // namespace tally
