// The HTML report: one self-contained file (styles, data, Chart.js and the page's script inline)
// that opens offline. What to draw comes from the metrics' ResultSpecs only:
//   Plot::Bars    an array of numbers       -> a bar chart (baseline bars beside it when known)
//   Plot::Heatmap an array of equal arrays  -> a table whose cells are shaded by value
//   Plot::Curve   {"x": [..], "y": [..], "x_label", "y_label"} (or an array of them) -> a line
//   chart
// Every text that came from a user (labels, keys, config names) is escaped; chart data travels
// as JSON in a <script type="application/json"> block with '<', '>' and '&' escaped.
// The page checks itself: <body data-errors> counts script errors (caught by a handler installed
// before anything else runs, and console.error), every chart canvas gets data-points (the
// elements Chart.js drew) and <body data-ready="1"> is set when the script is done.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "report_common.hpp"
#include "tally/file_io.hpp"
#include "tally/registry.hpp"
#include "tally/reports/reports.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/version.hpp"

namespace tally {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

using report::html_escape;
using report::is_curve;
using report::numbers_only;

constexpr std::size_t kMaxHeatmapSide = 64;
constexpr std::size_t kMaxTableRows = 1000;

constexpr const char* kStyle = R"css(
:root { --fg: #1d2125; --muted: #5f6b76; --line: #d9dee3; --bg: #ffffff; --panel: #f6f8fa;
        --bad: #c62828; --good: #2e7d32; --warn: #b26a00; --info: #0277bd; --accent: #1f77b4; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: var(--fg); background: var(--bg); }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 32px 0 12px; padding-bottom: 6px; border-bottom: 1px solid var(--line); }
h3 { font-size: 16px; margin: 24px 0 8px; }
h3 .type { font-weight: normal; color: var(--muted); font-size: 13px; margin-left: 6px; }
.run { color: var(--muted); margin: 0 0 14px; }
.summary { padding: 10px 14px; border-radius: 6px; font-weight: 600; margin: 8px 0; }
.summary.bad { background: #fdecea; color: var(--bad); border: 1px solid #f5c2bd; }
.summary.good { background: #edf7ee; color: var(--good); border: 1px solid #c3e3c5; }
.summary.none { background: var(--panel); color: var(--muted); border: 1px solid var(--line); }
.summary ul { margin: 6px 0 0; padding-left: 20px; font-weight: normal; }
table { border-collapse: collapse; margin: 6px 0 12px; }
th, td { padding: 4px 10px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: var(--panel); font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 13px; }
.pill { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; }
.v-regressed { background: #fdecea; color: var(--bad); }
.v-improved { background: #edf7ee; color: var(--good); }
.v-ok { background: var(--panel); color: var(--muted); }
.v-changed { background: #e3f2fd; color: var(--info); }
.v-missing, .v-new { background: #fff4e0; color: var(--warn); }
.v-within-noise { background: #f3e5f5; color: #6a1b9a; }
.v-drift { background: #fdecea; color: var(--bad); }
td.test { font-size: 12px; white-space: nowrap; }
figure.drift { border: 2px solid var(--bad); }
.trend-note { font-size: 12px; color: var(--muted); margin: 6px 0 0; }
figure.drift .trend-note { color: var(--bad); }
.d-regressed { color: var(--bad); font-weight: 600; }
.d-improved { color: var(--good); }
.note { color: var(--muted); }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(480px, 1fr)); gap: 16px; }
figure { margin: 0; padding: 12px; border: 1px solid var(--line); border-radius: 6px; background: #fff; }
figcaption { font-weight: 600; margin-bottom: 6px; }
figcaption .doc { font-weight: normal; color: var(--muted); display: block; font-size: 12px; }
.chart { position: relative; height: 280px; }
table.heatmap { margin: 0; }
table.heatmap td, table.heatmap th { border: 1px solid #fff; padding: 3px 5px; min-width: 32px; text-align: center;
                                     font-size: 12px; font-variant-numeric: tabular-nums; }
table.heatmap td.diff { outline: 2px solid var(--warn); outline-offset: -2px; }
.axis { color: var(--muted); font-size: 12px; }
details { margin: 4px 0 10px; }
summary { cursor: pointer; color: var(--accent); }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
)css";

// Installed first: any error from here on (Chart.js included) is counted on <body>.
constexpr const char* kGuardScript = R"js(
(function () {
  'use strict';
  var errors = [];
  window.tallyFail = function (message) {
    errors.push(String(message));
    document.body.setAttribute('data-errors', String(errors.length));
    document.body.setAttribute('data-error-messages', errors.join(' | '));
  };
  window.addEventListener('error', function (e) { window.tallyFail(e.message || 'script error'); });
  window.addEventListener('unhandledrejection', function (e) { window.tallyFail('unhandled rejection: ' + e.reason); });
  var consoleError = console.error;
  console.error = function () {
    window.tallyFail(Array.prototype.join.call(arguments, ' '));
    return consoleError.apply(console, arguments);
  };
})();
)js";

constexpr const char* kPageScript = R"js(
(function () {
  'use strict';
  var body = document.body;
  var palette = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
  function config(spec) {
    var next = 0;
    var datasets = spec.datasets.map(function (d) {
      var color = d.role === 'baseline' ? '#a8b0b8' : palette[next++ % palette.length];
      return {
        label: d.label, data: d.data, backgroundColor: color, borderColor: color,
        borderWidth: spec.type === 'line' ? 2 : 0, pointRadius: spec.type === 'line' && d.data.length > 60 ? 0 : 2,
        borderDash: d.role === 'baseline' && spec.type === 'line' ? [6, 4] : [], fill: false, tension: 0
      };
    });
    var scales = {
      x: { title: { display: !!spec.x_label, text: spec.x_label } },
      y: { title: { display: !!spec.y_label, text: spec.y_label }, beginAtZero: spec.type === 'bar' }
    };
    if (spec.type === 'line') {
      scales.x.type = 'linear';
      if (spec.unit) { scales.x.min = 0; scales.x.max = 1; scales.y.min = 0; scales.y.max = 1; }
    }
    return {
      type: spec.type,
      data: spec.type === 'bar' ? { labels: spec.labels, datasets: datasets } : { datasets: datasets },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, parsing: spec.type === 'bar' ? true : undefined,
        plugins: { legend: { display: datasets.length > 1 }, title: { display: false } },
        scales: scales
      }
    };
  }
  function trendConfig(spec) {
    var n = spec.labels.length;
    var color = spec.drift ? '#c62828' : '#1f77b4';
    var band = spec.drift ? 'rgba(198, 40, 40, 0.15)' : 'rgba(31, 119, 180, 0.15)';
    var datasets = [];
    if (spec.low && spec.high) {
      datasets.push({ label: 'interval low', data: spec.low, borderWidth: 0, pointRadius: 0,
                      borderColor: 'rgba(0, 0, 0, 0)', backgroundColor: band, fill: false, spanGaps: false });
      datasets.push({ label: 'interval', data: spec.high, borderWidth: 0, pointRadius: 0,
                      borderColor: 'rgba(0, 0, 0, 0)', backgroundColor: band, fill: '-1', spanGaps: false });
    }
    datasets.push({
      label: spec.key, data: spec.values, borderColor: color, backgroundColor: color, borderWidth: 2,
      pointRadius: spec.values.map(function (_, i) { return i === n - 1 ? 7 : 3; }),
      pointStyle: spec.values.map(function (_, i) { return i === n - 1 ? 'rectRot' : 'circle'; }),
      spanGaps: false, fill: false, tension: 0
    });
    if (spec.fit) {
      datasets.push({ label: 'Theil-Sen trend', data: spec.fit, borderColor: '#5f6b76', backgroundColor: '#5f6b76',
                      borderWidth: 1, borderDash: [6, 4], pointRadius: 0, spanGaps: true, fill: false });
    }
    return {
      type: 'line',
      data: { labels: spec.labels, datasets: datasets },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        plugins: { legend: { display: true, labels: { filter: function (item) { return item.text !== 'interval low'; } } },
                   title: { display: false } },
        scales: { x: { title: { display: true, text: 'run (oldest first; the last is this run)' } },
                  y: { title: { display: true, text: spec.key } } }
      }
    };
  }
  var specs = [];
  try {
    specs = JSON.parse(document.getElementById('tally-charts').textContent);
  } catch (e) {
    window.tallyFail('chart data: ' + e.message);
  }
  var drawn = 0;
  if (typeof Chart === 'undefined') {
    body.setAttribute('data-charts-available', '0');
    specs.forEach(function (spec) {
      var canvas = document.getElementById(spec.id);
      if (!canvas) return;
      var note = document.createElement('p');
      note.className = 'note';
      note.textContent = 'Chart unavailable: Chart.js was not found when this report was written ' +
                         '(install libjs-chart.js, or set TALLY_CHARTJS). The values are in the tables.';
      canvas.parentNode.replaceChild(note, canvas);
    });
  } else {
    body.setAttribute('data-charts-available', '1');
    specs.forEach(function (spec) {
      try {
        var canvas = document.getElementById(spec.id);
        var chart = new Chart(canvas.getContext('2d'), spec.type === 'trend' ? trendConfig(spec) : config(spec));
        var points = 0;
        chart.data.datasets.forEach(function (d, i) { points += chart.getDatasetMeta(i).data.length; });
        canvas.setAttribute('data-points', String(points));
        if (points > 0) drawn++;
      } catch (e) {
        window.tallyFail(spec.id + ': ' + (e && e.message ? e.message : e));
      }
    });
  }
  body.setAttribute('data-charts-drawn', String(drawn));
  body.setAttribute('data-ready', '1');
})();
)js";

bool is_number_matrix(const Value& v) {
  if (!v.is_array() || v.size() == 0) return false;
  const auto& rows = v.as_array();
  return std::all_of(rows.begin(), rows.end(),
                     [&](const Value& r) { return numbers_only(r) && r.size() == rows[0].size(); });
}

bool is_curves(const Value& v) {
  return is_curve(v) || (v.is_array() && v.size() > 0 &&
                         std::all_of(v.as_array().begin(), v.as_array().end(),
                                     [](const Value& c) { return is_curve(c); }));
}

json numbers(const Value& v) {
  auto a = json::array();
  for (const auto& e : v.as_array()) a.push_back(report::to_json(e));
  return a;
}

json curve_points(const Value& c) {
  auto pts = json::array();
  const auto& xs = c.at("x").as_array();
  const auto& ys = c.at("y").as_array();
  for (std::size_t i = 0; i < xs.size(); ++i)
    pts.push_back({{"x", report::to_json(xs[i])}, {"y", report::to_json(ys[i])}});
  return pts;
}

std::string text_field(const Value& c, std::string_view key) {
  const Value* v = c.is_map() ? c.find(key) : nullptr;
  return v && v->is_string() ? v->as_string() : std::string();
}

std::string verdict_pill(Verdict v) {
  return fmt::format("<span class=\"pill v-{}\">{}</span>", report::verdict_slug(v),
                     verdict_name(v));
}

std::string test_html(const KeyDiff& k) {
  if (!k.test) return "";
  return html_escape(report::paired_test_text(*k.test));
}

json optional_numbers(const std::vector<std::optional<double>>& xs) {
  auto a = json::array();
  for (const auto& x : xs) {
    if (x)
      a.push_back(*x);
    else
      a.push_back(nullptr);
  }
  return a;
}

std::string delta_html(const KeyDiff& k) {
  if (!k.delta) return "";
  const std::string d = format_delta(k.delta, k.baseline.is_int() && k.value.is_int());
  const char* arrow = *k.delta > 0 ? "▲ " : *k.delta < 0 ? "▼ " : "";
  const char* cls = k.verdict == Verdict::Regressed  ? "d-regressed"
                    : k.verdict == Verdict::Improved ? "d-improved"
                                                     : "";
  return fmt::format("<span class=\"{}\">{}{}</span>", cls, arrow, html_escape(d));
}

std::string tolerance_html(const KeyDiff& k) {
  if (!k.delta) return "";
  return k.tolerance == 0 ? "exact" : fmt::format("±{:.3g}", k.tolerance);
}

class Page {
 public:
  explicit Page(const ReportInput& in) : in_(in) {}

  std::string render(const std::string& chartjs) {
    const auto& run = in_.results.run;
    const std::string title = in_.title.empty() ? run.config : in_.title;
    std::string out;
    out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
    out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
    out += fmt::format("<meta name=\"generator\" content=\"tally {}\">\n", kVersion);
    out += fmt::format("<title>tally report: {}</title>\n<style>{}</style>\n</head>\n",
                       html_escape(title), kStyle);
    with_charts_ = !chartjs.empty();
    std::string main_html = body_html(title);
    out += fmt::format("<body data-errors=\"0\" data-charts=\"{}\">\n<script>{}</script>\n",
                       charts_.size(), kGuardScript);
    out += main_html;
    out += fmt::format("<script id=\"tally-charts\" type=\"application/json\">{}</script>\n",
                       report::script_json(charts_));
    if (!chartjs.empty()) out += "<script>\n" + chartjs + "\n</script>\n";
    out += fmt::format("<script>{}</script>\n</body>\n</html>\n", kPageScript);
    return out;
  }

 private:
  std::string body_html(const std::string& title) {
    const auto& run = in_.results.run;
    const Comparison* cmp = in_.comparison;
    std::string out = "<main>\n";
    out += fmt::format("<h1>tally report: {}</h1>\n", html_escape(title));
    out += fmt::format(
        "<p class=\"run\">{} samples · {} backend · world size {} · {:.3f} s · tally {} · written "
        "{} UTC</p>\n",
        run.samples, html_escape(run.backend), run.world_size, run.wall_seconds, kVersion,
        report::utc_timestamp());
    if (cmp != nullptr) {
      const bool bad = cmp->regressed();
      out += fmt::format(
          "<div class=\"summary {}\" id=\"summary\">{}{} — compared with <code>{}</code>",
          bad ? "bad" : "good",
          bad ? "Regression: " : "No regression: ", html_escape(cmp->summary()),
          html_escape(cmp->baseline_source));
      if (bad) {
        out += "<ul>";
        for (const auto& k : cmp->keys)
          if (k.verdict == Verdict::Regressed)
            out += fmt::format(
                "<li><code>{}{}</code>: {} → {} ({}){}</li>", html_escape(k.name()),
                html_escape(k.element), html_escape(format_number(k.baseline)),
                html_escape(format_number(k.value)),
                html_escape(format_delta(k.delta, k.baseline.is_int() && k.value.is_int())),
                k.note.empty() ? "" : " — " + html_escape(k.note));
        out += "</ul>";
      }
      out += "</div>\n";
    } else {
      out += "<div class=\"summary none\" id=\"summary\">No baseline: results only.</div>\n";
    }
    if (cmp != nullptr) out += comparison_html(*cmp);
    if (in_.trends != nullptr) out += trends_html(*in_.trends);
    out += "<h2 id=\"results\">Results</h2>\n";
    for (const auto& [label, res] : in_.results.metrics.as_map()) out += metric_html(label, res);
    out += fmt::format(
        "<footer>Written by tally {}. Charts: Chart.js, inlined; this file needs no "
        "network.</footer>\n",
        kVersion);
    out += "</main>\n";
    return out;
  }

  std::string comparison_html(const Comparison& cmp) {
    std::string out = "<h2 id=\"comparison\">Comparison with the baseline</h2>\n";
    out +=
        "<table "
        "class=\"comparison\">\n<tr><th>verdict</th><th>key</th><th>baseline</th><th>value</"
        "th><th>delta</th>"
        "<th>tolerance</th><th>direction</th><th>test</th><th>note</th></tr>\n";
    std::vector<const KeyDiff*> rows;
    for (const auto& k : cmp.keys) rows.push_back(&k);
    std::stable_sort(rows.begin(), rows.end(), [&](const KeyDiff* a, const KeyDiff* b) {
      return report::verdict_rank(a->verdict) < report::verdict_rank(b->verdict);
    });
    for (const KeyDiff* k : rows) {
      std::string note = html_escape(k->note);
      if (!k->elements.empty()) {
        note += fmt::format("<details><summary>{} element{}</summary><table>", k->elements.size(),
                            k->elements.size() == 1 ? "" : "s");
        note +=
            "<tr><th>element</th><th>baseline</th><th>value</th><th>delta</th><th>verdict</th></"
            "tr>";
        for (const auto& e : k->elements)
          note += fmt::format(
              "<tr><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
              "<td class=\"num\">{}</td><td>{}</td></tr>",
              html_escape(e.index), html_escape(format_number(e.baseline)),
              html_escape(format_number(e.value)),
              html_escape(format_delta(e.delta, e.baseline.is_int() && e.value.is_int())),
              verdict_pill(e.verdict));
        note += "</table></details>";
      }
      out += fmt::format(
          "<tr data-key=\"{}\" data-verdict=\"{}\"><td>{}</td><td><code>{}{}</code></td><td "
          "class=\"num\">{}</td>"
          "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td "
          "class=\"note\">{}</td><td class=\"test\">{}</td>"
          "<td class=\"note\">{}</td></tr>\n",
          html_escape(k->name()), verdict_name(k->verdict), verdict_pill(k->verdict),
          html_escape(k->name()), html_escape(k->element),
          k->verdict == Verdict::New ? "—" : html_escape(format_number(k->baseline)),
          k->verdict == Verdict::Missing ? "—" : html_escape(format_number(k->value)),
          delta_html(*k), tolerance_html(*k), better_name(k->better), test_html(*k), note);
    }
    out += "</table>\n";
    return out;
  }

  // The trends over a history folder: a summary, then one line chart per key (drifted keys first,
  // then the keys the test ran on), or a table per key when Chart.js is not inlined.
  std::string trends_html(const Trends& t) {
    std::string out = "<h2 id=\"trends\">Trends</h2>\n";
    const std::size_t runs = t.history_runs();
    if (runs == 0)
      return out + fmt::format(
                       "<div class=\"summary none\" id=\"trends-summary\">No earlier runs in "
                       "<code>{}</code>.</div>\n",
                       html_escape(t.dir.string()));
    const std::size_t drifted = t.drifted();
    const std::size_t window = std::min(runs, t.window);
    if (drifted > 0) {
      out += fmt::format(
          "<div class=\"summary bad\" id=\"trends-summary\">Slow drift: {} key{} drifted over "
          "the last {} runs and this one<ul>",
          drifted, drifted == 1 ? "" : "s", window);
      for (const auto& k : t.keys)
        if (k.drift)
          out += fmt::format("<li><code>{}</code>: {}</li>", html_escape(k.name()),
                             html_escape(k.note));
      out += "</ul></div>\n";
    } else {
      out += fmt::format(
          "<div class=\"summary good\" id=\"trends-summary\">No drift over the last {} runs "
          "and this one</div>\n",
          window);
    }
    out += fmt::format(
        "<p class=\"note\">{} earlier run{} in <code>{}</code>, oldest first; the last point "
        "(&#9670;) is this run. A key drifts when its Mann-Kendall trend over the window goes its "
        "bad way at p &lt; {:g} and the change from the window's first run passes its "
        "tolerance.</p>\n",
        runs, runs == 1 ? "" : "s", html_escape(t.dir.string()), t.alpha);
    std::vector<const KeyTrend*> keys;
    for (const auto& k : t.keys) keys.push_back(&k);
    std::stable_sort(keys.begin(), keys.end(), [](const KeyTrend* a, const KeyTrend* b) {
      return (a->drift ? 0 : a->tested ? 1 : 2) < (b->drift ? 0 : b->tested ? 1 : 2);
    });
    auto labels = json::array();
    for (const auto& r : t.runs) labels.push_back(r);
    out += "<div class=\"figures trends\">\n";
    for (const KeyTrend* k : keys) {
      const std::string name = k->name();
      std::string stats = better_name(k->better);
      if (k->tested)
        stats += fmt::format(" · Mann-Kendall p = {:.3g}, tau = {:.3f} · Theil-Sen {} a run",
                             k->p_value, k->tau, format_delta(k->slope, false));
      out += fmt::format(
          "<figure class=\"trend{}\" data-key=\"{}\" data-drift=\"{}\"><figcaption>{}{}<span "
          "class=\"doc\">{}</span></figcaption>",
          k->drift ? " drift" : "", html_escape(name), k->drift ? 1 : 0, html_escape(name),
          k->drift ? " <span class=\"pill v-drift\">drift</span>" : "", html_escape(stats));
      const bool any_interval =
          std::any_of(k->lows.begin(), k->lows.end(), [](const auto& x) { return x.has_value(); });
      if (with_charts_) {
        const std::string id = new_chart_id();
        json spec = {{"id", id},
                     {"type", "trend"},
                     {"key", name},
                     {"labels", labels},
                     {"values", optional_numbers(k->values)},
                     {"drift", k->drift}};
        if (any_interval) {
          spec["low"] = optional_numbers(k->lows);
          spec["high"] = optional_numbers(k->highs);
        }
        if (k->tested && std::isfinite(k->slope) && std::isfinite(k->intercept)) {
          auto fit = json::array();
          for (std::size_t r = 0; r < k->values.size(); ++r) {
            if (r < k->window_begin)
              fit.push_back(nullptr);
            else
              fit.push_back(k->intercept + k->slope * static_cast<double>(r - k->window_begin));
          }
          spec["fit"] = fit;
        }
        charts_.push_back(std::move(spec));
        out += fmt::format(
            "<div class=\"chart\"><canvas id=\"{}\" role=\"img\" aria-label=\"trend of "
            "{}\"></canvas></div>",
            id, html_escape(name));
        out +=
            "<details><summary>values</summary>" + trend_table(t, *k, any_interval) + "</details>";
      } else {
        out += trend_table(t, *k, any_interval);
      }
      if (!k->note.empty())
        out += fmt::format("<p class=\"trend-note\">{}</p>", html_escape(k->note));
      out += "</figure>\n";
    }
    out += "</div>\n";
    return out;
  }

  static std::string trend_table(const Trends& t, const KeyTrend& k, bool intervals) {
    std::string out =
        fmt::format("<table class=\"trend\" data-key=\"{}\"><tr><th>run</th><th>value</th>{}</tr>",
                    html_escape(k.name()), intervals ? "<th>interval</th>" : "");
    const std::size_t n = k.values.size();
    const std::size_t from = n > kMaxTableRows ? n - kMaxTableRows : 0;
    if (from > 0)
      out += fmt::format("<tr><td colspan=\"{}\" class=\"note\">{} earlier runs left out</td></tr>",
                         intervals ? 3 : 2, from);
    for (std::size_t r = from; r < n; ++r) {
      const bool current = r + 1 == n;
      out += fmt::format(
          "<tr{}><td>{}{}</td><td class=\"num\">{}</td>", current ? " class=\"current\"" : "",
          html_escape(r < t.runs.size() ? t.runs[r] : std::string()), current ? " &#9670;" : "",
          k.values[r] ? html_escape(format_number(Value(*k.values[r]))) : "—");
      if (intervals)
        out +=
            fmt::format("<td class=\"num\">{}</td>",
                        k.lows[r] && k.highs[r]
                            ? html_escape(fmt::format("[{}, {}]", format_number(Value(*k.lows[r])),
                                                      format_number(Value(*k.highs[r]))))
                            : "");
      out += "</tr>";
    }
    return out + "</table>";
  }

  std::string metric_html(const std::string& label, const Value& res) {
    const std::string type = in_.specs.type(label);
    std::string out =
        fmt::format("<section class=\"metric\" data-label=\"{}\">\n<h3>{}{}</h3>\n",
                    html_escape(label), html_escape(label),
                    type.empty() || type == label
                        ? ""
                        : fmt::format("<span class=\"type\">{}</span>", html_escape(type)));
    const Value::Map entries = res.is_map() ? res.as_map() : Value::Map{{"", res}};
    const bool cmp = in_.comparison != nullptr;
    out += cmp ? "<table><tr><th>key</th><th>value</th><th>baseline</th><th>delta</th><th>verdict</"
                 "th></tr>\n"
               : "<table><tr><th>key</th><th>value</th></tr>\n";
    std::string figures, details;
    for (const auto& [key, v] : entries) {
      const Plot plot = in_.specs.plot(label, key);
      const ResultSpec* spec = in_.specs.find(label, key);
      const std::string doc = spec ? spec->doc : std::string();
      const KeyDiff* k = cmp ? in_.comparison->find(label, key) : nullptr;
      std::string value_text;
      if (v.is_array() || v.is_map()) {
        std::string figure;
        if (plot == Plot::Bars && numbers_only(v))
          figure = bars(label, key, doc, v);
        else if (plot == Plot::Heatmap && is_number_matrix(v))
          figure = heatmap(label, key, doc, v);
        else if (plot == Plot::Curve && is_curves(v))
          figure = curve(label, key, doc, v);
        value_text = html_escape(format_number(v));
        if (!figure.empty()) {
          figures += figure;
          value_text += " <span class=\"note\">(drawn below)</span>";
        } else if (numbers_only(v)) {
          details += array_details(label, key, v);
          value_text += " <span class=\"note\">(listed below)</span>";
        } else {
          value_text = fmt::format("<code>{}</code>", html_escape(v.to_json().substr(0, 400)));
        }
      } else {
        value_text =
            html_escape(format_number(v) +
                        report::interval_suffix(in_.results.intervals, label, key,
                                                [](const Value& x) { return format_number(x); }));
      }
      out += fmt::format("<tr data-key=\"{}\"><td{}><code>{}</code></td><td class=\"num\">{}</td>",
                         html_escape(key),
                         doc.empty() ? "" : fmt::format(" title=\"{}\"", html_escape(doc)),
                         html_escape(key), value_text);
      if (cmp) {
        if (k == nullptr || k->verdict == Verdict::New)
          out += fmt::format("<td class=\"num\">—</td><td></td><td>{}</td>",
                             verdict_pill(Verdict::New));
        else
          out += fmt::format(
              "<td class=\"num\">{}{}</td><td class=\"num\">{}</td><td>{}</td>",
              k->element.empty() ? "" : fmt::format("<code>{}</code> ", html_escape(k->element)),
              html_escape(format_number(k->baseline)), delta_html(*k), verdict_pill(k->verdict));
      }
      out += "</tr>\n";
    }
    out += "</table>\n";
    if (!figures.empty()) out += "<div class=\"figures\">\n" + figures + "</div>\n";
    out += details;
    out += "</section>\n";
    return out;
  }

  std::string new_chart_id() { return fmt::format("chart-{}", charts_.size()); }

  static std::string caption(const std::string& label, const std::string& key,
                             const std::string& doc) {
    return fmt::format(
        "<figcaption>{}.{}{}</figcaption>", html_escape(label), html_escape(key),
        doc.empty() ? "" : fmt::format("<span class=\"doc\">{}</span>", html_escape(doc)));
  }

  std::string bars(const std::string& label, const std::string& key, const std::string& doc,
                   const Value& v) {
    const std::string id = new_chart_id();
    auto labels = json::array();
    for (std::size_t i = 0; i < v.size(); ++i) labels.push_back(std::to_string(i));
    auto datasets = json::array();
    const Value* base = base_value(label, key);
    if (base != nullptr && numbers_only(*base) && base->size() == v.size())
      datasets.push_back({{"label", "baseline"}, {"role", "baseline"}, {"data", numbers(*base)}});
    datasets.push_back({{"label", key}, {"role", "value"}, {"data", numbers(v)}});
    charts_.push_back({{"id", id},
                       {"type", "bar"},
                       {"title", label + "." + key},
                       {"x_label", "index"},
                       {"y_label", key},
                       {"labels", labels},
                       {"datasets", datasets}});
    return fmt::format(
        "<figure>{}<div class=\"chart\"><canvas id=\"{}\" role=\"img\" "
        "aria-label=\"{}\"></canvas></div></figure>\n",
        caption(label, key, doc), id, html_escape(label + "." + key));
  }

  std::string curve(const std::string& label, const std::string& key, const std::string& doc,
                    const Value& v) {
    const std::string id = new_chart_id();
    auto datasets = json::array();
    const auto add = [&](const Value& c, const std::string& name, const char* role) {
      datasets.push_back({{"label", name}, {"role", role}, {"data", curve_points(c)}});
    };
    std::vector<const Value*> curves;
    if (is_curve(v))
      curves.push_back(&v);
    else
      for (const auto& c : v.as_array()) curves.push_back(&c);
    const Value* base = base_value(label, key);
    if (base != nullptr && is_curve(*base) && curves.size() == 1)
      add(*base, "baseline", "baseline");
    bool unit = true;
    for (std::size_t i = 0; i < curves.size(); ++i) {
      const std::string name = text_field(*curves[i], "label");
      add(*curves[i],
          !name.empty()        ? name
          : curves.size() == 1 ? key
                               : fmt::format("{}[{}]", key, i),
          "value");
      for (const char* axis : {"x", "y"})
        for (const auto& e : curves[i]->at(axis).as_array())
          if (e.is_number() && (e.as_double() < 0 || e.as_double() > 1)) unit = false;
    }
    charts_.push_back({{"id", id},
                       {"type", "line"},
                       {"title", label + "." + key},
                       {"x_label", text_field(*curves[0], "x_label")},
                       {"y_label", text_field(*curves[0], "y_label")},
                       {"unit", unit},
                       {"datasets", datasets}});
    return fmt::format(
        "<figure>{}<div class=\"chart\"><canvas id=\"{}\" role=\"img\" "
        "aria-label=\"{}\"></canvas></div></figure>\n",
        caption(label, key, doc), id, html_escape(label + "." + key));
  }

  std::string heatmap(const std::string& label, const std::string& key, const std::string& doc,
                      const Value& v) {
    const auto& rows = v.as_array();
    const std::size_t n_rows = rows.size(), n_cols = rows[0].size();
    std::string out = fmt::format("<figure>{}", caption(label, key, doc));
    if (n_rows > kMaxHeatmapSide || n_cols > kMaxHeatmapSide) {
      out += fmt::format(
          "<p class=\"note\">{}×{}: too large to draw here (at most {}×{}); the values are in the "
          "results JSON.</p></figure>\n",
          n_rows, n_cols, kMaxHeatmapSide, kMaxHeatmapSide);
      return out;
    }
    const Value* base = base_value(label, key);
    const bool with_base = base != nullptr && is_number_matrix(*base) && base->size() == n_rows &&
                           base->as_array()[0].size() == n_cols;
    double max = 0;
    for (const auto& r : rows)
      for (const auto& c : r.as_array())
        if (c.is_number() && std::isfinite(c.as_double()))
          max = std::max(max, std::abs(c.as_double()));
    out +=
        fmt::format("<table class=\"heatmap\" data-points=\"{}\"><tr><th></th>", n_rows * n_cols);
    for (std::size_t j = 0; j < n_cols; ++j) out += fmt::format("<th>{}</th>", j);
    out += "</tr>";
    for (std::size_t i = 0; i < n_rows; ++i) {
      out += fmt::format("<tr><th>{}</th>", i);
      for (std::size_t j = 0; j < n_cols; ++j) {
        const Value& c = rows[i].as_array()[j];
        const double x =
            c.is_number() && std::isfinite(c.as_double()) ? std::abs(c.as_double()) : 0.0;
        const double alpha = max > 0 ? x / max : 0.0;
        std::string title = fmt::format("[{}][{}] = {}", i, j, format_number(c));
        bool diff = false;
        if (with_base) {
          const Value& b = base->as_array()[i].as_array()[j];
          title += fmt::format(" (baseline {})", format_number(b));
          diff = !(b == c);
        }
        out += fmt::format(
            "<td{} style=\"background: rgba(31, 119, 180, {:.3f}); color: {}\" "
            "title=\"{}\">{}</td>",
            diff ? " class=\"diff\"" : "", 0.06 + 0.94 * alpha, alpha > 0.55 ? "#fff" : "#1d2125",
            html_escape(title), html_escape(format_number(c)));
      }
      out += "</tr>";
    }
    out += "</table><p class=\"axis\">rows: the first index; columns: the second";
    if (with_base) out += "; outlined cells differ from the baseline";
    out += "</p></figure>\n";
    return out;
  }

  std::string array_details(const std::string& label, const std::string& key, const Value& v) {
    std::string out = fmt::format(
        "<details><summary>{}.{}: {} values</summary><table><tr><th>index</th><th>value</th></tr>",
        html_escape(label), html_escape(key), v.size());
    for (std::size_t i = 0; i < v.size() && i < kMaxTableRows; ++i)
      out += fmt::format("<tr><td>{}</td><td class=\"num\">{}</td></tr>", i,
                         html_escape(format_number(v.as_array()[i])));
    if (v.size() > kMaxTableRows)
      out += fmt::format("<tr><td colspan=\"2\" class=\"note\">... {} more</td></tr>",
                         v.size() - kMaxTableRows);
    out += "</table></details>\n";
    return out;
  }

  // The baseline's whole value for a key, when the comparison has it.
  const Value* base_value(const std::string& label, const std::string& key) const {
    if (in_.baseline == nullptr) return nullptr;
    const Value* l = in_.baseline->find(label);
    if (l == nullptr) return nullptr;
    return l->is_map() ? l->find(key) : nullptr;
  }

  const ReportInput& in_;
  json charts_ = json::array();
  bool with_charts_ = true;
};

}  // namespace

std::string html_report(const ReportInput& in, const std::string& chartjs) {
  return Page(in).render(chartjs);
}

std::optional<fs::path> find_chartjs() {
  std::error_code ec;
  if (const char* env = std::getenv("TALLY_CHARTJS"); env != nullptr && *env != '\0')
    return fs::path(env);
  // Beside libtally (<libdir>/tally/chart.js: the wheel ships Debian's copy there), then Debian's
  // libjs-chart.js: chart.min.js is the UMD build in 3.x; 4.x ships chart.umd.js.
  const fs::path folders[] = {Registry::builtin_dir().parent_path() / "chart.js",
                              "/usr/share/javascript/chart.js"};
  for (const auto& folder : folders)
    for (const char* name : {"chart.umd.min.js", "chart.umd.js", "chart.min.js", "Chart.min.js"}) {
      const fs::path p = folder / name;
      if (fs::is_regular_file(p, ec)) return p;
    }
  return std::nullopt;
}

std::string read_chartjs(const fs::path& file) {
  std::string js = read_whole_file(file, "Chart.js", kChartjsMaxBytes);
  // A classic <script> cannot load an ES module, and must not contain its own end tag.
  if (js.find("Chart") == std::string::npos || js.find("export {") != std::string::npos ||
      js.find("export default") != std::string::npos)
    throw RuntimeError(fmt::format(
        "'{}' is not a Chart.js UMD build (a plain script defining Chart)", file.string()));
  for (std::size_t p = 0; (p = js.find("</script", p)) != std::string::npos; p += 3)
    js.replace(p, 2, "<\\/");
  return js;
}

}  // namespace tally
