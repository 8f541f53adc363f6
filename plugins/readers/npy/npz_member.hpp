// One .npy member of a NumPy .npz archive (a zip file: np.savez stores members, np.savez_compressed
// deflates them), read with libzip.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "npy_file.hpp"
#include "tally/sdk/tensor.hpp"

namespace tally_npy {

/// A field value that names an archive member: "ARCHIVE.npz:MEMBER", or "ARCHIVE.npz" alone
/// (the member is then named after the field). The split is at the LAST ".npz:" of the value;
/// a value with no ".npz:" that does not end in ".npz" is a plain .npy path (nullopt).
struct NpzRef {
  std::string archive;
  std::string member;
};
std::optional<NpzRef> parse_npz_ref(std::string_view value, std::string_view field);

class NpzMember {
 public:
  /// Opens the archive, finds the member ("name" or "name.npy") and parses its .npy header.
  /// InputError "<what>: <problem>" for a missing or corrupt archive, a missing member (listing
  /// the members found), an encrypted member, or a bad .npy header.
  NpzMember(const NpzRef& ref, const std::string& what);
  ~NpzMember();
  NpzMember(const NpzMember&) = delete;
  NpzMember& operator=(const NpzMember&) = delete;

  /// The parsed header (data and mapping empty).
  const NpyFile& header() const { return header_; }

  /// Rows [begin, end) of the leading dimension, in owned memory (a tensor of that many rows).
  /// Reads (inflating a deflated member) through the whole member, so that libzip checks its
  /// CRC: InputError for a corrupt or truncated member. Call once.
  tally::Tensor read_rows(std::int64_t begin, std::int64_t end);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  NpyFile header_;
  std::string what_;
};

}  // namespace tally_npy
