// Machinery, not API: how TypedMetric writes and reads one state field with StateWriter and
// StateReader (tally/sdk/bytes.hpp). The bytes are those msgpack-c's adaptors wrote for the same
// types before ABI 7 (a checkpoint or records file of then still restores):
//
//   bool, integers, float, double     msgpack's bool, int (shortest), float (pack_double)
//   PackedVector<T> (and types derived from it)   one bin of the raw little-endian values
//   std::string                      str
//   std::vector<char / unsigned char / std::byte>  bin
//   sequences (std::vector, std::deque, std::set, ...) and std::array   array of the elements
//   std::pair, std::tuple            array of the members
//   maps (std::map, std::unordered_map, ...)  map
//   std::optional                    nil or the value
//   a type with tally_pack / tally_unpack members  what they write and read
//
// Detection is by shape (members and traits), so this header includes no container header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tally/sdk/bytes.hpp"

namespace tally {

template <class T>
struct PackedVector;

namespace internal {

template <class T>
concept CustomField = requires(const T& c, T& m, StateWriter& w, StateReader& r) {
  c.tally_pack(w);
  m.tally_unpack(r);
};

/// The element type of the PackedVector that T is or derives from (void when it is none).
template <class E>
E packed_element(const PackedVector<E>*);
void packed_element(const void*);
template <class T>
using packed_element_t = decltype(packed_element(static_cast<const T*>(nullptr)));
template <class T>
concept Packed = !std::is_void_v<packed_element_t<T>>;

template <class T>
concept StringLike = std::is_same_v<T, std::string>;

template <class T>
concept Optional = requires(T& v) {
  typename T::value_type;
  v.has_value();
  v.reset();
  *v;
  v.emplace();
};

template <class T>
concept MapLike = requires(T& v) {
  typename T::key_type;
  typename T::mapped_type;
  v.begin();
  v.end();
  v.size();
  v.clear();
};

template <class T>
concept TupleLike = requires {
  std::tuple_size<T>::value;
}
&&!requires(T & v) { v.begin(); };

template <class T>
concept FixedArray = requires {
  std::tuple_size<T>::value;
}
&&requires(T& v) { v.begin(); };

template <class T>
concept Sequence = requires(T& v) {
  typename T::value_type;
  v.begin();
  v.end();
  v.size();
  v.clear();
}
&&!MapLike<T> && !StringLike<T> && !Packed<T> && !FixedArray<T>;

template <class T>
concept ByteSequence = Sequence<T> &&(std::is_same_v<typename T::value_type, char> ||
                                      std::is_same_v<typename T::value_type, unsigned char> ||
                                      std::is_same_v<typename T::value_type, std::byte>);

template <class T>
void write(StateWriter& w, const T& v);
template <class T>
void read(StateReader& r, T& v);

template <class T>
T checked_integer(StateReader& r) {
  if constexpr (std::is_signed_v<T>) {
    const std::int64_t x = r.integer();
    if (x < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
        x > static_cast<std::int64_t>(std::numeric_limits<T>::max()))
      StateReader::fail("the integer " + std::to_string(x) + " does not fit its field");
    return static_cast<T>(x);
  } else {
    const std::uint64_t x = r.unsigned_integer();
    if (x > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
      StateReader::fail("the integer " + std::to_string(x) + " does not fit its field");
    return static_cast<T>(x);
  }
}

template <class T>
void write(StateWriter& w, const T& v) {
  if constexpr (CustomField<T>) {
    v.tally_pack(w);
  } else if constexpr (Packed<T>) {
    using E = packed_element_t<T>;
    w.bin(v.data(), v.size() * sizeof(E));
  } else if constexpr (std::is_same_v<T, bool>) {
    w.boolean(v);
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    w.integer(v);
  } else if constexpr (std::is_integral_v<T>) {
    w.unsigned_integer(v);
  } else if constexpr (std::is_same_v<T, float>) {
    w.float32(v);
  } else if constexpr (std::is_same_v<T, double>) {
    w.float64(v);
  } else if constexpr (StringLike<T>) {
    w.str(v);
  } else if constexpr (Optional<T>) {
    if (v.has_value())
      write(w, *v);
    else
      w.nil();
  } else if constexpr (TupleLike<T>) {
    w.array(std::tuple_size_v<T>);
    std::apply([&](const auto&... m) { (write(w, m), ...); }, v);
  } else if constexpr (MapLike<T>) {
    w.map(v.size());
    for (const auto& [key, value] : v) {
      write(w, key);
      write(w, value);
    }
  } else if constexpr (ByteSequence<T>) {
    w.bin(v.data(), v.size());
  } else if constexpr (Sequence<T> || FixedArray<T>) {
    w.array(v.size());
    for (const auto& e : v) write(w, static_cast<const typename T::value_type&>(e));
  } else {
    static_assert(sizeof(T) == 0,
                  "a state field of this type cannot be packed: give it tally_pack / tally_unpack "
                  "members (tally/sdk/bytes.hpp)");
  }
}

template <class T>
void read(StateReader& r, T& v) {
  if constexpr (CustomField<T>) {
    v.tally_unpack(r);
  } else if constexpr (Packed<T>) {
    using E = packed_element_t<T>;
    const Bytes b = r.bin();
    // A length that is not a whole number of elements is a corrupt payload, not a truncation.
    if (b.size() % sizeof(E) != 0)
      StateReader::fail("a bin of " + std::to_string(b.size()) +
                        " bytes holds no whole number of " + std::to_string(sizeof(E)) +
                        "-byte values");
    v.resize(b.size() / sizeof(E));
    if (!b.empty()) std::memcpy(v.data(), b.data(), b.size());
  } else if constexpr (std::is_same_v<T, bool>) {
    v = r.boolean();
  } else if constexpr (std::is_integral_v<T>) {
    v = checked_integer<T>(r);
  } else if constexpr (std::is_floating_point_v<T>) {
    v = static_cast<T>(r.float64());
  } else if constexpr (StringLike<T>) {
    v = std::string(r.str());
  } else if constexpr (Optional<T>) {
    if (r.peek() == StateReader::Kind::Nil) {
      r.nil();
      v.reset();
    } else {
      read(r, v.emplace());
    }
  } else if constexpr (TupleLike<T>) {
    if (r.array() != std::tuple_size_v<T>)
      StateReader::fail("an array of another size than the tuple it was packed from");
    std::apply([&](auto&... m) { (read(r, m), ...); }, v);
  } else if constexpr (MapLike<T>) {
    const std::uint32_t n = r.map();
    v.clear();
    for (std::uint32_t i = 0; i < n; ++i) {
      typename T::key_type key{};
      typename T::mapped_type value{};
      read(r, key);
      read(r, value);
      v.emplace(std::move(key), std::move(value));
    }
  } else if constexpr (ByteSequence<T>) {
    const Bytes b = r.bin();
    v.resize(b.size());
    if (!b.empty()) std::memcpy(v.data(), b.data(), b.size());
  } else if constexpr (FixedArray<T>) {
    if (r.array() != std::tuple_size_v<T>)
      StateReader::fail("an array of another size than the fixed-size field it was packed from");
    for (auto& e : v) read(r, e);
  } else if constexpr (Sequence<T>) {
    const std::uint32_t n = r.array();
    v.clear();
    if constexpr (requires { v.reserve(n); }) v.reserve(n);
    for (std::uint32_t i = 0; i < n; ++i) {
      typename T::value_type e{};
      read(r, e);
      if constexpr (requires { v.push_back(std::move(e)); })
        v.push_back(std::move(e));
      else
        v.insert(std::move(e));
    }
  } else {
    static_assert(sizeof(T) == 0,
                  "a state field of this type cannot be unpacked: give it tally_pack / "
                  "tally_unpack members (tally/sdk/bytes.hpp)");
  }
}

/// TALLY_FIELDS: the members of a plugin's own field type, written as one array in order (the
/// bytes msgpack-c's MSGPACK_DEFINE wrote for the same members).
template <class... M>
void write_members(StateWriter& w, const M&... m) {
  w.array(sizeof...(M));
  (write(w, m), ...);
}
template <class... M>
void read_members(StateReader& r, M&... m) {
  if (r.array() != sizeof...(M))
    StateReader::fail("an array of another size than the " + std::to_string(sizeof...(M)) +
                      " members it was packed from");
  (read(r, m), ...);
}

/// A ByteSink appending to a std::string (the plugin's side of a state it writes for itself).
struct StringSink final : ByteSink {
  std::string bytes;
  void write(const char* data, std::size_t size) override { bytes.append(data, size); }
};

}  // namespace internal
}  // namespace tally
