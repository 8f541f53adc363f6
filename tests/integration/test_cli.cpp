// The tally command end to end: run, validate, plugins, and every bad input a user can hand it
// (exit code 2, one clear line on stderr, no output file left behind).
#include <fstream>

#include "integration/cli_fixture.hpp"

namespace fs = std::filesystem;
using namespace tally::test;

namespace {
int line_count(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}
}  // namespace

TEST_F(CliTest, RunPrintsATableAndWritesTheResultsJson) {
  const auto out = dir / "results.json";
  const auto r = tally("run " + config().string() + " --output " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Accuracy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("top2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("50 samples, nondist backend, world size 1"), std::string::npos) << r.out;
  const auto j = read_json(out);
  ASSERT_TRUE(j["results"]["Accuracy"]["top1"].is_number_float());
  const double top1 = j["results"]["Accuracy"]["top1"];
  EXPECT_GT(top1, 0.0);
  EXPECT_LT(top1, 1.0);
  EXPECT_EQ(j["results"]["prf_none"]["precision_classwise"].size(), 5u);
  EXPECT_EQ(j["results"]["ConfusionMatrix"]["matrix"].size(), 5u);
  EXPECT_EQ(j["run"]["samples"], 50);
  EXPECT_EQ(j["run"]["world_size"], 1);
  EXPECT_EQ(j["run"]["backend"], "nondist");
  EXPECT_EQ(j["run"]["tally_version"], "0.1.0");
  // The counts in the matrix add up to the samples.
  std::int64_t total = 0;
  for (const auto& row : j["results"]["ConfusionMatrix"]["matrix"])
    for (const auto& v : row) total += v.get<std::int64_t>();
  EXPECT_EQ(total, 50);
}

TEST_F(CliTest, OutputJsonFromTheConfigAndQuiet) {
  const auto out = dir / "from_config.json";
  const auto r =
      tally("run -q " + config(kMetricsYaml, "output:\n  json: " + out.string() + "\n").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(fs::exists(out));
}

TEST_F(CliTest, ExampleConfigMatchesScikitLearn) {
  // Expected values: tests/reference/expected_classification.json, section "example", computed by
  // tests/reference/classification.py with scikit-learn (versions recorded in that file).
  const auto expected = read_json(fs::path(TALLY_SOURCE_DIR) /
                                  "tests/reference/expected_classification.json")["example"];
  const auto out = dir / "example.json";
  const auto r = run_command("cd " + std::string(TALLY_SOURCE_DIR) + " && " + kTally +
                             " run configs/examples/classification.yaml -q -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto got = read_json(out);
  EXPECT_EQ(got["run"]["samples"], expected["samples"]);
  for (const auto& [label, keys] : expected["results"].items()) {
    for (const auto& [key, want] : keys.items()) {
      const auto& have = got["results"][label][key];
      ASSERT_FALSE(have.is_null()) << label << "." << key;
      if (want.is_number_float()) {
        EXPECT_NEAR(have.get<double>(), want.get<double>(), 1e-12 * std::abs(want.get<double>()))
            << label << "." << key;
      } else if (want.is_array() && !want.empty() && want[0].is_number_float()) {
        ASSERT_EQ(have.size(), want.size());
        for (std::size_t i = 0; i < want.size(); ++i)
          EXPECT_NEAR(have[i].get<double>(), want[i].get<double>(),
                      1e-12 * std::abs(want[i].get<double>()))
              << label << "." << key << "[" << i << "]";
      } else {
        EXPECT_EQ(have, want) << label << "." << key;  // counts: exact
      }
    }
  }
}

TEST_F(CliTest, ValidateChecksWithoutRunning) {
  const auto r = tally("validate " + config().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ok (50 samples, reader fields: "), std::string::npos) << r.out;
  const auto bad = tally("validate " + config("metrics:\n  - type: ConfusionMatrix\n").string());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("missing required parameter 'num_classes'"), std::string::npos) << bad.err;
}

TEST_F(CliTest, PluginsListsEveryComponentWithItsParameters) {
  const auto r = tally("plugins");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"backend nondist", "backend mpi", "reader npy", "metric Accuracy",
                        "metric SingleLabelMetric", "alias SingleLabelPrecisionRecallF1score",
                        "metric ConfusionMatrix", "topk", "num_classes"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;

  const auto j = nlohmann::json::parse(tally("plugins --json").out);
  ASSERT_TRUE(j.is_array());
  bool saw_accuracy = false;
  for (const auto& c : j) {
    for (const char* k : {"kind", "name", "aliases", "plugin", "version", "file", "doc", "params"})
      EXPECT_TRUE(c.contains(k)) << c.dump();
    EXPECT_TRUE(fs::exists(c["file"].get<std::string>()));
    EXPECT_FALSE(c["doc"].get<std::string>().empty()) << c["name"];
    for (const auto& p : c["params"]) {
      EXPECT_FALSE(p["doc"].get<std::string>().empty()) << c["name"] << "." << p["name"];
      for (const char* k : {"name", "type", "required", "default"}) EXPECT_TRUE(p.contains(k));
    }
    if (c["name"] == "Accuracy") {
      saw_accuracy = true;
      EXPECT_EQ(c["kind"], "metric");
      EXPECT_FALSE(c["inputs"].empty());
    }
  }
  EXPECT_TRUE(saw_accuracy);
}

TEST_F(CliTest, SetOverridesTheConfig) {
  const auto out = dir / "r.json";
  const auto r =
      tally("run -q " + config().string() + " --set metrics.0.topk=[1,3] -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(read_json(out)["results"]["Accuracy"].contains("top3"));
}

// ---- bad input: exit 2, one line naming what and where, no output file ----------------------

TEST_F(CliTest, BadInputsGiveExitTwoAndOneClearLine) {
  const auto out = dir / "never.json";
  const auto run_bad = [&](const std::string& args, const std::string& fragment) {
    SCOPED_TRACE(args);
    fs::remove(out);
    const auto r = tally(args + " -o " + out.string());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("tally: error: ", 0), 0u) << r.err;
    EXPECT_EQ(line_count(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos)
        << "expected '" << fragment << "' in: " << r.err;
    EXPECT_FALSE(fs::exists(out)) << "no output file after a failed run";
  };
  const auto cfg = config().string();

  run_bad("run " + (dir / "missing.yaml").string(), "cannot read config");
  write_text(dir / "syntax.yaml", "metrics:\n  - type: Accuracy\n    topk: [1, 2\n");
  run_bad("run " + (dir / "syntax.yaml").string(), "syntax.yaml:4:1: YAML syntax error");
  run_bad("run " + config(kMetricsYaml, "outputs: {json: x}\n", "k.yaml").string(),
          "k.yaml:17:1: unknown top-level key 'outputs'");
  run_bad("run " + config("metrics:\n  - type: Acuracy\n", "", "m.yaml").string(),
          "m.yaml:8:5: unknown metric 'Acuracy'");
  run_bad(
      "run " + config("metrics:\n  - type: Accuracy\n    topk: three\n", "", "t.yaml").string(),
      "t.yaml:9:11: metric 'Accuracy': parameter 'topk' expects int | list of int, found 'three'");
  run_bad("run " + config("metrics:\n  - type: ConfusionMatrix\n", "", "c.yaml").string(),
          "c.yaml:8:5: metric 'ConfusionMatrix': missing required parameter 'num_classes'");
  run_bad("run " + config("metrics:\n  - type: Accuracy\n    inputs: {gt_labels: target}\n", "",
                          "in.yaml")
                       .string(),
          "metric 'Accuracy' reads input 'gt_labels' from the data field 'target', which the npy "
          "reader does not provide");
  run_bad("run " + cfg + " --set metrics.0", "expected KEY=VALUE");
  run_bad("run " + cfg + " --set data.batch_size=0", "batch_size");
  run_bad("run " + cfg + " --bogus", "--bogus");
  run_bad("run " + cfg + " --set data.fields.gt_labels=nope.npy", "nope.npy");

  // Output into folders that do not exist yet: made (mkdir -p), before the run. A folder that
  // cannot be made (a file in its way) is refused before the run, naming it.
  {
    const auto made = tally("run " + cfg + " -q -o " + (dir / "reports" / "a" / "r.json").string());
    EXPECT_EQ(made.exit_code, 0) << made.err;
    EXPECT_TRUE(fs::is_regular_file(dir / "reports" / "a" / "r.json"));
    write_text(dir / "plain", "x");
    const auto r = tally("run " + cfg + " -o " + (dir / "plain" / "sub" / "r.json").string());
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("output '" + (dir / "plain" / "sub" / "r.json").string() +
                         "': cannot create the folder '" + (dir / "plain" / "sub").string() +
                         "': Not a directory"),
              std::string::npos)
        << r.err;
  }

  // Bad data files.
  write_npy(dir / "short.npy", std::vector<std::int64_t>{0, 1, 2});
  run_bad("run " + cfg + " --set data.fields.gt_labels=short.npy", "short.npy");
  {
    std::ofstream f(dir / "fortran.npy", std::ios::binary);
    f << npy_header("<i8", {50}, true);
    std::vector<std::int64_t> zeros(50, 0);
    f.write(reinterpret_cast<const char*>(zeros.data()), 400);
  }
  run_bad("run " + cfg + " --set data.fields.gt_labels=fortran.npy", "ortran");
  {
    std::ofstream f(dir / "truncated.npy", std::ios::binary);
    f << npy_header("<i8", {50});
    f << "abc";
  }
  run_bad("run " + cfg + " --set data.fields.gt_labels=truncated.npy", "truncated.npy");
  {
    std::ofstream f(dir / "half.npy", std::ios::binary);
    f << npy_header("<f2", {50});
    f << std::string(100, '\0');
  }
  run_bad("run " + cfg + " --set data.fields.gt_labels=half.npy", "<f2");
  write_text(dir / "not.npy", "hello, world\n");
  run_bad("run " + cfg + " --set data.fields.gt_labels=not.npy", "not.npy");

  // Bad values inside good files: the message names the metric and the field.
  auto d = make_dataset(50, 5);
  d.labels[37] = 5;
  write_npy(dir / "oob.npy", d.labels);
  run_bad("run " + cfg + " --set data.fields.gt_labels=oob.npy", "gt_labels");
  d.labels[37] = -1;
  write_npy(dir / "neg.npy", d.labels);
  run_bad("run " + cfg + " --set data.fields.gt_labels=neg.npy", "gt_labels");
  auto nan = make_dataset(50, 5);
  nan.scores[7 * 5 + 2] = std::nanf("");
  write_npy(dir / "nan.npy", nan.scores, {50, 5});
  run_bad("run " + cfg + " --set data.fields.pred_scores=nan.npy", "pred_scores");
  write_npy(dir / "flat.npy", nan.labels);  // 1-D where [N, C] scores are expected
  run_bad("run " +
              config("metrics:\n  - type: Accuracy\n    topk: [1, 3]\n", "", "flat.yaml").string() +
              " --set data.fields.pred_scores=flat.npy",
          "Accuracy");
}

TEST_F(CliTest, FailedRunLeavesAnEarlierResultsFileIntact) {
  const auto out = dir / "keep.json";
  write_text(out, "{\"previous\": true}\n");
  auto d = make_dataset(50, 5);
  d.labels[3] = 99;
  write_npy(dir / "labels.npy", d.labels);
  const auto r = tally("run " + config().string() + " -o " + out.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(read_file(out), "{\"previous\": true}\n");
  // And no temporary file is left in the folder.
  for (const auto& e : fs::directory_iterator(dir.path))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

// Hostile bytes: a metric state whose declared size is a lie (testkit's HostileState) is refused
// with a message naming the rank, quickly, without allocating the claimed 96 GiB or 1 GiB. States
// travel between ranks only (a world of one computes from them in place): two mpi ranks.
TEST_F(CliTest, AStatePayloadThatLiesAboutItsSizeIsRefused) {
  for (const std::string lie : {"count", "length"}) {
    const auto cfg =
        config("metrics:\n  - type: HostileState\n    lie: " + lie + "\n",
               "plugins:\n  paths: [" + std::string(TALLY_TEST_PLUGIN_DIR) + "/testkit]\n");
    const auto out = dir / "never.json";
    const auto r = run_command(mpirun(2) + " " + kTally + " run " + cfg.string() +
                               " --set backend.type=mpi -o " + out.string());
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("sync failed: the payload of rank 0"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("is not valid msgpack"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
}
