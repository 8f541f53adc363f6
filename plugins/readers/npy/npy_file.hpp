// One NumPy .npy file, memory-mapped read-only: the parsed header and a pointer to the data.
// Format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tally/sdk/tensor.hpp"

namespace tally_npy {

struct NpyFile {
  std::filesystem::path path;
  tally::DType dtype = tally::DType::F32;
  std::string descr;                // as written in the header ("<f4")
  std::vector<std::int64_t> shape;  // at least one dimension
  std::size_t header_bytes = 0;     // offset of the data in the file
  std::size_t row_bytes = 0;        // bytes of one sample (one index of the leading dimension)
  /// The data (the mapping plus header_bytes); valid as long as `mapping` lives.
  const std::byte* data = nullptr;
  /// Owns the mapping: handed to tensor views as their keepalive.
  std::shared_ptr<const void> mapping;
  /// The file's size when it was mapped, and a function that asks it again (empty where the
  /// data is not a mapped file). A file shortened within its last page raises no SIGBUS: its
  /// lost bytes read as zeros, so the reader compares the two before every batch.
  std::uint64_t file_size = 0;
  std::function<std::uint64_t()> size_now;

  std::int64_t samples() const { return shape.front(); }
};

/// Maps and parses `path`. InputError "<what>: <problem>" for a missing or unreadable file, a
/// bad magic string, an unsupported version, a malformed header, Fortran order, a big-endian or
/// unsupported dtype, a 0-d array, or a file shorter than its header says.
NpyFile open_npy(const std::filesystem::path& path, const std::string& what);

/// Parses the preamble and header of an .npy image of `file_size` bytes whose first bytes are
/// `file` (at least npy_prefix_bytes() of them, or all when the image is shorter). Checks that
/// the image holds the data the header announces. Leaves `path`, `data` and `mapping` empty.
NpyFile parse_npy(std::string_view file, std::size_t file_size, const std::string& what);

/// The length of the preamble plus header announced by the first 12 bytes of an .npy image; 0
/// when they do not start with the magic string (parse_npy reports that).
std::size_t npy_prefix_bytes(std::string_view first_12);

/// "(3, 4)", as NumPy writes shapes.
std::string shape_string(const std::vector<std::int64_t>& shape);

}  // namespace tally_npy
