// Issue 16, text and plugins, through the real `tally` binary: text that is not UTF-8 is refused
// before the run (config) or escaped where it is only reported (file names); control characters
// never reach the terminal raw; plugins another user could have written are refused unless the
// user opts in.
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "integration/cli_fixture.hpp"
#include "tally/text_safety.hpp"

namespace fs = std::filesystem;
using tally::test::CliTest;
using tally::test::read_file;
using tally::test::run_command;
using tally::test::write_text;

namespace {

const fs::path kTestPlugins = TALLY_TEST_PLUGIN_DIR;

// A shell word: the text in single quotes (any byte but NUL may appear inside).
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool has_raw_control(const std::string& s) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f || u == 0x9b) return true;
  }
  return false;
}

std::size_t lines(const std::string& s) {
  return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
}

// A folder holding a copy of the testkit plugin, mode `mode`.
fs::path plugin_folder(const tally::test::TempDir& dir, mode_t mode,
                       const std::string& file = "libtally_testkit.so") {
  const fs::path folder = dir / "plugins";
  fs::create_directories(folder);
  fs::copy_file(kTestPlugins / "testkit" / "libtally_testkit.so", folder / file,
                fs::copy_options::overwrite_existing);
  ::chmod((folder / file).c_str(), 0755);
  ::chmod(folder.c_str(), mode);
  return folder;
}

}  // namespace

// Labels, data paths and keys that are not UTF-8: exit 2 before any work, one line naming the
// file, line, key and byte offset; no results file.
TEST_F(CliTest, ConfigTextThatIsNotUtf8IsRefusedBeforeTheRun) {
  const std::string cases[][2] = {
      {"metrics:\n  - type: Accuracy\n    name: acc\xff\n",
       "the value of 'name' is not valid UTF-8: byte 0xff at offset 3"},
      {"metrics:\n  - type: Accuracy\n    name: \"caf\xe9\"\n",
       "the value of 'name' is not valid UTF-8: byte 0xe9 at offset 3"},
      {"metrics:\n  - type: Accuracy\n    inputs: {pred_scores: \"pred\xc3\"}\n",
       "the value of 'pred_scores' is not valid UTF-8: byte 0xc3 at offset 4"},
      {"metrics:\n  - type: Accuracy\n    top\xfe: 1\n",
       "the key is not valid UTF-8: byte 0xfe at offset 3 (\"top\\xfe\")"},
  };
  for (const auto& [metrics, expected] : cases) {
    SCOPED_TRACE(expected);
    const auto out = dir / "out.json";
    const auto r = tally("run " + config(metrics).string() + " -o " + out.string());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("tally: error: " + (dir / "eval.yaml").string() + ":"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
  // A data path, in the config and through --set.
  write_text(dir / "eval2.yaml",
             "data:\n  type: npy\n  fields:\n    pred_scores: \"sc\xf0\x9f.npy\"\n    gt_labels: "
             "labels.npy\nmetrics:\n  - type: Accuracy\n");
  auto r = tally("run " + (dir / "eval2.yaml").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("eval2.yaml:4:18: the value of 'pred_scores' is not valid UTF-8: byte "
                       "0xf0 at offset 2"),
            std::string::npos)
      << r.err;
  r = tally("run " + config().string() + " --set " + quoted("metrics.0.name=a\xff"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("is not valid UTF-8: byte 0xff at offset 1"), std::string::npos) << r.err;
  r = tally("validate " + config().string() + " --set " + quoted("data.fields.gt_labels=l\xfe"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

// A config file whose name is not UTF-8 is fine: the results JSON names it with \xNN escapes.
TEST_F(CliTest, AConfigFileNameThatIsNotUtf8IsEscapedInTheResults) {
  for (const std::string name : {"eval\xff.yaml", "\xe9val.yaml", "ev\x1b[2Jal.yaml"}) {
    SCOPED_TRACE(tally::escape_for_terminal(name));
    const auto cfg = config(tally::test::kMetricsYaml, "", name);
    const auto out = dir / "out.json";
    fs::remove(out);
    const auto r = tally("run " + quoted(cfg.string()) + " -o " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = read_json(out);  // valid JSON, hence valid UTF-8
    const std::string shown = j["run"]["config"];
    EXPECT_EQ(shown, cfg.parent_path().string() + "/" + tally::escape_invalid_utf8(name));
    EXPECT_FALSE(has_raw_control(r.out)) << r.out;
    EXPECT_FALSE(has_raw_control(r.err)) << r.err;
  }
}

// ESC and other controls in labels, file names and messages are shown escaped on stdout and
// stderr: in the results table, in the comparison table, in every error and warning line.
TEST_F(CliTest, ControlCharactersAreNeverPrintedRaw) {
  // Labels with ESC, CR, BEL, DEL and a C1 CSI (all valid UTF-8 from YAML escapes).
  const std::string metrics =
      "metrics:\n  - type: Accuracy\n    name: \"\\e[31mred\\e[0m\"\n  - type: Accuracy\n    "
      "name: \"cr\\rbel\\a\\x7f\\x9b\"\n";
  const auto out = dir / "out.json";
  auto r = tally("run " + config(metrics).string() + " -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(has_raw_control(r.out)) << r.out;
  EXPECT_NE(r.out.find("\\x1b[31mred\\x1b[0m"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cr\\x0dbel\\x07\\x7f\\xc2\\x9b"), std::string::npos) << r.out;
  // The results JSON keeps the labels as they are (JSON escapes them).
  const auto j = read_json(out);
  EXPECT_TRUE(j["results"].contains("\x1b[31mred\x1b[0m"));

  // The comparison table: the same results against a baseline missing one label.
  auto base = j;
  base["results"].erase("\x1b[31mred\x1b[0m");
  write_text(dir / "base.json", base.dump());
  r = tally("compare " + out.string() + " " + (dir / "base.json").string() + " --color never");
  EXPECT_FALSE(has_raw_control(r.out)) << r.out;
  EXPECT_FALSE(has_raw_control(r.err)) << r.err;
  EXPECT_NE(r.out.find("\\x1b[31mred"), std::string::npos) << r.out;

  // Errors and warnings: an unknown metric type, a data file that does not exist, an output
  // folder that cannot be made (a file in its way), a bad --set, each with controls in the text.
  write_text(dir / "no\x1b[1Afile", "x");
  const std::string bad[] = {
      "run " + config("metrics:\n  - type: \"Acc\\e]0;pwned\\a\"\n", "", "bad_type.yaml").string(),
      "run " + config().string() + " --set " + quoted("data.fields.gt_labels=no\x1b[2J.npy"),
      "run " + config().string() + " -o " +
          quoted((dir / "no\x1b[1Afile" / "dir" / "r.json").string()),
      "run " + config().string() + " --set " + quoted("metrics.\x1b[2J=1"),
      "compare " + quoted((dir / "gone\x1b[2J.json").string()) + " " + out.string(),
  };
  for (const auto& cmd : bad) {
    SCOPED_TRACE(tally::escape_for_terminal(cmd));
    r = tally(cmd);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("tally: error: ", 0), 0u) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_FALSE(has_raw_control(r.err)) << r.err;
    EXPECT_NE(r.err.find("\\x1b"), std::string::npos) << r.err;
  }
}

// `tally plugins` over a plugin whose file name is not UTF-8 (and holds an ESC): the JSON is
// valid (the name escaped as \xNN), the text listing shows it escaped; no abort.
TEST_F(CliTest, PluginFileNamesThatAreNotUtf8AreListedEscaped) {
  for (const std::string name :
       {"libtally_\xff\xfe.so", "libtally_t\xc3.so", "libtally_\x1b[2J.so"}) {
    SCOPED_TRACE(tally::escape_for_terminal(name));
    tally::test::TempDir pd;
    const auto folder = plugin_folder(pd, 0755, name);
    auto r = tally("plugins --json --path " + quoted(folder.string()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    bool found = false;
    for (const auto& c : j)
      if (c["name"] == "SequenceProbe") {
        found = true;
        EXPECT_EQ(c["file"], (folder / tally::escape_invalid_utf8(name)).string());
      }
    EXPECT_TRUE(found) << r.out.substr(0, 500);
    r = tally("plugins --path " + quoted(folder.string()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(has_raw_control(r.out));
    EXPECT_EQ(tally::invalid_utf8_offset(r.out), std::nullopt);
    EXPECT_NE(r.out.find(tally::escape_for_terminal(name)), std::string::npos);
  }
}

// A plugin folder others may write: `tally plugins`, `validate` and `run` refuse it with one
// line naming the folder, its mode and the opt-in; the opt-in (environment or config) loads it.
TEST_F(CliTest, PluginsOthersCouldHaveWrittenAreRefusedUnlessOptedIn) {
  tally::test::TempDir pd;
  const auto folder = plugin_folder(pd, 0777);
  const std::string expected =
      "plugin folder '" + folder.string() + "' is world-writable (mode 0777";
  auto r = tally("plugins --path " + folder.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tally: error: plugins.paths: " + expected), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("TALLY_ALLOW_UNSAFE_PLUGINS=1"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_EQ(r.out, "");
  r = run_command("TALLY_ALLOW_UNSAFE_PLUGINS=1 " + tally::test::kTally + " plugins --path " +
                  folder.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("metric SequenceProbe"), std::string::npos);

  const std::string paths = "plugins:\n  paths: [" + folder.string() + "]\n";
  const auto out = dir / "out.json";
  r = tally("validate " + config(tally::test::kMetricsYaml, paths).string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
  r = tally("run " + config(tally::test::kMetricsYaml, paths).string() + " -o " + out.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  const std::string opt_in = "plugins:\n  paths: [" + folder.string() + "]\n  allow_unsafe: true\n";
  r = tally("run " + config(tally::test::kMetricsYaml, opt_in).string() + " -o " + out.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out));
  r = tally("validate " +
            config(tally::test::kMetricsYaml, "plugins:\n  allow_unsafe: maybe\n").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("plugins.allow_unsafe expects true or false"), std::string::npos) << r.err;
}

// A folder on the way to the plugin folder that others may write (not sticky): `tally plugins`
// and `run` refuse it with one line naming that folder, its mode and the opt-in; sticky, it loads.
TEST_F(CliTest, AWritableFolderOnTheWayToThePluginsIsRefused) {
  tally::test::TempDir pd;
  const fs::path parent = pd / "shared";
  const fs::path folder = parent / "plugins";
  fs::create_directories(folder);
  ::chmod(folder.c_str(), 0755);
  fs::copy_file(kTestPlugins / "testkit" / "libtally_testkit.so", folder / "libtally_testkit.so");
  ::chmod((folder / "libtally_testkit.so").c_str(), 0755);
  const auto out = dir / "out.json";
  const std::string paths = "plugins:\n  paths: [" + folder.string() + "]\n";
  for (mode_t mode : {0777, 0773, 0757}) {
    ::chmod(parent.c_str(), mode);
    const std::string expected = fmt::format(
        "tally: error: plugins.paths: plugin folder '{}' lies in folder '{}', which is "
        "world-writable and not sticky (mode {:04o}",
        folder.string(), parent.string(), mode);
    auto r = tally("plugins --path " + folder.string());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("TALLY_ALLOW_UNSAFE_PLUGINS=1"), std::string::npos) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_EQ(r.out, "");
    r = tally("run " + config(tally::test::kMetricsYaml, paths).string() + " -o " + out.string());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
  ::chmod(parent.c_str(), 01777);
  const auto r = tally("plugins --path " + folder.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("metric SequenceProbe"), std::string::npos);
}

// A plugin built for another ABI, through the CLI: refused, and its static constructor never ran.
TEST_F(CliTest, APluginOfAnotherAbiIsRefusedBeforeItsCodeRuns) {
  for (const char* name : {"bad_abi", "no_abi_marker"}) {
    SCOPED_TRACE(name);
    const auto marker = dir / "constructor-ran";
    const auto r =
        run_command("TALLY_TEST_LOAD_MARKER=" + marker.string() + " " + tally::test::kTally +
                    " plugins --path " + (kTestPlugins / name).string());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(std::string("libtally_") + name + ".so'"), std::string::npos) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_FALSE(fs::exists(marker));
  }
}

// A plugin folder or file the user cannot read: one line naming it, not a library's raw text. The
// test runs tally as another user (nobody), which takes root and setpriv.
TEST_F(CliTest, UnreadablePluginFoldersAndFilesAreOneClearLine) {
  if (::geteuid() != 0 || !fs::exists("/usr/bin/setpriv"))
    GTEST_FAIL() << "needs root and setpriv (util-linux) to run tally as another user: root reads "
                    "any folder";
  const std::string as_nobody =
      "/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups " + tally::test::kTally;
  tally::test::TempDir pd;
  ::chmod(pd.path.c_str(), 0755);
  const auto folder = plugin_folder(pd, 0700);  // root's, mode 0700: nobody cannot list it
  auto r = run_command(as_nobody + " plugins --path " + folder.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, "tally: error: plugins.paths: cannot list plugin folder '" + folder.string() +
                       "': Permission denied\n");
  ::chmod(folder.c_str(), 0755);
  ::chmod((folder / "libtally_testkit.so").c_str(), 0600);  // listed, but not readable
  r = run_command(as_nobody + " plugins --path " + folder.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, "tally: error: plugin '" + (folder / "libtally_testkit.so").string() +
                       "' cannot be loaded: Permission denied\n");
}
