// The bytes of the values inside a msgpack array, found without decoding them: a metric's part of
// a sync payload, a checkpoint or a records file goes to the metric as the bytes it wrote
// (Metric's Bytes, ABI 7). Only for bytes already checked whole with unpack_bounded
// (msgpack_bounds.hpp): a value's extent is found by msgpack-c's own parser with a visitor that
// builds nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include <msgpack.hpp>

#include "tally/sdk/bytes.hpp"

namespace tally {

using ByteSpan = std::span<const std::byte>;
/// The engine's own msgpack writer (plugins write through a ByteSink, tally/sdk/bytes.hpp).
using Packer = msgpack::packer<msgpack::sbuffer>;

/// Where the msgpack value starting at `offset` of `bytes` ends.
inline std::size_t msgpack_value_end(ByteSpan bytes, std::size_t offset) {
  msgpack::null_visitor skip;
  std::size_t off = offset;
  if (!msgpack::parse(reinterpret_cast<const char*>(bytes.data()), bytes.size(), off, skip))
    throw std::runtime_error("a msgpack value is cut short");
  return off;
}

/// Reads the header of the array that starts at `offset` and moves past it: its size.
inline std::uint32_t msgpack_array_header(ByteSpan bytes, std::size_t& offset) {
  const auto byte = [&](std::size_t i) {
    if (offset + i >= bytes.size()) throw std::runtime_error("a msgpack array header is cut short");
    return static_cast<std::uint32_t>(bytes[offset + i]);
  };
  const std::uint32_t tag = byte(0);
  if (tag >= 0x90 && tag <= 0x9f) {
    offset += 1;
    return tag & 0x0f;
  }
  if (tag == 0xdc) {
    const std::uint32_t n = byte(1) << 8 | byte(2);
    offset += 3;
    return n;
  }
  if (tag == 0xdd) {
    const std::uint32_t n = byte(1) << 24 | byte(2) << 16 | byte(3) << 8 | byte(4);
    offset += 5;
    return n;
  }
  throw std::runtime_error("not a msgpack array");
}

/// The bytes of each value of the array starting at `offset` of `bytes`.
inline std::vector<ByteSpan> msgpack_array_items(ByteSpan bytes, std::size_t offset) {
  const std::uint32_t n = msgpack_array_header(bytes, offset);
  std::vector<ByteSpan> items;
  items.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::size_t end = msgpack_value_end(bytes, offset);
    items.push_back(bytes.subspan(offset, end - offset));
    offset = end;
  }
  return items;
}

/// The bytes of the values of a payload [status, [value, ...]] (a sync payload, a checkpoint's
/// states): each value's bytes, in order. The payload must have been checked to be that shape.
inline std::vector<ByteSpan> msgpack_payload_items(ByteSpan bytes) {
  std::size_t offset = 0;
  if (msgpack_array_header(bytes, offset) != 2) throw std::runtime_error("not a tally payload");
  offset = msgpack_value_end(bytes, offset);  // the status
  return msgpack_array_items(bytes, offset);
}

/// A ByteSink appending to a msgpack sbuffer: what a metric writes lands in the engine's buffer,
/// inline (the bytes of one msgpack value, so the buffer stays one msgpack document).
struct SbufferSink final : ByteSink {
  explicit SbufferSink(msgpack::sbuffer& b) : buffer(&b) {}
  msgpack::sbuffer* buffer;
  void write(const char* data, std::size_t size) override { buffer->write(data, size); }
};

}  // namespace tally
