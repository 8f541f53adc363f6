// Bounded parsers and sizes through the `tally` binary (issue 16): YAML alias bombs and deep
// nesting in configs, --set values and tolerances; baselines nested too deep, with numbers out of
// range, NaN words or strings where numbers belong (tally compare, and tally run with a
// regression: section); .npy headers nested too deep; every size parameter of every metric that
// `tally plugins --json` lists (checked in-process as tally validate checks them, the last through
// the binary). Each is exit 2 with one line on stderr, never a crash.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_fixture.hpp"
#include "registry.hpp"
#include "tally/evaluator.hpp"
#include "tally/sdk/error.hpp"

namespace {

using tally::test::CliTest;
using tally::test::ProcessResult;
using tally::test::read_file;
using tally::test::write_text;

// Exit 2 and exactly one line on stderr, "tally: error: ...", containing `part`.
void expect_one_line_error(const ProcessResult& r, const std::string& part) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("tally: error: ", 0), 0u) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_NE(r.err.find(part), std::string::npos) << "expected '" << part << "' in: " << r.err;
}

std::string laughs(int levels = 9, int fan = 9, const std::string& indent = "") {
  std::string out = indent + "l0: &l0 [lol]\n";
  for (int i = 1; i <= levels; ++i) {
    out += indent + "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int j = 0; j < fan; ++j) out += (j ? ", *l" : "*l") + std::to_string(i - 1);
    out += "]\n";
  }
  return out;
}

std::string nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

using BoundedCli = CliTest;

TEST_F(BoundedCli, AliasBombsAreExitTwoNamingThePlace) {
  const std::string expands = "expands to more than 1000000 nodes (YAML aliases?)";
  // In the config.
  const auto bomb = config(tally::test::kMetricsYaml,
                           "backend:\n  type: nondist\n  x:\n" + laughs(9, 9, "    "), "bomb.yaml");
  expect_one_line_error(tally("validate " + bomb.string()), expands);
  expect_one_line_error(tally("run " + bomb.string()), "bomb.yaml:");
  // In a --set value.
  const auto ok = config();
  expect_one_line_error(
      tally("run " + ok.string() +
            " --set 'backend.x=[&a [1,1,1,1,1,1,1,1,1,1], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a], &c "
            "[*b,*b,*b,*b,*b,*b,*b,*b,*b,*b], &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c], &e "
            "[*d,*d,*d,*d,*d,*d,*d,*d,*d,*d], &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e], &g "
            "[*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]]'"),
      "--set backend.x: the document " + expands);
  // In a tolerances file, for tally compare and for tally run's regression: section.
  const auto results = dir / "results.json";
  ASSERT_EQ(tally("run " + ok.string() + " --output " + results.string()).exit_code, 0);
  write_text(dir / "tol.yaml", laughs());
  expect_one_line_error(tally("compare " + results.string() + " " + results.string() +
                              " --tolerances " + (dir / "tol.yaml").string()),
                        "tol.yaml:");
  const auto reg =
      config(tally::test::kMetricsYaml,
             "regression:\n  baseline: results.json\n  tolerances: tol.yaml\n", "reg.yaml");
  expect_one_line_error(tally("run " + reg.string()), expands);
  EXPECT_FALSE(std::filesystem::exists(dir / "out.json"));
}

TEST_F(BoundedCli, DeepNestingIsExitTwoNotACrash) {
  const auto deep = dir / "deep.yaml";
  write_text(deep, "metrics: " + nested(100000) + "\n");
  expect_one_line_error(tally("validate " + deep.string()),
                        "deep.yaml:1:74: nested deeper than 64");
  expect_one_line_error(tally("validate " + config().string() + " --set 'backend.x=" +
                              nested(50000) + "'"),  // an argument: < 128 KiB
                        "nested deeper than 64 levels");
  // A baseline of nested arrays, in tally compare and in a regression: section.
  const auto results = dir / "results.json";
  ASSERT_EQ(tally("run " + config().string() + " --output " + results.string()).exit_code, 0);
  write_text(dir / "deep.json",
             "{\"results\": {\"Accuracy\": {\"top1\": " + nested(100000) + "}}}\n");
  expect_one_line_error(tally("compare " + results.string() + " " + (dir / "deep.json").string()),
                        "deep.json': line 1, column");
  const auto reg =
      config(tally::test::kMetricsYaml, "regression:\n  baseline: deep.json\n", "reg.yaml");
  expect_one_line_error(tally("run " + reg.string() + " --output " + (dir / "out.json").string()),
                        "nested deeper than 64 levels");
  EXPECT_FALSE(std::filesystem::exists(dir / "out.json"));
  // An .npy header of nested tuples.
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': " + std::string(20000, '(') +
      std::string(20000, ')') + "}\n";
  std::string npy = "\x93NUMPY\x01";
  npy += '\0';
  npy += static_cast<char>(header.size() & 0xff);
  npy += static_cast<char>(header.size() >> 8);
  write_text(dir / "scores.npy", npy + header);
  expect_one_line_error(tally("run " + config().string()), "nested deeper than 16 levels");
}

TEST_F(BoundedCli, YamlNumbersOutOfRangeAreExitTwo) {
  for (const char* set : {"metrics.0.thrs=1e999", "metrics.0.thrs=[0.5,-1e400]"}) {
    SCOPED_TRACE(set);
    expect_one_line_error(tally("validate " + config().string() + " --set '" + set + "'"),
                          "parameter 'thrs' expects float");
  }
  const auto reg = config(tally::test::kMetricsYaml,
                          "regression:\n  baseline: b.json\n  rtol: 1e999\n", "reg.yaml");
  expect_one_line_error(tally("validate " + reg.string()),
                        "regression.rtol expects a finite number >= 0, found '1e999'");
}

TEST_F(BoundedCli, BaselineValuesThatAreNotNumbersAreExitTwo) {
  const auto results = dir / "results.json";
  ASSERT_EQ(tally("run " + config().string() + " --output " + results.string()).exit_code, 0);
  const std::string text = read_file(results);
  const auto top1 = text.find("\"top1\": ");
  ASSERT_NE(top1, std::string::npos);
  const auto value_end = text.find_first_of(",\n}", top1 + 8);
  const auto with_top1 = [&](const std::string& v) {
    return text.substr(0, top1 + 8) + v + text.substr(value_end);
  };
  struct Case {
    std::string value, message;
  };
  for (const Case& c : std::vector<Case>{
           {"\"0.93\"", "\"results.Accuracy.top1\" is the string \"0.93\", expected a number"},
           {"true", "\"results.Accuracy.top1\" is the boolean true"},
           {"1e999", "number overflow parsing '1e999'"},
           {"-1e400", "number overflow parsing '-1e400'"},
           {"NaN", "NaN is not a JSON value"},
           {"Infinity", "Infinity is not a JSON value"},
       }) {
    SCOPED_TRACE(c.value);
    write_text(dir / "baseline.json", with_top1(c.value));
    const auto r = tally("compare " + results.string() + " " + (dir / "baseline.json").string());
    expect_one_line_error(r, c.message);
    EXPECT_NE(r.err.find("baseline.json"), std::string::npos) << r.err;
    // The same baseline in a regression: section: no results written.
    std::filesystem::remove(dir / "out.json");
    const auto reg =
        config(tally::test::kMetricsYaml, "regression:\n  baseline: baseline.json\n", "reg.yaml");
    expect_one_line_error(tally("run " + reg.string() + " --output " + (dir / "out.json").string()),
                          c.message);
    EXPECT_FALSE(std::filesystem::exists(dir / "out.json"));
  }
}

// The CLI reading a large .npy in small batches; once /proc shows the file mapped, the test
// truncates it: the next page tally touches raises SIGBUS. Exit 1 and one line naming the file,
// no results written.
TEST_F(BoundedCli, AnNpyTruncatedWhileTheRunReadsItIsExitOneNamingTheFile) {
  const std::int64_t n = 1'000'000, c = 8;  // 32 MB of scores, read 16 samples a batch
  tally::test::write_npy(dir / "scores.npy", std::vector<float>(n * c, 0.5f), {n, c});
  tally::test::write_npy(dir / "labels.npy", std::vector<std::int64_t>(n, 1));
  const auto cfg = config("metrics:\n  - type: Accuracy\n", "", "big.yaml");
  const auto err = dir / "stderr.txt";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    const std::string out = (dir / "out.json").string();
    execl(tally::test::kTally.c_str(), "tally", "run", cfg.c_str(), "--set", "data.batch_size=16",
          "--quiet", "--output", out.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::string maps = "/proc/" + std::to_string(pid) + "/maps";
  bool mapped = false;
  for (int i = 0; i < 6000 && !mapped; ++i) {  // up to 60 s under sanitizers
    mapped = read_file(maps).find("scores.npy") != std::string::npos;
    if (!mapped) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (mapped) std::filesystem::resize_file(dir / "scores.npy", 4096);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(mapped) << "tally never mapped scores.npy: " << read_file(err);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 1) << read_file(err);
  const std::string msg = read_file(err);
  EXPECT_EQ(msg.rfind("tally: error: npy reader: field 'pred_scores' (", 0), 0u) << msg;
  EXPECT_NE(msg.find("scores.npy): the file was truncated while it was read"), std::string::npos)
      << msg;
  EXPECT_EQ(msg.find('\n'), msg.size() - 1) << msg;
  EXPECT_FALSE(std::filesystem::exists(dir / "out.json"));
}

// A value for a required parameter of type `type` (as `tally plugins --json` names types).
nlohmann::json filler(const nlohmann::json& p) {
  const std::string type = p.at("type");
  if (!p.at("choices").empty()) return p.at("choices")[0];
  if (type == "int") return 3;
  if (type == "float") return 0.5;
  if (type == "bool") return false;
  if (type == "int | list of int") return nlohmann::json::array({1});
  if (type == "float | list of float") return nlohmann::json::array({0.5});
  if (type == "string | list of string") return nlohmann::json::array({"x"});
  if (type == "map of string" || type == "map of path") return nlohmann::json::object();
  return "x";
}

// The parameters that size an allocation (each must be refused at 10^12, naming its bound).
bool is_size(const std::string& name) {
  for (const char* s : {"num_classes", "num_thrs", "topk", "n_gram", "proposal_nums", "threads",
                        "bins", "crop_border", "num_keypoints"})
    if (name == s) return true;
  return false;
}

// Each parameter is checked in this process, as `tally validate` checks a config (Evaluator with
// validate_only): 150 configs took 40 s as one `tally validate` process each under the
// sanitizers, each loading every plugin anew. The last goes through the CLI too, for its exit
// code and its one line.
TEST_F(BoundedCli, EverySizeParameterOfEveryMetricHasOneBound) {
  const auto listed = tally("plugins --json");
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const auto components = nlohmann::json::parse(listed.out);
  // Held for the loop: each evaluator's registry then finds the plugins loaded (dlopen'ed
  // once, not once per config).
  const auto loaded = tally::Registry::load({});
  std::size_t sizes = 0, ints = 0;
  std::string last_size_metric;
  for (const auto& c : components) {
    if (c.at("kind") != "metric") continue;
    const std::string type = c.at("name");
    for (const auto& p : c.at("params")) {
      const std::string ptype = p.at("type");
      if (ptype != "int" && ptype != "int | list of int") continue;
      const std::string name = p.at("name");
      SCOPED_TRACE(type + "." + name);
      std::string metric = "metrics:\n  - type: " + type + "\n";
      for (const auto& q : c.at("params"))
        if (q.at("required") && q.at("name") != name)
          metric += "    " + q.at("name").get<std::string>() + ": " + filler(q).dump() + "\n";
      metric +=
          "    " + name + ": " + (ptype == "int" ? "1000000000000" : "[1000000000000]") + "\n";
      ++ints;
      // Never a crash, an allocation failure or a run-time error, whatever the parameter: valid,
      // or a config error (exit 2).
      std::string error;
      try {
        tally::EvaluatorOptions opts;
        opts.validate_only = true;
        auto ev = tally::Evaluator::from_yaml(metric, opts, "size.yaml");
        (void)ev;
      } catch (const tally::ConfigError& e) {
        error = e.what();
      } catch (const tally::InputError& e) {
        error = e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "not a config error: " << e.what();
      }
      if (!is_size(name)) continue;
      ++sizes;
      EXPECT_NE(error.find("parameter '" + name + "' must be at most"), std::string::npos) << error;
      EXPECT_NE(error.find(type), std::string::npos) << error;
      EXPECT_NE(error.find("got 1000000000000"), std::string::npos) << error;
      EXPECT_EQ(error.find('\n'), std::string::npos) << error;
      last_size_metric = metric;
    }
  }
  EXPECT_GE(sizes, 10u);
  EXPECT_GT(ints, sizes);
  ASSERT_FALSE(last_size_metric.empty());
  expect_one_line_error(tally("validate " + config(last_size_metric, "", "size.yaml").string()),
                        "must be at most");
}

}  // namespace
