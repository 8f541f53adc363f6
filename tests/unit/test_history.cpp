// History folders, trends and the slow-drift flag (tally/reports/history.hpp,
// engine/reports/history.cpp). Expected values: tests/reference/expected_history.json, written by
// tests/reference/history.py with SciPy 1.16.3 (the file records the versions and the call per
// case):
//   "kendall"   scipy.stats.kendalltau(x, y) (tau, two-sided p, method 'auto') and
//               scipy.stats.theilslopes(y, x) (slope, intercept), matched to 1e-12 relative;
//   "scenarios" series over history runs and the current run, with the window's kendalltau,
//               theilslopes and the drift flag the script computes (and checks: the slow drift's
//               every step is within the 0.3 % tolerance, the noise has p >= 0.05).
#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "tally/reports/history.hpp"
#include "tally/reports/reports.hpp"
#include "tally/sdk/error.hpp"

namespace fs = std::filesystem;
using Json = nlohmann::json;
using tally::Better;
using tally::Value;
using tally::test::TempDir;
using tally::test::write_text;

namespace {

constexpr double kRel = 1e-12;

const Json& expected() {
  static const Json doc = [] {
    std::ifstream in(fs::path(TALLY_SOURCE_DIR) / "tests/reference/expected_history.json");
    return Json::parse(in);
  }();
  return doc;
}

// |a - b| <= rel * |b| (both NaN: equal).
::testing::AssertionResult close(double a, double b, double rel = kRel) {
  if (std::isnan(a) && std::isnan(b)) return ::testing::AssertionSuccess();
  if (std::fabs(a - b) <= rel * std::fabs(b) || a == b) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << fmt::format("{:.17g} vs {:.17g} (relative diff {:.3g})",
                                                      a, b, std::fabs(a - b) / std::fabs(b));
}

double num(const Json& j) {
  return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>();
}

// A results file holding {"M": {"acc": v, "other": 1}} (acc left out when null).
std::string results_json(const Json& value, const Json& interval = nullptr) {
  Json res = {{"M", {{"other", 1}}}};
  if (!value.is_null()) res["M"]["acc"] = value;
  Json doc = {{"results", res}, {"run", {{"tally_version", "0.1.0"}, {"config", "eval.yaml"}}}};
  if (!interval.is_null())
    doc["intervals"] = {{"settings", {{"confidence", 0.95}}},
                        {"metrics", {{"M", {{"acc", interval}}}}}};
  return doc.dump();
}

tally::Results current_results(const Json& value) {
  tally::Results r;
  Value m = Value::map();
  if (!value.is_null()) m.set("acc", value.get<double>());
  m.set("other", 1);
  r.metrics.set("M", m);
  return r;
}

Better better_of(const std::string& s) {
  return s == "higher" ? Better::Higher : s == "lower" ? Better::Lower : Better::Neither;
}

const tally::KeyTrend* find(const tally::Trends& t, const std::string& name) {
  for (const auto& k : t.keys)
    if (k.name() == name) return &k;
  return nullptr;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const tally::InputError& e) {
    return e.what();
  }
  return "<no InputError>";
}

}  // namespace

TEST(History, NaturalOrderComparesDigitRunsAsNumbers) {
  using tally::natural_less;
  EXPECT_TRUE(natural_less("run-9", "run-10"));
  EXPECT_FALSE(natural_less("run-10", "run-9"));
  EXPECT_TRUE(natural_less("2024-5-1", "2024-10-1"));
  EXPECT_TRUE(natural_less("2024-05-01", "2024-05-02"));
  EXPECT_TRUE(natural_less("build-99", "build-812"));
  EXPECT_TRUE(natural_less("a", "b"));
  EXPECT_TRUE(natural_less("run", "run-1"));
  EXPECT_TRUE(natural_less("run-01", "run-1"));  // equal as numbers: byte order decides
  EXPECT_FALSE(natural_less("run-1", "run-01"));
  EXPECT_FALSE(natural_less("x", "x"));
  EXPECT_TRUE(natural_less("v2.9.json", "v2.10.json"));
  EXPECT_TRUE(natural_less("run-00000000000000000000009", "run-100000000000000000000000"));
}

TEST(History, ReadsEveryResultsFileOldestFirstInNaturalOrder) {
  TempDir dir;
  for (int i : {10, 9, 1, 100, 2}) write_text(dir / fmt::format("run-{}.json", i), results_json(i));
  write_text(dir / "notes.txt", "not a results file");
  fs::create_directories(dir / "old.json");  // a folder: ignored
  const auto h = tally::read_history(dir.path);
  ASSERT_EQ(h.runs.size(), 5u);
  const std::vector<std::string> names{"run-1", "run-2", "run-9", "run-10", "run-100"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(h.runs[i].name, names[i]);
    EXPECT_EQ(h.runs[i].path, dir / (names[i] + ".json"));
  }
  EXPECT_EQ(h.runs[3].results.metrics.at("M").at("acc").as_double(), 10);

  TempDir empty;
  EXPECT_TRUE(tally::read_history(empty.path).runs.empty());
  const auto t = tally::trends(tally::read_history(empty.path), current_results(Json(0.5)), {}, {});
  EXPECT_EQ(t.history_runs(), 0u);
  EXPECT_EQ(t.runs, std::vector<std::string>{"current"});
  ASSERT_NE(find(t, "M.acc"), nullptr);
  EXPECT_FALSE(find(t, "M.acc")->tested);
  EXPECT_EQ(tally::format_trends(t, false), "history: no earlier runs\n");
}

TEST(History, ABadFolderOrFileIsAnInputErrorNamingIt) {
  TempDir dir;
  const auto missing = dir / "no-such-folder";
  EXPECT_NE(
      error_of([&] { tally::read_history(missing); }).find(missing.string() + "' does not exist"),
      std::string::npos);
  write_text(dir / "file", "x");
  EXPECT_NE(error_of([&] { tally::read_history(dir / "file"); }).find("is not a folder"),
            std::string::npos);

  TempDir runs;
  write_text(runs / "run-1.json", results_json(0.9));
  write_text(runs / "run-2.json", "{\"results\": {\"M\": {\"acc\": 0.9}");  // truncated
  std::string msg = error_of([&] { tally::read_history(runs.path); });
  EXPECT_NE(msg.find((runs / "run-2.json").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;

  write_text(runs / "run-2.json", "{\"run\": {}}");  // no results object
  msg = error_of([&] { tally::read_history(runs.path); });
  EXPECT_NE(msg.find((runs / "run-2.json").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("no \"results\" object"), std::string::npos) << msg;

  try {
    tally::read_history(runs.path);
    FAIL();
  } catch (const tally::Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
  }

  TempDir fine;
  EXPECT_NE(error_of([&] {
              tally::trends(tally::read_history(fine.path), current_results(Json(0.5)), {}, {},
                            {.window = 2});
            }).find("history window expects an integer >= 3"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              tally::trends(tally::read_history(fine.path), current_results(Json(0.5)), {}, {},
                            {.window = 10, .alpha = 1.5});
            }).find("alpha expects a number in (0, 1)"),
            std::string::npos);
}

// Issue 32, item 7: a folder of many large files is listed, and only the newest files the drift
// window needs are opened (the older ones here are not even JSON); each run keeps its numbers
// only. The drift verdict is the one over every run.
TEST(History, ReadsOnlyTheNewestRunsTheWindowNeeds) {
  TempDir dir;
  for (int i = 1; i <= 30; ++i)
    write_text(dir / fmt::format("run-{}.json", i),
               i <= 18 ? "not json" : results_json(0.9 - 0.01 * i));
  write_text(dir / "notes.txt", "ignored");
  for (const std::size_t window : {3, 5, 12}) {
    SCOPED_TRACE(window);
    const auto h = tally::read_history(dir.path, window);
    EXPECT_EQ(h.files, 30u);
    ASSERT_EQ(h.runs.size(), window);
    EXPECT_EQ(h.runs.front().name, fmt::format("run-{}", 31 - window));
    EXPECT_EQ(h.runs.back().name, "run-30");
    const auto t = tally::trends(h, current_results(Json(0.5)), {}, {}, {.window = window});
    ASSERT_NE(find(t, "M.acc"), nullptr);
    EXPECT_EQ(find(t, "M.acc")->window_begin, 0u);
    EXPECT_EQ(find(t, "M.acc")->drift, window >= 4) << find(t, "M.acc")->note;
  }
  // One run more than the good files: the oldest one opened is named.
  EXPECT_NE(error_of([&] {
              tally::read_history(dir.path, 13);
            }).find((dir / "run-18.json").string() + "' is not valid JSON"),
            std::string::npos);
  // The same statistics as from a history read whole ("window of 10 over 15 runs").
  for (const auto& s : expected().at("scenarios")) {
    if (s.at("values").size() <= 11) continue;
    const auto& values = s.at("values");
    TempDir d;
    for (std::size_t i = 0; i + 1 < values.size(); ++i)
      write_text(d / fmt::format("run-{}.json", i + 1), results_json(values[i]));
    tally::ResultSpecs specs;
    specs.set("M", {{"acc", better_of(s.at("better")), tally::Plot::None, "the key"}});
    tally::Tolerances tol;
    tol.defaults.rtol = s.at("rtol").get<double>();
    const std::size_t window = s.at("window").get<std::size_t>();
    const auto all = tally::trends(tally::read_history(d.path, values.size()),
                                   current_results(values.back()), specs, tol, {.window = window});
    const auto part = tally::trends(tally::read_history(d.path, window),
                                    current_results(values.back()), specs, tol, {.window = window});
    const auto *a = find(all, "M.acc"), *b = find(part, "M.acc");
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->p_value, b->p_value);
    EXPECT_EQ(a->slope, b->slope);
    EXPECT_EQ(a->drift, b->drift);
    EXPECT_EQ(part.runs.size(), window + 1);
  }
  // Arrays and strings of a history run are not kept.
  TempDir big;
  Json res = {
      {"M", {{"acc", 0.5}, {"per_class", Json::array()}, {"c", {{"x_label", "t"}, {"auc", 1}}}}}};
  for (int i = 0; i < 1000; ++i) res["M"]["per_class"].push_back(i);
  write_text(big / "run-1.json", Json{{"results", res}}.dump());
  const auto h = tally::read_history(big.path);
  const Value& m = h.runs.at(0).results.metrics.at("M");
  EXPECT_EQ(m.find("per_class"), nullptr);
  EXPECT_EQ(m.at("c").find("x_label"), nullptr);
  EXPECT_EQ(m.at("c").at("auc").as_int(), 1);
  EXPECT_EQ(m.at("acc").as_double(), 0.5);
}

// The command reads only the --drift-window newest runs too.
TEST(History, TheCommandOpensOnlyTheDriftWindowsRuns) {
  TempDir dir;
  fs::create_directories(dir / "h");
  for (int i = 1; i <= 8; ++i)
    write_text(dir / "h" / fmt::format("run-{}.json", i), i <= 3 ? "{broken" : results_json(0.9));
  write_text(dir / "cur.json", results_json(0.9));
  const std::string base = std::string(TALLY_CLI) + " compare " + (dir / "cur.json").string() +
                           " " + (dir / "cur.json").string() + " --history " + (dir / "h").string();
  auto r = tally::test::run_command(base + " --drift-window 5");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("history: 5 runs"), std::string::npos) << r.out;
  r = tally::test::run_command(base + " --drift-window 6");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("run-3.json"), std::string::npos) << r.err;
}

TEST(History, MannKendallAndTheilSenMatchScipy) {
  double max_p = 0, max_tau = 0, max_slope = 0;
  const auto rel = [](double a, double b) {
    return std::isnan(a) && std::isnan(b) ? 0.0 : a == b ? 0.0 : std::fabs(a - b) / std::fabs(b);
  };
  for (const auto& c : expected().at("kendall")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const auto x = c.at("x").get<std::vector<double>>();
    const auto y = c.at("y").get<std::vector<double>>();
    const auto mk = tally::mann_kendall(x, y);
    EXPECT_TRUE(close(mk.tau, num(c.at("tau"))));
    EXPECT_TRUE(close(mk.p_value, num(c.at("p_value"))));
    if (!c.at("tau").is_null()) {
      EXPECT_EQ(mk.exact, c.at("method") == "exact");
    }
    const auto ts = tally::theil_sen(x, y);
    EXPECT_TRUE(close(ts.slope, num(c.at("slope"))));
    EXPECT_TRUE(close(ts.intercept, num(c.at("intercept"))));
    max_p = std::max(max_p, rel(mk.p_value, num(c.at("p_value"))));
    max_tau = std::max(max_tau, rel(mk.tau, num(c.at("tau"))));
    max_slope = std::max(
        {max_slope, rel(ts.slope, num(c.at("slope"))), rel(ts.intercept, num(c.at("intercept")))});
  }
  std::cout << fmt::format(
      "max relative diff vs SciPy {}: p {:.3g}, tau {:.3g}, Theil-Sen {:.3g} ({} cases)\n",
      expected().at("versions").at("scipy").get<std::string>(), max_p, max_tau, max_slope,
      expected().at("kendall").size());
}

// Each scenario as a history folder (run-1.json ... run-N.json) and a current run: the window's
// statistics and the drift flag as the reference script computes them.
TEST(History, DriftScenariosMatchTheReference) {
  for (const auto& s : expected().at("scenarios")) {
    const std::string name = s.at("name");
    SCOPED_TRACE(name);
    const auto& values = s.at("values");
    TempDir dir;
    for (std::size_t i = 0; i + 1 < values.size(); ++i)
      write_text(dir / fmt::format("run-{}.json", i + 1), results_json(values[i]));
    const auto history = tally::read_history(dir.path, values.size());  // every run
    ASSERT_EQ(history.runs.size(), values.size() - 1);
    tally::ResultSpecs specs;
    specs.set("M", {{"acc", better_of(s.at("better")), tally::Plot::None, "the key"},
                    {"other", Better::Neither, tally::Plot::None, "a count"}});
    tally::Tolerances tol;
    tol.defaults.rtol = s.at("rtol").get<double>();
    tol.defaults.atol = s.at("atol").get<double>();
    const tally::DriftOptions options{.window = s.at("window").get<std::size_t>(),
                                      .alpha = s.at("alpha").get<double>()};
    const auto t = tally::trends(history, current_results(values.back()), specs, tol, options);
    ASSERT_EQ(t.runs.size(), values.size());
    EXPECT_EQ(t.runs.back(), "current");
    const auto* k = find(t, "M.acc");
    ASSERT_NE(k, nullptr);
    const auto& e = s.at("expected");
    // The series: every run's value, gaps where the run lacks the key.
    ASSERT_EQ(k->values.size(), values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(k->values[i].has_value(), !values[i].is_null()) << i;
      if (k->values[i]) {
        EXPECT_EQ(*k->values[i], values[i].get<double>()) << i;
      }
    }
    EXPECT_EQ(k->window_begin, e.at("window_begin").get<std::size_t>());
    EXPECT_EQ(k->points, e.at("points").get<std::size_t>());
    EXPECT_EQ(k->tested, e.at("tested").get<bool>());
    EXPECT_EQ(k->drift, e.at("drift").get<bool>()) << k->note;
    if (e.contains("p_value")) {
      EXPECT_TRUE(close(k->p_value, num(e.at("p_value"))));
      EXPECT_TRUE(close(k->tau, num(e.at("tau"))));
      EXPECT_TRUE(close(k->slope, num(e.at("slope"))));
      EXPECT_TRUE(close(k->intercept, num(e.at("intercept"))));
      EXPECT_TRUE(close(k->change, num(e.at("change"))));
      EXPECT_TRUE(close(k->tolerance, num(e.at("tolerance"))));
    }
    // A count without a direction is never flagged.
    ASSERT_NE(find(t, "M.other"), nullptr);
    EXPECT_FALSE(find(t, "M.other")->drift);
    EXPECT_EQ(t.drifted(), k->drift ? 1u : 0u);
    if (k->drift) {
      EXPECT_NE(k->note.find("Mann-Kendall p = "), std::string::npos) << k->note;
      const std::string text = tally::format_trends(t, false);
      EXPECT_EQ(text.substr(0, text.find('\n')),
                fmt::format("history: {} runs, 1 key drifted: M.acc", values.size() - 1));
    } else {
      EXPECT_EQ(tally::format_trends(t, false).find("drifted:"), std::string::npos);
    }
    if (name == "too few runs") {
      EXPECT_NE(k->note.find("too few runs"), std::string::npos) << k->note;
    }
    if (name == "not in the current run") {
      EXPECT_EQ(k->note, "not in the current run");
    }
  }
}

// The point of the flag: a drift of 0.1 % a run that no single comparison with a 0.3 % tolerance
// catches (the current run against the last one, or any run against the one before it).
TEST(History, ASlowDriftNoSingleComparisonCatchesIsFlagged) {
  const Json* drift = nullptr;
  for (const auto& s : expected().at("scenarios"))
    if (s.at("name") == "slow drift down, higher is better") drift = &s;
  ASSERT_NE(drift, nullptr);
  const auto& values = drift->at("values");
  tally::ResultSpecs specs;
  specs.set("M", {{"acc", Better::Higher, tally::Plot::None, "accuracy"}});
  tally::Tolerances tol;
  tol.defaults.rtol = 0.003;
  for (std::size_t i = 1; i < values.size(); ++i) {
    const auto cmp = tally::compare(current_results(values[i]).metrics,
                                    current_results(values[i - 1]).metrics, specs, tol);
    EXPECT_EQ(cmp.find("M", "acc")->verdict, tally::Verdict::Ok) << i;
  }
  TempDir dir;
  for (std::size_t i = 0; i + 1 < values.size(); ++i)
    write_text(dir / fmt::format("2026-11-{:02}.json", i + 1), results_json(values[i]));
  const auto t = tally::trends(tally::read_history(dir.path), current_results(values.back()), specs,
                               tol, {.current_name = "this run"});
  EXPECT_EQ(t.runs.front(), "2026-11-01");
  EXPECT_EQ(t.runs.back(), "this run");
  const auto* k = find(t, "M.acc");
  ASSERT_NE(k, nullptr);
  EXPECT_TRUE(k->drift) << k->note;
  EXPECT_LT(k->slope, 0);
  EXPECT_NEAR(k->slope / 0.9, -0.001, 0.0002);
  const std::string text = tally::format_trends(t, true);
  EXPECT_NE(text.find("\033[31mM.acc\033[0m"), std::string::npos) << text;
}

// Keys: nested maps named as compare names them, arrays and curves left out, keys only earlier
// runs have kept (not tested), intervals carried per run, directions from a tolerances entry.
TEST(History, KeysIntervalsAndDirections) {
  TempDir dir;
  for (int i = 0; i < 6; ++i) {
    Json res = {{"Det",
                 {{"bbox", {{"mAP", 0.5 - 0.01 * i}, {"mAP_50", 0.7}}},
                  {"ap_per_class", {0.1, 0.2}},
                  {"pr_curve", {{"x", {0, 1}}, {"y", {1, 0}}, {"auc", 0.5}}}}},
                {"Loss", 0.2 + 0.01 * i}};
    if (i < 3) res["Old"] = {{"gone", 1.0}};
    Json doc = {{"results", res}};
    if (i % 2 == 0)
      doc["intervals"] = {
          {"metrics", {{"Det", {{"bbox.mAP", {{"low", 0.4 - 0.01 * i}, {"high", 0.6}}}}}}}};
    write_text(dir / fmt::format("b{}.json", i), doc.dump());
  }
  tally::Results cur;
  Value bbox = Value::map();
  bbox.set("mAP", 0.43);
  bbox.set("mAP_50", 0.7);
  Value det = Value::map();
  det.set("bbox", bbox);
  cur.metrics.set("Det", det);
  cur.metrics.set("Loss", 0.27);
  cur.intervals = Value::map();
  {
    Value iv = Value::map();
    iv.set("low", 0.41);
    iv.set("high", 0.45);
    Value per = Value::map();
    per.set("bbox.mAP", iv);
    Value metrics = Value::map();
    metrics.set("Det", per);
    cur.intervals.set("metrics", metrics);
  }
  tally::ResultSpecs specs;
  specs.set("Det", {{"bbox", Better::Higher, tally::Plot::None, "box AP"},
                    {"pr_curve", Better::Neither, tally::Plot::Curve, "a curve"}});
  tally::Tolerances tol;
  tol.rules.push_back({"Loss", std::nullopt, std::nullopt, Better::Lower, "inline"});
  tol.rules.push_back({"Det.bbox.mAP_50", std::nullopt, std::nullopt, Better::Neither, "inline"});
  const auto t = tally::trends(tally::read_history(dir.path), cur, specs, tol);
  std::vector<std::string> names;
  for (const auto& k : t.keys) names.push_back(k.name());
  EXPECT_EQ(names,
            (std::vector<std::string>{"Det.bbox.mAP", "Det.bbox.mAP_50", "Loss", "Old.gone"}));
  const auto* map = find(t, "Det.bbox.mAP");
  ASSERT_NE(map, nullptr);
  EXPECT_EQ(map->label, "Det");
  EXPECT_EQ(map->key, "bbox.mAP");
  EXPECT_EQ(map->better, Better::Higher);
  ASSERT_EQ(map->lows.size(), 7u);
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(map->lows[i].has_value(), i % 2 == 0) << i;
    EXPECT_EQ(map->highs[i].has_value(), i % 2 == 0) << i;
  }
  EXPECT_EQ(*map->lows[6], 0.41);
  EXPECT_EQ(*map->highs[6], 0.45);
  EXPECT_TRUE(map->drift) << map->note;  // 0.5 falling 0.01 a run: p = 2 / 7!
  EXPECT_TRUE(close(map->p_value, 2.0 / 5040));
  EXPECT_FALSE(find(t, "Det.bbox.mAP_50")->drift);  // constant, and no direction
  EXPECT_EQ(find(t, "Det.bbox.mAP_50")->better, Better::Neither);
  const auto* loss = find(t, "Loss");
  EXPECT_EQ(loss->label, "Loss");
  EXPECT_EQ(loss->key, "");
  EXPECT_EQ(loss->better, Better::Lower);  // from the tolerances entry
  EXPECT_TRUE(loss->drift) << loss->note;
  const auto* old = find(t, "Old.gone");
  EXPECT_FALSE(old->tested);
  EXPECT_EQ(old->note, "not in the current run");
  EXPECT_FALSE(old->values.back().has_value());
  EXPECT_TRUE(old->values.front().has_value());
  EXPECT_EQ(t.drifted(), 2u);
  const std::string text = tally::format_trends(t, false);
  EXPECT_EQ(text.substr(0, text.find('\n')), "history: 6 runs, 2 keys drifted: Det.bbox.mAP, Loss");
}
