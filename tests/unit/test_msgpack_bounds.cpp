// Hostile bytes in the sync protocol (engine/src/msgpack_bounds.hpp): a state payload or results
// message that lies about a size is rejected before msgpack allocates what the lie claims; a
// truncated message and one with trailing bytes are rejected. The declared-count checks raise
// msgpack's *_size_overflow errors, which msgpack throws before it reserves any memory for the
// declared entries (msgpack/v1/detail/create_object_visitor.hpp: start_array/start_map check the
// limit first).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <msgpack.hpp>

#include "msgpack_bounds.hpp"

namespace {

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::string raw(std::initializer_list<unsigned> b) {
  std::string s;
  for (unsigned c : b) s.push_back(static_cast<char>(c));
  return s;
}

}  // namespace

TEST(MsgpackBounds, AWellFormedMessageRoundTrips) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, std::make_tuple(0, std::vector<std::int64_t>{1, 2, 3}, std::string("x")));
  const std::string s(buf.data(), buf.size());
  const auto h = tally::unpack_bounded(bytes_of(s), false);
  EXPECT_EQ(h.get().via.array.size, 3u);
  EXPECT_EQ(h.get().via.array.ptr[1].via.array.ptr[2].as<std::int64_t>(), 3);
}

TEST(MsgpackBounds, ReferencedBinsPointIntoTheBuffer) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> p(buf);
  p.pack_bin(4);
  p.pack_bin_body("abcd", 4);
  const std::string s(buf.data(), buf.size());
  const auto h = tally::unpack_bounded(bytes_of(s), true);
  EXPECT_EQ(h.get().via.bin.ptr, s.data() + 2);  // bin8 header: 0xc4, length
}

TEST(MsgpackBounds, ACountLargerThanTheDataIsRejectedBeforeAllocating) {
  // array32 claiming 2^32 - 1 entries, then nothing: 96 GiB of msgpack::object if believed.
  EXPECT_THROW(tally::unpack_bounded(bytes_of(raw({0xdd, 0xff, 0xff, 0xff, 0xff})), false),
               msgpack::array_size_overflow);
  // map32 claiming 2^31 pairs.
  EXPECT_THROW(tally::unpack_bounded(bytes_of(raw({0xdf, 0x80, 0x00, 0x00, 0x00, 0x01})), false),
               msgpack::map_size_overflow);
  // array16 claiming 40 entries in 6 bytes: also more entries than bytes.
  EXPECT_THROW(tally::unpack_bounded(bytes_of(raw({0xdc, 0x00, 0x28, 0x01, 0x02, 0x03})), false),
               msgpack::array_size_overflow);
}

TEST(MsgpackBounds, ALengthLargerThanTheDataIsRejected) {
  // bin32 claiming 1 GiB followed by 3 bytes; str32 claiming 2^32 - 1 bytes. msgpack waits for
  // the bytes of a string or bin before it copies or references them, so these fail as
  // "insufficient bytes" (or as over the limit), never by allocating.
  EXPECT_THROW(
      tally::unpack_bounded(bytes_of(raw({0xc6, 0x40, 0x00, 0x00, 0x00, 'a', 'b', 'c'})), true),
      msgpack::unpack_error);
  EXPECT_THROW(tally::unpack_bounded(bytes_of(raw({0xdb, 0xff, 0xff, 0xff, 0xff, 'a'})), false),
               msgpack::unpack_error);
}

TEST(MsgpackBounds, TruncatedAndOverlongMessagesAreRejected) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, std::vector<std::int64_t>{1, 2, 300000});
  const std::string s(buf.data(), buf.size());
  for (std::size_t cut = 0; cut < s.size(); ++cut)
    EXPECT_ANY_THROW(tally::unpack_bounded(bytes_of(s.substr(0, cut)), false)) << cut;
  EXPECT_ANY_THROW(tally::unpack_bounded(bytes_of(s + '\x01'), false));  // trailing byte
}

TEST(MsgpackBounds, NestingIsBounded) {
  std::string deep(200, '\x91');  // fixarray of 1, nested 200 deep
  deep.push_back('\x00');
  EXPECT_THROW(tally::unpack_bounded(bytes_of(deep), false), msgpack::depth_size_overflow);
}
