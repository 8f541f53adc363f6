// Regression checks in CI, end to end through the real binary: a baseline from one run, data
// changed so one key falls, `tally run` with `regression:` exits 3, and its JUnit (validated
// against tests/data/junit/junit.xsd with xmllint), Markdown and HTML (opened in headless
// Chromium) say which key fell and by how much. Also: the HTML escapes user text and draws every
// chart its ResultSpecs ask for, progress on stderr, config errors, `tally plugins` specs.
#include <algorithm>
#include <numeric>
#include <regex>

#include <fmt/format.h>

#include "integration/cli_fixture.hpp"
#include "report_common.hpp"
#include "results_io.hpp"
#include "tally/file_io.hpp"
#include "tally/reports/compare.hpp"
#include "tally/reports/history.hpp"
#include "tally/reports/reports.hpp"

namespace fs = std::filesystem;
using namespace tally::test;

namespace {

bool have(const std::string& program) {
  return run_command("command -v " + program + " >/dev/null 2>&1").exit_code == 0;
}

std::string chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"})
    if (have(name)) return name;
  return {};
}

std::string attr(const std::string& tag, const std::string& name) {
  std::smatch m;
  const std::regex re(name + "=\"([^\"]*)\"");
  return std::regex_search(tag, m, re) ? m[1].str() : std::string("<absent>");
}

std::vector<std::string> tags(const std::string& html, const std::string& element) {
  std::vector<std::string> out;
  const std::regex re("<" + element + "\\b[^>]*>");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), re); it != std::sregex_iterator();
       ++it)
    out.push_back(it->str());
  return out;
}

// The page as Chromium leaves it once its scripts ran.
struct Browser {
  std::string exe = chromium();
  TempDir profile;

  std::string flags() const {
    return " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars "
           "--no-first-run"
           " --user-data-dir=" +
           profile.path.string() + " --virtual-time-budget=10000 ";
  }
  ProcessResult dump_dom(const fs::path& page) const {
    return run_command(exe + flags() + "--dump-dom file://" + page.string());
  }
  ProcessResult screenshot(const fs::path& page, const fs::path& png) const {
    return run_command(exe + flags() + "--window-size=1280,2000 --screenshot=" + png.string() +
                       " file://" + page.string());
  }
};

// Checks what the page's own script recorded: no error, done, and every chart drew points.
void expect_page_ok(const std::string& dom, int expected_charts) {
  const auto bodies = tags(dom, "body");
  ASSERT_EQ(bodies.size(), 1u) << dom.substr(0, 2000);
  const std::string& body = bodies[0];
  EXPECT_EQ(attr(body, "data-errors"), "0") << attr(body, "data-error-messages");
  EXPECT_EQ(attr(body, "data-ready"), "1") << body;
  EXPECT_EQ(attr(body, "data-charts-available"), "1") << body;
  EXPECT_EQ(attr(body, "data-charts"), std::to_string(expected_charts)) << body;
  EXPECT_EQ(attr(body, "data-charts-drawn"), std::to_string(expected_charts)) << body;
  const auto canvases = tags(dom, "canvas");
  EXPECT_EQ(canvases.size(), static_cast<std::size_t>(expected_charts));
  for (const auto& c : canvases) {
    const std::string points = attr(c, "data-points");
    ASSERT_NE(points, "<absent>") << c;
    EXPECT_GT(std::stoi(points), 0) << c;
  }
}

// Where screenshots go: with the test output in the build folder, so they outlive the test.
fs::path screenshot_path(const std::string& name) {
  const fs::path dir = fs::path(TALLY_BINARY_DIR) / "tests";
  fs::create_directories(dir);
  return dir / name;
}

const char* kTolerantPrf = R"(regression:
  baseline: baseline.json
  tolerances:
    "prf*": {atol: 1.0}
)";

}  // namespace

class ReportTest : public CliTest {
 protected:
  // Moves `count` samples whose top-1 prediction was right to their second-best class: top1 falls
  // by count/n exactly, top2 does not move (the true class stays within the top 2).
  Dataset with_top1_misses(Dataset d, int count) {
    int moved = 0;
    for (std::int64_t i = 0; i < d.n && moved < count; ++i) {
      if (i % 11 == 0) continue;  // rows with ties
      const float* row = d.scores.data() + i * d.c;
      std::vector<std::int64_t> order(static_cast<std::size_t>(d.c));
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](auto a, auto b) { return row[a] > row[b]; });
      auto& label = d.labels[static_cast<std::size_t>(i)];
      if (label != order[0]) continue;
      label = order[1];
      ++moved;
    }
    EXPECT_EQ(moved, count);
    return d;
  }
};

TEST_F(ReportTest, JunitWithoutBaselineHasOneTestcasePerKeyAndNoFailure) {
  const auto junit = dir / "junit.xml";
  const auto r = tally("run -q " + config().string() + " --junit " + junit.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string xml = read_file(junit);
  // Accuracy: top1, top2; prf_macro and prf_none: precision, recall, f1-score; ConfusionMatrix:
  // matrix.
  EXPECT_EQ(count_of(xml, "<testcase "), 9) << xml;
  EXPECT_EQ(count_of(xml, "<failure"), 0);
  EXPECT_NE(xml.find("<testcase name=\"top1\" classname=\"Accuracy\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<testcase name=\"precision_classwise\" classname=\"prf_none\""),
            std::string::npos);
  EXPECT_NE(xml.find("tests=\"9\" failures=\"0\" errors=\"0\""), std::string::npos);
  if (!have("xmllint"))
    GTEST_FAIL() << "xmllint not installed: scripts/install-deps.sh installs libxml2-utils";
  const auto v = run_command("xmllint --noout --schema " + std::string(TALLY_SOURCE_DIR) +
                             "/tests/data/junit/junit.xsd " + junit.string());
  EXPECT_EQ(v.exit_code, 0) << v.err;
}

TEST_F(ReportTest, TheSchemaRejectsWhatCiToolsWouldNot) {
  // The schema is the test's yardstick: make sure it is not vacuous.
  if (!have("xmllint"))
    GTEST_FAIL() << "xmllint not installed: scripts/install-deps.sh installs libxml2-utils";
  const std::string xsd = std::string(TALLY_SOURCE_DIR) + "/tests/data/junit/junit.xsd";
  write_text(dir / "no_classname.xml",
             "<testsuites><testsuite name=\"s\" tests=\"1\" failures=\"0\" errors=\"0\"><testcase "
             "name=\"t\"/></testsuite></testsuites>");
  write_text(dir / "bad_count.xml",
             "<testsuites><testsuite name=\"s\" tests=\"x\" failures=\"0\" "
             "errors=\"0\"></testsuite></testsuites>");
  write_text(dir / "good.xml",
             "<testsuites><testsuite name=\"s\" tests=\"1\" failures=\"1\" errors=\"0\"><testcase "
             "name=\"t\" classname=\"c\" "
             "time=\"0.5\"><failure message=\"m\" "
             "type=\"regression\">text</failure></testcase></testsuite></testsuites>");
  EXPECT_NE(
      run_command("xmllint --noout --schema " + xsd + " " + (dir / "no_classname.xml").string())
          .exit_code,
      0);
  EXPECT_NE(run_command("xmllint --noout --schema " + xsd + " " + (dir / "bad_count.xml").string())
                .exit_code,
            0);
  EXPECT_EQ(
      run_command("xmllint --noout --schema " + xsd + " " + (dir / "good.xml").string()).exit_code,
      0);
}

TEST_F(ReportTest, CiRunWithABaselineFailsWhenAKeyFallsAndSaysWhichAndByHowMuch) {
  const auto cfg = config(kMetricsYaml, kTolerantPrf);
  const auto baseline = dir / "baseline.json";

  // No baseline yet: a clear error naming the way to make one.
  auto r = tally("run -q " + cfg.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("baseline '" + baseline.string() + "' does not exist"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--update-baseline"), std::string::npos);

  // 1. The baseline, written on purpose.
  r = tally("run -q " + cfg.string() + " --update-baseline");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto base_json = read_json(baseline);
  const double top1_before = base_json["results"]["Accuracy"]["top1"];
  EXPECT_EQ(base_json["run"]["types"]["prf_none"], "SingleLabelMetric");
  // The same data again: no regression.
  r = tally("run -q " + cfg.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;

  // 2. The data changes: 5 of 50 samples lose their top-1 hit.
  write_data(with_top1_misses(make_dataset(50, 5), 5));
  const auto out = dir / "out";
  fs::create_directories(out);
  r = tally("run " + cfg.string() + " -o " + (out / "results.json").string() + " --junit " +
            (out / "junit.xml").string() + " --markdown " + (out / "summary.md").string() +
            " --html " + (out / "report.html").string());
  ASSERT_EQ(r.exit_code, 3) << r.out << r.err;
  // Results are still written, with the new numbers.
  const double top1_after = read_json(out / "results.json")["results"]["Accuracy"]["top1"];
  EXPECT_NEAR(top1_after, top1_before - 0.1, 1e-12);
  // The terminal says it, and stderr names the key in one line.
  EXPECT_NE(r.out.find("1 regressed"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("1 key regressed: Accuracy.top1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(-0.1)"), std::string::npos) << r.err;

  // JUnit: exactly one failure, on Accuracy/top1, carrying baseline, value, delta and tolerance.
  const std::string xml = read_file(out / "junit.xml");
  EXPECT_EQ(count_of(xml, "<failure "), 1) << xml;
  const auto at = xml.find("<testcase name=\"top1\" classname=\"Accuracy\"");
  ASSERT_NE(at, std::string::npos) << xml;
  const std::string tc = xml.substr(at, xml.find("</testcase>", at) - at);
  EXPECT_NE(tc.find("<failure type=\"regression\" message=\"Accuracy.top1 regressed"),
            std::string::npos)
      << tc;
  EXPECT_NE(tc.find(fmt::format("baseline: {:.6g}", top1_before)), std::string::npos) << tc;
  EXPECT_NE(tc.find(fmt::format("value: {:.6g}", top1_after)), std::string::npos) << tc;
  EXPECT_NE(tc.find("delta: -0.1\n"), std::string::npos) << tc;
  EXPECT_NE(tc.find("tolerance: 0 "), std::string::npos) << tc;
  EXPECT_NE(xml.find("tests=\"9\" failures=\"1\""), std::string::npos);
  // The confusion matrix (no direction) changed but did not fail; prf moved within its tolerance.
  EXPECT_NE(xml.find("verdict: changed"), std::string::npos);
  if (have("xmllint")) {
    const auto v = run_command("xmllint --noout --schema " + std::string(TALLY_SOURCE_DIR) +
                               "/tests/data/junit/junit.xsd " + (out / "junit.xml").string());
    EXPECT_EQ(v.exit_code, 0) << v.err;
  } else {
    std::cout << "[ SKIPPED  ] xmllint not installed (apt-get install libxml2-utils): JUnit schema "
                 "check skipped\n";
  }

  // Markdown: the headline, the results table, then the comparison with arrows.
  const std::string md = read_file(out / "summary.md");
  EXPECT_NE(md.find("**❌ 1 key regressed**"), std::string::npos) << md;
  EXPECT_NE(md.find("- **Accuracy.top1**:"), std::string::npos) << md;
  EXPECT_LT(md.find("### Results"), md.find("### Comparison with the baseline"));
  EXPECT_NE(md.find("| ❌ regressed | Accuracy.top1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("↓ -0.1"), std::string::npos) << md;

  // HTML: the summary names the key and the drop; the comparison row is marked regressed.
  const std::string html = read_file(out / "report.html");
  EXPECT_NE(html.find("<div class=\"summary bad\" id=\"summary\">Regression: 1 regressed"),
            std::string::npos);
  EXPECT_NE(html.find("<li><code>Accuracy.top1</code>: " + fmt::format("{:.6g}", top1_before) +
                      " → " + fmt::format("{:.6g}", top1_after) + " (-0.1)</li>"),
            std::string::npos);
  EXPECT_NE(html.find("<tr data-key=\"Accuracy.top1\" data-verdict=\"regressed\">"),
            std::string::npos);
  EXPECT_NE(html.find("<tr data-key=\"ConfusionMatrix.matrix\" data-verdict=\"changed\">"),
            std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);  // self-contained
  EXPECT_EQ(html.find("<link "), std::string::npos);

  const Browser browser;
  if (browser.exe.empty()) {
    GTEST_FAIL()
        << "chromium not installed (scripts/install-deps.sh installs it): the HTML was not opened";
  }
  const auto dom = browser.dump_dom(out / "report.html");
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  // Charts: the three per-class arrays of prf_none (bars, baseline beside them); the matrix is a
  // table.
  expect_page_ok(dom.out, 3);
  auto heat = tags(dom.out, "table");
  std::erase_if(
      heat, [](const std::string& t) { return t.find("class=\"heatmap\"") == std::string::npos; });
  ASSERT_EQ(heat.size(), 1u);
  EXPECT_EQ(attr(heat[0], "data-points"), "25");
  EXPECT_EQ(dom.err.find("Uncaught"), std::string::npos) << dom.err;
  const auto png = screenshot_path("report_screenshot.png");
  fs::remove(png);
  const auto shot = browser.screenshot(out / "report.html", png);
  ASSERT_EQ(shot.exit_code, 0) << shot.err;
  ASSERT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 20'000u);  // a page with tables and charts, not a blank one
  std::cout << "report screenshot: " << png.string() << "\n";

  // 3. Accept the new numbers on purpose: the baseline is rewritten, and the next run passes.
  r = tally("run -q " + cfg.string() + " --update-baseline");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NEAR(read_json(baseline)["results"]["Accuracy"]["top1"].get<double>(), top1_after, 1e-15);
  EXPECT_TRUE(
      std::none_of(fs::directory_iterator(dir.path), fs::directory_iterator(), [](const auto& e) {
        return e.path().filename().string().find(".tmp.") !=
               std::string::npos;  // atomic writes leave no temp file
      }));
  r = tally("run -q " + cfg.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(ReportTest, OutputsFromTheConfigAndToleranceAsAFileRelativeToIt) {
  fs::create_directories(dir / "sub");
  write_text(dir / "sub" / "tol.yaml", "Accuracy.top1: {atol: 0.2}\n");
  const std::string regression =
      "regression:\n  baseline: baseline.json\n  tolerances: sub/tol.yaml\n";
  const std::string outputs =
      "output:\n  json: " + (dir / "r.json").string() + "\n  junit: " + (dir / "j.xml").string() +
      "\n  markdown: " + (dir / "s.md").string() + "\n  html: " + (dir / "h.html").string() + "\n";
  const auto cfg = config(kMetricsYaml, regression + outputs);
  ASSERT_EQ(tally("run -q " + cfg.string() + " --update-baseline").exit_code, 0);
  write_data(with_top1_misses(make_dataset(50, 5), 5));
  // top1 falls by 0.1, within its 0.2; but prf keys have no tolerance now and fall: still exit 3.
  auto r = tally("run -q " + cfg.string());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  for (const char* f : {"r.json", "j.xml", "s.md", "h.html"}) EXPECT_TRUE(fs::exists(dir / f)) << f;
  const std::string xml = read_file(dir / "j.xml");
  EXPECT_EQ(xml.find("classname=\"Accuracy\" time=\"0\"><failure"), std::string::npos)
      << "top1 is within its tolerance";
  EXPECT_NE(xml.find("classname=\"prf_macro\" time=\"0\"><failure"), std::string::npos) << xml;
  // Per-class keys say which class fell.
  EXPECT_NE(xml.find("prf_none.recall_classwise regressed at ["), std::string::npos) << xml;
}

TEST_F(ReportTest, HtmlEscapesUserTextAndDrawsNoInjectedMarkup) {
  const auto cfg =
      config("metrics:\n  - type: SingleLabelMetric\n    name: '" +
             std::string("x<img src=q onerror=alert(1)>&\"''") + "'\n    average: none\n");
  const auto page = dir / "r.html";
  auto r = tally("run -q " + cfg.string() + " --html " + page.string() + " --junit " +
                 (dir / "j.xml").string() + " --markdown " + (dir / "s.md").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = read_file(page);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("x&lt;img src=q onerror=alert(1)&gt;&amp;&quot;&#39;"), std::string::npos);
  // Inside the chart data, '<' never appears raw: no way to close the <script> early.
  const auto data_at = html.find("<script id=\"tally-charts\"");
  const auto data = html.substr(data_at, html.find("</script>", data_at) - data_at);
  EXPECT_EQ(data.find('<', 1), std::string::npos);
  EXPECT_NE(data.find("\\u003cimg"), std::string::npos);
  const std::string xml = read_file(dir / "j.xml");
  EXPECT_NE(xml.find("classname=\"x&lt;img src=q onerror=alert(1)&gt;&amp;&quot;&#39;\""),
            std::string::npos)
      << xml;
  if (have("xmllint")) {
    EXPECT_EQ(run_command("xmllint --noout " + (dir / "j.xml").string()).exit_code, 0);
  }
  const std::string md = read_file(dir / "s.md");
  EXPECT_EQ(md.find("<img"), std::string::npos);
  const Browser browser;
  if (browser.exe.empty())
    GTEST_FAIL() << "chromium not installed (scripts/install-deps.sh installs it)";
  const auto dom = browser.dump_dom(page);
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  EXPECT_TRUE(tags(dom.out, "img").empty());
  expect_page_ok(dom.out, 3);  // precision, recall, f1-score per class
}

// The writer draws whatever the ResultSpecs say, for any metric: curves (one, or several), bars,
// heatmaps; no metric names appear in its code. A made-up detector metric shows it.
TEST_F(ReportTest, HtmlDrawsCurvesBarsAndHeatmapsFromResultSpecsAlone) {
  using tally::Value;
  const auto curve = [](std::vector<double> x, std::vector<double> y, const char* xl,
                        const char* yl) {
    Value c = Value::map();
    c.set("x", Value(x));
    c.set("y", Value(y));
    c.set("x_label", xl);
    c.set("y_label", yl);
    return c;
  };
  tally::Results res;
  Value det = Value::map();
  det.set("mAP", 0.61);
  det.set("false_alarms", 0.12);
  det.set("pr_curve",
          curve({0, 0.2, 0.5, 0.8, 1.0}, {1.0, 0.95, 0.85, 0.6, 0.3}, "recall", "precision"));
  Value rocs = Value::array();
  rocs.push_back(
      curve({0, 0.1, 0.3, 1}, {0, 0.6, 0.9, 1}, "false positive rate", "true positive rate"));
  rocs.push_back(
      curve({0, 0.2, 0.5, 1}, {0, 0.5, 0.8, 1}, "false positive rate", "true positive rate"));
  det.set("roc_per_class", rocs);
  det.set("ap_per_class", Value(std::vector<double>{0.7, 0.5, 0.62}));
  det.set("confusion", Value(Value::Array{Value(std::vector<long long>{9, 1, 0}),
                                          Value(std::vector<long long>{2, 7, 1}),
                                          Value(std::vector<long long>{0, 3, 6})}));
  res.metrics.set("Detector", det);
  res.run.config = "synthetic";
  res.run.types = {{"Detector", "MadeUpDetector"}};
  tally::ResultSpecs specs;
  specs.set("Detector",
            {{"*_curve", tally::Better::Neither, tally::Plot::Curve, "precision against recall"},
             {"roc*", tally::Better::Neither, tally::Plot::Curve, "one curve per class"},
             {"*_per_class", tally::Better::Higher, tally::Plot::Bars, "per class"},
             {"confusion", tally::Better::Neither, tally::Plot::Heatmap, "rows = truth"},
             {"false_alarms", tally::Better::Lower, tally::Plot::None, "lower is better"}},
            "MadeUpDetector");
  // A baseline where false alarms were lower and AP of class 1 higher.
  Value base = res.metrics;
  base.find("Detector")->set("false_alarms", 0.10);
  base.find("Detector")->set("ap_per_class", Value(std::vector<double>{0.7, 0.55, 0.62}));
  auto cmp = tally::compare(res.metrics, base, specs, {});
  cmp.baseline_source = "baseline.json (made in the test)";
  EXPECT_EQ(cmp.find("Detector", "false_alarms")->verdict,
            tally::Verdict::Regressed);  // lower is better
  EXPECT_EQ(cmp.find("Detector", "ap_per_class")->element, "[1]");
  EXPECT_EQ(cmp.find("Detector", "pr_curve")->verdict, tally::Verdict::Ok);

  const auto chartjs_file = tally::find_chartjs();
  ASSERT_TRUE(chartjs_file)
      << "Chart.js not found: apt-get install libjs-chart.js (scripts/install-deps.sh)";
  const tally::ReportInput input{res, specs, &cmp, &base, "synthetic detector"};
  const auto page = dir / "curves.html";
  tally::write_file_atomic(page, tally::html_report(input, tally::read_chartjs(*chartjs_file)));
  const std::string html = read_file(page);
  EXPECT_EQ(count_of(html, "<canvas "), 3);  // pr_curve, roc_per_class, ap_per_class
  EXPECT_EQ(count_of(html, "<table class=\"heatmap\""), 1);
  EXPECT_NE(html.find("MadeUpDetector"), std::string::npos);

  // Without Chart.js the page still opens, with tables and a note instead of charts.
  const auto bare = dir / "bare.html";
  tally::write_file_atomic(bare, tally::html_report(input, ""));

  const Browser browser;
  if (browser.exe.empty())
    GTEST_FAIL() << "chromium not installed (scripts/install-deps.sh installs it)";
  auto dom = browser.dump_dom(page);
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  expect_page_ok(dom.out, 3);
  // Points drawn: 2 datasets of 5 (curve + baseline curve), 2 curves of 4, 2 x 3 bars.
  const auto canvases = tags(dom.out, "canvas");
  ASSERT_EQ(canvases.size(), 3u);
  EXPECT_EQ(attr(canvases[0], "data-points"), "10");
  EXPECT_EQ(attr(canvases[1], "data-points"), "8");
  EXPECT_EQ(attr(canvases[2], "data-points"), "6");
  const auto png = screenshot_path("report_screenshot_curves.png");
  fs::remove(png);
  ASSERT_EQ(browser.screenshot(page, png).exit_code, 0);
  EXPECT_TRUE(fs::exists(png));
  std::cout << "report screenshot (curves): " << png.string() << "\n";

  dom = browser.dump_dom(bare);
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  const auto body = tags(dom.out, "body");
  ASSERT_EQ(body.size(), 1u);
  EXPECT_EQ(attr(body[0], "data-errors"), "0") << attr(body[0], "data-error-messages");
  EXPECT_EQ(attr(body[0], "data-charts-available"), "0");
  EXPECT_EQ(count_of(dom.out, "<p class=\"note\">Chart unavailable"), 3);
}

// The paired tests of `tally compare` (KeyDiff::test) and the "within noise" verdict, in every
// report: a Comparison built by hand (what apply_paired_tests leaves).
TEST_F(ReportTest, ReportsShowPairedTestsAndTheWithinNoiseVerdict) {
  using tally::Value;
  using tally::Verdict;
  tally::Results res;
  Value acc = Value::map();
  acc.set("top1", 0.912);
  acc.set("top5", 0.981);
  acc.set("loss", 0.31);
  res.metrics.set("Accuracy", acc);
  res.run.config = "eval.yaml";
  tally::ResultSpecs specs;
  specs.set("Accuracy", {{"loss", tally::Better::Lower, tally::Plot::None, "lower is better"},
                         {"top*", tally::Better::Higher, tally::Plot::None, "accuracy"}});
  const auto key = [](const char* k, Verdict v, double base, double value) {
    tally::KeyDiff d;
    d.label = "Accuracy";
    d.key = k;
    d.verdict = v;
    d.baseline = base;
    d.value = value;
    d.delta = value - base;
    d.tol.atol = 0.001;
    d.tolerance = 0.001;
    return d;
  };
  tally::Comparison cmp;
  cmp.baseline_source = "baseline.json";
  cmp.keys.push_back(key("top5", Verdict::Ok, 0.981, 0.981));
  auto noise = key("loss", Verdict::WithinNoise, 0.30, 0.31);
  noise.better = tally::Better::Lower;
  tally::PairedTest pb;
  pb.key = "loss";
  pb.method = "paired bootstrap";
  pb.units = 500;
  pb.difference = 0.01;
  pb.low = -0.004;
  pb.high = 0.024;
  pb.p_value = 0.21;
  pb.gate = "within noise";
  noise.test = pb;
  cmp.keys.push_back(noise);
  auto fell = key("top1", Verdict::Regressed, 0.92, 0.912);
  tally::PairedTest mc;
  mc.key = "top1";
  mc.method = "McNemar exact";
  mc.units = 1000;
  mc.difference = -0.008;
  mc.low = -0.012;
  mc.high = -0.004;
  mc.p_value = 0.003;
  mc.worse = 11;
  mc.better = 3;
  mc.gate = "regressed";
  fell.test = mc;
  cmp.keys.push_back(fell);
  const std::string mc_text = "p = 0.003 (McNemar exact), Δ 95% CI [-0.012, -0.004]";
  const std::string pb_text = "p = 0.21 (paired bootstrap), Δ 95% CI [-0.004, 0.024]";
  EXPECT_EQ(tally::report::paired_test_text(mc), mc_text);
  const tally::ReportInput input{res, specs, &cmp, nullptr, "paired"};

  // Markdown: a "test" column, the new verdict, regressions first then within noise.
  const std::string md = tally::markdown_report(input);
  EXPECT_NE(md.find("| verdict | key | baseline | value | delta | tolerance | test | note |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 〰️ within noise | Accuracy.loss |"), std::string::npos) << md;
  const auto md_row = [&](const std::string& k) {
    const auto at = md.find("| Accuracy." + k + " |");
    return at == std::string::npos ? std::string() : md.substr(at, md.find('\n', at) - at);
  };
  EXPECT_NE(md_row("top1").find(tally::report::md_escape(mc_text)), std::string::npos) << md;
  EXPECT_NE(md_row("loss").find(tally::report::md_escape(pb_text)), std::string::npos) << md;
  EXPECT_EQ(md_row("top5").find("p = "), std::string::npos) << md;  // no test: blank
  EXPECT_LT(md.find("| Accuracy.top1 |"), md.find("| Accuracy.loss |"));
  EXPECT_LT(md.find("| Accuracy.loss |"), md.find("| Accuracy.top5 |"));
  EXPECT_NE(md.find("- **Accuracy.top1**: 0.92 → 0.912"), std::string::npos) << md;

  // HTML: the pill (a class without spaces), the test cell, the order.
  const std::string html = tally::html_report(input, "");
  EXPECT_NE(html.find("<span class=\"pill v-within-noise\">within noise</span>"),
            std::string::npos);
  EXPECT_NE(html.find("<th>test</th>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"test\">" + tally::report::html_escape(mc_text) + "</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"test\">" + tally::report::html_escape(pb_text) + "</td>"),
            std::string::npos);
  EXPECT_EQ(count_of(html, "<td class=\"test\"></td>"), 1);  // top5: no test
  EXPECT_LT(html.find("data-key=\"Accuracy.top1\" data-verdict=\"regressed\""),
            html.find("data-key=\"Accuracy.loss\" data-verdict=\"within noise\""));
  EXPECT_LT(html.find("data-key=\"Accuracy.loss\" data-verdict=\"within noise\""),
            html.find("data-key=\"Accuracy.top5\" data-verdict=\"ok\""));

  // JUnit: one failure (the regression, its test in the message and text); within noise passes,
  // its test in system-out. Valid against the schema.
  const std::string xml = tally::junit_report(input);
  EXPECT_NE(xml.find("failures=\"1\""), std::string::npos) << xml;
  EXPECT_EQ(count_of(xml, "<failure "), 1) << xml;
  const auto testcase = [&](const std::string& name) {
    const auto at = xml.find("<testcase name=\"" + name + "\"");
    return at == std::string::npos ? std::string()
                                   : xml.substr(at, xml.find("</testcase>", at) - at);
  };
  const std::string top1 = testcase("top1"), loss = testcase("loss");
  EXPECT_NE(top1.find("<failure type=\"regression\" message=\"" +
                      tally::report::xml_escape("Accuracy.top1 regressed: 0.92 -> 0.912")),
            std::string::npos);
  EXPECT_NE(top1.find("; test: " + tally::report::xml_escape(mc_text) + "\""), std::string::npos)
      << top1;
  EXPECT_NE(top1.find("test discordant units: 11 worse, 3 better"), std::string::npos) << top1;
  EXPECT_EQ(loss.find("<failure"), std::string::npos) << loss;
  EXPECT_NE(loss.find("verdict: within noise\ntest: " + tally::report::xml_escape(pb_text)),
            std::string::npos)
      << loss;
  EXPECT_EQ(testcase("top5").find("test: "), std::string::npos);
  if (!have("xmllint"))
    GTEST_FAIL() << "xmllint not installed: scripts/install-deps.sh installs libxml2-utils";
  write_text(dir / "paired.xml", xml);
  const auto v = run_command("xmllint --noout --schema " + std::string(TALLY_SOURCE_DIR) +
                             "/tests/data/junit/junit.xsd " + (dir / "paired.xml").string());
  EXPECT_EQ(v.exit_code, 0) << v.err;
}

// History: the HTML report's "Trends" section (one line chart per key, the drifted key first and
// marked, interval bands) opened in Chromium; without Chart.js a table per key; the Markdown's
// "Drift" list.
TEST_F(ReportTest, TrendsFromAHistoryFolderInHtmlAndMarkdown) {
  using tally::Value;
  const auto history_dir = dir / "history";
  fs::create_directories(history_dir);
  // 10 earlier runs: top1 falls 0.1 % a run (a slow drift), top5 is noise, loss is constant.
  const double noise[] = {0.981, 0.983, 0.980, 0.982, 0.984, 0.981, 0.979, 0.983, 0.982, 0.980};
  const auto results_of = [&](int i) {
    tally::Results r;
    Value acc = Value::map();
    acc.set("top1", 0.92 * (1 - 0.001 * i));
    acc.set("top5", noise[i % 10]);
    acc.set("loss", 0.3);
    r.metrics.set("Accuracy", acc);
    r.run.config = "eval.yaml";
    Value iv = Value::map();
    iv.set("low", 0.91 * (1 - 0.001 * i));
    iv.set("high", 0.93 * (1 - 0.001 * i));
    Value per = Value::map();
    per.set("top1", iv);
    Value metrics = Value::map();
    metrics.set("Accuracy", per);
    r.intervals = Value::map();
    r.intervals.set("metrics", metrics);
    return r;
  };
  for (int i = 0; i < 10; ++i)
    write_text(history_dir / fmt::format("build-{}.json", 90 + i), results_of(i).to_json());
  const tally::Results res = results_of(10);
  tally::ResultSpecs specs;
  specs.set("Accuracy", {{"loss", tally::Better::Lower, tally::Plot::None, "lower is better"},
                         {"top*", tally::Better::Higher, tally::Plot::None, "accuracy"}});
  tally::Tolerances tol;
  tol.defaults.rtol = 0.003;
  const auto history = tally::read_history(history_dir);
  ASSERT_EQ(history.runs.size(), 10u);
  EXPECT_EQ(history.runs.front().name, "build-90");
  const auto trends = tally::trends(history, res, specs, tol, {.current_name = "this run"});
  ASSERT_EQ(trends.drifted(), 1u);
  EXPECT_TRUE(trends.keys[0].drift);  // top1
  tally::ReportInput input{res, specs, nullptr, nullptr, "history"};
  input.trends = &trends;

  const std::string md = tally::markdown_report(input);
  EXPECT_NE(md.find("### Drift"), std::string::npos) << md;
  EXPECT_NE(md.find("**📉 1 key drifted**"), std::string::npos) << md;
  EXPECT_NE(md.find("- **Accuracy.top1**: "), std::string::npos) << md;
  EXPECT_EQ(md.find("- **Accuracy.top5**"), std::string::npos) << md;

  const auto chartjs_file = tally::find_chartjs();
  ASSERT_TRUE(chartjs_file) << "Chart.js not found (scripts/install-deps.sh)";
  const auto page = dir / "trends.html";
  tally::write_file_atomic(page, tally::html_report(input, tally::read_chartjs(*chartjs_file)));
  const std::string html = read_file(page);
  EXPECT_NE(html.find("<h2 id=\"trends\">Trends</h2>"), std::string::npos);
  EXPECT_NE(html.find("Slow drift: 1 key drifted"), std::string::npos);
  EXPECT_EQ(count_of(html, "<canvas "), 3);
  // The drifted key first, marked.
  const auto figures = tags(html, "figure");
  ASSERT_EQ(figures.size(), 3u);
  EXPECT_EQ(attr(figures[0], "data-key"), "Accuracy.top1");
  EXPECT_EQ(attr(figures[0], "data-drift"), "1");
  EXPECT_EQ(attr(figures[0], "class"), "trend drift");
  EXPECT_EQ(attr(figures[1], "data-drift"), "0");
  EXPECT_NE(html.find("\"labels\":[\"build-90\","), std::string::npos);
  EXPECT_NE(html.find("\"this run\"]"), std::string::npos);

  const auto bare = dir / "trends-bare.html";
  tally::write_file_atomic(bare, tally::html_report(input, ""));
  const std::string bare_html = read_file(bare);
  EXPECT_EQ(count_of(bare_html, "<canvas "), 0);
  EXPECT_EQ(count_of(bare_html, "<table class=\"trend\""), 3);
  EXPECT_NE(bare_html.find("<tr class=\"current\"><td>this run &#9670;</td>"), std::string::npos);

  const Browser browser;
  if (browser.exe.empty())
    GTEST_FAIL() << "chromium not installed (scripts/install-deps.sh installs it)";
  auto dom = browser.dump_dom(page);
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  expect_page_ok(dom.out, 3);
  // top1: interval low + high + values (11 each) + the Theil-Sen line (11) = 44 points.
  const auto canvases = tags(dom.out, "canvas");
  ASSERT_EQ(canvases.size(), 3u);
  EXPECT_EQ(attr(canvases[0], "data-points"), "44");
  const auto png = screenshot_path("report_screenshot_trends.png");
  fs::remove(png);
  ASSERT_EQ(browser.screenshot(page, png).exit_code, 0);
  EXPECT_TRUE(fs::exists(png));
  std::cout << "report screenshot (trends): " << png.string() << "\n";
  dom = browser.dump_dom(bare);
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  const auto body = tags(dom.out, "body");
  ASSERT_EQ(body.size(), 1u);
  EXPECT_EQ(attr(body[0], "data-errors"), "0") << attr(body[0], "data-error-messages");

  // No drift: one line in the Markdown.
  const auto calm = tally::trends(history, results_of(0), specs, tol);
  EXPECT_EQ(calm.drifted(), 0u);
  input.trends = &calm;
  const std::string calm_md = tally::markdown_report(input);
  EXPECT_NE(calm_md.find("### Drift\n\nNo key drifted over the last 10 runs and this one"),
            std::string::npos)
      << calm_md;
}

TEST_F(ReportTest, ConfigAndCommandLineErrorsAreOneClearLine) {
  const auto expect_error = [&](const std::string& args, const std::string& needle) {
    const auto r = tally(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_EQ(count_of(r.err, "\n"), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  };
  expect_error("run " + config(kMetricsYaml, "output:\n  pdf: x.pdf\n").string(),
               "eval.yaml:18:3: unknown key 'output.pdf' (expected json, junit, markdown, html, "
               "records)");
  expect_error("run " + config(kMetricsYaml, "regression:\n  rtol: 0.1\n").string(),
               "regression: missing 'baseline'");
  expect_error(
      "run " + config(kMetricsYaml, "regression:\n  baseline: b.json\n  rtol: -1\n").string(),
      "eval.yaml:19:9: regression.rtol expects a finite number >= 0, found");
  expect_error(
      "run " + config(kMetricsYaml, "regression:\n  baseline: b.json\n  tolerance: {}\n").string(),
      "unknown key 'regression.tolerance' (expected baseline, rtol, atol, tolerances, "
      "baseline_records, alpha, resamples, seed, test, history, fail_on_drift)");
  expect_error(
      "run " + config(kMetricsYaml, "regression:\n  baseline: b.json\n  alpha: 1.5\n").string(),
      "regression.alpha expects a number in (0, 1)");
  expect_error(
      "run " + config(kMetricsYaml, "regression:\n  baseline: b.json\n  test: exact\n").string(),
      "regression.test expects auto or bootstrap, found");
  expect_error(
      "run " + config(kMetricsYaml, "regression:\n  baseline: b.json\n  resamples: 1\n").string(),
      "regression.resamples expects an integer in [2, 1000000]");
  expect_error("run " + config().string() + " --update-baseline", "--update-baseline:");
  expect_error("run " + config().string() + " --color=sometimes", "--color");
  write_text(dir / "plain", "x");
  expect_error("run " + config().string() + " --html " + (dir / "plain" / "no" / "r.html").string(),
               "cannot create the folder");
  // Tolerances written inline are checked before the run, with their line.
  write_text(dir / "baseline.json", R"({"results": {}, "run": {}})");
  expect_error(
      "run " + config(kMetricsYaml,
                      "regression:\n  baseline: baseline.json\n  tolerances:\n    a.b: {atol: x}\n")
                   .string(),
      "eval.yaml:20:17: regression.tolerances: 'a.b': atol expects a finite number >= 0, found "
      "'x'");
  expect_error("run " + config(kMetricsYaml, "regression:\n  baseline: eval.yaml\n").string(),
               "is not valid JSON");
  expect_error(
      "validate " +
          config(kMetricsYaml, "regression:\n  baseline: baseline.json\n  tolerances: nope.yaml\n")
              .string(),
      "cannot read tolerances '" + (dir / "nope.yaml").string() + "'");
  // A bad TALLY_CHARTJS is a configuration error found before the run: no results are written.
  const auto r = run_command("TALLY_CHARTJS=" + (dir / "none.js").string() + " " + kTally +
                             " run " + config().string() + " -o " + (dir / "r.json").string() +
                             " --html " + (dir / "r.html").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cannot read Chart.js '" + (dir / "none.js").string() + "'"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir / "r.json"));
  write_text(dir / "module.js", "export default class Chart {}\n");
  const auto m = run_command("TALLY_CHARTJS=" + (dir / "module.js").string() + " " + kTally +
                             " run " + config().string() + " --html " + (dir / "r.html").string());
  EXPECT_EQ(m.exit_code, 2);
  EXPECT_NE(m.err.find("is not a Chart.js UMD build"), std::string::npos) << m.err;
}

TEST_F(ReportTest, ValidateReportsTheRegressionSetup) {
  const auto cfg = config(kMetricsYaml, kTolerantPrf);
  auto r = tally("validate " + cfg.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("baseline " + (dir / "baseline.json").string() + " does not exist yet"),
            std::string::npos)
      << r.out;
  ASSERT_EQ(tally("run -q " + cfg.string() + " --update-baseline").exit_code, 0);
  r = tally("validate " + cfg.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(4 metrics), 1 tolerance rules"), std::string::npos) << r.out;
}

TEST_F(ReportTest, ProgressOnStderrWhenAskedQuietOtherwise) {
  const auto quiet = tally("run -q " + config().string());
  ASSERT_EQ(quiet.exit_code, 0);
  EXPECT_EQ(quiet.err, "");  // not a terminal: no progress bar
  const auto shown = tally("run -q --progress " + config().string());
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.err.find("50/50 samples"), std::string::npos) << shown.err;
  EXPECT_NE(shown.err.find("samples/s"), std::string::npos) << shown.err;
  EXPECT_NE(shown.err.find("100%"), std::string::npos) << shown.err;
  EXPECT_EQ(shown.err.find("rank 0"), std::string::npos);  // one process: no rank label
  const auto off = tally("run -q --no-progress " + config().string());
  EXPECT_EQ(off.err, "");
}

TEST_F(ReportTest, RegressionUnderMpiExitsThreeOnEveryRankAndWritesOnce) {
#ifndef TALLY_MPIEXEC
  GTEST_FAIL() << "MPI not found at configure time: scripts/install-deps.sh installs Open MPI";
#else
  const auto cfg = config(kMetricsYaml, kTolerantPrf);
  ASSERT_EQ(tally("run -q " + cfg.string() + " --update-baseline").exit_code, 0);
  write_data(with_top1_misses(make_dataset(50, 5), 5));
  const auto junit = dir / "junit.xml";
  const auto r = run_command(mpirun(3) + kTally + " run -q --progress " + cfg.string() +
                             " --set backend.type=mpi --junit " + junit.string());
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_EQ(count_of(r.err, "key regressed: Accuracy.top1"), 1) << r.err;  // rank 0 only
  EXPECT_NE(r.err.find("rank 0 ["), std::string::npos)
      << r.err;  // the bar says whose shard it counts
  EXPECT_NE(r.err.find("16/16 samples"), std::string::npos) << r.err;  // rank 0 of 3 reads [0, 16)
  EXPECT_EQ(count_of(read_file(junit), "<failure "), 1);
#endif
}

TEST_F(ReportTest, TheDocsCiExampleRunsAgainstItsCommittedBaseline) {
  // docs/ci/eval.yaml is what docs/ci/github-actions.yml and gitlab-ci.yml run: it must pass
  // against the committed baseline and write the reports those files publish.
  fs::create_directories(dir / "reports");
  const std::string docs = std::string(TALLY_SOURCE_DIR) + "/docs/ci/";
  const auto r =
      run_command("cd " + dir.path.string() + " && " + kTally + " run -q " + docs + "eval.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* f : {"results.json", "junit.xml", "summary.md", "report.html"})
    EXPECT_TRUE(fs::exists(dir / "reports" / f)) << f;
  EXPECT_NE(read_file(dir / "reports" / "junit.xml").find("failures=\"0\""), std::string::npos);
  EXPECT_NE(read_file(dir / "reports" / "summary.md").find("no regression"), std::string::npos);
  for (const char* ci : {"github-actions.yml", "gitlab-ci.yml"}) {
    const std::string text = read_file(docs + ci);
    EXPECT_NE(text.find("tally run docs/ci/eval.yaml"), std::string::npos) << ci;
    EXPECT_NE(text.find("reports/junit.xml"), std::string::npos) << ci;
  }
}

TEST_F(ReportTest, PluginsListTheResultSpecs) {
  const auto text = tally("plugins");
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("result top*"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("higher is better, none"), std::string::npos);
  EXPECT_NE(text.out.find("result matrix"), std::string::npos);
  EXPECT_NE(text.out.find("no direction, heatmap"), std::string::npos);
  const auto j = nlohmann::json::parse(tally("plugins --json").out);
  bool saw = false;
  for (const auto& c : j) {
    if (c["name"] != "SingleLabelMetric") continue;
    saw = true;
    ASSERT_TRUE(c["results"].is_array());
    ASSERT_EQ(c["results"].size(), 4u);
    EXPECT_EQ(c["results"][0]["key"], "support*_classwise");
    EXPECT_EQ(c["results"][0]["better"], "neither");
    EXPECT_EQ(c["results"][0]["plot"], "bars");
    EXPECT_EQ(c["results"][2]["key"], "*_classwise");
    EXPECT_EQ(c["results"][2]["better"], "higher");
  }
  EXPECT_TRUE(saw);
}
