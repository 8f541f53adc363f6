// tally::run (tally/reports/run.hpp), the one run path of `tally run` and Python's run(): what its
// sinks are given and what its outcome says. The command's behaviour is the CLI tests'; that
// Python's equals it is python/tests/test_run_parity.py's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_fixture.hpp"
#include "tally/reports/run.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

struct Captured {
  std::string out, err;
  std::int64_t progress_total = -1, progress_done = 0;
  bool progress_finished = false;
};

RunSinks capturing(Captured& c, bool print_errors = true) {
  RunSinks s;
  s.out = [&c](std::string_view text) { c.out += text; };
  s.err = [&c](std::string_view line) { c.err += line; };
  s.print_errors = print_errors;
  s.progress_begin = [&c](std::int64_t total, int) { c.progress_total = total; };
  s.progress_add = [&c](std::int64_t n) { c.progress_done += n; };
  s.progress_finish = [&c] { c.progress_finished = true; };
  return s;
}

class RunLibraryCliTest : public CliTest {};

TEST_F(RunLibraryCliTest, ARegressionIsExitThreeWithTheCommandsLineAndTheTables) {
  // A baseline no run reaches: top1 of 2 (accuracies are at most 1).
  write_text(
      dir / "base.json",
      R"({"results": {"Accuracy": {"top1": 2.0}}, "run": {"types": {"Accuracy": "Accuracy"}}})");
  RunRequest r;
  r.config = config(kMetricsYaml, "regression:\n  baseline: base.json\n").string();
  r.output = (dir / "out.json").string();
  Captured c;
  const RunOutcome o = tally::run(r, capturing(c));
  EXPECT_EQ(o.exit_code, 3) << c.err;
  EXPECT_FALSE(o.error);
  ASSERT_TRUE(o.results && o.comparison);
  // The baseline named as messages show a path: absolute, outside the working directory.
  EXPECT_TRUE(o.message.starts_with("regression against '" + (dir / "base.json").string() +
                                    "': 1 key regressed: Accuracy.top1 2 -> "))
      << o.message;
  EXPECT_EQ(c.err, "tally: " + o.message + "\n");
  ASSERT_EQ(o.messages.size(), 1u);
  EXPECT_EQ(o.messages[0], o.message);
  // The results table, then the comparison.
  const auto table_end = c.out.find(" samples, nondist backend, world size 1, ");
  ASSERT_NE(table_end, std::string::npos) << c.out;
  EXPECT_LT(c.out.find("Accuracy"), table_end) << c.out;
  EXPECT_GT(c.out.find("regressed"), table_end) << c.out;
  // Every sample counted by the progress sinks (50 on one rank).
  EXPECT_EQ(c.progress_total, 50);
  EXPECT_EQ(c.progress_done, 50);
  EXPECT_TRUE(c.progress_finished);
  EXPECT_TRUE(std::filesystem::exists(dir / "out.json"));
}

TEST_F(RunLibraryCliTest, AnErrorIsPrintedOrOnlyReturnedToBeRaised) {
  RunRequest r;
  r.config = config("metrics: [{type: Accuracy, topk: three}]\n").string();
  r.quiet = true;
  Captured printed, raised;
  const RunOutcome p = tally::run(r, capturing(printed));
  const RunOutcome q = tally::run(r, capturing(raised, /*print_errors=*/false));
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_EQ(q.exit_code, 2);
  EXPECT_EQ(printed.err, "tally: error: " + p.message + "\n");
  EXPECT_EQ(raised.err, "");
  EXPECT_EQ(q.message, p.message);
  EXPECT_NE(q.message.find("topk"), std::string::npos) << q.message;
  ASSERT_TRUE(q.error);
  EXPECT_THROW(std::rethrow_exception(q.error), ConfigError);
  EXPECT_FALSE(q.results);
}

TEST_F(RunLibraryCliTest, OnAnEvaluatorAlreadyMadeTheRequestIsChecked) {
  auto ev = Evaluator::from_file(config());
  RunRequest r;
  r.config = "my-config";
  r.update_baseline = true;
  Captured c;
  const RunOutcome o = tally::run(ev, r, capturing(c, false));
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_EQ(o.message,
            "--update-baseline: my-config has no 'regression:' section naming the baseline to "
            "write (regression: {baseline: baseline.json})");
  EXPECT_EQ(c.out, "");  // nothing computed, nothing printed
}

}  // namespace
}  // namespace tally::test
