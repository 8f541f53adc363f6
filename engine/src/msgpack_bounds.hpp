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

#include "tally/value_msgpack.hpp"

namespace tally {

/// Deepest nesting accepted in a state payload or a results message.
inline constexpr std::size_t kMaxMsgpackDepth = 64;

namespace detail {
inline msgpack::unpack_limit limit_for(std::size_t n) {
  return msgpack::unpack_limit(n, n / 2, n, n, n, kMaxMsgpackDepth);
}
inline msgpack::unpack_reference_func bins_referenced(bool reference_bins) {
  return reference_bins ? [](msgpack::type::object_type t, std::size_t,
                             void*) { return t == msgpack::type::BIN; }
                        : msgpack::unpack_reference_func{nullptr};
}
inline void check_filled(std::size_t offset, std::size_t n) {
  if (offset != n)
    throw std::runtime_error("the message ends after " + std::to_string(offset) + " of " +
                             std::to_string(n) + " bytes");
}
}  // namespace detail

/// One msgpack object that is exactly `bytes`. Bins are referenced in place when `reference_bins`
/// (large numeric state is read straight from the receive buffer, which must then outlive the
/// handle). Throws std::runtime_error (msgpack's own errors derive from it) when the bytes are
/// not one well-formed message within the bounds.
inline msgpack::object_handle unpack_bounded(std::span<const std::byte> bytes,
                                             bool reference_bins) {
  const auto n = bytes.size();
  std::size_t offset = 0;
  auto handle =
      msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), n, offset,
                      detail::bins_referenced(reference_bins), nullptr, detail::limit_for(n));
  detail::check_filled(offset, n);
  return handle;
}

/// The same, allocated in `zone` (which the object then lives in): many small messages share one
/// arena instead of a zone each (a zone's first chunk alone is 8 KiB).
inline msgpack::object unpack_bounded(msgpack::zone& zone, std::span<const std::byte> bytes,
                                      bool reference_bins) {
  const auto n = bytes.size();
  std::size_t offset = 0;
  const msgpack::object o =
      msgpack::unpack(zone, reinterpret_cast<const char*>(bytes.data()), n, offset,
                      detail::bins_referenced(reference_bins), nullptr, detail::limit_for(n));
  detail::check_filled(offset, n);
  return o;
}

}  // namespace tally
