// StateWriter and StateReader (tally/sdk/bytes.hpp): a metric's state as msgpack bytes, written
// and read by msgpack-c here, in libtally, so that no msgpack type crosses the plugin ABI.
#include <fmt/format.h>

#include <array>
#include <bit>

#include <msgpack.hpp>

#include "msgpack_bounds.hpp"
#include "tally/sdk/bytes.hpp"

namespace tally {

ByteSink::~ByteSink() = default;
StateFormatError::~StateFormatError() = default;

namespace {

/// msgpack-c's packer writes through this: every append goes straight to the plugin's sink.
struct SinkStream {
  ByteSink* sink;
  void write(const char* data, std::size_t size) { sink->write(data, size); }
};

/// Runs f on a msgpack-c packer writing into `out`.
template <class F>
void packing(ByteSink* out, F&& f) {
  SinkStream stream{out};
  msgpack::packer<SinkStream> packer(stream);
  f(packer);
}

std::uint32_t checked_size(std::size_t n, const char* what) {
  if (n > UINT32_MAX)
    throw StateFormatError(
        fmt::format("{} of {} elements: msgpack holds at most 2^32 - 1", what, n));
  return static_cast<std::uint32_t>(n);
}

}  // namespace

void StateWriter::array(std::size_t n) {
  const auto size = checked_size(n, "an array");
  packing(out_, [&](auto& p) { p.pack_array(size); });
}
void StateWriter::map(std::size_t n) {
  const auto size = checked_size(n, "a map");
  packing(out_, [&](auto& p) { p.pack_map(size); });
}
void StateWriter::nil() {
  packing(out_, [](auto& p) { p.pack_nil(); });
}
void StateWriter::boolean(bool v) {
  packing(out_, [&](auto& p) { p.pack(v); });
}
void StateWriter::integer(std::int64_t v) {
  packing(out_, [&](auto& p) { p.pack_int64(v); });
}
void StateWriter::unsigned_integer(std::uint64_t v) {
  packing(out_, [&](auto& p) { p.pack_uint64(v); });
}
void StateWriter::float32(float v) {
  packing(out_, [&](auto& p) { p.pack_float(v); });
}
void StateWriter::float64(double v) {
  packing(out_, [&](auto& p) { p.pack_double(v); });
}
void StateWriter::str(std::string_view v) {
  const auto n = checked_size(v.size(), "a string");
  packing(out_, [&](auto& p) {
    p.pack_str(n);
    p.pack_str_body(v.data(), n);
  });
}
void StateWriter::bin(const void* data, std::size_t size) {
  if (size > UINT32_MAX)
    throw StateFormatError(fmt::format("a bin of {} bytes: msgpack holds at most 4 GiB", size));
  const auto n = static_cast<std::uint32_t>(size);
  packing(out_, [&](auto& p) {
    p.pack_bin(n);
    if (n != 0) p.pack_bin_body(static_cast<const char*>(data), n);
  });
}

// ---- StateReader --------------------------------------------------------------------------------
//
// A pull decoder straight over the bytes (msgpack-c has none: its unpacker builds a tree of
// msgpack::object in a zone first, which a bootstrap replaying every unit's state once per
// resample paid again and again). Every read checks as it goes, without allocating: the type, that
// the value's bytes are there, that an array's or a map's count is within the bytes left (each
// value takes one at least: a header claiming 2^32 elements is refused before a caller reserves
// room for them), nesting at most kMaxMsgpackDepth; done() that nothing follows the value.

namespace {

using Kind = StateReader::Kind;

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Nil:
      return "nil";
    case Kind::Boolean:
      return "a boolean";
    case Kind::Integer:
      return "an integer";
    case Kind::Float:
      return "a float";
    case Kind::Str:
      return "a string";
    case Kind::Bin:
      return "a bin";
    case Kind::Array:
      return "an array";
    case Kind::Map:
      return "a map";
    default:
      return "an extension";
  }
}

/// One msgpack value's header: its kind, where its payload starts and how long it is (bytes for
/// str, bin, ext and scalars; elements for arrays, 2 x entries for maps).
struct Header {
  Kind kind = Kind::Other;
  std::size_t header = 1;  // bytes of the header (type byte and length)
  std::uint64_t length = 0;
  bool negative = false;  // Integer: held as int64 (u64 otherwise)
  std::uint64_t u = 0;    // Integer (two's complement when negative), Boolean
  double f = 0;           // Float
};

std::uint64_t big_endian(const unsigned char* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

[[noreturn]] void truncated() { StateReader::fail("it ends inside a value (truncated)"); }

/// How the types 0xc4..0xdf are laid out: what follows the type byte.
enum class Layout : std::uint8_t {
  Length,
  Ext,
  MapLength,
  Unsigned,
  Signed,
  Float32,
  Float64,
  Fixext
};
struct TypeInfo {
  Kind kind;
  std::uint8_t bytes;  // of the length or the scalar after the type byte (fixext: of its data)
  Layout layout;
};
constexpr std::array<TypeInfo, 28> kTypes{{
    {Kind::Bin, 1, Layout::Length},       {Kind::Bin, 2, Layout::Length},        // c4 c5
    {Kind::Bin, 4, Layout::Length},       {Kind::Other, 1, Layout::Ext},         // c6 c7
    {Kind::Other, 2, Layout::Ext},        {Kind::Other, 4, Layout::Ext},         // c8 c9
    {Kind::Float, 4, Layout::Float32},    {Kind::Float, 8, Layout::Float64},     // ca cb
    {Kind::Integer, 1, Layout::Unsigned}, {Kind::Integer, 2, Layout::Unsigned},  // cc cd
    {Kind::Integer, 4, Layout::Unsigned}, {Kind::Integer, 8, Layout::Unsigned},  // ce cf
    {Kind::Integer, 1, Layout::Signed},   {Kind::Integer, 2, Layout::Signed},    // d0 d1
    {Kind::Integer, 4, Layout::Signed},   {Kind::Integer, 8, Layout::Signed},    // d2 d3
    {Kind::Other, 1, Layout::Fixext},     {Kind::Other, 2, Layout::Fixext},      // d4 d5
    {Kind::Other, 4, Layout::Fixext},     {Kind::Other, 8, Layout::Fixext},      // d6 d7
    {Kind::Other, 16, Layout::Fixext},    {Kind::Str, 1, Layout::Length},        // d8 d9
    {Kind::Str, 2, Layout::Length},       {Kind::Str, 4, Layout::Length},        // da db
    {Kind::Array, 2, Layout::Length},     {Kind::Array, 4, Layout::Length},      // dc dd
    {Kind::Map, 2, Layout::MapLength},    {Kind::Map, 4, Layout::MapLength},     // de df
}};

/// The header of a value of type `b` in 0xc4..0xdf at `at`.
Header decode_typed(unsigned char b, const unsigned char* at, const unsigned char* end) {
  const TypeInfo& t = kTypes[b - 0xc4];
  Header h;
  h.kind = t.kind;
  if (t.layout == Layout::Fixext) {  // type byte + data
    h.length = 1 + std::uint64_t{t.bytes};
    return h;
  }
  if (static_cast<std::size_t>(end - at) < 1u + t.bytes) truncated();
  h.header = 1 + t.bytes;
  const std::uint64_t v = big_endian(at + 1, t.bytes);
  switch (t.layout) {
    case Layout::Length:
      h.length = v;
      break;
    case Layout::Ext:
      h.length = v + 1;  // + its type byte
      break;
    case Layout::MapLength:
      h.length = 2 * v;
      break;
    case Layout::Unsigned:
      h.u = v;
      break;
    case Layout::Signed: {
      const unsigned shift = 64u - 8u * t.bytes;
      const auto x = static_cast<std::int64_t>(v << shift) >> shift;  // sign-extended
      h.negative = x < 0;
      h.u = static_cast<std::uint64_t>(x);
      break;
    }
    case Layout::Float32:
      h.f = static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(v)));
      break;
    default:  // Float64
      h.f = std::bit_cast<double>(v);
      break;
  }
  return h;
}

/// The header at `at` (before `end`); StateFormatError when the bytes end inside it.
Header decode(const unsigned char* at, const unsigned char* end) {
  if (at == end) truncated();
  const unsigned char b = at[0];
  Header h;
  if (b <= 0x7f) {
    h.kind = Kind::Integer;
    h.u = b;
  } else if (b >= 0xe0) {
    h.kind = Kind::Integer;
    h.negative = true;
    h.u = static_cast<std::uint64_t>(static_cast<std::int64_t>(static_cast<std::int8_t>(b)));
  } else if (b <= 0x8f) {
    h.kind = Kind::Map;
    h.length = 2 * std::uint64_t{b & 0x0fu};
  } else if (b <= 0x9f) {
    h.kind = Kind::Array;
    h.length = b & 0x0fu;
  } else if (b <= 0xbf) {
    h.kind = Kind::Str;
    h.length = b & 0x1fu;
  } else if (b == 0xc0) {
    h.kind = Kind::Nil;
  } else if (b == 0xc2 || b == 0xc3) {
    h.kind = Kind::Boolean;
    h.u = b == 0xc3 ? 1 : 0;
  } else if (b == 0xc1) {
    StateReader::fail("it holds the byte 0xc1, which msgpack never uses");
  } else {
    return decode_typed(b, at, end);
  }
  return h;
}

bool is_container(Kind k) { return k == Kind::Array || k == Kind::Map; }

/// Bytes of payload after the header (0 for containers: their values follow).
std::uint64_t payload_of(const Header& h) {
  return is_container(h.kind) || h.kind == Kind::Integer || h.kind == Kind::Float ? 0 : h.length;
}

}  // namespace

struct StateReader::Impl {
  const unsigned char* at = nullptr;
  const unsigned char* end = nullptr;
  // Values left in each array or map being read (a map of n entries is 2n values); [0] the root.
  std::array<std::uint64_t, kMaxMsgpackDepth + 2> left;  // [0, depth) in use: not zeroed
  std::size_t depth = 0;

  void pop_done() {
    while (depth > 1 && left[depth - 1] == 0) --depth;
  }
  Header peek() {
    pop_done();
    if (left[depth - 1] == 0) fail("it holds fewer values than this metric reads");
    return decode(at, end);
  }
  /// Consumes the value whose header peek() just returned (its payload too, unless a
  /// container's).
  void consume(const Header& h) {
    const std::uint64_t payload = payload_of(h);
    if (payload > static_cast<std::uint64_t>(end - at) - h.header) truncated();
    --left[depth - 1];
    at += h.header + payload;
  }
  /// The next value's header, consumed.
  Header take() {
    const Header h = peek();
    consume(h);
    return h;
  }
  Header take(Kind want, const char* what) {
    const Header h = peek();
    if (h.kind != want) fail(fmt::format("expected {}, found {}", what, kind_name(h.kind)));
    consume(h);
    return h;
  }
  void enter(const Header& h) {
    if (h.length > static_cast<std::uint64_t>(end - at))
      fail(fmt::format("{} {} values in the {} bytes left",
                       h.kind == Kind::Map ? "a map of" : "an array of",
                       h.kind == Kind::Map ? h.length / 2 : h.length, end - at));
    if (depth == left.size()) fail(fmt::format("it nests deeper than {} levels", kMaxMsgpackDepth));
    left[depth++] = h.length;
  }
};

StateReader::StateReader(Bytes bytes) : impl_(new Impl) {
  impl_->at = reinterpret_cast<const unsigned char*>(bytes.data());
  impl_->end = impl_->at + bytes.size();
  impl_->left[0] = 1;
  impl_->depth = 1;
}

StateReader::~StateReader() { delete impl_; }

void StateReader::fail(const std::string& what) {
  throw StateFormatError("the state is corrupt: " + what);
}

StateReader::Kind StateReader::peek() const { return impl_->peek().kind; }

std::uint32_t StateReader::array() {
  const Header h = impl_->take(Kind::Array, "an array");
  impl_->enter(h);
  return static_cast<std::uint32_t>(h.length);
}

std::uint32_t StateReader::map() {
  const Header h = impl_->take(Kind::Map, "a map");
  if (h.length / 2 > UINT32_MAX / 2) fail("a map of more than 2^31 entries");
  impl_->enter(h);
  return static_cast<std::uint32_t>(h.length / 2);
}

void StateReader::nil() { impl_->take(Kind::Nil, "nil"); }

bool StateReader::boolean() { return impl_->take(Kind::Boolean, "a boolean").u != 0; }

std::int64_t StateReader::integer() {
  const Header h = impl_->take(Kind::Integer, "an integer");
  if (!h.negative && h.u > static_cast<std::uint64_t>(INT64_MAX))
    fail(fmt::format("the integer {} does not fit in 64 signed bits", h.u));
  return static_cast<std::int64_t>(h.u);
}

std::uint64_t StateReader::unsigned_integer() {
  const Header h = impl_->peek();
  if (h.kind != Kind::Integer)
    fail(fmt::format("expected a non-negative integer, found {}", kind_name(h.kind)));
  if (h.negative)
    fail(fmt::format("expected a non-negative integer, found {}", static_cast<std::int64_t>(h.u)));
  impl_->consume(h);
  return h.u;
}

double StateReader::float64() {
  const Header h = impl_->peek();
  switch (h.kind) {
    case Kind::Float:
      impl_->consume(h);
      return h.f;
    case Kind::Integer:
      impl_->consume(h);
      return h.negative ? static_cast<double>(static_cast<std::int64_t>(h.u))
                        : static_cast<double>(h.u);
    default:
      fail(fmt::format("expected a number, found {}", kind_name(h.kind)));
  }
}

std::string_view StateReader::str() {
  const Header h = impl_->peek();
  if (h.kind != Kind::Bin && h.kind != Kind::Str)
    fail(fmt::format("expected a string, found {}", kind_name(h.kind)));
  const char* p = reinterpret_cast<const char*>(impl_->at + h.header);
  impl_->consume(h);
  return {p, static_cast<std::size_t>(h.length)};
}

Bytes StateReader::bin() {
  const Header h = impl_->peek();
  if (h.kind != Kind::Bin) fail(fmt::format("expected a bin, found {}", kind_name(h.kind)));
  const auto* p = reinterpret_cast<const std::byte*>(impl_->at + h.header);
  impl_->consume(h);
  return {p, static_cast<std::size_t>(h.length)};
}

void StateReader::skip() {
  // The next value with everything in it, entered and read through to its end.
  impl_->pop_done();
  const std::size_t base = impl_->depth;
  const Header first = impl_->take();
  if (is_container(first.kind)) impl_->enter(first);
  while (impl_->depth > base) {
    if (impl_->left[impl_->depth - 1] == 0) {
      --impl_->depth;
      continue;
    }
    const Header h = impl_->take();
    if (is_container(h.kind)) impl_->enter(h);
  }
}

bool StateReader::done() const {
  impl_->pop_done();
  return impl_->depth == 1 && impl_->left[0] == 0 && impl_->at == impl_->end;
}

}  // namespace tally
