// The paired tests of `tally compare --records --baseline-records` and of `tally run` with
// `regression.baseline_records` (docs/significance.md): McNemar's exact test for an accuracy-like
// key, the paired bootstrap for the others; a key beyond its tolerance regresses only when the
// test finds the change significant (exit 3), and is "within noise" otherwise (exit 0); records of
// other samples or of another run are exit 2. Expected values are recomputed here from the
// per-sample correctness: McNemar's discordant counts, its p-value from the stats core (itself
// checked against statsmodels 0.15.0's mcnemar(exact=True) in test_stats), and the paired
// bootstrap's interval and p-value from the stats core's resamples (same seed).
#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "integration/cli_fixture.hpp"
#include "tally/stats/mcnemar.hpp"
#include "tally/stats/random.hpp"

namespace fs = std::filesystem;
using namespace tally::test;

namespace {

/// Scores for `labels` (c classes) whose argmax is `pred` (no ties).
std::vector<float> scores_for(const std::vector<std::int64_t>& pred, std::int64_t c,
                              std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(0.f, 0.5f);
  std::vector<float> s;
  for (const auto p : pred)
    for (std::int64_t k = 0; k < c; ++k) s.push_back(u(gen) + (k == p ? 1.f : 0.f));
  return s;
}

/// A baseline and a candidate over the same n labelled samples: the baseline right on about 80 %,
/// the candidate the baseline with `worse` of its right answers made wrong and `better` of its
/// wrong answers made right.
struct Pair {
  std::vector<std::int64_t> labels, base, cand;
  std::int64_t c = 5;
};

Pair make_pair_of_runs(std::size_t n, std::size_t worse, std::size_t better, std::uint32_t seed) {
  Pair p;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(0, 1);
  for (std::size_t i = 0; i < n; ++i) {
    const auto y = static_cast<std::int64_t>(gen() % 5);
    p.labels.push_back(y);
    p.base.push_back(u(gen) < 0.8 ? y : (y + 1 + static_cast<std::int64_t>(gen() % 4)) % 5);
  }
  p.cand = p.base;
  std::vector<std::size_t> right, wrong;
  for (std::size_t i = 0; i < n; ++i) (p.base[i] == p.labels[i] ? right : wrong).push_back(i);
  std::shuffle(right.begin(), right.end(), gen);
  std::shuffle(wrong.begin(), wrong.end(), gen);
  for (std::size_t j = 0; j < worse; ++j) p.cand[right[j]] = (p.labels[right[j]] + 1) % 5;
  for (std::size_t j = 0; j < better; ++j) p.cand[wrong[j]] = p.labels[wrong[j]];
  return p;
}

class PairedCompareTest : public CliTest {
 protected:
  /// Writes the labels and `pred`'s scores, runs `cfg` keeping the records; returns the paths.
  void run_one(const fs::path& cfg, const Pair& p, const std::vector<std::int64_t>& pred,
               const std::string& name) {
    write_npy(dir / "scores.npy", scores_for(pred, p.c, 3),
              {static_cast<std::int64_t>(pred.size()), p.c});
    write_npy(dir / "labels.npy", p.labels);
    const auto r = tally("run -q " + cfg.string() + " -o " + (dir / (name + ".json")).string() +
                         " --set output.records=" + (dir / (name + ".rec")).string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  /// tally compare of cand against base with both records; returns the exit code, and the
  /// comparison JSON in `out`.
  int compare(nlohmann::json& out, const std::string& extra = "", const std::string& cand = "cand",
              const std::string& base = "base") {
    const auto json = dir / "cmp.json";
    fs::remove(json);
    const auto r =
        tally("compare -q " + (dir / (cand + ".json")).string() + " " +
              (dir / (base + ".json")).string() + " --records " + (dir / (cand + ".rec")).string() +
              " --baseline-records " + (dir / (base + ".rec")).string() + " --json " +
              json.string() + " " + extra);
    last_err = r.err;
    if (fs::exists(json)) out = read_json(json);
    return r.exit_code;
  }

  static const nlohmann::json& key_of(const nlohmann::json& cmp, const std::string& label,
                                      const std::string& key) {
    for (const auto& k : cmp["keys"])
      if (k["label"] == label && k["key"] == key) return k;
    static const nlohmann::json none;
    ADD_FAILURE() << "no key " << label << "." << key << " in " << cmp.dump();
    return none;
  }

  std::string last_err;
};

const char* kAccuracy = "metrics:\n  - type: Accuracy\n";

}  // namespace

// A real regression: 60 right answers lost, 20 gained on 2000 samples (accuracy -2 points).
// McNemar's exact test over the discordant pairs finds it: exit 3, verdict regressed, and the
// counts and p-value are those of the samples.
TEST_F(PairedCompareTest, McNemarFindsARealRegression) {
  const auto p = make_pair_of_runs(2000, 60, 20, 1);
  const auto cfg = config(kAccuracy);
  run_one(cfg, p, p.base, "base");
  run_one(cfg, p, p.cand, "cand");
  nlohmann::json cmp;
  EXPECT_EQ(compare(cmp), 3) << last_err;
  const auto& k = key_of(cmp, "Accuracy", "top1");
  EXPECT_EQ(k["verdict"], "regressed");
  const auto& t = k["test"];
  ASSERT_TRUE(t.is_object()) << k.dump();
  EXPECT_EQ(t["method"], "McNemar exact");
  EXPECT_EQ(t["worse"], 60);
  EXPECT_EQ(t["better"], 20);
  EXPECT_EQ(t["units"], 2000);
  EXPECT_EQ(t["gate"], "regressed");
  EXPECT_DOUBLE_EQ(t["p_value"].get<double>(), tally::stats::mcnemar_exact(60, 20).pvalue);
  EXPECT_NEAR(t["difference"].get<double>(), -40.0 / 2000, 1e-15);
  EXPECT_LT(t["high"].get<double>(), 0.0);  // the whole interval below zero
  EXPECT_NE(last_err.find("Accuracy.top1"), std::string::npos) << last_err;
}

// Noise: 9 right answers lost, 5 gained (accuracy -0.2 points on 2000 samples). The fixed
// tolerance (0) fails it; the paired test does not find it significant: within noise, exit 0.
TEST_F(PairedCompareTest, NoiseIsWithinNoise) {
  const auto p = make_pair_of_runs(2000, 9, 5, 2);
  const auto cfg = config(kAccuracy);
  run_one(cfg, p, p.base, "base");
  run_one(cfg, p, p.cand, "cand");
  // Without records: the tolerance alone, a regression.
  const auto plain =
      tally("compare -q " + (dir / "cand.json").string() + " " + (dir / "base.json").string());
  EXPECT_EQ(plain.exit_code, 3);
  nlohmann::json cmp;
  EXPECT_EQ(compare(cmp), 0) << last_err;
  const auto& k = key_of(cmp, "Accuracy", "top1");
  EXPECT_EQ(k["verdict"], "within noise");
  EXPECT_EQ(k["test"]["worse"], 9);
  EXPECT_EQ(k["test"]["better"], 5);
  EXPECT_DOUBLE_EQ(k["test"]["p_value"].get<double>(), tally::stats::mcnemar_exact(9, 5).pvalue);
  EXPECT_EQ(cmp["counts"]["within noise"], 1);
  EXPECT_FALSE(cmp["regressed"].get<bool>());
  // A looser alpha makes nothing significant that is not: still within noise at 0.3 (p ~ 0.42).
  EXPECT_EQ(compare(cmp, "--alpha 0.3"), 0);
  // An improvement the same size is within noise too.
  nlohmann::json rev;
  EXPECT_EQ(compare(rev, "", "base", "cand"), 0);
  EXPECT_EQ(key_of(rev, "Accuracy", "top1")["verdict"], "within noise");
}

// The tolerance is the smallest effect that counts: a significant drop within it is ok.
TEST_F(PairedCompareTest, ASignificantDropWithinTheToleranceIsOk) {
  const auto p = make_pair_of_runs(2000, 60, 20, 1);
  const auto cfg = config(kAccuracy);
  run_one(cfg, p, p.base, "base");
  run_one(cfg, p, p.cand, "cand");
  nlohmann::json cmp;
  EXPECT_EQ(compare(cmp, "--atol 0.03"), 0) << last_err;
  const auto& k = key_of(cmp, "Accuracy", "top1");
  EXPECT_EQ(k["verdict"], "ok");
  EXPECT_EQ(k["test"]["gate"], "regressed");
  EXPECT_NE(k["note"].get<std::string>().find("within the tolerance"), std::string::npos);
}

// --test bootstrap: the paired bootstrap for accuracy too. Its interval, standard error and
// p-value equal those recomputed here from the per-sample correctness of both runs over the stats
// core's resamples (seed 5, 400 resamples).
TEST_F(PairedCompareTest, PairedBootstrapEqualsAnIndependentRecomputation) {
  const auto p = make_pair_of_runs(700, 25, 12, 3);
  const auto cfg = config(kAccuracy);
  run_one(cfg, p, p.base, "base");
  run_one(cfg, p, p.cand, "cand");
  nlohmann::json cmp;
  ASSERT_NE(compare(cmp, "--test bootstrap --resamples 400 --seed 5 --alpha 0.1"), 2) << last_err;
  const auto& t = key_of(cmp, "Accuracy", "top1")["test"];
  EXPECT_EQ(t["method"], "paired bootstrap");
  EXPECT_EQ(t["resamples"], 400);
  const std::size_t n = p.labels.size();
  std::vector<double> d;
  std::vector<std::uint32_t> w(n);
  for (std::uint64_t b = 0; b < 400; ++b) {
    tally::stats::resample_counts(5, b, w);
    double sa = 0, sb = 0;
    for (std::size_t i = 0; i < n; ++i) {
      sa += w[i] * (p.base[i] == p.labels[i] ? 1.0 : 0.0);
      sb += w[i] * (p.cand[i] == p.labels[i] ? 1.0 : 0.0);
    }
    d.push_back(sb / static_cast<double>(n) - sa / static_cast<double>(n));
  }
  double mean = 0;
  for (double x : d) mean += x;
  mean /= static_cast<double>(d.size());
  double ss = 0, below = 0, zero = 0;
  for (double x : d) {
    ss += (x - mean) * (x - mean);
    below += x < 0;
    zero += x == 0;
  }
  std::sort(d.begin(), d.end());
  const auto pct = [&](double q) {
    const double h = (static_cast<double>(d.size()) - 1) * q / 100.0;
    const auto lo = static_cast<std::size_t>(std::floor(h));
    const auto hi = std::min(lo + 1, d.size() - 1);
    const double f = h - static_cast<double>(lo);
    return f >= 0.5 ? d[hi] - (d[hi] - d[lo]) * (1 - f) : d[lo] + (d[hi] - d[lo]) * f;
  };
  const double L = (below + zero / 2) / 400.0;
  EXPECT_NEAR(t["low"].get<double>(), pct(5), 1e-14);
  EXPECT_NEAR(t["high"].get<double>(), pct(95), 1e-14);
  EXPECT_NEAR(t["standard_error"].get<double>(), std::sqrt(ss / 399.0), 1e-14);
  EXPECT_NEAR(t["p_value"].get<double>(), std::min(1.0, 2 * std::min(L, 1 - L)), 1e-14);
  EXPECT_NEAR(t["difference"].get<double>(), (12.0 - 25.0) / static_cast<double>(n), 1e-15);
}

// Metrics that are not accuracy-like (macro precision, recall, F1) take the paired bootstrap;
// the same seed gives the same comparison, byte for byte.
TEST_F(PairedCompareTest, OtherMetricsTakeThePairedBootstrapReproducibly) {
  const auto p = make_pair_of_runs(1500, 80, 10, 4);
  const auto cfg = config(
      "metrics:\n  - type: Accuracy\n    topk: [1, 2]\n  - type: SingleLabelMetric\n"
      "    name: prf_macro\n  - type: ConfusionMatrix\n    num_classes: 5\n");
  run_one(cfg, p, p.base, "base");
  run_one(cfg, p, p.cand, "cand");
  nlohmann::json cmp;
  EXPECT_EQ(compare(cmp, "--resamples 100"), 3) << last_err;
  const std::string first = read_file(dir / "cmp.json");
  int bootstrapped = 0;
  for (const auto& k : cmp["keys"]) {
    if (k["test"].is_null()) continue;
    const auto& t = k["test"];
    if (k["label"] == "Accuracy") {
      EXPECT_EQ(t["method"], "McNemar exact") << k.dump();
      continue;
    }
    EXPECT_EQ(t["method"], "paired bootstrap") << k.dump();
    EXPECT_LE(t["low"].get<double>(), t["difference"].get<double>() + 1e-12) << k.dump();
    EXPECT_GE(t["high"].get<double>(), t["difference"].get<double>() - 1e-12) << k.dump();
    EXPECT_NEAR(t["difference"].get<double>(), k["delta"].get<double>(), 1e-12) << k.dump();
    ++bootstrapped;
  }
  EXPECT_GE(bootstrapped, 3);
  // The confusion matrix (an array) keeps the tolerance rule: no test.
  EXPECT_TRUE(key_of(cmp, "ConfusionMatrix", "matrix")["test"].is_null());
  EXPECT_EQ(compare(cmp, "--resamples 100"), 3);
  EXPECT_EQ(read_file(dir / "cmp.json"), first);
}

TEST_F(PairedCompareTest, RecordsOfOtherSamplesOrAnotherRunAreExit2) {
  const auto p = make_pair_of_runs(400, 20, 5, 5);
  const auto cfg = config(kAccuracy);
  run_one(cfg, p, p.base, "base");
  run_one(cfg, p, p.cand, "cand");
  // Another dataset (one sample fewer).
  auto q = p;
  q.labels.pop_back();
  q.cand.pop_back();
  run_one(cfg, q, q.cand, "short");
  nlohmann::json cmp;
  EXPECT_EQ(compare(cmp, "", "short", "base"), 2);
  EXPECT_NE(last_err.find("cover different samples"), std::string::npos) << last_err;
  // The right samples, but the records of another run than the results compared.
  fs::copy_file(dir / "base.rec", dir / "other.rec");
  const auto r = tally("compare -q " + (dir / "cand.json").string() + " " +
                       (dir / "base.json").string() + " --records " + (dir / "other.rec").string() +
                       " --baseline-records " + (dir / "base.rec").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("another run"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("other.rec"), std::string::npos) << r.err;
  // One records file without the other.
  const auto one =
      tally("compare " + (dir / "cand.json").string() + " " + (dir / "base.json").string() +
            " --records " + (dir / "cand.rec").string());
  EXPECT_EQ(one.exit_code, 2);
  EXPECT_NE(one.err.find("--baseline-records"), std::string::npos) << one.err;
  // Not a records file.
  const auto bad =
      tally("compare " + (dir / "cand.json").string() + " " + (dir / "base.json").string() +
            " --records " + (dir / "cand.json").string() + " --baseline-records " +
            (dir / "base.rec").string());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("cand.json"), std::string::npos) << bad.err;
}

// tally run with regression.baseline_records: --update-baseline writes the baseline and its
// records; later runs are gated by the paired test, with the same verdict on 1-7 ranks.
TEST_F(PairedCompareTest, RunGatesOnTheBaselineRecordsOnAnyRankCount) {
  const auto p = make_pair_of_runs(1000, 40, 8, 6);
  const auto noise = make_pair_of_runs(1000, 6, 3, 6);
  const auto cfg = config(kAccuracy,
                          "regression:\n  baseline: base.json\n  baseline_records: base.rec\n"
                          "  resamples: 200\n");
  write_npy(dir / "scores.npy", scores_for(p.base, p.c, 3), {1000, p.c});
  write_npy(dir / "labels.npy", p.labels);
  const auto up = tally("run -q " + cfg.string() + " --update-baseline");
  ASSERT_EQ(up.exit_code, 0) << up.err;
  ASSERT_TRUE(fs::exists(dir / "base.rec"));
  ASSERT_TRUE(fs::exists(dir / "base.json"));
  EXPECT_NE(up.err.find("base.rec"), std::string::npos) << up.err;
  // noise.base == p.base (same seed): its candidate differs by 6 worse, 3 better.
  ASSERT_EQ(noise.base, p.base);
  std::vector<std::string> launchers = {""};
#ifdef TALLY_MPIEXEC
  for (int np : {1, 2, 3, 4, 7}) launchers.push_back(mpirun(np) + kTally + " run");
#endif
  for (const auto& launcher : launchers) {
    SCOPED_TRACE(launcher);
    const std::string cmd = (launcher.empty() ? kTally + " run" : launcher) + " " + cfg.string() +
                            " --color never" + (launcher.empty() ? "" : " --set backend.type=mpi");
    write_npy(dir / "scores.npy", scores_for(p.cand, p.c, 3), {1000, p.c});
    const auto reg = run_command(cmd);
    EXPECT_EQ(reg.exit_code, 3) << reg.err;
    EXPECT_NE(reg.out.find("McNemar exact: 40 worse, 8 better"), std::string::npos) << reg.out;
    write_npy(dir / "scores.npy", scores_for(noise.cand, p.c, 3), {1000, p.c});
    const auto ok = run_command(cmd);
    EXPECT_EQ(ok.exit_code, 0) << ok.err;
    EXPECT_NE(ok.out.find("within noise"), std::string::npos) << ok.out;
  }
  // Without the baseline's records: exit 2, saying how to write them.
  fs::remove(dir / "base.rec");
  const auto missing = tally("run -q " + cfg.string());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--update-baseline"), std::string::npos) << missing.err;
}

// The README's example (docs/ci/gate.yaml, its committed baseline and records, the two candidates
// of configs/examples/data/gate/): the retrained model is within noise (exit 0), the preprocessing
// bug regressed (exit 3), with the discordant counts the README shows. The p-value 0.003378 is
// statsmodels 0.15.0's mcnemar([[0, 29], [10, 0]], exact=True) (make_example_data.py gate).
TEST_F(PairedCompareTest, TheReadmeGateExampleGivesItsVerdicts) {
  const std::string src = TALLY_SOURCE_DIR;
  // 200 resamples instead of the config's 1000 (the sanitized build is slow): the McNemar lines
  // the README shows do not depend on them, nor do the summaries' verdicts.
  const std::string cfg = src + "/docs/ci/gate.yaml --set regression.resamples=200";
  const auto noise = tally("run " + cfg + " --color never --set data.fields.pred_scores=" + src +
                           "/configs/examples/data/gate/noise.npy");
  EXPECT_EQ(noise.exit_code, 0) << noise.err;
  EXPECT_NE(noise.out.find("within noise  not significant at alpha 0.05: p = 1 (McNemar exact: 13 "
                           "worse, 12 better of 897)"),
            std::string::npos)
      << noise.out;
  EXPECT_NE(noise.out.find("4 within noise, 1 ok"), std::string::npos) << noise.out;
  const auto reg = tally("run " + cfg + " --color never --set data.fields.pred_scores=" + src +
                         "/configs/examples/data/gate/regressed.npy");
  EXPECT_EQ(reg.exit_code, 3) << reg.err;
  EXPECT_NE(reg.out.find("regressed     significant: p = 0.00338 (McNemar exact: 29 worse, 10 "
                         "better of 897)"),
            std::string::npos)
      << reg.out;
  EXPECT_NE(reg.out.find("4 regressed, 1 within noise"), std::string::npos) << reg.out;
  EXPECT_NEAR(tally::stats::mcnemar_exact(29, 10).pvalue, 0.0033778479119064286, 1e-15);
  // The tolerance alone fails both.
  for (const char* cand : {"noise", "regressed"}) {
    const auto plain =
        tally("run -q " + cfg + " --set regression.baseline_records=null --set " +
              "data.fields.pred_scores=" + src + "/configs/examples/data/gate/" + cand + ".npy");
    EXPECT_EQ(plain.exit_code, 3) << cand << ": " << plain.err;
  }
}

// History through the command line: a folder of ten earlier results where Accuracy.top1 loses 0.1
// point a run. Each comparison with the previous run stays within a 0.3-point tolerance; the
// drift is flagged (exit 0, or 3 with --fail-on-drift), and the HTML report draws the trends.
TEST_F(PairedCompareTest, HistoryFlagsASlowDriftThroughTheCommandLine) {
  const auto hist = dir / "history";
  fs::create_directories(hist);
  const auto results = [](double top1, double f1) {
    return fmt::format(
        R"({{"results": {{"Accuracy": {{"top1": {}}}, "prf": {{"f1-score": {}}}}},)"
        R"( "run": {{"types": {{"Accuracy": "Accuracy", "prf": "SingleLabelMetric"}}}}}})",
        top1, f1);
  };
  // f1-score wanders without a trend.
  const double wander[] = {0.81, 0.80, 0.815, 0.805, 0.81, 0.80, 0.812, 0.806, 0.809, 0.803};
  for (int i = 0; i < 10; ++i)
    write_text(hist / fmt::format("build-{}.json", i + 1), results(0.92 - 0.001 * i, wander[i]));
  write_text(dir / "base.json", results(0.92 - 0.001 * 9, 0.803));
  write_text(dir / "cur.json", results(0.92 - 0.001 * 10, 0.808));
  const std::string cmp = "compare " + (dir / "cur.json").string() + " " +
                          (dir / "base.json").string() + " --atol 0.003 --color never --history " +
                          hist.string();
  const auto r = tally(cmp + " --html " + (dir / "r.html").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Accuracy.top1"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("history: 1 key drifted"), std::string::npos) << r.err;
  const std::string html = read_file(dir / "r.html");
  EXPECT_NE(html.find("Trends"), std::string::npos);
  EXPECT_NE(html.find("build-10"), std::string::npos);
  const auto fail = tally(cmp + " --fail-on-drift");
  EXPECT_EQ(fail.exit_code, 3) << fail.err;
  EXPECT_NE(fail.err.find("--fail-on-drift"), std::string::npos) << fail.err;
  // A folder that is not there: exit 2 naming it.
  const auto missing = tally(cmp + "-none");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("history-none"), std::string::npos) << missing.err;
}

// regression.history in a config: the run's trends against the folder; fail_on_drift makes the
// drift exit 3 on every rank.
TEST_F(PairedCompareTest, RunReadsTheHistoryFolderOfItsConfig) {
  const auto p = make_pair_of_runs(400, 0, 0, 7);
  write_npy(dir / "scores.npy", scores_for(p.base, p.c, 3), {400, p.c});
  write_npy(dir / "labels.npy", p.labels);
  const auto first =
      tally("run -q " + config(kAccuracy).string() + " -o " + (dir / "now.json").string());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const double top1 = read_json(dir / "now.json")["results"]["Accuracy"]["top1"].get<double>();
  // Ten earlier runs, each 0.2 point above the next: this run continues the slide.
  fs::create_directories(dir / "runs");
  for (int i = 0; i < 10; ++i)
    write_text(dir / "runs" / fmt::format("{}.json", i + 1),
               fmt::format(R"({{"results": {{"Accuracy": {{"top1": {}}}}},)"
                           R"( "run": {{"types": {{"Accuracy": "Accuracy"}}}}}})",
                           top1 + 0.002 * (10 - i)));
  write_text(dir / "base.json", read_file(dir / "runs" / "10.json"));
  const std::string section = "regression:\n  baseline: base.json\n  atol: 0.01\n  history: runs\n";
  const auto cfg = config(kAccuracy, section);
  const auto r =
      tally("run " + cfg.string() + " --color never --html " + (dir / "r.html").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("history: 1 key drifted"), std::string::npos) << r.err;
  EXPECT_NE(read_file(dir / "r.html").find("Trends"), std::string::npos);
  const auto strict = config(kAccuracy, section + "  fail_on_drift: true\n", "strict.yaml");
  EXPECT_EQ(tally("run -q " + strict.string()).exit_code, 3);
#ifdef TALLY_MPIEXEC
  const auto mpi =
      run_command(mpirun(3) + kTally + " run -q " + strict.string() + " --set backend.type=mpi");
  EXPECT_EQ(mpi.exit_code, 3) << mpi.err;
#endif
}
