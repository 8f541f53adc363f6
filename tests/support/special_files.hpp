// Entries that are not regular files, made in a test's folder: the FIFO, socket, device link,
// dangling link and folder that a reader must refuse, naming them, rather than skip or block on.
#pragma once

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace tally::test {

/// Makes one entry at `path` of each kind: "fifo", "socket", "dev_zero_link" (a link to
/// /dev/zero), "dangling_link", "folder", "link_loop" (a link to itself); false (and a test
/// failure) when it cannot.
inline bool make_special(const std::string& kind, const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (kind == "fifo") return ::mkfifo(path.c_str(), 0600) == 0;
  if (kind == "dev_zero_link") return fs::create_symlink("/dev/zero", path, ec), !ec;
  if (kind == "dangling_link") return fs::create_symlink(path.string() + ".gone", path, ec), !ec;
  if (kind == "folder") return fs::create_directory(path, ec);
  if (kind == "link_loop") return fs::create_symlink(path.filename(), path, ec), !ec;
  if (kind == "socket") {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.string().size() >= sizeof addr.sun_path) return false;
    std::strcpy(addr.sun_path, path.c_str());
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (fd >= 0) ::close(fd);
    return ok;
  }
  ADD_FAILURE() << "unknown kind " << kind;
  return false;
}

/// The kinds make_special makes and the words a reader's message has for each.
inline const std::vector<std::pair<std::string, std::string>>& special_kinds() {
  static const std::vector<std::pair<std::string, std::string>> kinds{
      {"fifo", "(a FIFO)"},
      {"socket", "(a socket)"},
      {"dev_zero_link", "(a link to a character device)"},
      {"dangling_link", "(a link to nothing"},
      {"folder", "(a folder)"},
      {"link_loop", "(a link that cannot be followed: Too many levels of symbolic links)"}};
  return kinds;
}

}  // namespace tally::test
