// tally/file_io.hpp: whole-file reads refuse what is not a regular file (without blocking on
// a FIFO) and are bounded in size; outputs are staged and committed all or none, written through
// devices, FIFOs, sockets and file descriptors (never renamed over them), through symlinks to
// their targets, with the umask's mode, shortened temporary names, and the removal of temporary
// files that killed runs left behind. The same paths end to end:
// tests/integration/test_outputs.cpp.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "file_io.hpp"
#include "support/expect_error.hpp"
#include "support/file_checks.hpp"
#include "support/process.hpp"
#include "tally/sdk/error.hpp"

namespace fs = std::filesystem;
using tally::test::error_of;
using tally::test::mode_of;
using tally::test::read_file;
using tally::test::TempDir;
using tally::test::temporaries;
using tally::test::write_text;

namespace {

// Runs `f` in a child process that SIGALRM ends after `seconds`: a call that regresses into
// blocking (a FIFO opened without O_NONBLOCK) fails the test instead of hanging it. Returns the
// message of the tally::Error it threw, "<no error>", or "<hung>".
std::string bounded_error(const std::function<void()>& f, unsigned seconds = 10) {
  int p[2];
  if (::pipe(p) != 0) return "<pipe failed>";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    ::alarm(seconds);
    std::string msg = "<no error>";
    try {
      f();
    } catch (const tally::Error& e) {
      msg = e.what();
    } catch (const std::exception& e) {
      msg = std::string("<other exception> ") + e.what();
    }
    if (::write(p[1], msg.data(), msg.size()) < 0) ::_exit(3);
    ::_exit(0);
  }
  ::close(p[1]);
  std::string msg;
  char buf[4096];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) msg.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGALRM ? "<hung>" : "<killed>";
  return msg;
}

// A PID that is certainly not running: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

// Restores the umask when it goes.
struct UmaskGuard {
  mode_t old;
  explicit UmaskGuard(mode_t m) : old(::umask(m)) {}
  ~UmaskGuard() { ::umask(old); }
};

}  // namespace

// ---- reading ------------------------------------------------------------------------------------

TEST(FileIo, ReadsARegularFileWhole) {
  TempDir dir;
  write_text(dir / "a.yaml", "x: 1\n");
  EXPECT_EQ(tally::read_whole_file(dir / "a.yaml", "config", 100), "x: 1\n");
  write_text(dir / "empty.yaml", "");
  EXPECT_EQ(tally::read_whole_file(dir / "empty.yaml", "config", 100), "");
  // Through a symlink: the target is read.
  fs::create_symlink(dir / "a.yaml", dir / "link.yaml");
  EXPECT_EQ(tally::read_whole_file(dir / "link.yaml", "config", 100), "x: 1\n");
  const auto missing = error_of([&] { tally::read_whole_file(dir / "no.yaml", "config", 100); });
  EXPECT_HAS(missing,
             "cannot read config '" + (dir / "no.yaml").string() + "': No such file or directory");
}

TEST(FileIo, RefusesWhatIsNotARegularFileWithoutBlocking) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  fs::create_directory(dir / "folder");
  // A listening socket's file.
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = (dir / "sock").string();
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  ASSERT_EQ(::bind(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(s, 1), 0);
  fs::create_symlink(dir / "fifo", dir / "to-fifo");
  const std::pair<fs::path, const char*> cases[] = {{"/dev/zero", "a character device"},
                                                    {"/dev/null", "a character device"},
                                                    {dir / "fifo", "a FIFO"},
                                                    {dir / "to-fifo", "a FIFO"},
                                                    {dir / "folder", "a folder"},
                                                    {dir / "sock", "a socket"}};
  for (const auto& [path, kind] : cases) {
    for (const char* what : {"config", "tolerances", "results", "Chart.js"}) {
      const auto msg = bounded_error([&] { tally::read_whole_file(path, what, 1 << 20); });
      EXPECT_EQ(msg, fmt::format("{} '{}' is not a regular file ({}); a regular file was expected",
                                 what, path.string(), kind));
    }
  }
  // Without a word for it: "'/dev/zero' is not a regular file".
  EXPECT_HAS(bounded_error([&] { tally::read_whole_file("/dev/zero", "", 1 << 20); }),
             "'/dev/zero' is not a regular file (a character device)");
  ::close(s);
}

TEST(FileIo, TheSizeReadIsBounded) {
  TempDir dir;
  write_text(dir / "ten", std::string(10, 'x'));
  EXPECT_EQ(tally::read_whole_file(dir / "ten", "config", 10).size(), 10u);
  EXPECT_EQ(error_of([&] { tally::read_whole_file(dir / "ten", "config", 9); }),
            fmt::format("config '{}' is 10 bytes, too large: the limit for config is 9 bytes",
                        (dir / "ten").string()));
  // Refused by its size, before reading: a sparse file of 64 MiB + 1 (the config limit).
  {
    const auto big = dir / "big.yaml";
    write_text(big, "");
    fs::resize_file(big, tally::kConfigMaxBytes + 1);
    EXPECT_HAS(error_of([&] { tally::read_whole_file(big, "config", tally::kConfigMaxBytes); }),
               "is 64.0 MiB (67108865 bytes), too large: the limit for config is 64 MiB");
    fs::resize_file(big, 3 * tally::kResultsMaxBytes / 2);
    EXPECT_HAS(error_of([&] { tally::read_whole_file(big, "results", tally::kResultsMaxBytes); }),
               "is 1.5 GiB (1610612736 bytes), too large: the limit for results is 1 GiB");
  }
  // A file whose size says less than it holds (/proc): at most limit + 1 bytes are read.
  EXPECT_HAS(bounded_error([] { tally::read_whole_file("/proc/self/maps", "config", 16); }),
             "config '/proc/self/maps' is larger than 16 bytes (it grew while read)");
  EXPECT_EQ(tally::format_size(812), "812 bytes");
  EXPECT_EQ(tally::format_size(64 * tally::kMiB), "64 MiB");
  EXPECT_EQ(tally::format_size(1536), "1.5 KiB");
}

// ---- outputs ------------------------------------------------------------------------------------

TEST(OutputSet, WritesAllOrNothing) {
  TempDir dir;
  write_text(dir / "a.json", "old a");
  {
    tally::OutputSet out;
    out.stage(dir / "a.json", "new a", "--output");
    out.stage(dir / "b.xml", "new b", "--junit");
    // Staged, not yet in place.
    EXPECT_EQ(read_file(dir / "a.json"), "old a");
    EXPECT_FALSE(fs::exists(dir / "b.xml"));
    EXPECT_EQ(temporaries(dir.path).size(), 2u);
    out.commit();
  }
  EXPECT_EQ(read_file(dir / "a.json"), "new a");
  EXPECT_EQ(read_file(dir / "b.xml"), "new b");
  EXPECT_TRUE(temporaries(dir.path).empty());

  // A failure while staging (the third output's folder cannot be made: a file is in its way),
  // and the set destroyed without a commit: nothing written, no temporary left, earlier files
  // intact.
  {
    tally::OutputSet out;
    out.stage(dir / "a.json", "newer a", "--output");
    out.stage(dir / "c.md", "c", "--markdown");
    EXPECT_THROW(out.stage(dir / "b.xml" / "sub" / "d.html", "d", "--html"), tally::ConfigError);
  }
  EXPECT_EQ(read_file(dir / "a.json"), "new a");
  EXPECT_FALSE(fs::exists(dir / "c.md"));
  EXPECT_TRUE(temporaries(dir.path).empty());

  // A failure at commit: a device that is full. The devices are written first, so no file has
  // been renamed yet.
  {
    tally::OutputSet out;
    out.stage(dir / "a.json", "newest a", "--output");
    out.stage("/dev/full", "html", "--html");
    EXPECT_HAS(error_of<tally::RuntimeError>([&] { out.commit(); }),
               "cannot write --html '/dev/full': No space left on device");
  }
  EXPECT_EQ(read_file(dir / "a.json"), "new a");
  EXPECT_TRUE(temporaries(dir.path).empty());
  EXPECT_TRUE(S_ISCHR(mode_of("/dev/full")));
}

TEST(OutputSet, ASymlinkHasItsTargetWritten) {
  TempDir dir;
  fs::create_directory(dir / "real");
  write_text(dir / "real" / "r.json", "old");
  fs::create_symlink("real/r.json", dir / "rel-link");         // relative
  fs::create_symlink(dir / "rel-link", dir / "link-to-link");  // a chain
  tally::write_file_atomic(dir / "rel-link", "one");
  EXPECT_TRUE(fs::is_symlink(dir / "rel-link"));
  EXPECT_EQ(read_file(dir / "real" / "r.json"), "one");
  tally::write_file_atomic(dir / "link-to-link", "two");
  EXPECT_TRUE(fs::is_symlink(dir / "link-to-link"));
  EXPECT_TRUE(fs::is_symlink(dir / "rel-link"));
  EXPECT_EQ(read_file(dir / "real" / "r.json"), "two");
  // The temporary file is made beside the target, not beside the link.
  EXPECT_TRUE(temporaries(dir.path).empty());
  EXPECT_TRUE(temporaries(dir / "real").empty());
  // A dangling link creates its target.
  fs::create_symlink(dir / "real" / "new.json", dir / "dangling");
  tally::write_file_atomic(dir / "dangling", "three");
  EXPECT_TRUE(fs::is_symlink(dir / "dangling"));
  EXPECT_EQ(read_file(dir / "real" / "new.json"), "three");
  // A loop, and a link into a folder that does not exist.
  fs::create_symlink(dir / "loop-b", dir / "loop-a");
  fs::create_symlink(dir / "loop-a", dir / "loop-b");
  EXPECT_HAS(
      error_of<tally::ConfigError>([&] { tally::check_writable(dir / "loop-a", "--output"); }),
      "--output '" + (dir / "loop-a").string() + "': too many levels of symlinks");
  fs::create_symlink(dir / "nowhere" / "x.json", dir / "into-nowhere");
  EXPECT_HAS(
      error_of<tally::ConfigError>([&] { tally::check_writable(dir / "into-nowhere", "--junit"); }),
      "the folder '" + (dir / "nowhere").string() + "' does not exist");
}

TEST(OutputSet, DevicesFifosSocketsAndDescriptorsAreWrittenThrough) {
  TempDir dir;
  // /dev/null: written through, still a character device after.
  tally::write_file_atomic("/dev/null", "{}", "--output");
  EXPECT_TRUE(S_ISCHR(mode_of("/dev/null")));
  fs::create_symlink("/dev/null", dir / "null-link");
  tally::write_file_atomic(dir / "null-link", "{}", "--output");
  EXPECT_TRUE(fs::is_symlink(dir / "null-link"));
  EXPECT_TRUE(S_ISCHR(mode_of("/dev/null")));

  // A FIFO with a reader gets the bytes; it stays a FIFO.
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] {
    const int fd = ::open(fifo.c_str(), O_RDONLY);
    char buf[256];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    ::close(fd);
  });
  // The reader must have opened its end before the FIFO is opened for writing (O_NONBLOCK).
  std::string staged;
  for (int i = 0; i < 2000 && staged.empty(); ++i) {
    try {
      tally::write_file_atomic(fifo, "through the fifo", "--output");
      staged = "ok";
    } catch (const tally::ConfigError&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  reader.join();
  EXPECT_EQ(staged, "ok");
  EXPECT_EQ(got, "through the fifo");
  EXPECT_TRUE(S_ISFIFO(mode_of(fifo)));

  // A socket: connected to and written.
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = (dir / "sock").string();
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  ASSERT_EQ(::bind(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(s, 1), 0);
  std::string from_socket;
  std::thread server([&] {
    const int c = ::accept(s, nullptr, nullptr);
    char buf[256];
    for (ssize_t n; (n = ::read(c, buf, sizeof buf)) > 0;)
      from_socket.append(buf, static_cast<size_t>(n));
    ::close(c);
  });
  tally::write_file_atomic(dir / "sock", "over the socket", "--markdown");
  server.join();
  ::close(s);
  EXPECT_EQ(from_socket, "over the socket");
  EXPECT_TRUE(S_ISSOCK(mode_of(dir / "sock")));

  // /dev/fd/N: this process's descriptor N, written as it is (here a pipe).
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  tally::write_file_atomic(fmt::format("/dev/fd/{}", p[1]), "down the pipe", "--junit");
  tally::write_file_atomic(fmt::format("/proc/self/fd/{}", p[1]), "!", "--junit");
  ::close(p[1]);
  std::string from_pipe;
  char buf[256];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;)
    from_pipe.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  EXPECT_EQ(from_pipe, "down the pipe!");
  EXPECT_HAS(error_of<tally::ConfigError>([] { tally::write_file_atomic("/dev/fd/987", "x"); }),
             "output '/dev/fd/987': file descriptor 987 is not open");
  EXPECT_TRUE(temporaries(dir.path).empty());
}

TEST(OutputSet, AFifoThatNobodyReadsIsAnErrorNotAHang) {
  TempDir dir;
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  write_text(dir / "a.json", "old");
  const auto msg = bounded_error([&] {
    tally::OutputSet out;
    out.stage(dir / "a.json", "new", "--output");
    out.stage(fifo, "x", "--html");
    out.commit();
  });
  EXPECT_EQ(msg, "--html '" + fifo.string() + "' is a FIFO and no process is reading the FIFO");
  EXPECT_EQ(read_file(dir / "a.json"), "old");
  EXPECT_TRUE(S_ISFIFO(mode_of(fifo)));
  EXPECT_TRUE(temporaries(dir.path).empty());
  // A reader that goes away mid-write is an error (EPIPE), not the end of the process (SIGPIPE).
  const auto broken = bounded_error([&] {
    const int r = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    tally::OutputSet out;
    out.stage(fifo, std::string(1 << 20, 'x'), "--html");
    ::close(r);
    out.commit();
  });
  EXPECT_EQ(broken, "cannot write --html '" + fifo.string() +
                        "': the process reading it went away (broken pipe)");
}

TEST(OutputSet, PathsThatCannotTakeOutputAreRefusedNamingTheOption) {
  TempDir dir;
  fs::create_directory(dir / "folder");
  write_text(dir / "file", "");
  const auto refused = [](const fs::path& p, const char* what) {
    const auto check = error_of<tally::ConfigError>([&] { tally::check_writable(p, what); });
    const auto stage = error_of<tally::ConfigError>([&] {
      tally::OutputSet out;
      out.stage(p, "x", what);
    });
    EXPECT_EQ(check, stage);
    return check;
  };
  EXPECT_EQ(refused("", "--output"), "--output: the path is empty; a file name was expected");
  EXPECT_EQ(refused("", "output.html"), "output.html: the path is empty; a file name was expected");
  EXPECT_EQ(refused(dir / "folder", "--junit"),
            "--junit '" + (dir / "folder").string() + "' is a folder, a file name was expected");
  EXPECT_EQ(refused(dir.path / "folder" / "", "--junit"),
            "--junit '" + (dir.path / "folder" / "").string() +
                "' is a folder, a file name was expected");
  EXPECT_HAS(refused(dir / "file" / "r.json", "--markdown"), "Not a directory");
  // A folder that does not exist yet is made (mkdir -p), by the check as by the write.
  tally::check_writable(dir / "none" / "deeper" / "r.json", "regression.baseline");
  EXPECT_TRUE(fs::is_directory(dir / "none" / "deeper"));
  EXPECT_HAS(error_of<tally::ConfigError>([&] {
               tally::check_writable(dir / "file" / "sub" / "r.json", "regression.baseline");
             }),
             "regression.baseline '" + (dir / "file" / "sub" / "r.json").string() +
                 "': cannot create the folder '" + (dir / "file" / "sub").string() +
                 "': Not a directory");
  // A folder no one can create files in (checked by making one, as root passes access()).
  EXPECT_EQ(error_of<tally::ConfigError>([&] { tally::check_writable("/proc/r.json", "--html"); }),
            "--html '/proc/r.json': the folder '/proc' is not writable: No such file or directory");
  EXPECT_TRUE(temporaries(dir.path).empty());
}

TEST(OutputSet, ABlockDeviceIsRefused) {
  TempDir dir;
  // A block device of our own (loop7), never one of the machine's: a regression must not be able
  // to replace a real device.
  if (::mknod((dir / "blk").c_str(), S_IFBLK | 0600, makedev(7, 7)) != 0)
    GTEST_FAIL() << "cannot create a block device node here (mknod: " << std::strerror(errno)
                 << "; needs CAP_MKNOD)";
  EXPECT_EQ(error_of<tally::ConfigError>([&] { tally::check_writable(dir / "blk", "--output"); }),
            "--output '" + (dir / "blk").string() +
                "' is a block device; tally writes regular files, character devices, FIFOs and "
                "sockets");
  EXPECT_THROW(tally::write_file_atomic(dir / "blk", "x"), tally::ConfigError);
  struct stat st {};
  ASSERT_EQ(::lstat((dir / "blk").c_str(), &st), 0);
  EXPECT_TRUE(S_ISBLK(st.st_mode));
}

TEST(OutputSet, NewFilesFollowTheUmaskAndReplacedFilesKeepTheirMode) {
  TempDir dir;
  {
    UmaskGuard g(077);
    EXPECT_EQ(tally::current_umask(), 077u);
    tally::write_file_atomic(dir / "a", "x");
    EXPECT_EQ(mode_of(dir / "a") & 07777, 0600u);
  }
  {
    UmaskGuard g(022);
    EXPECT_EQ(tally::current_umask(), 022u);
    tally::write_file_atomic(dir / "b", "x");
    EXPECT_EQ(mode_of(dir / "b") & 07777, 0644u);
    ::chmod((dir / "b").c_str(), 0640);
    tally::write_file_atomic(dir / "b", "y");
    EXPECT_EQ(mode_of(dir / "b") & 07777, 0640u);
    EXPECT_EQ(read_file(dir / "b"), "y");
  }
  {
    UmaskGuard g(0);
    tally::write_file_atomic(dir / "c", "x");
    EXPECT_EQ(mode_of(dir / "c") & 07777, 0666u);
  }
}

TEST(OutputSet, StaleTemporariesOfKilledRunsAreRemovedAndLiveOnesKept) {
  TempDir dir;
  const pid_t dead = dead_pid();
  const auto dead_tmp = fmt::format(".r.json.tmp.{}.Ab3xYz", dead);
  const auto other_dead_tmp = fmt::format(".report.html.tmp.{}.q1w2e3", dead);
  // Live: this process's parent, and a dead PID whose file a live process holds locked (a run in
  // another PID namespace sharing the folder).
  const auto live_tmp = fmt::format(".r.json.tmp.{}.Ab3xYz", ::getppid());
  const auto locked_tmp = fmt::format(".x.json.tmp.{}.ZZZZZZ", dead);
  // Not tally's: a name of another pattern.
  const std::string foreign = ".r.json.tmp.notapid";
  for (const auto& n : {dead_tmp, other_dead_tmp, live_tmp, locked_tmp, foreign})
    write_text(dir / n, "partial");
  const int lock = ::open((dir / locked_tmp).c_str(), O_RDONLY);
  ASSERT_EQ(::flock(lock, LOCK_EX), 0);

  tally::write_file_atomic(dir / "r.json", "done");
  EXPECT_FALSE(fs::exists(dir / dead_tmp));
  EXPECT_FALSE(fs::exists(dir / other_dead_tmp));
  EXPECT_TRUE(fs::exists(dir / live_tmp));
  EXPECT_TRUE(fs::exists(dir / locked_tmp));
  EXPECT_TRUE(fs::exists(dir / foreign));
  ::close(lock);
  EXPECT_EQ(read_file(dir / "r.json"), "done");

  // This run's own temporary names carry its PID.
  tally::OutputSet out;
  out.stage(dir / "s.json", "x");
  bool mine = false;
  for (const auto& n : temporaries(dir.path))
    mine |= n.rfind(fmt::format(".s.json.tmp.{}.", ::getpid()), 0) == 0;
  EXPECT_TRUE(mine);
}

TEST(OutputSet, LongNamesGetAShortenedTemporaryName) {
  TempDir dir;
  // 250 bytes: the name fits (255), its temporary name would not.
  const std::string name(250, 'n');
  tally::write_file_atomic(dir / name, "long");
  EXPECT_EQ(read_file(dir / name), "long");
  // Cut at a character boundary: 2-byte characters.
  std::string utf8;
  while (utf8.size() < 254) utf8 += "\xc3\xa9";  // é
  tally::write_file_atomic(dir / utf8, "accents");
  EXPECT_EQ(read_file(dir / utf8), "accents");
  EXPECT_TRUE(temporaries(dir.path).empty());
  // A name the file system cannot hold: one clear line.
  const std::string too_long(300, 'x');
  const auto msg =
      error_of<tally::ConfigError>([&] { tally::check_writable(dir / too_long, "--output"); });
  EXPECT_HAS(msg, "the file name is 300 bytes long; the file system allows at most 255");
  EXPECT_EQ(msg, error_of<tally::ConfigError>(
                     [&] { tally::write_file_atomic(dir / too_long, "x", "--output"); }));
}

TEST(OutputSet, TwoOutputsNamingOneFile) {
  TempDir dir;
  fs::create_symlink(dir / "r.json", dir / "alias.json");
  {
    // The same bytes (--update-baseline -o baseline.json): written once.
    tally::OutputSet out;
    out.stage(dir / "r.json", "same", "--output");
    out.stage(dir / "alias.json", "same", "regression.baseline");
    out.commit();
  }
  EXPECT_EQ(read_file(dir / "r.json"), "same");
  EXPECT_TRUE(fs::is_symlink(dir / "alias.json"));
  {
    tally::OutputSet out;
    out.stage(dir / "r.json", "json", "--output");
    EXPECT_EQ(
        error_of<tally::ConfigError>([&] { out.stage(dir / "alias.json", "xml", "--junit"); }),
        "--output '" + (dir / "r.json").string() + "' and --junit '" +
            (dir / "alias.json").string() + "' name the same file");
  }
  EXPECT_EQ(read_file(dir / "r.json"), "same");
  EXPECT_TRUE(temporaries(dir.path).empty());
}

namespace {
volatile sig_atomic_t g_caught = 0;
extern "C" void count_signal(int sig) { g_caught = sig; }
}  // namespace

// Issue 32, item 17, in a program with its own SIGINT or SIGTERM handler (the Python package's):
// a signal while outputs are staged removes their temporary files, then calls that handler, and
// the set fails at commit naming the signal, nothing written; once no output is staged the
// program's handler is its own again, and the next set writes as usual.
TEST(OutputSet, ASignalTheProgramHandlesRemovesTheStagedFilesAndFailsTheSet) {
  for (const int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(sig);
    TempDir dir;
    write_text(dir / "a.json", "old a");
    struct sigaction mine {
    }, before{};
    mine.sa_handler = &count_signal;
    sigemptyset(&mine.sa_mask);
    ASSERT_EQ(::sigaction(sig, &mine, &before), 0);
    g_caught = 0;
    for (const int staged : {1, 3}) {
      tally::OutputSet out;
      for (int i = 0; i < staged; ++i)
        out.stage(dir / fmt::format("{}.json", static_cast<char>('a' + i)), "new", "--output");
      EXPECT_EQ(temporaries(dir.path).size(), static_cast<std::size_t>(staged));
      ASSERT_EQ(::raise(sig), 0);
      EXPECT_EQ(g_caught, sig);
      EXPECT_TRUE(temporaries(dir.path).empty());
      EXPECT_HAS(error_of<tally::RuntimeError>([&] { out.commit(); }),
                 fmt::format("the outputs were not written: signal {} ({}) came while they were "
                             "staged",
                             sig, sig == SIGINT ? "SIGINT" : "SIGTERM"));
    }
    EXPECT_EQ(read_file(dir / "a.json"), "old a");
    EXPECT_FALSE(fs::exists(dir / "b.json"));
    // Nothing staged: the program's own handler, and a set that writes.
    struct sigaction now {};
    ASSERT_EQ(::sigaction(sig, nullptr, &now), 0);
    EXPECT_EQ(now.sa_handler, &count_signal);
    tally::write_file_atomic(dir / "a.json", "newer a", "--output");
    EXPECT_EQ(read_file(dir / "a.json"), "newer a");
    EXPECT_TRUE(temporaries(dir.path).empty());
    ::sigaction(sig, &before, nullptr);
  }
}
