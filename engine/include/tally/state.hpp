// State helpers for metrics. Large numeric state travels between ranks as raw little-endian bytes
// in one msgpack `bin` (DESIGN.md, "The sync protocol"): unpacking is a memcpy, not a per-element
// decode. Small scalar state may use plain msgpack types.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include <msgpack.hpp>

namespace tally {

/// A std::vector of trivially copyable numbers that packs as one msgpack `bin`.
template <class T>
struct PackedVector : std::vector<T> {
  static_assert(std::is_trivially_copyable_v<T> && std::is_arithmetic_v<T>,
                "PackedVector holds plain numbers");
  using std::vector<T>::vector;
  PackedVector() = default;
  explicit PackedVector(std::vector<T> v) : std::vector<T>(std::move(v)) {}
};

}  // namespace tally

namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {

  template <class T>
  struct pack<tally::PackedVector<T>> {
    template <class Stream>
    packer<Stream>& operator()(packer<Stream>& o, const tally::PackedVector<T>& v) const {
      static_assert(std::endian::native == std::endian::little, "tally packs state little-endian");
      const auto bytes = v.size() * sizeof(T);
      if (bytes > UINT32_MAX) throw msgpack::container_size_overflow("PackedVector over 4 GiB");
      o.pack_bin(static_cast<uint32_t>(bytes));
      o.pack_bin_body(reinterpret_cast<const char*>(v.data()), static_cast<uint32_t>(bytes));
      return o;
    }
  };

  template <class T>
  struct convert<tally::PackedVector<T>> {
    const msgpack::object& operator()(const msgpack::object& o, tally::PackedVector<T>& v) const {
      // A length that is not a whole number of elements is a corrupt payload, not a truncation.
      if (o.type != type::BIN || o.via.bin.size % sizeof(T) != 0) throw msgpack::type_error();
      v.resize(o.via.bin.size / sizeof(T));
      if (o.via.bin.size != 0) std::memcpy(v.data(), o.via.bin.ptr, o.via.bin.size);
      return o;
    }
  };

  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE
}  // namespace msgpack
