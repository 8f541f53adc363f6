// tally compare's semantics: tolerances and their precedence, directions from ResultSpecs
// (higher, lower, neither), missing and new keys, arrays element by element, NaN, and the exit
// codes of the command (0 ok, 3 regression, 2 bad input).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <limits>
#include <tuple>

#include "config.hpp"
#include "progress.hpp"
#include "registry.hpp"
#include "results_io.hpp"
#include "support/process.hpp"
#include "tally/reports/compare.hpp"
#include "tally/sdk/error.hpp"

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
  EXPECT_NE(message("a.b: {atol: -1}\n").find("atol expects a finite number >= 0, found -1"),
            std::string::npos);
  EXPECT_NE(message("a.b: 0.1\n").find("'a.b' expects a map"), std::string::npos);
  EXPECT_NE(message("a.b: {better: up}\n").find("better expects higher, lower or neither"),
            std::string::npos);
  EXPECT_NE(message("- 1\n").find("expects a map of KEY_PATTERN"), std::string::npos);
  EXPECT_NE(message("a: [\n").find("YAML syntax error"), std::string::npos);
  EXPECT_EQ(message(""), "no error");  // an empty file: no rules
}

// Issue 32, item 8: the index answers as the scan over every rule does, for exact element and
// key entries, globs with and without literal prefixes and suffixes, '?', ties and no match.
TEST(ToleranceIndex, GivesTheAnswersOfTheScanForEveryKeyAndElement) {
  const auto t = rules(R"(
"*": {atol: 0.5}
"*.precision*": {rtol: 0.1}
prf.precision_classwise: {atol: 0.01}
"prf.precision_classwise[2]": {atol: 0.2}
"prf.precision_*": {atol: 0.3}
"prf.*[1?]": {atol: 0.4}
"*[3]": {atol: 0.6}
"m.arr[1*]": {atol: 0.7}
"m.arr[12*]": {atol: 0.8}
"m.arr[1?]": {atol: 0.9}
"m.*": {atol: 1.0}
"*.arr": {atol: 1.1}
"m.a?r[*]": {atol: 1.2}
"a.*": {atol: 1}
"*.b": {atol: 2}
"m.x*y": {atol: 3}
"m.x*": {better: lower}
)");
  const ToleranceIndex index(t);
  std::vector<std::pair<std::string, std::string>> cases;
  for (const std::string key : {"prf.precision_classwise", "prf.precision_micro", "m.arr", "m.xy",
                                "m.xzzy", "a.b", "other.precision", "zzz", "m", ""})
    for (const std::string suffix :
         {"", "[1]", "[2]", "[3]", "[12]", "[13]", "[123]", "[0][3]", ".y", ".sub.y", "[1x]"})
      cases.emplace_back(key, key + suffix);
  std::size_t matched = 0;
  for (const auto& [k, e] : cases) {
    SCOPED_TRACE(e);
    const auto a = t.resolve(k, e), b = index.resolve(k, e);
    EXPECT_EQ(a.rule, b.rule);
    EXPECT_EQ(a.tol.atol, b.tol.atol);
    EXPECT_EQ(a.tol.rtol, b.tol.rtol);
    EXPECT_EQ(a.better, b.better);
    matched += a.rule != nullptr && a.rule->pattern != "*";
  }
  EXPECT_GT(matched, cases.size() / 2);  // the cases exercise the rules, not only "*"
  // The same through the Key object, for every element of one key.
  const auto key = index.key("m.arr");
  for (int i = 0; i < 200; ++i) {
    const std::string e = fmt::format("m.arr[{}]", i);
    EXPECT_EQ(key.resolve(e).rule, t.resolve("m.arr", e).rule) << e;
  }
  // No rules at all: the defaults.
  Tolerances none;
  none.defaults = {0.25, 0.5};
  const ToleranceIndex empty(none);
  EXPECT_EQ(empty.resolve("k", "k[1]").rule, nullptr);
  EXPECT_DOUBLE_EQ(empty.resolve("k", "k[1]").tol.rtol, 0.25);
}

// Issue 32, item 6: a results file holds at most kMaxJsonValues values, whatever its bytes (a
// 1 GiB baseline of "0," would be 500 M values, 20 GB of memory): exit 2 naming the file; an
// array of numbers, of arrays, of nulls.
TEST(Compare, ResultsJsonOfTooManyValuesIsAnInputErrorNamingTheFile) {
  const std::size_t n = 5000;  // read_results_json's parser with a bound of 5,000 values
  const auto many = [&](const std::string& open, const std::string& item,
                        const std::string& close) {
    std::string t = R"({"results": {"M": {"a": )" + open;
    t.reserve(t.size() + n * (item.size() + 1) + 16);
    for (std::size_t i = 0; i < n; ++i) t += (i ? "," : "") + item;
    return t + close + "}}}";
  };
  for (const auto& [name, text] :
       std::vector<std::pair<std::string, std::string>>{{"zeros", many("[", "0", "]")},
                                                        {"nested", many("[", "[]", "]")},
                                                        {"nulls", many("[", "null", "]")}}) {
    SCOPED_TRACE(name);
    try {
      parse_results_text(text, "many.json", n);
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_TRUE(msg.starts_with("results 'many.json': more than")) << msg;
      EXPECT_NE(msg.find(fmt::format("more than {} values", n)), std::string::npos) << msg;
    }
    EXPECT_EQ(parse_results_text(text, "many.json", 2 * n).at("results").at("M").at("a").size(), n);
  }
  EXPECT_GE(kMaxJsonValues, std::size_t{1} << 24);  // 16 M: sixteen 1000-class confusion matrices
}

// Issue 32, item 8: many labels, keys and globs compare in linear time (a quadratic lookup of
// each label in the baseline, of each key's glob among thousands, would take minutes here).
TEST(Compare, ManyLabelsKeysAndGlobsCompareInLinearTime) {
  constexpr int kLabels = 50000;
  Value results = Value::map(), baseline = Value::map();
  for (int i = 0; i < kLabels; ++i) {
    Value r = Value::map(), b = Value::map();
    r.as_map().emplace_back("acc", Value(i == 777 ? 0.1 : 0.5));
    b.as_map().emplace_back("acc", Value(0.5));
    results.as_map().emplace_back(fmt::format("L{}", i), std::move(r));
    baseline.as_map().emplace_back(fmt::format("L{}", kLabels - 1 - i), std::move(b));  // reversed
  }
  baseline.as_map().emplace_back("gone", Value(1.0));
  const auto c = compare(results, baseline, {}, {});
  EXPECT_EQ(c.keys.size(), static_cast<std::size_t>(kLabels) + 1);
  EXPECT_EQ(c.count(Verdict::Regressed), 1u);
  EXPECT_EQ(c.count(Verdict::Missing), 1u);
  EXPECT_EQ(key(c, "L777", "acc").verdict, Verdict::Regressed);

  // 2,000 globs over a 50,000-element array: each element finds its own rule.
  Tolerances t;
  for (int i = 0; i < 2000; ++i) {
    ToleranceRule rule;
    rule.pattern = fmt::format("M.arr[{}*]", 1000 + i);
    rule.atol = 1.0;
    t.rules.push_back(rule);
  }
  Value::Array ra, ba;
  for (int i = 0; i < 50000; ++i) {
    ra.emplace_back(i >= 10000 && i < 10005 ? 1.5 : 1.0);  // [10000]..[10004]: matched by [1000*]
    ba.emplace_back(i == 4000 ? 3.0 : 1.0);                // [4000]: no rule, exact
  }
  Value m = Value::map();
  m.set("arr", Value(std::move(ra)));
  Value bm = Value::map();
  bm.set("arr", Value(std::move(ba)));
  Value rv = Value::map(), bv = Value::map();
  rv.set("M", m);
  bv.set("M", bm);
  const auto a = compare(rv, bv, {}, t);
  const auto& arr = key(a, "M", "arr");
  EXPECT_EQ(arr.element_count, 50000u);
  EXPECT_EQ(arr.regressed_count, 1u);  // [4000]; the five within atol 1
  EXPECT_EQ(arr.improved_count, 0u);
  EXPECT_EQ(arr.element, "[4000]");
}

// Issue 32, item 9: a NaN tolerance passes every key (|delta| > NaN is false): every tolerance,
// the defaults and each entry's, from any source, is a finite number >= 0, else ConfigError.
TEST(Compare, NonFiniteOrNegativeTolerancesAreConfigErrorsFromAnySource) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::string r = R"({"A": {"top1": 0.5}})", b = R"({"A": {"top1": 0.99}})";
  for (const double x : {nan, inf, -inf, -1.0, -1e-300}) {
    SCOPED_TRACE(x);
    for (int which = 0; which < 4; ++which) {
      Tolerances t;
      if (which == 0) t.defaults.rtol = x;
      if (which == 1) t.defaults.atol = x;
      ToleranceRule rule;
      rule.pattern = which == 2 ? "A.*" : "A.top1";
      (which == 2 ? rule.rtol : rule.atol) = x;
      if (which == 2) rule.where = "tol.yaml:3:4";
      if (which >= 2) t.rules.push_back(rule);
      try {
        cmp(r, b, t);
        ADD_FAILURE() << "accepted, case " << which;
      } catch (const ConfigError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("expects a finite number >= 0"), std::string::npos) << msg;
        EXPECT_NE(msg.find(which % 2 == 0 ? "rtol" : "atol"), std::string::npos) << msg;
        if (which == 2) {
          EXPECT_TRUE(msg.starts_with("tol.yaml:3:4: tolerance 'A.*'")) << msg;
        }
      }
    }
  }
  // A tolerances file: YAML's .nan and .inf are numbers, refused where they are written.
  for (const auto& [v, shown] :
       std::vector<std::pair<std::string, std::string>>{{".nan", "nan"},
                                                        {".NaN", "nan"},
                                                        {".inf", "inf"},
                                                        {"-.inf", "-inf"},
                                                        {"-0.5", "-0.5"}}) {
    SCOPED_TRACE(v);
    try {
      rules("A.top1: {rtol: " + v + "}\n");
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("tol.yaml:1:16: tolerances"), std::string::npos) << msg;
      EXPECT_NE(msg.find("rtol expects a finite number >= 0, found " + shown), std::string::npos)
          << msg;
    }
  }
  // Finite tolerances still gate: the drop from 0.99 to 0.5 regresses under atol 0.1.
  Tolerances fine;
  fine.defaults.atol = 0.1;
  EXPECT_EQ(key(cmp(r, b, fine), "A", "top1").verdict, Verdict::Regressed);
}

// The results reader builds its Value straight from the JSON text: equal keys of an object keep
// the first key's place with the last value (as before), in small and in large objects.
TEST(Compare, ResultsJsonWithEqualKeysKeepsTheLastValueAtTheFirstPlace) {
  TempDir dir;
  std::string big = R"({"results": {"M": {)";
  for (int i = 0; i < 100; ++i) big += fmt::format("\"k{}\": {}, ", i % 40, i);
  big += R"("z": 1}, "A": {"x": 1, "y": 2, "x": 3}}})";
  write_text(dir / "r.json", big);
  const Results r = read_results_json(dir / "r.json");
  const auto& m = r.metrics.at("M").as_map();
  ASSERT_EQ(m.size(), 41u);
  EXPECT_EQ(m[0].first, "k0");
  EXPECT_EQ(m[0].second.as_int(), 80);  // k0 = 0, 40, 80: the last
  EXPECT_EQ(m[39].first, "k39");
  EXPECT_EQ(m[39].second.as_int(), 79);
  EXPECT_EQ(m[40].first, "z");
  const auto& a = r.metrics.at("A").as_map();
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].first, "x");
  EXPECT_EQ(a[0].second.as_int(), 3);
  EXPECT_EQ(a[1].first, "y");
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

namespace {
std::string file_text(std::FILE* f) {
  std::rewind(f);
  std::string text;
  for (int ch; (ch = std::fgetc(f)) != EOF;) text += static_cast<char>(ch);
  return text;
}

// The steps of a run of two metrics on 4 ranks, then the outputs.
void run_steps(Progress& p) {
  p.add(100);
  tally::RunStep sync;
  sync.count = 2;
  sync.world_size = 4;
  p.step(sync);
  for (std::size_t i = 0; i < 2; ++i) {
    tally::RunStep m;
    m.kind = tally::RunStep::Kind::computing;
    m.name = i == 0 ? "auroc" : "acc";
    m.index = i;
    m.count = 2;
    m.world_size = 4;
    p.step(m);
    m.kind = tally::RunStep::Kind::computed;
    m.seconds = i == 0 ? 20.26 : 0.5;
    p.step(m);
  }
  tally::RunStep writing;
  writing.kind = tally::RunStep::Kind::writing;
  p.step(writing);
  p.finish();
}

// What the display writes for run_steps() on a terminal or a pipe (--progress).
std::string steps_text(bool tty) {
  std::FILE* f = std::tmpfile();
  if (f == nullptr) return "(no tmpfile)";
  {
    Progress p(100, 4, tty, /*forced=*/true, f);
    run_steps(p);
  }
  std::string text = file_text(f);
  std::fclose(f);
  return text;
}
}  // namespace

// After the read, every step is shown (no silent 100% while a metric computes): on a pipe with
// --progress, a line per step with each metric's time.
TEST(Progress, EveryStepAfterTheReadIsShownWithItsTime) {
  const std::string text = steps_text(/*tty=*/false);
  EXPECT_NE(text.find("100/100 samples"), std::string::npos) << text;
  EXPECT_NE(text.find("\nsyncing the states of 4 ranks\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ncomputing 'auroc' (1/2)\ncomputed 'auroc' (1/2) in 20.3 s\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\ncomputed 'acc' (2/2) in 0.50 s\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nwriting the outputs\nwrote the outputs in "), std::string::npos) << text;
  EXPECT_TRUE(text.ends_with(" s\n")) << text;
}

// A resume on another number of ranks gives rank 0 a part of another size: set_total() takes
// it, keeping what was counted (the states folded), and the bar ends at 100% of it.
TEST(Progress, ANewTotalKeepsTheSamplesCountedAndEndsAtItsFullCount) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p(60, 2, /*tty=*/false, /*forced=*/true, f);
    p.add(40);
    p.set_total(90);
    p.add(50);
    p.finish();
  }
  const std::string text = file_text(f);
  std::fclose(f);
  EXPECT_NE(text.find("rank 0 [############################] 100%  90/90 samples"),
            std::string::npos)
      << text;
}

TEST(Progress, ATerminalEndsTheComputesWithOneLineOfTheirTimes) {
  const std::string text = steps_text(/*tty=*/true);
  EXPECT_NE(text.find("computed 2 metrics in 20.8 s (auroc 20.3 s, acc 0.50 s)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("wrote the outputs in "), std::string::npos) << text;
  EXPECT_TRUE(text.ends_with("\n")) << text;
  EXPECT_EQ(Progress::computed_line({{"a", 1.0}}), "computed 'a' in 1.00 s");
  EXPECT_EQ(Progress::step_line(tally::RunStep{}, 0.0), "");  // no sync in a world of one
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

// Issue 32, item 9: --atol nan reported a drop from 0.99 to 0.5 as ok (exit 0).
TEST_F(CompareCli, NonFiniteOrNegativeToleranceOptionsAreExit2) {
  const auto base = results("base.json", R"({"Accuracy": {"top1": 0.99}})");
  const auto worse = results("worse.json", R"({"Accuracy": {"top1": 0.5}})");
  for (const std::string opt : {"--atol", "--rtol"})
    for (const std::string v : {"nan", "NaN", "-nan", "inf", "-inf", "1e999", "-1", "x"}) {
      const auto r = tally("compare " + worse.string() + " " + base.string() + " " + opt + " " + v);
      EXPECT_EQ(r.exit_code, 2) << opt << " " << v << "\n" << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      EXPECT_NE(r.err.find(opt + ": "), std::string::npos) << r.err;
      EXPECT_EQ(r.out, "");
    }
  // A tolerances file and a config's regression section (tally validate reads both).
  write_text(dir / "nan.yaml", "Accuracy.top1: {atol: .nan}\n");
  auto r = tally("compare " + worse.string() + " " + base.string() + " --tolerances " +
                 (dir / "nan.yaml").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("nan.yaml:1:23:"), std::string::npos) << r.err;
  for (const std::string section :
       {"regression: {baseline: base.json, rtol: .nan}",
        "regression: {baseline: base.json, atol: .inf}",
        "regression: {baseline: base.json, tolerances: {Accuracy.top1: {rtol: .nan}}}",
        "regression: {baseline: base.json, tolerances: nan.yaml}"}) {
    write_text(dir / "cfg.yaml", "metrics:\n  - type: Accuracy\n" + section + "\n");
    r = tally("run " + (dir / "cfg.yaml").string());
    EXPECT_EQ(r.exit_code, 2) << section << "\n" << r.err;
    EXPECT_NE(r.err.find("expects a finite number >= 0"), std::string::npos) << section << "\n"
                                                                             << r.err;
  }
  // Finite tolerances from the command line still gate.
  EXPECT_EQ(tally("compare " + worse.string() + " " + base.string() + " --atol 0.1").exit_code, 3);
  EXPECT_EQ(tally("compare " + worse.string() + " " + base.string() + " --atol 0.5").exit_code, 0);
}

// Issue 32, item 10: an output naming an input (the same path, a symlink, a hard link, another
// relative path) would replace it: exit 2 naming both, and no file changed.
TEST_F(CompareCli, OutputsNamingAnInputAreExit2AndNothingIsWritten) {
  const auto base = results("base.json", R"({"Accuracy": {"top1": 0.9}})");
  const auto cur = results("cur.json", R"({"Accuracy": {"top1": 0.8}})");
  write_text(dir / "tol.yaml", "\"Accuracy.*\": {atol: 0.01}\n");
  fs::create_directories(dir / "sub");
  fs::create_symlink(base, dir / "link.json");
  fs::create_hard_link(cur, dir / "hard.json");
  fs::create_symlink(dir / "link.json", dir / "sub" / "chain.md");  // a link to a link
  const std::string b0 = tally::test::read_file(base), c0 = tally::test::read_file(cur);
  const std::string args = "compare " + cur.string() + " " + base.string() + " --tolerances " +
                           (dir / "tol.yaml").string() + " ";
  for (const auto& [option, path, input] :
       std::vector<std::tuple<std::string, fs::path, std::string>>{
           {"--json", cur, "results"},
           {"--html", base, "baseline"},
           {"--json", dir / "link.json", "baseline"},
           {"--markdown", dir / "hard.json", "results"},
           {"--junit", dir / "sub" / ".." / "base.json", "baseline"},
           {"--markdown", dir / "sub" / "chain.md", "baseline"},
           {"--html", dir / "tol.yaml", "--tolerances"}}) {
    SCOPED_TRACE(option + " " + path.string());
    // An output that may be written is given too: it must not be written either.
    const std::string other = option == "--junit" ? "--json" : "--junit";
    const auto r = tally(args + other + " " + (dir / "fine.out").string() + " " + option + " " +
                         path.string());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(option + " '" + path.string() + "' is the " + input), std::string::npos)
        << r.err;
    EXPECT_EQ(tally::test::read_file(base), b0);
    EXPECT_EQ(tally::test::read_file(cur), c0);
    EXPECT_FALSE(fs::exists(dir / "fine.out"));
  }
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  // A history run is an input too.
  fs::create_directories(dir / "hist");
  for (int i = 1; i <= 3; ++i)
    write_text(dir / "hist" / fmt::format("run-{}.json", i),
               R"({"results": {"Accuracy": {"top1": 0.9}}})");
  const auto h0 = tally::test::read_file(dir / "hist" / "run-3.json");
  const auto r =
      tally("compare " + cur.string() + " " + base.string() + " --history " +
            (dir / "hist").string() + " --json " + (dir / "hist" / "run-3.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("is the history run"), std::string::npos) << r.err;
  EXPECT_EQ(tally::test::read_file(dir / "hist" / "run-3.json"), h0);
  // Other names are written.
  EXPECT_EQ(tally(args + "--json " + (dir / "cmp.json").string()).exit_code, 3);
  EXPECT_TRUE(fs::exists(dir / "cmp.json"));
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
