// The files tally writes and the files it reads whole, end to end through the real binary:
// outputs that are devices, FIFOs or symlinks are written through (never replaced), a failed run
// leaves no output at all (and earlier files intact), stale temporary files of killed runs are
// removed, modes follow the umask, bad output names are one clear line; configs, baselines,
// results, tolerances and Chart.js that are not regular files or are too large are refused in
// bounded time. Each command runs under `timeout`: a regression into blocking fails, not hangs.
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "integration/cli_fixture.hpp"
#include "support/file_checks.hpp"

namespace fs = std::filesystem;
using namespace tally::test;

namespace {

class OutputsTest : public CliTest {
 protected:
  // tally under `timeout`: 124 if it ran past the limit (a hang).
  ProcessResult bounded(const std::string& args, const std::string& env = "") {
    return run_command(env + "timeout 120 " + kTally + " " + args);
  }

  // Exit 2 with exactly one line on stderr holding `fragment`.
  void expect_refused(const ProcessResult& r, const std::string& fragment, int code = 2) {
    EXPECT_NE(r.exit_code, 124) << "timed out (a hang): " << fragment;
    EXPECT_EQ(r.exit_code, code) << r.err;
    EXPECT_EQ(line_count(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("tally: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos)
        << "expected '" << fragment << "' in: " << r.err;
  }

  fs::path results_file() {
    const auto r = tally("run -q " + config().string() + " -o " + (dir / "r.json").string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return dir / "r.json";
  }
};

}  // namespace

TEST_F(OutputsTest, DevNullAndDevStdoutAreWrittenThroughNeverReplaced) {
  struct stat before {};
  ASSERT_EQ(::stat("/dev/null", &before), 0);
  const auto r = bounded("run -q " + config().string() +
                         " -o /dev/null --junit /dev/null --markdown /dev/null --html /dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  struct stat after {};
  ASSERT_EQ(::lstat("/dev/null", &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode)) << "/dev/null was replaced";
  EXPECT_EQ(after.st_rdev, before.st_rdev);

  // --output /dev/stdout: the results JSON on stdout (after the table when not quiet).
  const auto s = bounded("run -q " + config().string() + " -o /dev/stdout");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto j = nlohmann::json::parse(s.out);
  EXPECT_EQ(j["run"]["samples"], 50);
  const auto t = bounded("run " + config().string() + " -o /dev/stdout");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const auto brace = t.out.find("\n{");
  ASSERT_NE(brace, std::string::npos) << t.out;
  EXPECT_NE(t.out.find("Accuracy"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(t.out.substr(brace + 1))["run"]["samples"], 50);
  // Redirected to a file: written at stdout's offset, not over the table.
  const auto u = run_command("timeout 120 " + kTally + " run " + config().string() +
                             " -o /dev/stdout > " + (dir / "stdout.txt").string());
  ASSERT_EQ(u.exit_code, 0) << u.err;
  const auto redirected = read_file(dir / "stdout.txt");
  const auto at = redirected.find("\n{");
  ASSERT_NE(at, std::string::npos) << redirected;
  EXPECT_NE(redirected.substr(0, at).find("Accuracy"), std::string::npos) << redirected;
  EXPECT_EQ(nlohmann::json::parse(redirected.substr(at + 1))["run"]["samples"], 50);
  EXPECT_TRUE(temporaries(dir.path).empty());

  // tally compare's reports too.
  const auto results = results_file();
  const auto c = bounded("compare -q " + results.string() + " " + results.string() +
                         " --junit /dev/stdout --markdown /dev/null");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("<testsuite"), std::string::npos) << c.out;
  EXPECT_TRUE(S_ISCHR(mode_of("/dev/null")));
}

TEST_F(OutputsTest, AFifoIsWrittenThroughAndOneWithoutAReaderIsAnErrorNotAHang) {
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A reader first (its end open, with room for the whole JSON), then the run.
  {
    const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    ASSERT_GE(fd, 0);
    ::fcntl(fd, F_SETPIPE_SZ, 1 << 20);
    const auto r = bounded("run -q " + config().string() + " -o " + fifo.string());
    std::string got;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
      got.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(got)["run"]["samples"], 50);
    EXPECT_TRUE(S_ISFIFO(mode_of(fifo)));
  }
  // Nobody reading: exit 2 at once, naming the option or key; no other output written.
  const auto out = dir / "r.json";
  expect_refused(
      bounded("run -q " + config().string() + " -o " + out.string() + " --junit " + fifo.string()),
      "--junit '" + fifo.string() + "' is a FIFO and no process is reading the FIFO");
  expect_refused(
      bounded(
          "run -q " +
          config(kMetricsYaml, "output:\n  markdown: " + fifo.string() + "\n", "o.yaml").string() +
          " -o " + out.string()),
      "output.markdown '" + fifo.string() + "' is a FIFO and no process is reading the FIFO");
  expect_refused(bounded("run -q " + config().string() + " -o " + fifo.string()),
                 "--output '" + fifo.string() + "' is a FIFO and no process is reading");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(S_ISFIFO(mode_of(fifo)));
  EXPECT_TRUE(temporaries(dir.path).empty());
}

TEST_F(OutputsTest, ASymlinkHasItsTargetWrittenAndStaysALink) {
  fs::create_directory(dir / "real");
  write_text(dir / "real" / "r.json", "old");
  fs::create_symlink("real/r.json", dir / "link.json");
  fs::create_symlink(dir / "real" / "new.xml", dir / "dangling.xml");
  const auto r = bounded("run -q " + config().string() + " -o " + (dir / "link.json").string() +
                         " --junit " + (dir / "dangling.xml").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  EXPECT_TRUE(fs::is_symlink(dir / "dangling.xml"));
  EXPECT_EQ(read_json(dir / "real" / "r.json")["run"]["samples"], 50);
  EXPECT_NE(read_file(dir / "real" / "new.xml").find("<testsuite"), std::string::npos);
  EXPECT_TRUE(temporaries(dir.path).empty());
  EXPECT_TRUE(temporaries(dir / "real").empty());
  // A loop: one line, no raw errno.
  fs::create_symlink(dir / "b", dir / "a");
  fs::create_symlink(dir / "a", dir / "b");
  expect_refused(bounded("run -q " + config().string() + " -o " + (dir / "a").string()),
                 "--output '" + (dir / "a").string() + "': too many levels of symlinks");
}

TEST_F(OutputsTest, AFailedRunLeavesNoOutputAndEarlierFilesIntact) {
  const auto ok = dir / "ok.json";
  const auto xml = dir / "ok.xml";
  write_text(ok, "earlier results");
  write_text(xml, "earlier report");
  write_text(dir / "a-file", "");
  fs::create_directory(dir / "folder");
  const std::string both = " -o " + ok.string() + " --junit " + xml.string();
  // Refused before the run: a report whose folder cannot be made (a file in its way), whose
  // "folder" is a file, that is a folder, or a path of the config's output: section.
  expect_refused(bounded("run -q " + config().string() + both + " --html " +
                         (dir / "a-file" / "sub" / "r.html").string()),
                 "--html '" + (dir / "a-file" / "sub" / "r.html").string() +
                     "': cannot create the folder '" + (dir / "a-file" / "sub").string() +
                     "': Not a directory");
  expect_refused(bounded("run -q " + config().string() + both + " --markdown " +
                         (dir / "a-file" / "r.md").string()),
                 "--markdown '" + (dir / "a-file" / "r.md").string() + "': cannot use");
  expect_refused(
      bounded("run -q " + config().string() + both + " --html " + (dir / "folder").string()),
      "--html '" + (dir / "folder").string() + "' is a folder, a file name was expected");
  expect_refused(
      bounded("run -q " +
              config(kMetricsYaml, "output:\n  html: " + (dir / "folder").string() + "\n", "o.yaml")
                  .string() +
              both),
      "output.html '" + (dir / "folder").string() + "' is a folder");
  // A folder that cannot be written, even by root: a pseudo file system.
  expect_refused(bounded("run -q " + config().string() + both + " --html /proc/r.html"),
                 "--html '/proc/r.html': the folder '/proc' is not writable");
  // Failing after the run, while writing: a full device. Exit 1, and still nothing written.
  const auto full = bounded("run -q " + config().string() + both + " --markdown /dev/full");
  EXPECT_EQ(full.exit_code, 1) << full.err;
  EXPECT_EQ(line_count(full.err), 1) << full.err;
  EXPECT_NE(full.err.find("cannot write --markdown '/dev/full': No space left on device"),
            std::string::npos)
      << full.err;
  // A regular file whose write fails (RLIMIT_FSIZE, as a full disk would): exit 1, nothing.
  // tally ignores SIGXFSZ itself (the shell does not), so the write fails instead of killing it.
  const auto big = run_command("sh -c 'ulimit -f 1; exec timeout 120 " + kTally + " run -q " +
                               config().string() + both + "'");
  EXPECT_EQ(big.exit_code, 1) << big.err;
  EXPECT_NE(big.err.find("cannot write --output '" + ok.string() + "' (write): File too large"),
            std::string::npos)
      << big.err;
  // The baseline of --update-baseline is one of the outputs too.
  const auto base = bounded(
      "run -q --update-baseline " +
      config(kMetricsYaml, "regression:\n  baseline: /dev/full\n", "b.yaml").string() + both);
  EXPECT_EQ(base.exit_code, 1) << base.err;
  EXPECT_NE(base.err.find("cannot write regression.baseline '/dev/full'"), std::string::npos)
      << base.err;
  EXPECT_EQ(read_file(ok), "earlier results");
  EXPECT_EQ(read_file(xml), "earlier report");
  // tally compare: its reports all or none.
  fs::create_directory(dir / "c");
  const auto results = dir / "c" / "r.json";
  ASSERT_EQ(tally("run -q " + config().string() + " -o " + results.string()).exit_code, 0);
  const auto cmp = bounded("compare -q " + results.string() + " " + results.string() + " --junit " +
                           (dir / "c" / "c.xml").string() + " --html /dev/full");
  EXPECT_EQ(cmp.exit_code, 1) << cmp.err;
  EXPECT_FALSE(fs::exists(dir / "c" / "c.xml"));
  EXPECT_TRUE(temporaries(dir.path).empty());
  EXPECT_TRUE(temporaries(dir / "c").empty());
}

TEST_F(OutputsTest, StaleTemporariesOfAKilledRunAreRemovedByTheNextRun) {
  fs::create_directory(dir / "out");
  // A PID that no process has: a child that exited and was reaped.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const auto stale = fmt::format(".r.json.tmp.{}.aB3dE6", dead);
  const auto stale_report = fmt::format(".r.html.tmp.{}.zzzzzz", dead);
  const auto live = fmt::format(".r.json.tmp.{}.aB3dE6", ::getpid());  // this test: alive
  for (const auto& n : {stale, stale_report, live}) write_text(dir / "out" / n, "partial");
  const auto r =
      bounded("run -q " + config().string() + " -o " + (dir / "out" / "r.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out" / stale));
  EXPECT_FALSE(fs::exists(dir / "out" / stale_report));
  EXPECT_TRUE(fs::exists(dir / "out" / live));
  EXPECT_EQ(temporaries(dir / "out"), std::vector<std::string>{live});
}

TEST_F(OutputsTest, OutputFilesFollowTheUmaskAndAReplacedFileKeepsItsMode) {
  const auto run_with_umask = [&](const char* mask, const std::string& args) {
    return run_command(fmt::format("sh -c 'umask {}; exec timeout 120 {} {}'", mask, kTally, args));
  };
  const std::string outs = " -o " + (dir / "a.json").string() + " --junit " +
                           (dir / "a.xml").string() + " --markdown " + (dir / "a.md").string();
  auto r = run_with_umask("077", "run -q " + config().string() + outs);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* f : {"a.json", "a.xml", "a.md"}) EXPECT_EQ(mode_of(dir / f) & 07777, 0600u) << f;
  fs::remove(dir / "a.json");
  fs::remove(dir / "a.xml");
  ::chmod((dir / "a.md").c_str(), 0640);
  r = run_with_umask("022", "run -q " + config().string() + outs);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(mode_of(dir / "a.json") & 07777, 0644u);
  EXPECT_EQ(mode_of(dir / "a.xml") & 07777, 0644u);
  EXPECT_EQ(mode_of(dir / "a.md") & 07777, 0640u) << "a replaced file keeps its mode";
  // --update-baseline: the baseline too.
  r = run_with_umask(
      "027", "run -q --update-baseline " +
                 config(kMetricsYaml,
                        "regression:\n  baseline: " + (dir / "base.json").string() + "\n", "b.yaml")
                     .string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(mode_of(dir / "base.json") & 07777, 0640u);
}

TEST_F(OutputsTest, BadOutputNamesAreOneClearLine) {
  const auto cfg = config().string();
  for (const char* option : {"-o", "--output", "--junit", "--markdown", "--html"}) {
    const std::string name = option == std::string("-o") ? "--output" : option;
    expect_refused(bounded("run -q " + cfg + " " + option + " ''"),
                   name + ": the path is empty; a file name was expected");
  }
  const auto results = results_file();
  for (const char* option : {"--junit", "--markdown", "--html"})
    expect_refused(
        bounded("compare -q " + results.string() + " " + results.string() + " " + option + " ''"),
        std::string(option) + ": the path is empty; a file name was expected");
  // A long name: its temporary name would be too long and is shortened; the write works.
  const auto long_name = dir / std::string(250, 'n');
  const auto r = bounded("run -q " + cfg + " -o " + long_name.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_json(long_name)["run"]["samples"], 50);
  // A name too long for the file system: one line, before the run.
  const auto too_long = dir / std::string(300, 'x');
  expect_refused(bounded("run -q " + cfg + " --junit " + too_long.string()),
                 "--junit '" + too_long.string() +
                     "': the file name is 300 bytes long; the file system allows at most 255");
  EXPECT_TRUE(temporaries(dir.path).empty());
}

TEST_F(OutputsTest, InputsReadWholeMustBeRegularFilesAndAreRefusedInBoundedTime) {
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directory(dir / "folder");
  const auto results = results_file();
  const auto r = results.string();

  // Configs.
  expect_refused(bounded("run /dev/zero"),
                 "config '/dev/zero' is not a regular file (a character device)");
  expect_refused(bounded("validate " + fifo.string()),
                 "config '" + fifo.string() + "' is not a regular file (a FIFO)");
  expect_refused(bounded("run " + fifo.string()),
                 "config '" + fifo.string() + "' is not a regular file (a FIFO)");
  expect_refused(bounded("run " + (dir / "folder").string()),
                 "config '" + (dir / "folder").string() + "' is not a regular file (a folder)");
  // Results and baselines of tally compare.
  expect_refused(bounded("compare " + r + " /dev/zero"),
                 "results '/dev/zero' is not a regular file (a character device)");
  expect_refused(bounded("compare " + fifo.string() + " " + r),
                 "results '" + fifo.string() + "' is not a regular file (a FIFO)");
  // Tolerances: --tolerances, and the config's regression.tolerances.
  expect_refused(bounded("compare " + r + " " + r + " --tolerances " + fifo.string()),
                 "tolerances '" + fifo.string() + "' is not a regular file (a FIFO)");
  expect_refused(bounded("compare " + r + " " + r + " --tolerances /dev/zero"),
                 "tolerances '/dev/zero' is not a regular file (a character device)");
  expect_refused(bounded("run -q " + config(kMetricsYaml,
                                            "regression:\n  baseline: " + r +
                                                "\n  tolerances: " + fifo.string() + "\n",
                                            "t.yaml")
                                         .string()),
                 "tolerances '" + fifo.string() + "' is not a regular file (a FIFO)");
  // The baseline of a run's regression: section.
  expect_refused(
      bounded("run -q " +
              config(kMetricsYaml, "regression:\n  baseline: " + fifo.string() + "\n", "b.yaml")
                  .string()),
      "results '" + fifo.string() + "' is not a regular file (a FIFO)");
  // Chart.js for the HTML report.
  expect_refused(bounded("run -q " + config().string() + " --html " + (dir / "r.html").string(),
                         "TALLY_CHARTJS=" + fifo.string() + " "),
                 "Chart.js '" + fifo.string() + "' is not a regular file (a FIFO)");
  EXPECT_FALSE(fs::exists(dir / "r.html"));

  // Checkpoint metadata, read by --resume.
  {
    const auto ck = dir / "ck";
    const auto cfg =
        config(kMetricsYaml, "checkpoint:\n  dir: " + ck.string() + "\n  every_n_batches: 2\n",
               "ck.yaml")
            .string();
    ASSERT_EQ(tally("run -q " + cfg).exit_code, 0);
    fs::path last;
    for (const auto& e : fs::directory_iterator(ck)) last = std::max(last, e.path());
    ASSERT_FALSE(last.empty());
    fs::remove(last / "metadata.json");
    ASSERT_EQ(::mkfifo((last / "metadata.json").c_str(), 0600), 0);
    expect_refused(bounded("run -q --resume " + cfg), "checkpoint metadata '" +
                                                          (last / "metadata.json").string() +
                                                          "' is not a regular file (a FIFO)");
  }

  // Sizes: refused from the size alone (sparse files), naming the file, its size and the limit.
  const auto big_config = dir / "big.yaml";
  write_text(big_config, "");
  fs::resize_file(big_config, 64 * (1 << 20) + 1);
  expect_refused(bounded("validate " + big_config.string()),
                 "config '" + big_config.string() +
                     "' is 64.0 MiB (67108865 bytes), too large: the limit for config is 64 MiB");
  const auto big_results = dir / "big.json";
  write_text(big_results, "");
  fs::resize_file(big_results, std::uintmax_t{1} << 31);
  expect_refused(bounded("compare " + r + " " + big_results.string()),
                 "results '" + big_results.string() +
                     "' is 2 GiB (2147483648 bytes), too large: the limit for results is 1 GiB");
  const auto big_tolerances = dir / "tol.yaml";
  write_text(big_tolerances, "");
  fs::resize_file(big_tolerances, 100 * (1 << 20));
  expect_refused(bounded("compare " + r + " " + r + " --tolerances " + big_tolerances.string()),
                 "tolerances '" + big_tolerances.string() + "' is 100 MiB (104857600 bytes)");
  EXPECT_TRUE(S_ISFIFO(mode_of(fifo)));
}

// Data files that are FIFOs or devices: every reader refuses them without opening them for
// reading (a FIFO would wait for a writer; /dev/zero would never end).
TEST_F(OutputsTest, DataFilesThatAreFifosOrDevicesAreRefusedWithoutBlocking) {
  const auto fifo = dir / "data.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string examples = std::string(TALLY_SOURCE_DIR) + "/configs/examples/";
  for (const std::string& file : {fifo.string(), std::string("/dev/zero")}) {
    SCOPED_TRACE(file);
    // npy: a field.
    expect_refused(bounded("run -q " + config().string() + " --set data.fields.gt_labels=" + file),
                   "not a regular file");
    // jsonl: the file.
    expect_refused(bounded("run -q " + examples + "text.yaml --set data.path=" + file),
                   "not a regular file");
    // coco_json: the annotations and the results.
    expect_refused(bounded("run -q " + examples + "detection.yaml --set data.annotations=" + file),
                   "not a regular file");
    expect_refused(bounded("run -q " + examples + "detection.yaml --set data.results=" + file),
                   "not a regular file");
  }
}

namespace {

// tally started directly (fork and exec, no shell: a shell's background job ignores SIGINT),
// with the default signal actions, stdout to /dev/null and stderr to `err`. Its PID.
pid_t spawn_tally(const std::vector<std::string>& args, const fs::path& err) {
  std::vector<std::string> words{kTally};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int n = ::open("/dev/null", O_WRONLY);
    if (e < 0 || n < 0 || ::dup2(e, 2) < 0 || ::dup2(n, 1) < 0) ::_exit(127);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

// Issue 32, item 17: SIGTERM or SIGINT while the outputs are staged removes every temporary file
// (".NAME.tmp.PID.*") and ends tally with the signal. Deterministic: the HTML report goes to a
// FIFO whose pipe the test fills and never reads, and outputs written through go after every
// other output is staged, so tally is held there with its temporaries on disk until the signal.
TEST_F(OutputsTest, ASignalWhileOutputsAreStagedRemovesTheTemporariesAndEndsWithTheSignal) {
  const auto fifo = dir / "report.html";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto plain = config();
  const auto with_records =
      config(kMetricsYaml, "output:\n  records: " + (dir / "r.rec").string() + "\n", "rec.yaml");
  const std::vector<fs::path> written = {dir / "r.json", dir / "r.md", dir / "r.xml",
                                         dir / "r.rec"};
  for (const int sig : {SIGTERM, SIGINT}) {
    for (const auto& cfg : {plain, with_records}) {
      SCOPED_TRACE(fmt::format("signal {}, {}", sig, cfg.filename().string()));
      const int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
      ASSERT_GE(rd, 0);
      ::fcntl(rd, F_SETPIPE_SZ, 4096);
      const int room = ::fcntl(rd, F_GETPIPE_SZ);
      const pid_t pid = spawn_tally(
          {"run", "-q", cfg.string(), "-o", written[0].string(), "--markdown", written[1].string(),
           "--junit", written[2].string(), "--html", fifo.string()},
          dir / "err.txt");
      ASSERT_GT(pid, 0);
      // Held once the pipe is full (bounded wait: 100 ms steps, 120 s at most).
      int queued = 0;
      for (int i = 0; i < 1200 && queued < room; ++i) {
        ::usleep(100'000);
        ::ioctl(rd, FIONREAD, &queued);
        if (::waitpid(pid, nullptr, WNOHANG) == pid) break;
      }
      ASSERT_GE(queued, room) << read_file(dir / "err.txt");
      EXPECT_GE(temporaries(dir.path).size(), cfg == plain ? 3u : 4u);
      ASSERT_EQ(::kill(pid, sig), 0);
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, 0), pid);
      ::close(rd);
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig)
          << "status " << status << ": " << read_file(dir / "err.txt");
      EXPECT_TRUE(temporaries(dir.path).empty()) << fmt::format("{}", temporaries(dir.path).size());
      for (const auto& p : written) EXPECT_FALSE(fs::exists(p)) << p;
    }
  }
}
