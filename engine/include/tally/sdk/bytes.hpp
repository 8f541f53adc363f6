// What crosses the plugin boundary when a metric's state travels (ABI 7, docs/abi.md): plain bytes.
//
// A metric's state leaves the plugin as bytes written into a ByteSink and comes back as Bytes (a
// pointer and a length). The bytes are msgpack, written and read by libtally's StateWriter and
// StateReader (msgpack-c inside libtally, byte-identical to what ABI 6 plugins packed with
// msgpack-c themselves, so checkpoints and records written before ABI 7 still restore), so that no
// msgpack, Boost or other library type is part of any signature a plugin and the engine share,
// and a plugin unit includes no msgpack header at all.
//
// Plugin authors rarely use these directly: TypedMetric (tally/sdk/metric.hpp) writes and reads a
// TALLY_STATE state field by field. A field of a type of the plugin's own implements
//
//   void tally_pack(tally::StateWriter& out) const;
//   void tally_unpack(tally::StateReader& in);   // throws StateFormatError for a corrupt state
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "tally/sdk/error.hpp"
#include "tally/sdk/export.hpp"

namespace tally {

/// Bytes handed to a plugin: a view (pointer and length) of memory the engine owns for the call.
using Bytes = std::span<const std::byte>;

/// Where a plugin writes bytes that the engine keeps (a state it gathers or checkpoints).
class TALLY_API ByteSink {
 public:
  virtual ~ByteSink();
  /// Appends `size` bytes.
  virtual void write(const char* data, std::size_t size) = 0;
};

/// Bytes that are not the state a metric wrote: the wrong type where a field is read, a size that
/// cannot be, trailing or missing elements. The engine turns it into a message naming the metric,
/// the rank or the checkpoint.
class TALLY_API StateFormatError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
  ~StateFormatError() override;
};

/// Writes msgpack into a ByteSink, value by value (the same bytes msgpack-c's packer writes for the
/// same calls: integers in their shortest form, doubles as msgpack-c's pack_double writes them).
class TALLY_API StateWriter {
 public:
  explicit StateWriter(ByteSink& out) noexcept : out_(&out) {}

  /// The header of an array of `n` values (the next `n` written); StateFormatError over 2^32 - 1.
  void array(std::size_t n);
  /// The header of a map of `n` entries (the next 2n values written: key, value, ...).
  void map(std::size_t n);
  void nil();
  void boolean(bool v);
  void integer(std::int64_t v);
  void unsigned_integer(std::uint64_t v);
  /// msgpack-c's pack_float: an integral value is written as an integer.
  void float32(float v);
  /// msgpack-c's pack_double: an integral value (1.0, -0.0) is written as an integer.
  void float64(double v);
  void str(std::string_view v);
  /// A msgpack bin of `size` bytes (StateFormatError over 4 GiB).
  void bin(const void* data, std::size_t size);

 private:
  ByteSink* out_;
};

/// Reads the msgpack value in `Bytes` back, value by value, in the order it was written, straight
/// from the bytes. Every read checks as it goes and throws StateFormatError naming what it
/// expected and what it found: the type, that the value's bytes are there, that an array's or a
/// map's count fits in the bytes left (so a header claiming 2^32 elements is refused before room
/// is reserved for them), nesting; done() says whether the value was read whole and nothing
/// follows it. Arrays and maps are entered with array() / map(), which give their sizes, and left
/// after their last value.
class TALLY_API StateReader {
 public:
  /// Reads nothing yet. Strings and bins are read in place: `bytes` must outlive the reader and
  /// what str() and bin() return.
  explicit StateReader(Bytes bytes);
  ~StateReader();
  StateReader(const StateReader&) = delete;
  StateReader& operator=(const StateReader&) = delete;

  enum class Kind : std::uint8_t { Nil, Boolean, Integer, Float, Str, Bin, Array, Map, Other };
  /// The kind of the next value, without reading it (StateFormatError when there is none).
  Kind peek() const;

  std::uint32_t array();
  std::uint32_t map();
  void nil();
  bool boolean();
  /// An integer within int64.
  std::int64_t integer();
  /// A non-negative integer.
  std::uint64_t unsigned_integer();
  /// A float or an integer (msgpack-c writes integral floating-point values as integers).
  double float64();
  /// A string (or a bin, as msgpack-c reads a std::string from either).
  std::string_view str();
  Bytes bin();
  /// Reads past the next value, whatever it is.
  void skip();
  /// Whether the value has been read whole and no byte follows it.
  bool done() const;

  /// Throws StateFormatError("the state is corrupt: " + what).
  [[noreturn]] static void fail(const std::string& what);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace tally
