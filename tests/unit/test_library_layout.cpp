// The libraries show the architecture (issue 17, item 4): libtally (SDK runtime and engine) holds
// no reports and no compare, which live in tally_reports; plugins need libtally alone; the
// command uses only public headers; a run's Results carry their metrics' ResultSpecs, and the
// parts of the config the command acts on come from the one parse the Evaluator made.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/process.hpp"
#include "tally/evaluator.hpp"
#include "tally/registry.hpp"
#include "tally/reports/compare.hpp"
#include "tally/reports/reports.hpp"
#include "tally/sdk/error.hpp"

namespace fs = std::filesystem;
using tally::Batch;
using tally::Better;
using tally::Evaluator;
using tally::Tensor;
using tally::test::run_command;
using tally::test::TempDir;
using tally::test::write_text;

namespace {

// The quoted includes of a source file.
std::vector<std::string> quoted_includes(const fs::path& file) {
  static const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, include)) out.push_back(m[1]);
  }
  return out;
}

// The dynamic symbols a shared library defines, demangled (nm -DC --defined-only).
std::string defined_symbols(const fs::path& lib) {
  const auto r = run_command("nm -DC --defined-only '" + lib.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

// The libraries a shared object needs (readelf -d: NEEDED entries).
std::string needed_libraries(const fs::path& lib) {
  const auto r = run_command("readelf -d '" + lib.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

const fs::path kLibDir = fs::path(TALLY_PLUGIN_DIR).parent_path().parent_path();

Batch regression_batch() {
  Batch b;
  b.set("pred", Tensor::from_vector(std::vector<double>{1.0, 2.0, 4.0}));
  b.set("target", Tensor::from_vector(std::vector<double>{1.0, 3.0, 3.0}));
  return b;
}

}  // namespace

TEST(LibraryLayout, TheCommandIncludesOnlyPublicHeadersAndItsOwn) {
  const fs::path cli = fs::path(TALLY_SOURCE_DIR) / "engine" / "cli";
  const fs::path include = fs::path(TALLY_SOURCE_DIR) / "engine" / "include";
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(cli)) {
    const auto ext = entry.path().extension();
    if (ext != ".cpp" && ext != ".hpp") continue;
    ++files;
    for (const auto& inc : quoted_includes(entry.path())) {
      const bool public_header = inc.starts_with("tally/") && fs::exists(include / inc);
      const bool own = fs::exists(cli / inc);
      EXPECT_TRUE(public_header || own)
          << entry.path().filename() << " includes \"" << inc
          << "\": neither a public header (engine/include/tally) nor one of engine/cli";
    }
  }
  EXPECT_GE(files, 2u);  // main.cpp and progress.cpp at least
}

TEST(LibraryLayout, LibtallyHoldsNoReportsAndNoCompare) {
  const auto libtally = defined_symbols(kLibDir / "libtally.so");
  const auto reports = defined_symbols(kLibDir / "libtally_reports.so");
  for (const char* symbol :
       {"tally::junit_report", "tally::markdown_report", "tally::html_report", "tally::compare(",
        "tally::format_comparison", "tally::read_results_json(", "tally::format_table",
        "tally::Tolerances::resolve(", "tally::ResultSpecs::from_results(",
        "tally::apply_paired_tests(", "tally::comparison_json", "tally::read_history(",
        "tally::trends("}) {
    EXPECT_EQ(libtally.find(symbol), std::string::npos) << symbol << " is in libtally";
    EXPECT_NE(reports.find(symbol), std::string::npos) << symbol << " is not in tally_reports";
  }
  // The engine's own pieces stay in libtally: the results JSON, the settings, the registry.
  for (const char* symbol :
       {"tally::Results::to_json", "tally::read_tolerance_rules(", "tally::Registry::load(",
        "tally::Evaluator::outputs()", "tally::paired_tests(", "tally::Evaluator::paired_tests("})
    EXPECT_NE(libtally.find(symbol), std::string::npos) << symbol << " is not in libtally";
  EXPECT_EQ(needed_libraries(kLibDir / "libtally.so").find("libtally_reports"), std::string::npos);
}

TEST(LibraryLayout, PluginsNeedLibtallyAlone) {
  std::size_t plugins = 0;
  for (const fs::path& dir :
       {fs::path(TALLY_PLUGIN_DIR), fs::path(TALLY_TEST_PLUGIN_DIR) / "testkit"}) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".so") continue;
      ++plugins;
      const auto needed = needed_libraries(entry.path());
      EXPECT_NE(needed.find("[libtally.so"), std::string::npos) << entry.path();
      EXPECT_EQ(needed.find("libtally_reports"), std::string::npos)
          << entry.path() << " needs tally_reports";
    }
  }
  EXPECT_GE(plugins, 2u);
}

TEST(ResultsCarrySpecs, EveryMetricLabelGetsTheSpecsItsComponentDeclares) {
  auto ev = Evaluator::from_yaml(
      "metrics:\n"
      "  - {type: RegressionMAE, name: err}\n"
      "  - {type: R2Score}\n"  // an alias: the type recorded is the component's name
      "  - {type: RegressionMSE}\n");
  ev.add(regression_batch());
  const tally::Results r = ev.compute();
  ASSERT_EQ(r.specs.size(), 3u);
  EXPECT_EQ(r.specs[0].first, "err");
  ASSERT_EQ(r.specs[0].second.size(), 1u);
  EXPECT_EQ(r.specs[0].second[0].key, "mae");
  EXPECT_EQ(r.specs[0].second[0].better, Better::Lower);

  const auto specs = tally::ResultSpecs::from_results(r);
  EXPECT_EQ(specs.better("err", "mae"), Better::Lower);
  EXPECT_EQ(specs.better("R2Score", "r2"), Better::Higher);
  EXPECT_EQ(specs.better("RegressionMSE", "mse"), Better::Lower);
  EXPECT_EQ(specs.type("err"), "RegressionMAE");
  EXPECT_EQ(specs.type("R2Score"), "R2");
  EXPECT_EQ(specs.better("nolabel", "x"), Better::Higher);

  // The same specs as tally compare finds through the registry for a results file.
  const auto reg = tally::Registry::load();
  const auto from_file = tally::ResultSpecs::from_registry(reg, r.run.types);
  for (const auto& [label, key] : std::vector<std::pair<std::string, std::string>>{
           {"err", "mae"}, {"R2Score", "r2"}, {"RegressionMSE", "mse"}})
    EXPECT_EQ(from_file.better(label, key), specs.better(label, key)) << label;

  // The results JSON does not hold them: read back, a Results has none.
  TempDir dir;
  write_text(dir / "r.json", r.to_json());
  EXPECT_TRUE(tally::read_results_json(dir / "r.json").specs.empty());
}

TEST(ResultsCarrySpecs, ALowerIsBetterKeyRegressesWhenItRisesUsingTheRunsOwnSpecs) {
  auto ev = Evaluator::from_yaml("metrics: [{type: RegressionMAE}]\n");
  ev.add(regression_batch());
  const auto r = ev.compute();
  tally::Value baseline = tally::Value::map();
  tally::Value mae = tally::Value::map();
  mae.set("mae", 0.1);  // the run's mae is 2/3: higher, which is worse
  baseline.set("RegressionMAE", mae);
  const auto c =
      tally::compare(r.metrics, baseline, tally::ResultSpecs::from_results(r), tally::Tolerances{});
  ASSERT_EQ(c.keys.size(), 1u);
  EXPECT_EQ(c.keys[0].verdict, tally::Verdict::Regressed);
  EXPECT_EQ(c.keys[0].better, Better::Lower);
}

TEST(EvaluatorSettings, OutputsRegressionAndCheckpointComeFromTheOneParse) {
  TempDir dir;
  write_text(dir / "tol.yaml", "RegressionMAE.mae: {atol: 0.5}\n");
  tally::EvaluatorOptions opts;
  opts.validate_only = true;
  opts.overrides = {"output.html=over.html"};
  const auto ev = Evaluator::from_yaml(
      "metrics: [{type: RegressionMAE}]\n"
      "output: {json: r.json, junit: r.xml, markdown: r.md, html: r.html}\n"
      "regression:\n"
      "  baseline: base.json\n"
      "  rtol: 0.25\n"
      "  tolerances:\n"
      "    'RegressionMAE.*': {atol: 0.01, better: lower}\n"
      "    x.y: {rtol: 1}\n"
      "checkpoint: {dir: ck, every_n_batches: 2}\n",
      opts, "eval.yaml", dir.path);
  const auto out = ev.outputs();
  EXPECT_EQ(out.json, fs::path("r.json"));
  EXPECT_EQ(out.junit, fs::path("r.xml"));
  EXPECT_EQ(out.markdown, fs::path("r.md"));
  EXPECT_EQ(out.html, fs::path("over.html"));  // --set applied in the same parse
  EXPECT_EQ(ev.output_json(), out.json);
  ASSERT_TRUE(ev.regression());
  const auto& rc = *ev.regression();
  EXPECT_EQ(rc.baseline, dir.path / "base.json");  // relative to the config's folder
  EXPECT_EQ(rc.rtol, 0.25);
  EXPECT_FALSE(rc.atol);
  EXPECT_FALSE(rc.tolerances_file);
  ASSERT_EQ(rc.tolerances.size(), 2u);
  EXPECT_EQ(rc.tolerances[0].pattern, "RegressionMAE.*");
  EXPECT_EQ(rc.tolerances[0].atol, 0.01);
  EXPECT_EQ(rc.tolerances[0].better, Better::Lower);
  EXPECT_EQ(rc.tolerances[0].where, "eval.yaml:7:5");
  EXPECT_EQ(rc.tolerances[1].rtol, 1.0);
  EXPECT_TRUE(ev.has_checkpoint());

  // Tolerances::of: the section's defaults, its inline rules and its file's.
  auto with_file = rc;
  with_file.tolerances_file = dir / "tol.yaml";
  const auto t = tally::Tolerances::of(with_file);
  EXPECT_EQ(t.defaults.rtol, 0.25);
  EXPECT_EQ(t.defaults.atol, 0.0);
  ASSERT_EQ(t.rules.size(), 3u);
  EXPECT_EQ(t.resolve("RegressionMAE.mae", "RegressionMAE.mae").tol.atol, 0.5);  // exact wins

  opts.overrides.clear();
  const auto none = Evaluator::from_yaml("metrics: [{type: RegressionMAE}]\n", opts);
  EXPECT_FALSE(none.outputs().json || none.outputs().junit || none.outputs().markdown ||
               none.outputs().html);
  EXPECT_FALSE(none.regression());
  EXPECT_FALSE(none.has_checkpoint());
}

TEST(EvaluatorSettings, BadInlineTolerancesAreConfigErrorsNamingTheirPlace) {
  tally::EvaluatorOptions opts;
  opts.validate_only = true;
  const std::string head = "metrics: [{type: RegressionMAE}]\nregression:\n  baseline: b.json\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  tolerances:\n    a.b: {atol: x}\n",
       "eval.yaml:5:17: regression.tolerances: 'a.b': "
       "atol expects a finite number >= 0, found 'x'"},
      {"  tolerances:\n    a.b: {rtol: -1}\n",
       "eval.yaml:5:17: regression.tolerances: 'a.b': "
       "rtol expects a finite number >= 0, found -1"},
      {"  tolerances:\n    a.b: {better: up}\n",
       "regression.tolerances: 'a.b': better expects higher, lower or neither, found 'up'"},
      {"  tolerances:\n    a.b: {rtl: 1}\n",
       "eval.yaml:5:11: regression.tolerances: 'a.b': unknown key 'rtl'"},
      {"  tolerances:\n    a.b: 0.1\n", "regression.tolerances: 'a.b' expects a map"},
      {"  tolerances: [1]\n", "regression.tolerances expects a file name or a map"},
  };
  for (const auto& [yaml, expected] : cases) {
    try {
      (void)Evaluator::from_yaml(head + yaml, opts, "eval.yaml");
      ADD_FAILURE() << "no error for " << yaml;
    } catch (const tally::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
          << e.what() << "\nexpected: " << expected;
    }
  }
}

TEST(EvaluatorSettings, JoinAsFailedOnlyForAnMpiBackend) {
  TempDir dir;
  tally::EvaluatorOptions opts;
  // Configs asking for another backend, or none, or that cannot be read at all: nothing to join.
  for (const std::string& text :
       {std::string("metrics: [{type: Nope}]\n"), std::string("backend: {type: nondist}\n"),
        std::string("backend: [mpi]\n"), std::string(": : :\n")}) {
    write_text(dir / "c.yaml", text);
    EXPECT_FALSE(Evaluator::join_as_failed(dir / "c.yaml", opts, 2, "boom")) << text;
  }
  EXPECT_FALSE(Evaluator::join_as_failed(dir / "missing.yaml", opts, 2, "boom"));
  // The last backend.type override wins over the file.
  write_text(dir / "c.yaml", "backend: {type: mpi}\n");
  opts.overrides = {"backend.type=mpi", "backend.type=nondist"};
  EXPECT_FALSE(Evaluator::join_as_failed(dir / "c.yaml", opts, 2, "boom"));
}
