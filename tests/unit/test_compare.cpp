// tally compare's semantics: tolerances and their precedence, directions from ResultSpecs
// (higher, lower, neither), missing and new keys, arrays element by element, NaN, and the exit
// codes of the command (0 ok, 3 regression, 2 bad input).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "config.hpp"
#include "progress.hpp"
#include "registry.hpp"
#include "results_io.hpp"
#include "support/process.hpp"
#include "tally/compare.hpp"
#include "tally/error.hpp"

namespace fs = std::filesystem;
using namespace tally;
using tally::test::run_command;
using tally::test::TempDir;
using tally::test::write_text;

namespace {

Value parse(const std::string& json) {
  return value_from_json(nlohmann::ordered_json::parse(json));
}

Comparison cmp(const std::string& results, const std::string& baseline, const Tolerances& t = {},
               const ResultSpecs& specs = {}) {
  return compare(parse(results), parse(baseline), specs, t);
}

const KeyDiff& key(const Comparison& c, const std::string& label, const std::string& k) {
  const KeyDiff* d = c.find(label, k);
  if (d == nullptr) throw std::runtime_error("no key " + label + "." + k);
  return *d;
}

Tolerances rules(const std::string& yaml, double rtol = 0, double atol = 0) {
  TempDir dir;
  write_text(dir / "tol.yaml", yaml);
  Tolerances t;
  t.defaults = {rtol, atol};
  t.add_file(dir / "tol.yaml");
  return t;
}

}  // namespace

TEST(Glob, StarAndQuestionMarkOnlyBracketsAreLiteral) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("top*", "top1"));
  EXPECT_TRUE(glob_match("*.precision*", "prf.precision_classwise[3]"));
  EXPECT_TRUE(glob_match("Acc?racy.top1", "Accuracy.top1"));
  EXPECT_TRUE(glob_match("m.x[1][2]", "m.x[1][2]"));  // brackets are not character classes
  EXPECT_FALSE(glob_match("m.x[12]", "m.x[1]"));
  EXPECT_FALSE(glob_match("top*", "xtop1"));
  EXPECT_FALSE(glob_match("*_classwise", "precision_classwise[0]"));
  EXPECT_TRUE(glob_match("a*b*c", "a__b__b__c"));
  EXPECT_FALSE(glob_match("a*b*c", "a__b__b__"));
}

TEST(Compare, WithinTheToleranceIsOkBeyondItIsADirectionalVerdict) {
  const std::string base = R"({"Accuracy": {"top1": 0.90, "top5": 0.95}})";
  // Exact by default: any drop regresses, any rise improves.
  auto c = cmp(R"({"Accuracy": {"top1": 0.899, "top5": 0.951}})", base);
  EXPECT_EQ(key(c, "Accuracy", "top1").verdict, Verdict::Regressed);
  EXPECT_NEAR(*key(c, "Accuracy", "top1").delta, -0.001, 1e-12);
  EXPECT_EQ(key(c, "Accuracy", "top5").verdict, Verdict::Improved);
  EXPECT_TRUE(c.regressed());
  EXPECT_EQ(c.summary(), "1 regressed, 1 improved");

  // atol 0.002 absorbs the drop of 0.001; rtol is relative to the baseline: 1% of 0.9 = 0.009.
  Tolerances t;
  t.defaults.atol = 0.002;
  EXPECT_EQ(key(cmp(R"({"Accuracy": {"top1": 0.899, "top5": 0.95}})", base, t), "Accuracy", "top1")
                .verdict,
            Verdict::Ok);
  t.defaults = {0.01, 0};
  auto c2 = cmp(R"({"Accuracy": {"top1": 0.892, "top5": 0.94}})", base, t);
  EXPECT_EQ(key(c2, "Accuracy", "top1").verdict, Verdict::Ok);  // -0.008 <= 0.009
  EXPECT_NEAR(key(c2, "Accuracy", "top1").tolerance, 0.009, 1e-12);
  EXPECT_EQ(key(c2, "Accuracy", "top5").verdict, Verdict::Regressed);  // -0.01 > 0.0095
  // Equal values are ok even with no tolerance.
  EXPECT_FALSE(cmp(base, base).regressed());
  EXPECT_EQ(cmp(base, base).count(Verdict::Ok), 2u);
}

TEST(Compare, DirectionsComeFromResultSpecsAndTolerancesMayOverrideThem) {
  ResultSpecs specs;
  specs.set("det", {{"*_error", Better::Lower, Plot::None, ""},
                    {"count", Better::Neither, Plot::None, ""}});
  const std::string base = R"({"det": {"mean_error": 0.20, "count": 10, "map": 0.5}})";
  auto c = cmp(R"({"det": {"mean_error": 0.25, "count": 12, "map": 0.4}})", base, {}, specs);
  EXPECT_EQ(key(c, "det", "mean_error").verdict,
            Verdict::Regressed);  // lower is better: a rise regresses
  EXPECT_EQ(key(c, "det", "mean_error").better, Better::Lower);
  EXPECT_EQ(key(c, "det", "count").verdict,
            Verdict::Changed);  // no direction: changed, never a failure
  EXPECT_EQ(key(c, "det", "map").verdict, Verdict::Regressed);  // no spec matches: higher is better
  auto better = cmp(R"({"det": {"mean_error": 0.15, "count": 10, "map": 0.5}})", base, {}, specs);
  EXPECT_EQ(key(better, "det", "mean_error").verdict, Verdict::Improved);
  EXPECT_FALSE(better.regressed());
  // Unknown labels (no specs at all) are higher-is-better.
  EXPECT_EQ(key(cmp(R"({"x": {"loss": 2}})", R"({"x": {"loss": 1}})"), "x", "loss").verdict,
            Verdict::Improved);
  // A tolerances entry can set the direction of a metric that declares none.
  const auto t = rules("x.loss: {better: lower}\n");
  EXPECT_EQ(key(cmp(R"({"x": {"loss": 2}})", R"({"x": {"loss": 1}})", t), "x", "loss").verdict,
            Verdict::Regressed);
}

TEST(Compare, ToleranceRulesPrecedenceExactElementThenExactKeyThenLongestGlob) {
  const auto t = rules(R"(
"*": {atol: 0.5}
"*.precision*": {rtol: 0.1}
prf.precision_classwise: {atol: 0.01}
"prf.precision_classwise[2]": {atol: 0.2}
"prf.precision_*": {atol: 0.3}
Accuracy.top1: {atol: 0.002}
)",
                       0.05, 0.001);
  // Exact element beats exact key.
  auto r = t.resolve("prf.precision_classwise", "prf.precision_classwise[2]");
  EXPECT_DOUBLE_EQ(r.tol.atol, 0.2);
  EXPECT_DOUBLE_EQ(r.tol.rtol, 0.05);  // not given by the entry: the default
  // Exact key beats every glob.
  r = t.resolve("prf.precision_classwise", "prf.precision_classwise[1]");
  EXPECT_DOUBLE_EQ(r.tol.atol, 0.01);
  // Among globs, the one with the most literal characters: "prf.precision_*" (15) over
  // "*.precision*" (10).
  r = t.resolve("prf.precision_micro", "prf.precision_micro");
  EXPECT_DOUBLE_EQ(r.tol.atol, 0.3);
  EXPECT_EQ(r.rule->pattern, "prf.precision_*");
  r = t.resolve("other.precision", "other.precision");
  EXPECT_EQ(r.rule->pattern, "*.precision*");
  EXPECT_DOUBLE_EQ(r.tol.rtol, 0.1);
  EXPECT_DOUBLE_EQ(r.tol.atol, 0.001);
  r = t.resolve("Accuracy.top1", "Accuracy.top1");
  EXPECT_DOUBLE_EQ(r.tol.atol, 0.002);
  r = t.resolve("Accuracy.top5", "Accuracy.top5");
  EXPECT_EQ(r.rule->pattern, "*");
  // On a tie between globs, the first written wins.
  const auto tie = rules("\"a.*\": {atol: 1}\n\"*.b\": {atol: 2}\n");
  EXPECT_DOUBLE_EQ(tie.resolve("a.b", "a.b").tol.atol, 1);
  // No rule: the defaults.
  Tolerances none;
  none.defaults = {0.25, 0.5};
  EXPECT_EQ(none.resolve("k", "k").rule, nullptr);
  EXPECT_DOUBLE_EQ(none.resolve("k", "k").tol.at(-2.0), 0.5 + 0.25 * 2.0);
}

TEST(Compare, MissingAndNewKeysAndLabels) {
  auto c = cmp(R"({"A": {"top1": 0.9, "top3": 0.95}, "N": {"x": 1}})",
               R"({"A": {"top1": 0.9, "top2": 0.93}, "Gone": {"y": 2, "z": [1, 2]}})");
  EXPECT_EQ(key(c, "A", "top1").verdict, Verdict::Ok);
  EXPECT_EQ(key(c, "A", "top3").verdict, Verdict::New);
  EXPECT_EQ(key(c, "A", "top2").verdict, Verdict::Missing);
  EXPECT_EQ(key(c, "N", "x").verdict, Verdict::New);
  EXPECT_EQ(key(c, "Gone", "y").verdict, Verdict::Missing);
  EXPECT_EQ(key(c, "Gone", "z").verdict, Verdict::Missing);
  EXPECT_EQ(key(c, "Gone", "y").baseline, Value(2));
  EXPECT_EQ(c.count(Verdict::Missing), 3u);
  EXPECT_EQ(c.count(Verdict::New), 2u);
  EXPECT_FALSE(c.regressed());  // reported, not failed
  EXPECT_EQ(c.keys.size(), 6u);
}

TEST(Compare, ArraysElementByElementNameTheElementThatRegressed) {
  const std::string base = R"({"prf": {"precision_classwise": [0.9, 0.8, 0.7, 0.6]}})";
  auto c = cmp(R"({"prf": {"precision_classwise": [0.95, 0.8, 0.6, 0.58]}})", base);
  const auto& k = key(c, "prf", "precision_classwise");
  EXPECT_EQ(k.verdict, Verdict::Regressed);
  EXPECT_EQ(k.element, "[2]");  // the largest drop: 0.7 -> 0.6
  EXPECT_NEAR(*k.delta, -0.1, 1e-12);
  EXPECT_EQ(k.baseline, Value(0.7));
  EXPECT_EQ(k.value, Value(0.6));
  EXPECT_EQ(k.element_count, 4u);
  EXPECT_EQ(k.regressed_count, 2u);
  EXPECT_EQ(k.improved_count, 1u);
  ASSERT_EQ(k.elements.size(), 3u);
  EXPECT_EQ(k.elements[0].index, "[0]");
  EXPECT_EQ(k.elements[0].verdict, Verdict::Improved);
  EXPECT_EQ(k.note, "2 of 4 elements regressed, 1 improved");

  // A per-element tolerance forgives one element only.
  const auto t = rules(
      "\"prf.precision_classwise[2]\": {atol: 0.2}\n\"prf.precision_classwise[3]\": {atol: "
      "0.05}\n");
  auto c2 = cmp(R"({"prf": {"precision_classwise": [0.9, 0.8, 0.6, 0.58]}})", base, t);
  EXPECT_EQ(key(c2, "prf", "precision_classwise").verdict, Verdict::Ok);
  // Only improvements: improved, and the element shown is the largest rise.
  auto c3 = cmp(R"({"prf": {"precision_classwise": [0.9, 0.85, 0.7, 0.6]}})", base);
  EXPECT_EQ(key(c3, "prf", "precision_classwise").verdict, Verdict::Improved);
  EXPECT_EQ(key(c3, "prf", "precision_classwise").element, "[1]");
}

TEST(Compare, MatricesAreComparedCellByCellAndShapeChangesAreRegressions) {
  ResultSpecs specs;
  specs.set("cm", {{"matrix", Better::Neither, Plot::Heatmap, ""}});
  const std::string base = R"({"cm": {"matrix": [[5, 1], [2, 7]]}, "p": {"c": [0.5, 0.5]}})";
  auto c = cmp(R"({"cm": {"matrix": [[5, 1], [3, 6]]}, "p": {"c": [0.5, 0.5]}})", base, {}, specs);
  const auto& m = key(c, "cm", "matrix");
  EXPECT_EQ(m.verdict, Verdict::Changed);
  EXPECT_EQ(m.changed_count, 2u);
  EXPECT_EQ(m.elements[0].index, "[1][0]");
  EXPECT_EQ(m.elements[1].index, "[1][1]");
  EXPECT_FALSE(c.regressed());
  // A per-class array whose length changed cannot be compared: a regression, said so.
  auto c2 =
      cmp(R"({"cm": {"matrix": [[5, 1], [2, 7]]}, "p": {"c": [0.5, 0.5, 0.1]}})", base, {}, specs);
  EXPECT_EQ(key(c2, "p", "c").verdict, Verdict::Regressed);
  EXPECT_NE(key(c2, "p", "c").note.find("shape [2] -> [3]"), std::string::npos)
      << key(c2, "p", "c").note;
  // ... but a matrix of counts (no direction) only changed.
  auto c3 = cmp(R"({"cm": {"matrix": [[5, 1, 0], [2, 7, 0], [0, 0, 1]]}, "p": {"c": [0.5, 0.5]}})",
                base, {}, specs);
  EXPECT_EQ(key(c3, "cm", "matrix").verdict, Verdict::Changed);
  EXPECT_NE(key(c3, "cm", "matrix").note.find("[2][2] -> [3][3]"), std::string::npos);
}

TEST(Compare, NullIsNaNAndCurvesAreComparedAsAWhole) {
  auto c = cmp(R"({"m": {"a": null, "b": null, "c": 0.5}})",
               R"({"m": {"a": 0.5, "b": null, "c": null}})");
  EXPECT_EQ(key(c, "m", "a").verdict, Verdict::Regressed);
  EXPECT_EQ(key(c, "m", "a").note, "the value is null (NaN)");
  EXPECT_EQ(key(c, "m", "b").verdict, Verdict::Ok);
  EXPECT_EQ(key(c, "m", "c").verdict, Verdict::Improved);

  ResultSpecs specs;
  specs.set("roc", {{"curve", Better::Neither, Plot::Curve, ""}});
  const std::string base = R"({"roc": {"curve": {"x": [0, 0.5, 1], "y": [0, 0.8, 1]}}})";
  EXPECT_EQ(key(cmp(base, base, {}, specs), "roc", "curve").verdict, Verdict::Ok);
  auto moved = cmp(R"({"roc": {"curve": {"x": [0, 0.4, 1], "y": [0, 0.7, 1]}}})", base, {}, specs);
  EXPECT_EQ(key(moved, "roc", "curve").verdict, Verdict::Changed);
  EXPECT_FALSE(moved.regressed());
}

TEST(Compare, BadToleranceEntriesNameTheirPlace) {
  const auto message = [](const std::string& yaml) {
    try {
      rules(yaml);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("a.b: {rtl: 0.1}\n").find("tol.yaml:1:7: tolerances"), std::string::npos)
      << message("a.b: {rtl: 0.1}\n");
  EXPECT_NE(message("a.b: {rtl: 0.1}\n").find("unknown key 'rtl' (expected rtol, atol, better)"),
            std::string::npos);
  EXPECT_NE(message("a.b: {atol: -1}\n").find("atol expects a number >= 0, found -1"),
            std::string::npos);
  EXPECT_NE(message("a.b: 0.1\n").find("'a.b' expects a map"), std::string::npos);
  EXPECT_NE(message("a.b: {better: up}\n").find("better expects higher, lower or neither"),
            std::string::npos);
  EXPECT_NE(message("- 1\n").find("expects a map of KEY_PATTERN"), std::string::npos);
  EXPECT_NE(message("a: [\n").find("YAML syntax error"), std::string::npos);
  EXPECT_EQ(message(""), "no error");  // an empty file: no rules
}

TEST(Compare, ClassificationPluginDeclaresItsDirectionsAndPlots) {
  const auto reg = Registry::load();
  std::vector<std::string> unknown;
  const auto specs = ResultSpecs::from_registry(reg,
                                                {{"acc", "Accuracy"},
                                                 {"prf", "SingleLabelPrecisionRecallF1score"},
                                                 {"cm", "ConfusionMatrix"},
                                                 {"x", "NoSuchMetric"}},
                                                &unknown);
  EXPECT_EQ(unknown, std::vector<std::string>{"NoSuchMetric"});
  EXPECT_EQ(specs.better("acc", "top1"), Better::Higher);
  EXPECT_EQ(specs.type("prf"), "SingleLabelMetric");  // an alias resolves to the component's name
  EXPECT_EQ(specs.better("prf", "precision"), Better::Higher);
  EXPECT_EQ(specs.plot("prf", "precision"), Plot::None);
  EXPECT_EQ(specs.plot("prf", "recall_classwise"), Plot::Bars);
  EXPECT_EQ(specs.plot("prf", "f1-score_thr-0.50_classwise"), Plot::Bars);
  EXPECT_EQ(specs.better("prf", "support"), Better::Neither);
  EXPECT_EQ(specs.better("prf", "support_classwise"), Better::Neither);
  EXPECT_EQ(specs.plot("prf", "support_classwise"), Plot::Bars);
  EXPECT_EQ(specs.better("cm", "matrix"), Better::Neither);
  EXPECT_EQ(specs.plot("cm", "matrix"), Plot::Heatmap);
  EXPECT_EQ(specs.better("x", "anything"), Better::Higher);
}

TEST(Compare, TableIsPlainOrColoredAndNamesTheElement) {
  auto c =
      cmp(R"({"prf": {"p": [0.9, 0.5], "q": 0.2}})", R"({"prf": {"p": [0.9, 0.7], "q": 0.2}})");
  c.baseline_source = "base.json";
  const std::string plain = format_comparison(c, false);
  EXPECT_EQ(plain.find('\x1b'), std::string::npos);
  EXPECT_NE(plain.find("prf.p[1]"), std::string::npos) << plain;
  EXPECT_NE(plain.find("-0.2"), std::string::npos) << plain;
  EXPECT_NE(plain.find("regressed"), std::string::npos);
  EXPECT_NE(plain.find("1 regressed, 1 ok (baseline: base.json)"), std::string::npos) << plain;
  const std::string colored = format_comparison(c, true);
  EXPECT_NE(colored.find("\x1b[1;31m"), std::string::npos);
  EXPECT_NE(colored.find("\x1b[0m"), std::string::npos);
}

TEST(Compare, ResultsJsonRoundTripsWithTypes) {
  Results r;
  r.metrics = parse(R"({"acc": {"top1": 1.0, "n": 3, "pc": [0.5, null]}})");
  r.run.config = "e.yaml";
  r.run.types = {{"acc", "Accuracy"}};
  r.run.plugins = {{"classification", "0.1.0"}};
  TempDir dir;
  write_text(dir / "r.json", r.to_json());
  const auto back = read_results_json(dir / "r.json");
  EXPECT_TRUE(back.metrics.at("acc").at("top1").is_float());  // 1.0 stays a float
  EXPECT_TRUE(back.metrics.at("acc").at("n").is_int());
  EXPECT_TRUE(back.metrics.at("acc").at("pc").as_array()[1].is_null());
  EXPECT_EQ(back.run.types, r.run.types);
  EXPECT_EQ(back.run.plugins, r.run.plugins);
  EXPECT_EQ(back.run.config, "e.yaml");
  write_text(dir / "bad.json", "{\"results\": ");
  EXPECT_THROW(read_results_json(dir / "bad.json"), InputError);
  write_text(dir / "other.json", "{\"a\": 1}");
  EXPECT_THROW(read_results_json(dir / "other.json"), InputError);
  EXPECT_THROW(read_results_json(dir / "none.json"), InputError);
}

TEST(Progress, LineShowsRateAndEtaAndLabelsRankZero) {
  const std::string l = Progress::line(250, 1000, 0.5, 1, false);
  EXPECT_NE(l.find(" 25%"), std::string::npos) << l;
  EXPECT_NE(l.find("250/1000 samples"), std::string::npos) << l;
  EXPECT_NE(l.find("500 samples/s"), std::string::npos) << l;
  EXPECT_NE(l.find("ETA 0:02"), std::string::npos) << l;  // 750 left at 500/s
  EXPECT_EQ(l.find("rank 0"), std::string::npos);
  const std::string done = Progress::line(3'000'000, 3'000'000, 2.0, 4, false);
  EXPECT_TRUE(done.starts_with("rank 0 [")) << done;
  EXPECT_NE(done.find("100%"), std::string::npos);
  EXPECT_NE(done.find("1.50 M samples/s"), std::string::npos) << done;
  EXPECT_NE(done.find("elapsed 0:02"), std::string::npos) << done;
}

TEST(Progress, TerminalUpdatesAreThrottledToTenASecond) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p(1'000'000, 1, /*tty=*/true, /*forced=*/true, f);
    for (int i = 0; i < 100'000; ++i) p.add(10);  // far faster than 100 ms
    p.finish();
  }
  std::rewind(f);
  std::string text;
  for (int ch; (ch = std::fgetc(f)) != EOF;) text += static_cast<char>(ch);
  std::fclose(f);
  std::size_t redraws = 0;
  for (char ch : text) redraws += ch == '\r';
  // One draw on the first add, maybe a few more if the machine stalls, and the final one.
  EXPECT_GE(redraws, 2u);
  EXPECT_LE(redraws, 12u) << text;
  EXPECT_TRUE(text.ends_with("\n"));
  EXPECT_NE(text.find("100%"), std::string::npos);
}

TEST(Progress, ShortRunsOnATerminalStayQuietUnlessForced) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p(100, 1, /*tty=*/true, /*forced=*/false, f);
    p.add(100);
    p.finish();
  }
  EXPECT_EQ(std::ftell(f), 0L);
  std::fclose(f);
}

// ---- the command -------------------------------------------------------------------------------

class CompareCli : public ::testing::Test {
 protected:
  tally::test::ProcessResult tally(const std::string& args) {
    return run_command(std::string(TALLY_CLI) + " " + args);
  }
  fs::path results(const std::string& name, const std::string& res,
                   const std::string& types = R"({"Accuracy": "Accuracy"})") {
    write_text(dir / name, R"({"results": )" + res + R"(, "run": {"config": "e.yaml", "types": )" +
                               types + "}}");
    return dir / name;
  }
  TempDir dir;
};

TEST_F(CompareCli, ExitCodesZeroOnOkThreeOnRegressionTwoOnBadInput) {
  const auto base = results("base.json", R"({"Accuracy": {"top1": 0.9, "top3": 0.95}})");
  const auto same = results("same.json", R"({"Accuracy": {"top1": 0.9, "top3": 0.96}})");
  const auto worse = results("worse.json", R"({"Accuracy": {"top1": 0.85, "top3": 0.95}})");

  auto r = tally("compare " + same.string() + " " + base.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Accuracy.top3"), std::string::npos);
  EXPECT_NE(r.out.find("improved"), std::string::npos);
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);  // not a terminal: plain

  r = tally("compare " + worse.string() + " " + base.string());
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("regressed"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("Accuracy.top1 0.9 -> 0.85 (-0.05)"), std::string::npos) << r.err;

  // Within --atol: ok. --rtol 0.1 of 0.9 = 0.09 > 0.05: ok.
  EXPECT_EQ(tally("compare " + worse.string() + " " + base.string() + " --atol 0.06").exit_code, 0);
  EXPECT_EQ(tally("compare " + worse.string() + " " + base.string() + " --rtol 0.1").exit_code, 0);
  EXPECT_EQ(tally("compare " + worse.string() + " " + base.string() + " --rtol 0.01").exit_code, 3);
  // A tolerances file, with a glob.
  write_text(dir / "tol.yaml", "\"Accuracy.top*\": {atol: 0.1}\n");
  EXPECT_EQ(tally("compare " + worse.string() + " " + base.string() + " --tolerances " +
                  (dir / "tol.yaml").string())
                .exit_code,
            0);

  // The reports, from two results files.
  r = tally("compare -q " + worse.string() + " " + base.string() + " --junit " +
            (dir / "j.xml").string() + " --markdown " + (dir / "s.md").string() + " --html " +
            (dir / "r.html").string());
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(tally::test::read_file(dir / "j.xml").find("failures=\"1\""), std::string::npos);
  EXPECT_NE(tally::test::read_file(dir / "s.md").find("| ❌ regressed | Accuracy.top1 |"),
            std::string::npos);
  EXPECT_NE(tally::test::read_file(dir / "r.html").find("data-verdict=\"regressed\""),
            std::string::npos);

  // --color=always colors even on a pipe.
  r = tally("compare --color=always " + worse.string() + " " + base.string());
  EXPECT_NE(r.out.find("\x1b[1;31m"), std::string::npos);

  // Bad input: exit 2, one line.
  write_text(dir / "broken.json", "{\"results\": {\"a\": ");
  for (const std::string& args : {"compare " + (dir / "broken.json").string() + " " + base.string(),
                                  "compare " + (dir / "nope.json").string() + " " + base.string(),
                                  "compare " + same.string() + " " + (dir / "tol.yaml").string(),
                                  "compare " + same.string() + " " + base.string() + " --rtol -1",
                                  "compare " + same.string() + " " + base.string() +
                                      " --tolerances " + (dir / "nope.yaml").string(),
                                  "compare " + same.string()}) {
    r = tally(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\n" << r.err;
    EXPECT_TRUE(r.err.starts_with("tally: error: ")) << r.err;
  }
  EXPECT_NE(tally("compare " + (dir / "broken.json").string() + " " + base.string())
                .err.find("is not valid JSON"),
            std::string::npos);
  EXPECT_NE(tally("compare " + same.string() + " " + (dir / "tol.yaml").string())
                .err.find("is not valid JSON"),
            std::string::npos);
  write_text(dir / "bad_tol.yaml", "Accuracy.top1: {rtl: 1}\n");
  r = tally("compare " + same.string() + " " + base.string() + " --tolerances " +
            (dir / "bad_tol.yaml").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad_tol.yaml:1:17:"), std::string::npos) << r.err;
}

TEST_F(CompareCli, DirectionsAreReadFromThePluginsThroughTheRecordedTypes) {
  // ConfusionMatrix declares Better::Neither for its matrix: a changed cell is not a regression.
  const std::string types = R"({"cm": "ConfusionMatrix", "prf": "SingleLabelMetric"})";
  const auto base =
      results("base.json", R"({"cm": {"matrix": [[3, 1], [0, 4]]}, "prf": {"support": 8}})", types);
  const auto now =
      results("now.json", R"({"cm": {"matrix": [[2, 2], [0, 4]]}, "prf": {"support": 7}})", types);
  auto r = tally("compare " + now.string() + " " + base.string());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("changed"), std::string::npos) << r.out;
  // Without the types, every key is higher-is-better (with a warning saying so).
  const auto base_untyped = results("bu.json", R"({"cm": {"matrix": [[3, 1], [0, 4]]}})", "{}");
  const auto now_untyped = results("nu.json", R"({"cm": {"matrix": [[2, 2], [0, 4]]}})", "{}");
  r = tally("compare " + now_untyped.string() + " " + base_untyped.string());
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("records no metric types"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("cm.matrix[0][0]"), std::string::npos) << r.out;  // the element that fell
  // A metric type no plugin provides: a warning, then higher-is-better.
  const auto base_unknown =
      results("bk.json", R"({"m": {"loss": 1.0}})", R"({"m": "NoSuchMetric"})");
  const auto now_unknown =
      results("nk.json", R"({"m": {"loss": 1.5}})", R"({"m": "NoSuchMetric"})");
  r = tally("compare " + now_unknown.string() + " " + base_unknown.string());
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.err.find("metric type NoSuchMetric not found among the plugins"), std::string::npos)
      << r.err;
}
