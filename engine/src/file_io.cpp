#include "file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "tally/error.hpp"

namespace tally {

namespace fs = std::filesystem;

std::optional<std::string> read_whole_file(const fs::path& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return std::nullopt;
  std::string bytes;
  char buf[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) bytes.append(buf, n);
  if (std::ferror(f.get()) != 0) {
    if (errno == 0) errno = EIO;
    return std::nullopt;
  }
  return bytes;
}

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    throw RuntimeError(
        fmt::format("cannot open the folder '{}': {}", dir.string(), std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems cannot fsync a folder (EINVAL); their renames are as durable as they get.
  if (rc != 0 && err != EINVAL)
    throw RuntimeError(
        fmt::format("cannot fsync the folder '{}': {}", dir.string(), std::strerror(err)));
}

void write_file_atomic(const fs::path& path, std::string_view bytes) {
  const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  std::string tmpl = (dir / fmt::format(".{}.tmp.XXXXXX", path.filename().string())).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0)
    throw RuntimeError(fmt::format("cannot write '{}': {}", path.string(), std::strerror(errno)));
  const auto fail = [&](const char* what, bool close_fd) {
    const int err = errno;
    if (close_fd) ::close(fd);
    ::unlink(tmpl.c_str());
    throw RuntimeError(
        fmt::format("cannot write '{}' ({}): {}", path.string(), what, std::strerror(err)));
  };
  std::size_t done = 0;
  while (done < bytes.size()) {
    const auto n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write", true);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) fail("chmod", true);
  if (::fsync(fd) != 0) fail("fsync", true);
  if (::close(fd) != 0) fail("close", false);
  if (::rename(tmpl.c_str(), path.c_str()) != 0) fail("rename", false);
  fsync_dir(dir);
}

}  // namespace tally
