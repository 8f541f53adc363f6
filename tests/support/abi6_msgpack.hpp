// The msgpack-c adaptor that ABI 6's tally/state.hpp defined for PackedVector (one bin of its
// little-endian values), kept here so that tests can write states in the layout of before ABI 7
// with msgpack-c itself and check that ABI 7's StateWriter writes, and StateReader reads, the same
// bytes. The SDK has no msgpack adaptor any more (docs/abi.md).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include <msgpack.hpp>

#include "tally/sdk/state.hpp"

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
      if (o.type != type::BIN || o.via.bin.size % sizeof(T) != 0) throw msgpack::type_error();
      v.resize(o.via.bin.size / sizeof(T));
      if (o.via.bin.size != 0) std::memcpy(v.data(), o.via.bin.ptr, o.via.bin.size);
      return o;
    }
  };

  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE
}  // namespace msgpack
