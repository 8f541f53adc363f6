// Unpacking msgpack from another process without trusting it: every declared count (array and
// map entries, string, bin and ext lengths) is bounded by the bytes actually received, so a
// hostile or corrupt length prefix is rejected before msgpack allocates what it claims (an
// array header claiming 2^32 entries would otherwise reserve 2^32 objects); nesting is bounded;
// and the message must fill the buffer exactly (trailing bytes mean a wrong size).
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include <msgpack.hpp>

namespace tally {

/// Deepest nesting accepted in a state payload or a results message.
inline constexpr std::size_t kMaxMsgpackDepth = 64;

/// One msgpack object that is exactly `bytes`. Bins are referenced in place when `reference_bins`
/// (large numeric state is read straight from the receive buffer, which must then outlive the
/// handle). Throws std::runtime_error (msgpack's own errors derive from it) when the bytes are
/// not one well-formed message within the bounds.
inline msgpack::object_handle unpack_bounded(std::span<const std::byte> bytes,
                                             bool reference_bins) {
  const auto n = bytes.size();
  const msgpack::unpack_limit limit(n, n / 2, n, n, n, kMaxMsgpackDepth);
  std::size_t offset = 0;
  auto handle = msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), n, offset,
                                reference_bins ? [](msgpack::type::object_type t, std::size_t,
                                                    void*) { return t == msgpack::type::BIN; }
                                               : msgpack::unpack_reference_func{nullptr},
                                nullptr, limit);
  if (offset != n)
    throw std::runtime_error("the message ends after " + std::to_string(offset) + " of " +
                             std::to_string(n) + " bytes");
  return handle;
}

}  // namespace tally
