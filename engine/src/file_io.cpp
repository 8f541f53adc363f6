#include "tally/file_io.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "tally/sdk/error.hpp"

namespace tally {

namespace fs = std::filesystem;

namespace {

// Closes a file descriptor when it goes.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// "config 'eval.yaml'", or "'eval.yaml'" when there is no word for it.
std::string named(std::string_view what, const fs::path& path) {
  return what.empty() ? fmt::format("'{}'", path.string())
                      : fmt::format("{} '{}'", what, path.string());
}

// "a character device": what a file that is not a regular file is, for messages.
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a regular file";
}

void clear_nonblock(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0 && (flags & O_NONBLOCK) != 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
}

}  // namespace

std::string format_size(std::uint64_t bytes) {
  constexpr std::uint64_t kGiB = kMiB << 10;
  const auto unit = [&](std::uint64_t u, const char* name) {
    return bytes % u == 0 ? fmt::format("{} {}", bytes / u, name)
                          : fmt::format("{:.1f} {}",
                                        static_cast<double>(bytes) / static_cast<double>(u), name);
  };
  if (bytes >= kGiB) return unit(kGiB, "GiB");
  if (bytes >= kMiB) return unit(kMiB, "MiB");
  if (bytes >= 1024) return unit(1024, "KiB");
  return fmt::format("{} bytes", bytes);
}

// ---- reading ------------------------------------------------------------------------------------

std::string read_whole_file(const fs::path& path, std::string_view what, std::uint64_t max_bytes) {
  const std::string name = named(what, path);
  const auto not_regular = [&](mode_t mode) {
    return InputError(fmt::format("{} is not a regular file ({}); a regular file was expected",
                                  name, file_kind(mode)));
  };
  // Refused before it is opened: opening a device can have effects, and a FIFO can block.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) throw not_regular(st.st_mode);
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) throw InputError(fmt::format("cannot read {}: {}", name, std::strerror(errno)));
  if (::fstat(fd.get(), &st) != 0)
    throw InputError(fmt::format("cannot read {}: {}", name, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) throw not_regular(st.st_mode);  // replaced since the stat
  clear_nonblock(fd.get());
  const auto limit = [&] {
    return fmt::format("the limit for {} is {}", what.empty() ? "this file" : what,
                       format_size(max_bytes));
  };
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes)
    throw InputError(fmt::format(
        "{} is {}, too large: {}", name,
        size < 1024 ? format_size(size) : fmt::format("{} ({} bytes)", format_size(size), size),
        limit()));
  std::string bytes;
  bytes.reserve(static_cast<std::size_t>(size));
  // At most max_bytes + 1 bytes: a file that grows while read (or a /proc file, whose size says
  // 0) cannot make this read forever.
  char buf[1 << 16];
  while (true) {
    const std::uint64_t room = max_bytes + 1 - bytes.size();
    const auto n =
        ::read(fd.get(), buf, static_cast<std::size_t>(std::min<std::uint64_t>(sizeof buf, room)));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(fmt::format("cannot read {}: {}", name, std::strerror(errno)));
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<std::size_t>(n));
    if (bytes.size() > max_bytes)
      throw InputError(fmt::format("{} is larger than {} (it grew while read): {}", name,
                                   format_size(max_bytes), limit()));
  }
  return bytes;
}

// ---- folders ------------------------------------------------------------------------------------

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

unsigned current_umask() {
  // Linux 4.7+ says it in /proc/self/status; umask() itself can only be read by setting it.
  if (std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen("/proc/self/status", "re"),
                                                        &std::fclose);
      f) {
    char line[256];
    while (std::fgets(line, sizeof line, f.get()) != nullptr) {
      if (std::strncmp(line, "Umask:", 6) != 0) continue;
      char* end = nullptr;
      const unsigned long v = std::strtoul(line + 6, &end, 8);
      if (end != line + 6 && v <= 0777) return static_cast<unsigned>(v);
      break;
    }
  }
  const mode_t m = ::umask(022);
  ::umask(m);
  return static_cast<unsigned>(m);
}

namespace {

// ---- output targets -----------------------------------------------------------------------------

enum class Kind { New, Regular, Device, Fifo, Socket, Descriptor };

struct Target {
  Kind kind = Kind::New;
  fs::path path;  // the final target, after symlinks
  mode_t mode = 0;
  int fd = -1;  // Kind::Descriptor: the file descriptor the path names
};

// /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: this process's own file descriptor N,
// written through as it is (its offset, its O_APPEND), not opened again.
std::optional<int> descriptor_of(const fs::path& p) {
  const std::string s = p.lexically_normal().string();
  if (s == "/dev/stdin") return 0;
  if (s == "/dev/stdout") return 1;
  if (s == "/dev/stderr") return 2;
  for (const std::string& prefix :
       {std::string("/dev/fd/"), std::string("/proc/self/fd/"),
        std::string("/proc/thread-self/fd/"), fmt::format("/proc/{}/fd/", ::getpid())}) {
    if (s.size() <= prefix.size() || s.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = s.substr(prefix.size());
    if (digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    return std::stoi(digits);
  }
  return std::nullopt;
}

long name_max_of(const fs::path& dir) {
  const long n = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  return n > 0 ? n : 255;
}

[[noreturn]] void name_too_long(std::string_view what, const fs::path& given, const fs::path& p,
                                long max) {
  const std::string file = p.filename().string();
  throw ConfigError(
      fmt::format("{}: the file name is {} bytes long; the file system allows at most {}",
                  named(what, given), file.size(), max));
}

// Follows symlinks one by one (each hop may name a file descriptor) to what the output really
// is. ConfigError for what cannot take output.
Target resolve(const fs::path& given, std::string_view what) {
  if (given.empty())
    throw ConfigError(fmt::format("{}: the path is empty; a file name was expected",
                                  what.empty() ? "output" : what));
  fs::path p = given;
  for (int hop = 0; hop <= 40; ++hop) {
    if (const auto fd = descriptor_of(p)) return Target{Kind::Descriptor, p, 0, *fd};
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      const int err = errno;
      if (err == ENOENT) {
        if (p.filename().empty())
          throw ConfigError(
              fmt::format("{} ends with '/': a file name was expected, and the "
                          "folder '{}' does not exist",
                          named(what, given), p.parent_path().string()));
        return Target{Kind::New, p};
      }
      if (err == ENAMETOOLONG && p.filename().string().size() > 255)
        name_too_long(what, given, p, 255);
      throw ConfigError(fmt::format("{}: cannot use '{}': {}", named(what, given), p.string(),
                                    std::strerror(err)));
    }
    if (S_ISLNK(st.st_mode)) {
      std::string link(static_cast<std::size_t>(st.st_size > 0 ? st.st_size : 255) + 1, '\0');
      const auto n = ::readlink(p.c_str(), link.data(), link.size());
      if (n < 0 || static_cast<std::size_t>(n) >= link.size())
        throw ConfigError(fmt::format("{}: cannot read the symlink '{}': {}", named(what, given),
                                      p.string(), std::strerror(n < 0 ? errno : ENAMETOOLONG)));
      link.resize(static_cast<std::size_t>(n));
      const fs::path to(link);
      p = to.is_absolute() ? to : p.parent_path() / to;
      continue;
    }
    if (S_ISREG(st.st_mode)) return Target{Kind::Regular, p, st.st_mode};
    if (S_ISCHR(st.st_mode)) return Target{Kind::Device, p, st.st_mode};
    if (S_ISFIFO(st.st_mode)) return Target{Kind::Fifo, p, st.st_mode};
    if (S_ISSOCK(st.st_mode)) return Target{Kind::Socket, p, st.st_mode};
    if (S_ISDIR(st.st_mode))
      throw ConfigError(
          fmt::format("{} is a folder, a file name was expected", named(what, given)));
    throw ConfigError(
        fmt::format("{} is {}; tally writes regular files, character devices, "
                    "FIFOs and sockets",
                    named(what, given), file_kind(st.st_mode)));
  }
  throw ConfigError(
      fmt::format("{}: too many levels of symlinks (a symlink loop?)", named(what, given)));
}

fs::path folder_of(const fs::path& p) {
  return p.parent_path().empty() ? fs::path(".") : p.parent_path();
}

// Makes the missing folders of an output's path as given (mkdir -p: `-o reports/r.json` with no
// reports/ yet), not the folders a symlink points into (a link to a missing folder stays an
// error). ConfigError naming the output when a folder cannot be made (a file in the way, no
// permission, a read-only file system).
// Nothing for a file descriptor (/dev/fd/N), an empty path or "dir/" (resolve() names what is
// wrong with those).
void make_folders(const fs::path& given, std::string_view name) {
  if (given.filename().empty() || descriptor_of(given)) return;
  const fs::path dir = folder_of(given);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(dir, ec))) return;  // a folder, or what resolve() refuses
  fs::create_directories(dir, ec);
  if (ec)
    throw ConfigError(
        fmt::format("{}: cannot create the folder '{}': {}", name, dir.string(), ec.message()));
}

// The temporary name of `file` in its folder: ".NAME.tmp.PID.XXXXXX", NAME cut (at a UTF-8
// character boundary) when the whole would be longer than the folder allows.
std::string temp_name(const std::string& file, long name_max) {
  const std::string tail = fmt::format(".tmp.{}.XXXXXX", ::getpid());
  std::string stem = file;
  const auto room = static_cast<std::size_t>(std::max<long>(name_max, 32)) - 1 - tail.size();
  if (stem.size() > room) {
    std::size_t cut = room;
    while (cut > 0 && (static_cast<unsigned char>(stem[cut]) & 0xC0) == 0x80) --cut;
    stem.resize(cut);
  }
  return "." + stem + tail;
}

// The PID in a temporary name written by temp_name, or nullopt when `name` is not one.
std::optional<pid_t> temp_pid(std::string_view name) {
  if (name.size() < 2 || name[0] != '.') return std::nullopt;
  const auto at = name.rfind(".tmp.");
  if (at == std::string_view::npos || at == 0) return std::nullopt;
  const std::string_view rest = name.substr(at + 5);  // PID.XXXXXX
  const auto dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 9 || rest.size() - dot - 1 != 6)
    return std::nullopt;
  long pid = 0;
  for (char c : rest.substr(0, dot)) {
    if (c < '0' || c > '9') return std::nullopt;
    pid = pid * 10 + (c - '0');
  }
  for (char c : rest.substr(dot + 1))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
      return std::nullopt;
  if (pid <= 0) return std::nullopt;
  return static_cast<pid_t>(pid);
}

// Removes the temporary files a killed tally left in `dir`: their PID is gone (ESRCH) and no
// process holds their lock (a live writer holds it from creation to rename, so a run in another
// PID namespace that shares the folder keeps its files). Only regular files of this user.
void remove_stale_temps(const fs::path& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), &::closedir);
  if (!d) return;
  const pid_t me = ::getpid();
  while (const dirent* e = ::readdir(d.get())) {
    const auto pid = temp_pid(e->d_name);
    if (!pid || *pid == me) continue;
    if (::kill(*pid, 0) == 0 || errno != ESRCH) continue;
    Fd fd(::openat(::dirfd(d.get()), e->d_name,
                   O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
    if (fd.get() < 0) continue;
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;
    ::unlinkat(::dirfd(d.get()), e->d_name, 0);
  }
}

// Whether the file open as `fd` holds exactly `bytes`.
bool same_contents(int fd, std::string_view bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != bytes.size()) return false;
  char buf[1 << 16];
  for (std::size_t at = 0; at < bytes.size();) {
    const auto n =
        ::pread(fd, buf, std::min(sizeof buf, bytes.size() - at), static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || bytes.compare(at, static_cast<std::size_t>(n),
                                std::string_view(buf, static_cast<std::size_t>(n))) != 0)
      return false;
    at += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

int write_all(int fd, std::string_view bytes) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigset_t pending;
  sigemptyset(&pending);
  ::sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  ::pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  int err = 0;
  std::size_t done = 0;
  while (done < bytes.size()) {
    const auto n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (err == EPIPE && !was_pending) {
    const timespec zero{0, 0};
    while (::sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return err;
}

// ---- staged files removed on SIGTERM and SIGINT -----------------------------------------------

namespace {

// A fixed table of the temporary files that OutputSets hold, read by the signal handler (which
// may only use async-signal-safe calls: no allocation, no locks). A slot is 0 (free), 1 (being
// filled), 2 (a temporary file's absolute path), 3 (being removed by the handler) or 4 (removed
// by the handler, the process going on: the program's own handler took the signal).
struct StagedSlot {
  std::atomic<int> state{0};
  char path[PATH_MAX];
};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs lock-free atomics");
constexpr std::size_t kStagedSlots = 64;
StagedSlot g_staged[kStagedSlots];

constexpr int kCleanedSignals[] = {SIGTERM, SIGINT};
struct sigaction g_previous[2];  // the actions before ours, by kCleanedSignals' order
bool g_installed[2] = {false, false};
std::mutex g_install_mutex;  // installing and restoring the handler (never in the handler)
int g_staged_count = 0;      // under g_install_mutex
// The signal that removed the staged files while the process went on (0: none): the OutputSets
// that staged them then fail instead of renaming files that are gone.
std::atomic<int> g_removed_by{0};

// Removes every staged temporary file, then does what the signal did before: the default action
// (the process ends with the signal, as without tally's handler), or the program's own handler.
extern "C" void remove_staged_files(int sig, siginfo_t* info, void* context) {
  const int saved = errno;
  for (auto& slot : g_staged) {
    int expected = 2;
    if (!slot.state.compare_exchange_strong(expected, 3)) continue;
    ::unlink(slot.path);
    slot.state.store(4);
  }
  g_removed_by.store(sig);
  const struct sigaction& previous = g_previous[sig == SIGINT ? 1 : 0];
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(sig, info, context);
  } else if (previous.sa_handler == SIG_DFL) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);  // delivered when this handler returns (the signal is blocked until then)
  } else if (previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
  }
  errno = saved;
}

// Registers `path` (absolute) for removal on SIGTERM and SIGINT; -1 when it cannot be (the table
// is full, the path longer than PATH_MAX): the file is then only removed on the usual paths.
int register_staged(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  for (std::size_t i = 0; i < kStagedSlots; ++i) {
    int expected = 0;
    if (!g_staged[i].state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(g_staged[i].path, path.c_str(), path.size() + 1);
    const std::lock_guard<std::mutex> lock(g_install_mutex);
    if (g_staged_count++ == 0) {
      g_removed_by.store(0);  // a signal that came before this set has nothing to do with it
      for (std::size_t k = 0; k < std::size(kCleanedSignals); ++k) {
        struct sigaction ours {};
        ours.sa_sigaction = &remove_staged_files;
        ours.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&ours.sa_mask);
        for (const int other : kCleanedSignals) sigaddset(&ours.sa_mask, other);
        struct sigaction previous {};
        // A signal the program ignores stays ignored (a background job's SIGINT, nohup's).
        g_installed[k] = ::sigaction(kCleanedSignals[k], nullptr, &previous) == 0 &&
                         previous.sa_handler != SIG_IGN &&
                         ::sigaction(kCleanedSignals[k], &ours, &g_previous[k]) == 0;
      }
    }
    g_staged[i].state.store(2);
    return static_cast<int>(i);
  }
  return -1;
}

// The temporary file of slot `i` is gone (renamed or removed): the slot is free again, and the
// program's own actions are back once no file is staged.
void unregister_staged(int i) {
  if (i < 0) return;
  auto& state = g_staged[static_cast<std::size_t>(i)].state;
  int expected = 2;
  // 3: the handler is removing every file on another thread; the slot stays as it is.
  if (!state.compare_exchange_strong(expected, 0) &&
      !(expected == 4 && state.compare_exchange_strong(expected, 0)))
    return;
  const std::lock_guard<std::mutex> lock(g_install_mutex);
  if (--g_staged_count > 0) return;
  for (std::size_t k = 0; k < std::size(kCleanedSignals); ++k)
    if (std::exchange(g_installed[k], false))
      ::sigaction(kCleanedSignals[k], &g_previous[k], nullptr);
}

}  // namespace

// ---- OutputSet ----------------------------------------------------------------------------------

struct OutputSet::Entry {
  std::string what;
  fs::path given;
  Target target;
  fs::path dir;
  std::string tmp;    // the temporary file (regular targets)
  int slot = -1;      // its slot in the table the SIGTERM and SIGINT handler removes
  int fd = -1;        // the temporary file, locked; or the device, FIFO, socket, descriptor
  std::string bytes;  // written through at commit (not a regular target)
  bool renamed = false;

  bool through() const { return target.kind != Kind::New && target.kind != Kind::Regular; }
  std::string name() const { return named(what, given); }

  ~Entry() {
    if (fd >= 0) ::close(fd);
    if (!tmp.empty() && !renamed) ::unlink(tmp.c_str());
    unregister_staged(slot);
  }
};

OutputSet::OutputSet() = default;
OutputSet::~OutputSet() = default;  // each Entry removes its temporary file unless renamed

void OutputSet::stage(const fs::path& path, std::string_view bytes, std::string_view what) {
  auto e = std::make_unique<Entry>();
  e->what = std::string(what);
  e->given = path;
  make_folders(path, named(what, path));
  e->target = resolve(path, what);
  const auto fail = [&](const char* step, int err) {
    return RuntimeError(
        fmt::format("cannot write {} ({}): {}", e->name(), step, std::strerror(err)));
  };
  switch (e->target.kind) {
    case Kind::Descriptor:
      e->fd = ::fcntl(e->target.fd, F_DUPFD_CLOEXEC, 3);
      if (e->fd < 0)
        throw ConfigError(
            fmt::format("{}: file descriptor {} is not open", e->name(), e->target.fd));
      break;
    case Kind::Device:
    case Kind::Fifo: {
      // O_NONBLOCK: a FIFO that nobody reads fails at once (ENXIO) instead of blocking.
      e->fd = ::open(e->target.path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      if (e->fd < 0) {
        const int err = errno;
        if (e->target.kind == Kind::Fifo && err == ENXIO)
          throw ConfigError(
              fmt::format("{} is a FIFO and no process is reading the FIFO", e->name()));
        throw ConfigError(fmt::format("{}: cannot open {} for writing: {}", e->name(),
                                      file_kind(e->target.mode), std::strerror(err)));
      }
      clear_nonblock(e->fd);
      break;
    }
    case Kind::Socket: {
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      const std::string s = e->target.path.string();
      if (s.size() >= sizeof addr.sun_path)
        throw ConfigError(
            fmt::format("{} is a socket whose path is too long to connect to", e->name()));
      std::memcpy(addr.sun_path, s.c_str(), s.size() + 1);
      e->fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (e->fd < 0 ||
          ::connect(e->fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        const int err = errno;
        throw ConfigError(fmt::format("{} is a socket and connecting to it failed: {}", e->name(),
                                      std::strerror(err)));
      }
      break;
    }
    case Kind::New:
    case Kind::Regular: {
      e->dir = folder_of(e->target.path);
      const std::string file = e->target.path.filename().string();
      const long name_max = name_max_of(e->dir);
      if (static_cast<long>(file.size()) > name_max)
        name_too_long(what, path, e->target.path, name_max);
      // Two outputs naming one file: the same bytes are written once; different bytes are an
      // error (one would silently replace the other).
      std::error_code ec;
      const auto canonical = fs::weakly_canonical(e->target.path, ec);
      for (const auto& other : entries_) {
        if (other->through() || ec) continue;
        std::error_code ec2;
        if (fs::weakly_canonical(other->target.path, ec2) != canonical || ec2) continue;
        if (same_contents(other->fd, bytes)) return;
        throw ConfigError(fmt::format("{} and {} name the same file", other->name(), e->name()));
      }
      if (std::find(cleaned_dirs_.begin(), cleaned_dirs_.end(), e->dir) == cleaned_dirs_.end()) {
        remove_stale_temps(e->dir);
        cleaned_dirs_.push_back(e->dir);
      }
      std::string tmpl = (e->dir / temp_name(file, name_max)).string();
      {
        // Created and registered with SIGTERM and SIGINT held back on this thread: one that
        // comes in between finds the file registered and removes it.
        sigset_t held, old;
        sigemptyset(&held);
        for (const int sig : kCleanedSignals) sigaddset(&held, sig);
        ::pthread_sigmask(SIG_BLOCK, &held, &old);
        e->fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
        const int err = errno;
        if (e->fd >= 0) {
          e->tmp = tmpl;
          std::error_code abs_ec;
          const fs::path absolute = fs::absolute(tmpl, abs_ec);
          e->slot = register_staged(abs_ec ? tmpl : absolute.string());
        }
        ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
        if (e->fd < 0) throw fail("create a temporary file in its folder", err);
      }
      // Locked while it exists: a later run never takes it for a killed run's leftover.
      ::flock(e->fd, LOCK_EX | LOCK_NB);
      if (const int err = write_all(e->fd, bytes)) throw fail("write", err);
      const mode_t mode = e->target.kind == Kind::Regular
                              ? (e->target.mode & 0777)
                              : static_cast<mode_t>(0666 & ~current_umask());
      if (::fchmod(e->fd, mode) != 0) throw fail("chmod", errno);
      if (::fsync(e->fd) != 0) throw fail("fsync", errno);
      break;
    }
  }
  if (e->through()) e->bytes = std::string(bytes);
  entries_.push_back(std::move(e));
}

namespace {

// RuntimeError when a signal removed the staged files (the program's own handler took it and the
// process went on): nothing is written, and nothing is renamed into place.
void check_not_removed() {
  if (const int sig = g_removed_by.load())
    throw RuntimeError(fmt::format(
        "the outputs were not written: signal {} ({}) came while they were staged, and their "
        "temporary files were removed",
        sig, sig == SIGINT ? "SIGINT" : "SIGTERM"));
}

}  // namespace

void OutputSet::commit() {
  if (committed_) return;
  check_not_removed();
  // The outputs that are written through first: they are the ones that can still fail (a full
  // device, a reader that went away), and nothing has been renamed yet when they do.
  for (auto& e : entries_) {
    if (!e->through()) continue;
    if (const int err = write_all(e->fd, e->bytes))
      throw RuntimeError(fmt::format(
          "cannot write {}: {}", e->name(),
          err == EPIPE ? "the process reading it went away (broken pipe)" : std::strerror(err)));
    const int fd = std::exchange(e->fd, -1);
    if (::close(fd) != 0 && errno != EINTR) {
      const int err = errno;
      throw RuntimeError(fmt::format("cannot write {}: {}", e->name(), std::strerror(err)));
    }
  }
  std::vector<fs::path> dirs;
  check_not_removed();
  for (auto& e : entries_) {
    if (e->through()) continue;
    if (::rename(e->tmp.c_str(), e->target.path.c_str()) != 0) {
      const int err = errno;
      throw RuntimeError(
          fmt::format("cannot write {} (rename): {}", e->name(), std::strerror(err)));
    }
    e->renamed = true;
    unregister_staged(std::exchange(e->slot, -1));
    if (std::find(dirs.begin(), dirs.end(), e->dir) == dirs.end()) dirs.push_back(e->dir);
  }
  committed_ = true;
  for (auto& e : entries_) {
    if (e->fd >= 0) ::close(std::exchange(e->fd, -1));  // releases the lock, after the rename
  }
  for (const auto& d : dirs) fsync_dir(d);
}

void write_file_atomic(const fs::path& path, std::string_view bytes, std::string_view what) {
  OutputSet out;
  out.stage(path, bytes, what);
  out.commit();
}

void check_writable(const fs::path& path, std::string_view what) {
  const std::string name = named(what, path);
  make_folders(path, name);
  const Target t = resolve(path, what);
  switch (t.kind) {
    case Kind::Descriptor:
      if (::fcntl(t.fd, F_GETFD) < 0)
        throw ConfigError(fmt::format("{}: file descriptor {} is not open", name, t.fd));
      return;
    case Kind::Device:
    case Kind::Fifo:
      if (::access(t.path.c_str(), W_OK) != 0)
        throw ConfigError(fmt::format("{}: {} is not writable: {}", name, file_kind(t.mode),
                                      std::strerror(errno)));
      return;
    case Kind::Socket:
      return;  // connected to when written
    case Kind::New:
    case Kind::Regular:
      break;
  }
  const fs::path dir = folder_of(t.path);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw ConfigError(fmt::format("{}: the folder '{}' does not exist", name, dir.string()));
  const long name_max = name_max_of(dir);
  const std::string file = t.path.filename().string();
  if (static_cast<long>(file.size()) > name_max) name_too_long(what, path, t.path, name_max);
  // A temporary file made and removed at once: the folder's mode, a read-only file system, a
  // pseudo file system (/proc, /sys) or a quota, whatever would stop the write after the run
  // stops it now (root passes access(W_OK) checks that the write itself fails).
  std::string probe = (dir / temp_name(file, name_max)).string();
  const int fd = ::mkostemp(probe.data(), O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw ConfigError(fmt::format("{}: the folder '{}' is not writable: {}", name, dir.string(),
                                  std::strerror(err)));
  }
  ::unlink(probe.c_str());
  ::close(fd);
}

}  // namespace tally
