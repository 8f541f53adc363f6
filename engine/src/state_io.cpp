// StateWriter and StateReader (tally/sdk/bytes.hpp): a metric's state as msgpack bytes, written
// and read by msgpack-c here, in libtally, so that no msgpack type crosses the plugin ABI.
#include <fmt/format.h>

#include <array>

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

const char* kind_name(msgpack::type::object_type t) {
  switch (t) {
    case msgpack::type::NIL:
      return "nil";
    case msgpack::type::BOOLEAN:
      return "a boolean";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER:
      return "an integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return "a float";
    case msgpack::type::STR:
      return "a string";
    case msgpack::type::BIN:
      return "a bin";
    case msgpack::type::ARRAY:
      return "an array";
    case msgpack::type::MAP:
      return "a map";
    default:
      return "an extension";
  }
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

struct StateReader::Impl {
  /// One array or map being read: its values, the next one's index and how many there are (a map
  /// of n entries is 2n values: key, value, ...).
  struct Frame {
    const msgpack::object* array = nullptr;
    const msgpack::object_kv* map = nullptr;
    std::uint32_t next = 0;
    std::uint32_t count = 0;
    const msgpack::object& at(std::uint32_t i) const {
      return array != nullptr ? array[i] : (i % 2 == 0 ? map[i / 2].key : map[i / 2].val);
    }
  };

  // A small first chunk: a state is a few values (bins are read in place), and a bootstrap
  // replays every unit's state once per resample.
  msgpack::zone zone{1024};
  msgpack::object root;
  // Nesting is bounded by unpack_bounded (kMaxMsgpackDepth), so the frames fit inline.
  std::array<Frame, kMaxMsgpackDepth + 2> frames{};
  std::size_t depth = 0;  // frames in use

  Frame& top() { return frames[depth - 1]; }
  /// Leaves the arrays and maps whose values have all been read.
  void pop_done() {
    while (depth > 1 && top().next == top().count) --depth;
  }
  void push(Frame f) {
    if (depth == frames.size()) fail("it nests deeper than a state can");
    frames[depth++] = f;
  }
  const msgpack::object& peek() {
    pop_done();
    const Frame& f = top();
    if (f.next == f.count) fail("it holds fewer values than this metric reads");
    return f.at(f.next);
  }
  const msgpack::object& take(msgpack::type::object_type want, const char* what) {
    const msgpack::object& o = peek();
    if (o.type != want) fail(fmt::format("expected {}, found {}", what, kind_name(o.type)));
    ++top().next;
    return o;
  }
  const msgpack::object& take_any() {
    const msgpack::object& o = peek();
    ++top().next;
    return o;
  }
};

StateReader::StateReader(Bytes bytes) : impl_(new Impl) {
  try {
    impl_->root = unpack_bounded(impl_->zone, bytes, /*reference_bins=*/true);
  } catch (const std::exception& e) {
    delete impl_;
    throw StateFormatError(
        fmt::format("the state is not valid msgpack ({} bytes): {}", bytes.size(), e.what()));
  }
  impl_->push({&impl_->root, nullptr, 0, 1});
}

StateReader::~StateReader() { delete impl_; }

void StateReader::fail(const std::string& what) {
  throw StateFormatError("the state is corrupt: " + what);
}

StateReader::Kind StateReader::peek() const {
  switch (impl_->peek().type) {
    case msgpack::type::NIL:
      return Kind::Nil;
    case msgpack::type::BOOLEAN:
      return Kind::Boolean;
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER:
      return Kind::Integer;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return Kind::Float;
    case msgpack::type::STR:
      return Kind::Str;
    case msgpack::type::BIN:
      return Kind::Bin;
    case msgpack::type::ARRAY:
      return Kind::Array;
    case msgpack::type::MAP:
      return Kind::Map;
    default:
      return Kind::Other;
  }
}

std::uint32_t StateReader::array() {
  const auto& o = impl_->take(msgpack::type::ARRAY, "an array");
  impl_->push({o.via.array.ptr, nullptr, 0, o.via.array.size});
  return o.via.array.size;
}

std::uint32_t StateReader::map() {
  const auto& o = impl_->take(msgpack::type::MAP, "a map");
  if (o.via.map.size > UINT32_MAX / 2) fail("a map of more than 2^31 entries");
  impl_->push({nullptr, o.via.map.ptr, 0, 2 * o.via.map.size});
  return o.via.map.size;
}

void StateReader::nil() { impl_->take(msgpack::type::NIL, "nil"); }

bool StateReader::boolean() { return impl_->take(msgpack::type::BOOLEAN, "a boolean").via.boolean; }

std::int64_t StateReader::integer() {
  const auto& o = impl_->peek();
  if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    impl_->take_any();
    return o.via.i64;
  }
  const auto& p = impl_->take(msgpack::type::POSITIVE_INTEGER, "an integer");
  if (p.via.u64 > static_cast<std::uint64_t>(INT64_MAX))
    fail(fmt::format("the integer {} does not fit in 64 signed bits", p.via.u64));
  return static_cast<std::int64_t>(p.via.u64);
}

std::uint64_t StateReader::unsigned_integer() {
  const auto& o = impl_->peek();
  if (o.type == msgpack::type::NEGATIVE_INTEGER)
    fail(fmt::format("expected a non-negative integer, found {}", o.via.i64));
  return impl_->take(msgpack::type::POSITIVE_INTEGER, "a non-negative integer").via.u64;
}

double StateReader::float64() {
  const auto& o = impl_->peek();
  switch (o.type) {
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      impl_->take_any();
      return o.via.f64;
    case msgpack::type::POSITIVE_INTEGER:
      impl_->take_any();
      return static_cast<double>(o.via.u64);
    case msgpack::type::NEGATIVE_INTEGER:
      impl_->take_any();
      return static_cast<double>(o.via.i64);
    default:
      fail(fmt::format("expected a number, found {}", kind_name(o.type)));
  }
}

std::string_view StateReader::str() {
  const auto& o = impl_->peek();
  if (o.type == msgpack::type::BIN) {
    impl_->take_any();
    return {o.via.bin.ptr, o.via.bin.size};
  }
  const auto& s = impl_->take(msgpack::type::STR, "a string");
  return {s.via.str.ptr, s.via.str.size};
}

Bytes StateReader::bin() {
  const auto& o = impl_->take(msgpack::type::BIN, "a bin");
  return {reinterpret_cast<const std::byte*>(o.via.bin.ptr), o.via.bin.size};
}

void StateReader::skip() { impl_->take_any(); }

bool StateReader::done() const {
  impl_->pop_done();
  return impl_->depth == 1 && impl_->top().next == 1;
}

}  // namespace tally
