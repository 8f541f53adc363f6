// Tensor: a dtype, a shape and contiguous (C-order) memory on the CPU or a CUDA device.
// A tensor either owns its memory or is a view that keeps its owner alive through `keepalive`
// (a memory-mapped file, a caller's buffer, a libtorch tensor). Copying a Tensor is cheap: it
// shares the memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "tally/sdk/error.hpp"
#include "tally/sdk/export.hpp"

namespace tally {

enum class DType : std::uint8_t { Bool, U8, I8, U16, I16, I32, U32, I64, F32, F64 };

TALLY_API const char* dtype_name(DType t) noexcept;
TALLY_API std::size_t dtype_size(DType t) noexcept;
inline bool is_floating(DType t) noexcept { return t == DType::F32 || t == DType::F64; }
inline bool is_integral(DType t) noexcept { return !is_floating(t) && t != DType::Bool; }

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, bool>)
    return DType::Bool;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return DType::U8;
  else if constexpr (std::is_same_v<T, std::int8_t>)
    return DType::I8;
  else if constexpr (std::is_same_v<T, std::uint16_t>)
    return DType::U16;
  else if constexpr (std::is_same_v<T, std::int16_t>)
    return DType::I16;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return DType::I32;
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return DType::U32;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return DType::I64;
  else if constexpr (std::is_same_v<T, float>)
    return DType::F32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::F64;
  else
    static_assert(sizeof(T) == 0, "tally::dtype_of: unsupported element type");
}

enum class DeviceType : std::uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  static Device cpu() { return {}; }
  static Device cuda(int index) { return {DeviceType::CUDA, index}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  friend bool operator==(const Device&, const Device&) = default;
};

class TALLY_API Tensor {
 public:
  Tensor() = default;

  /// A new CPU tensor that owns zero-initialised memory.
  static Tensor zeros(DType dtype, std::vector<std::int64_t> shape);
  /// A view of memory owned elsewhere; `keepalive` (may be null) is held as long as the view lives.
  static Tensor view(const void* data, DType dtype, std::vector<std::int64_t> shape,
                     Device device = Device::cpu(), std::shared_ptr<const void> keepalive = {});
  /// A CPU tensor that owns a copy of `values`; `shape` defaults to {values.size()}.
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, std::vector<std::int64_t> shape = {}) {
    if (shape.empty()) shape = {static_cast<std::int64_t>(values.size())};
    Tensor t = zeros(dtype_of<T>(), std::move(shape));
    if (t.numel() != static_cast<std::int64_t>(values.size()))
      throw InputError("Tensor::from_vector: shape does not match the number of values");
    if constexpr (std::is_same_v<T, bool>) {
      auto* out = static_cast<bool*>(t.data_);
      for (std::size_t i = 0; i < values.size(); ++i) out[i] = values[i];
    } else if (!values.empty()) {
      std::memcpy(t.data_, values.data(), values.size() * sizeof(T));
    }
    return t;
  }

  bool defined() const noexcept { return data_ != nullptr || !shape_.empty(); }
  DType dtype() const noexcept { return dtype_; }
  const std::vector<std::int64_t>& shape() const noexcept { return shape_; }
  std::int64_t dim() const noexcept { return static_cast<std::int64_t>(shape_.size()); }
  /// Size of dimension i; negative i counts from the end.
  std::int64_t size(std::int64_t i) const;
  std::int64_t numel() const noexcept;
  std::size_t nbytes() const noexcept {
    return static_cast<std::size_t>(numel()) * dtype_size(dtype_);
  }
  Device device() const noexcept { return device_; }
  bool is_cuda() const noexcept { return device_.is_cuda(); }

  const void* data() const noexcept { return data_; }
  void* mutable_data() noexcept { return data_; }
  /// Typed pointer; throws InputError when T does not match the dtype.
  template <class T>
  const T* data_as() const {
    check_dtype(dtype_of<T>());
    return static_cast<const T*>(data_);
  }
  template <class T>
  T* mutable_data_as() {
    check_dtype(dtype_of<T>());
    return static_cast<T*>(data_);
  }

  /// A view of rows [begin, end) of the leading dimension.
  Tensor slice(std::int64_t begin, std::int64_t end) const;
  /// A CPU tensor owning a copy of this one's bytes (CPU tensors only).
  Tensor clone() const;
  /// "f32[128, 10]"
  std::string describe() const;

 private:
  void check_dtype(DType want) const;

  std::shared_ptr<const void> holder_;
  void* data_ = nullptr;
  DType dtype_ = DType::F32;
  std::vector<std::int64_t> shape_;
  Device device_;
};

}  // namespace tally
