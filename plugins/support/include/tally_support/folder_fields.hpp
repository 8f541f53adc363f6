// Readers whose fields are folders of files matched by name (png_masks, images, wav): the field
// and its folder, the walk that lists a folder's files, the error when two folders do not hold
// the same file names; and the check every reader makes of a file before it opens it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "tally/sdk/error.hpp"

namespace tally::support {

struct FolderField {
  std::string name;
  std::filesystem::path dir;
};

/// What `path` is when it is not a regular file: "a FIFO", "a character device", "a socket", "a
/// folder", "a block device", "a link to nothing", ...; "" for a regular file (or a link to one).
/// Found with stat/lstat only: nothing is opened (opening a FIFO waits for a writer).
std::string not_regular_kind(const std::filesystem::path& path);

/// InputError "<what>: <path> is not a regular file (<kind>); <expected>" unless `path` is a
/// regular file or a link to one; "<what>: <path>: cannot open (<reason>)" when it cannot be
/// looked at (missing, no permission). `expected` says what was expected ("a PNG file").
void require_regular_file(const std::filesystem::path& path, std::string_view what,
                          std::string_view expected);

/// The sorted (byte order) names of the entries of the field's folder whose extension is
/// `extension` (".wav", ".png"; any case). Every such entry must be a regular file or a link to
/// one: a FIFO, device, socket, folder or dangling link of that name is an InputError naming it
/// (never skipped: a skipped file changes the count and the matching of the samples). InputError
/// when the folder is missing, not a folder or cannot be listed. Entries of other names are not
/// looked at.
std::vector<std::string> folder_file_names(std::string_view reader, const FolderField& field,
                                           std::string_view extension);

/// InputError naming the first file (in name order) that one field's folder has and the other's
/// lacks, and how many more names differ. `in_a` and `in_b`: the sorted file names of a and b.
[[noreturn]] inline void folder_mismatch(std::string_view reader, std::string_view extension,
                                         const FolderField& a, const std::vector<std::string>& in_a,
                                         const FolderField& b,
                                         const std::vector<std::string>& in_b) {
  std::vector<std::string> only_a, only_b;
  std::set_difference(in_a.begin(), in_a.end(), in_b.begin(), in_b.end(),
                      std::back_inserter(only_a));
  std::set_difference(in_b.begin(), in_b.end(), in_a.begin(), in_a.end(),
                      std::back_inserter(only_b));
  const bool a_has = !only_a.empty() && (only_b.empty() || only_a.front() < only_b.front());
  const FolderField& has = a_has ? a : b;
  const FolderField& lacks = a_has ? b : a;
  const auto& missing = a_has ? only_a : only_b;
  const std::size_t more = only_a.size() + only_b.size() - 1;
  throw InputError(fmt::format(
      "{} reader: '{}' is in {} (field '{}') but not in {} (field '{}'){}; the folders must hold "
      "the same file names ({} and {} {} files)",
      reader, missing.front(), has.dir.string(), has.name, lacks.dir.string(), lacks.name,
      more == 0 ? std::string() : fmt::format(", and {} more name(s) differ", more), in_a.size(),
      in_b.size(), extension));
}

}  // namespace tally::support
