#include "tally_support/folder_fields.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace tally::support {

namespace fs = std::filesystem;

namespace {

const char* kind_of_mode(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

std::string lower_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  for (char& c : ext)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return ext;
}

}  // namespace

std::string not_regular_kind(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    const std::string kind = kind_of_mode(st.st_mode);
    if (kind.empty()) return kind;
    struct stat link {};
    if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) return "a link to " + kind;
    return kind;
  }
  const int err = errno;
  struct stat link {};
  if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode))
    return err == ENOENT ? "a link to nothing (its target does not exist)"
                         : fmt::format("a link that cannot be followed: {}", std::strerror(err));
  return fmt::format("it cannot be looked at: {}", std::strerror(err));
}

void require_regular_file(const fs::path& path, std::string_view what, std::string_view expected) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    struct stat link {};
    if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode))
      throw InputError(fmt::format("{}: {} is not a regular file ({}); {} was expected", what,
                                   path.string(), not_regular_kind(path), expected));
    throw InputError(
        fmt::format("{}: {}: cannot open ({})", what, path.string(), std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode))
    throw InputError(fmt::format("{}: {} is not a regular file ({}); {} was expected", what,
                                 path.string(), not_regular_kind(path), expected));
}

std::vector<std::string> folder_file_names(std::string_view reader, const FolderField& field,
                                           std::string_view extension) {
  std::error_code ec;
  if (!fs::is_directory(field.dir, ec))
    throw InputError(fmt::format("{} reader: field '{}': {} is not a folder{}", reader, field.name,
                                 field.dir.string(),
                                 fs::exists(field.dir, ec) ? "" : " (it does not exist)"));
  std::vector<std::string> names;
  fs::directory_iterator it(field.dir, ec);
  if (ec)
    throw InputError(fmt::format("{} reader: field '{}': cannot list {}: {}", reader, field.name,
                                 field.dir.string(), ec.message()));
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::path& p = it->path();
    if (lower_extension(p) != extension) continue;
    const std::string kind = not_regular_kind(p);
    if (!kind.empty())
      throw InputError(fmt::format(
          "{} reader: field '{}': {} is not a regular file ({}); every {} entry of the folder "
          "must be a file (or a link to one)",
          reader, field.name, p.string(), kind, extension));
    names.push_back(p.filename().string());
  }
  if (ec)
    throw InputError(fmt::format("{} reader: field '{}': cannot list {}: {}", reader, field.name,
                                 field.dir.string(), ec.message()));
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace tally::support
