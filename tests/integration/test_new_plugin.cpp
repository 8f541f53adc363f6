// `tally new-plugin NAME DIR` through the real binary: what it writes, and the bad names and
// folders it refuses (exit 2, one line, nothing written). Building the skeleton against an
// installed tally and running its test is the SDK test sdk.new_plugin (tests/sdk).
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/process.hpp"

namespace tally::test {
namespace {

namespace fs = std::filesystem;

const std::string kTally = TALLY_CLI;

ProcessResult new_plugin(const std::string& name, const fs::path& dir) {
  return run_command(kTally + " new-plugin '" + name + "' '" + dir.string() + "'");
}

/// The names in `dir`, sorted.
std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void expect_one_error_line(const ProcessResult& r, const std::string& part) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("tally: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

const std::vector<std::string> kSkeleton = {".gitignore", "CMakeLists.txt", "README.md",
                                            "data.jsonl", "eval.yaml"};

// Expected: the six files, the code named after NAME, the CMake project setting no C++ standard
// and carrying a test; nothing else left beside DIR (no temporary folder).
TEST(NewPlugin, WritesTheSkeletonIntoANewFolder) {
  TempDir tmp;
  const fs::path dir = tmp / "a/b/my_mean";
  const ProcessResult r = new_plugin("my_mean", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  std::vector<std::string> want = kSkeleton;
  want.push_back("my_mean.cpp");
  std::sort(want.begin(), want.end());
  EXPECT_EQ(listing(dir), want);
  EXPECT_EQ(listing(tmp / "a/b"), std::vector<std::string>{"my_mean"});
  const std::string lists = read_file(dir / "CMakeLists.txt");
  EXPECT_NE(lists.find("find_package(tally REQUIRED)"), std::string::npos);
  EXPECT_NE(lists.find("tally_add_plugin(my_mean SOURCES my_mean.cpp)"), std::string::npos);
  EXPECT_NE(lists.find("add_test("), std::string::npos);
  EXPECT_EQ(lists.find("CMAKE_CXX_STANDARD"), std::string::npos);
  const std::string code = read_file(dir / "my_mean.cpp");
  EXPECT_NE(code.find("class MyMean final : public tally::TypedMetric<State>"), std::string::npos);
  EXPECT_NE(code.find("TALLY_STATE(concat(values), sum(n))"), std::string::npos);
  EXPECT_NE(code.find("TALLY_PLUGIN(\"my_mean\""), std::string::npos);
  EXPECT_NE(read_file(dir / "eval.yaml").find("type: MyMean"), std::string::npos);
}

// Expected: an existing empty folder is filled (it stays the same folder); a trailing '/' and
// digits and '_' in NAME are fine.
TEST(NewPlugin, FillsAnEmptyFolder) {
  TempDir tmp;
  const fs::path dir = tmp / "empty";
  fs::create_directory(dir);
  const ProcessResult r = new_plugin("iou_3d", dir.string() + "/");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> want = kSkeleton;
  want.push_back("iou_3d.cpp");
  std::sort(want.begin(), want.end());
  EXPECT_EQ(listing(dir), want);
  EXPECT_EQ(listing(tmp.path), std::vector<std::string>{"empty"});
  EXPECT_NE(read_file(dir / "iou_3d.cpp").find("class Iou3d final"), std::string::npos);
}

// Expected: a NAME that is not [a-z][a-z0-9_]* of at most 64 characters is exit 2 with one line
// naming NAME and the rule, and nothing is written.
TEST(NewPlugin, RefusesBadNames) {
  TempDir tmp;
  for (const std::string& name :
       std::vector<std::string>{"", "1abc", "Abc", "myMetric", "my-metric", "my metric", "_x",
                                "../x", "x/y", "na\xc3\xafve", "x.so", std::string(65, 'a')}) {
    const ProcessResult r = new_plugin(name, tmp / "skel");
    expect_one_error_line(r, "NAME '" + name + "' is not a plugin name");
    EXPECT_TRUE(listing(tmp.path).empty()) << name;
  }
  EXPECT_EQ(new_plugin(std::string(64, 'a'), tmp / "skel").exit_code, 0);
}

// Expected: a NAME whose plugin name or metric name a loaded plugin already has is refused (the
// two could not load together), naming the other plugin's file.
TEST(NewPlugin, RefusesNamesTakenByLoadedPlugins) {
  TempDir tmp;
  expect_one_error_line(new_plugin("accuracy", tmp / "skel"), "names its metric 'Accuracy'");
  expect_one_error_line(new_plugin("mean_io_u", tmp / "skel"), "names its metric 'MeanIoU'");
  expect_one_error_line(new_plugin("classification", tmp / "skel"),
                        "NAME 'classification' is taken by the plugin");
  EXPECT_TRUE(listing(tmp.path).empty());
}

// Expected: DIR holding anything, DIR a file, or DIR below a file is exit 2 with one line, and
// nothing is written or changed.
TEST(NewPlugin, RefusesFoldersItCannotFill) {
  TempDir tmp;
  fs::create_directory(tmp / "full");
  write_text(tmp / "full/keep.txt", "mine\n");
  expect_one_error_line(new_plugin("my_mean", tmp / "full"), "is not empty (it holds 'keep.txt')");
  EXPECT_EQ(listing(tmp / "full"), std::vector<std::string>{"keep.txt"});
  EXPECT_EQ(read_file(tmp / "full/keep.txt"), "mine\n");

  fs::create_directory(tmp / "hidden");
  write_text(tmp / "hidden/.git", "");
  expect_one_error_line(new_plugin("my_mean", tmp / "hidden"), "is not empty");

  write_text(tmp / "file", "x");
  expect_one_error_line(new_plugin("my_mean", tmp / "file"), "exists and is not a folder");
  expect_one_error_line(new_plugin("my_mean", tmp / "file/skel"), "cannot create the folder");
  EXPECT_EQ(listing(tmp.path), (std::vector<std::string>{"file", "full", "hidden"}));
  EXPECT_EQ(read_file(tmp / "file"), "x");
}

// Expected: CLI11's usage errors (NAME or DIR missing) are exit 2 too.
TEST(NewPlugin, UsageErrors) {
  EXPECT_EQ(run_command(kTally + " new-plugin").exit_code, 2);
  EXPECT_EQ(run_command(kTally + " new-plugin my_mean").exit_code, 2);
}

}  // namespace
}  // namespace tally::test
