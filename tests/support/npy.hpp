// Writes NumPy .npy files (format 1.0, C order, little-endian) for tests that need data files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <type_traits>
#include <vector>

namespace tally::test {

template <class T>
const char* npy_descr() {
  if constexpr (std::is_same_v<T, bool>)
    return "|b1";
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return "|u1";
  else if constexpr (std::is_same_v<T, std::int8_t>)
    return "|i1";
  else if constexpr (std::is_same_v<T, std::int16_t>)
    return "<i2";
  else if constexpr (std::is_same_v<T, std::uint16_t>)
    return "<u2";
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return "<i4";
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return "<u4";
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return "<i8";
  else if constexpr (std::is_same_v<T, float>)
    return "<f4";
  else if constexpr (std::is_same_v<T, double>)
    return "<f8";
  else
    static_assert(sizeof(T) == 0, "unsupported npy type");
}

/// The .npy header for `descr` and `shape` (padded so the data starts 64-byte aligned).
inline std::string npy_header(const std::string& descr, const std::vector<std::int64_t>& shape,
                              bool fortran = false) {
  std::string s = "(";
  for (auto d : shape) s += std::to_string(d) + ", ";
  if (shape.size() > 1) s.resize(s.size() - 2);
  s += ")";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': " + s + ", }";
  std::size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string h = "\x93NUMPY";
  h += '\x01';
  h += '\x00';
  h += static_cast<char>(dict.size() & 0xff);
  h += static_cast<char>(dict.size() >> 8);
  return h + dict;
}

template <class T>
void write_npy(const std::filesystem::path& p, const std::vector<T>& values,
               std::vector<std::int64_t> shape = {}) {
  if (shape.empty()) shape = {static_cast<std::int64_t>(values.size())};
  std::ofstream out(p, std::ios::binary);
  out << npy_header(npy_descr<T>(), shape);
  if constexpr (std::is_same_v<T, bool>) {
    for (bool b : values) out.put(b ? 1 : 0);
  } else {
    out.write(reinterpret_cast<const char*>(values.data()),
              static_cast<std::streamsize>(values.size() * sizeof(T)));
  }
}

}  // namespace tally::test
