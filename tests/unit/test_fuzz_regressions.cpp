// Replays the fuzzing corpora in the regular build (and under the asan preset): every seed under
// fuzz/corpus/<target>/ and every input a fuzzer crashed on, kept under
// tests/data/fuzz_regressions/<target>/, goes through the same entry point as the libFuzzer
// target fuzz/fuzz_<target>.cpp (fuzz/fuzz_entry_points.hpp) and must end in success or a clean
// tally::Error: no crash, no other exception. A regression input must also still be rejected
// with a clean error (each one was a crash, UB or an unclean error before its fix).
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../../fuzz/fuzz_entry_points.hpp"

namespace {

namespace fs = std::filesystem;
using tally_fuzz::Outcome;
using tally_fuzz::TargetInfo;

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string().front() != '.') out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Runs one input; returns its outcome, or fails the test for an unclean error.
Outcome replay(const TargetInfo& t, const fs::path& file, std::string* message) {
  const std::string bytes = tally_fuzz::read_file(file);
  try {
    return tally_fuzz::run_input(
        t.target,
        tally_fuzz::Bytes(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()),
        message);
  } catch (const tally_fuzz::UncleanError& e) {
    ADD_FAILURE() << file.string() << ": unclean error: " << e.what();
    return Outcome::CleanError;
  }
}

class FuzzCorpus : public ::testing::TestWithParam<TargetInfo> {};

TEST_P(FuzzCorpus, SeedsEndInSuccessOrACleanError) {
  const TargetInfo& t = GetParam();
  const auto seeds = files_in(fs::path(TALLY_SOURCE_DIR) / "fuzz/corpus" / t.name);
  ASSERT_FALSE(seeds.empty()) << "no seeds in fuzz/corpus/" << t.name;
  int ok = 0;
  for (const auto& f : seeds) {
    std::string message;
    if (replay(t, f, &message) == Outcome::Ok) ++ok;
  }
  // The seeds are valid inputs, most of them accepted: a reader or a decoder that rejects them
  // all has stopped reading its format.
  EXPECT_GT(ok, 0) << "every seed of " << t.name << " was rejected";
}

TEST_P(FuzzCorpus, CrashInputsEndInACleanError) {
  const TargetInfo& t = GetParam();
  for (const auto& f :
       files_in(fs::path(TALLY_SOURCE_DIR) / "tests/data/fuzz_regressions" / t.name)) {
    std::string message;
    EXPECT_EQ(replay(t, f, &message), Outcome::CleanError) << f.string();
    EXPECT_FALSE(message.empty()) << f.string();
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzCorpus, ::testing::ValuesIn(tally_fuzz::kTargets),
                         [](const auto& p) { return std::string(p.param.name); });

}  // namespace
