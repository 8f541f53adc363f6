// The Markdown summary: for $GITHUB_STEP_SUMMARY or a pull-request comment.
#include <algorithm>

#include <fmt/format.h>

#include "report_common.hpp"
#include "tally/reports/reports.hpp"
#include "tally/sdk/version.hpp"

namespace tally {

namespace {

using report::md_escape;

std::string verdict_badge(Verdict v) {
  switch (v) {
    case Verdict::Regressed:
      return "❌ regressed";
    case Verdict::Improved:
      return "✅ improved";
    case Verdict::Ok:
      return "✅ ok";
    case Verdict::Changed:
      return "🔄 changed";
    case Verdict::Missing:
      return "⚠️ missing";
    case Verdict::New:
      return "🆕 new";
    case Verdict::WithinNoise:
      return "〰️ within noise";
  }
  return "";
}

std::string arrow_delta(const KeyDiff& k) {
  if (!k.delta) return "";
  const std::string d = format_delta(k.delta, k.baseline.is_int() && k.value.is_int());
  if (*k.delta > 0) return "↑ " + d;
  if (*k.delta < 0) return "↓ " + d;
  return "→ 0";
}

std::string value_cell(const Value& v) {
  if (v.is_array()) {
    const bool numbers = std::all_of(v.as_array().begin(), v.as_array().end(),
                                     [](const Value& e) { return e.is_number() || e.is_null(); });
    if (numbers && v.size() <= 12) {
      std::string s = "[";
      for (std::size_t i = 0; i < v.size(); ++i)
        s += (i ? ", " : "") + format_number(v.as_array()[i]);
      return s + "]";
    }
  }
  return format_number(v);
}

// The drifted keys of a history, one line each (none: one line that says so).
std::string drift_markdown(const Trends& t) {
  std::string out = "\n### Drift\n\n";
  const std::size_t runs = t.history_runs();
  if (runs == 0) return out + "No earlier runs in the history folder.\n";
  const std::size_t drifted = t.drifted();
  if (drifted == 0)
    return out + fmt::format(
                     "No key drifted over the last {} runs and this one ({} in the history, "
                     "Mann-Kendall at alpha {:g}).\n",
                     std::min(runs, t.window), runs, t.alpha);
  out += fmt::format(
      "**📉 {} key{} drifted** over the last {} runs and this one ({} in the history):\n\n", drifted,
      drifted == 1 ? "" : "s", std::min(runs, t.window), runs);
  for (const auto& k : t.keys)
    if (k.drift) out += fmt::format("- **{}**: {}\n", md_escape(k.name()), md_escape(k.note));
  return out;
}

}  // namespace

std::string markdown_report(const ReportInput& in) {
  const auto& run = in.results.run;
  const Comparison* cmp = in.comparison;
  std::string out =
      fmt::format("## tally: {}\n\n", md_escape(in.title.empty() ? run.config : in.title));
  if (cmp != nullptr) {
    const auto regressed = cmp->count(Verdict::Regressed);
    out += regressed
               ? fmt::format("**❌ {} key{} regressed** — ", regressed, regressed == 1 ? "" : "s")
               : std::string("**✅ no regression** — ");
    out += fmt::format("{} (baseline `{}`)\n\n", cmp->summary(), md_escape(cmp->baseline_source));
    for (const auto& k : cmp->keys) {
      if (k.verdict != Verdict::Regressed) continue;
      out +=
          fmt::format("- **{}{}**: {} → {} ({}){}{}\n", md_escape(k.name()), md_escape(k.element),
                      format_number(k.baseline), format_number(k.value), arrow_delta(k),
                      k.test ? "; " + md_escape(report::paired_test_text(*k.test)) : "",
                      k.note.empty() ? "" : fmt::format(" — {}", md_escape(k.note)));
    }
    if (cmp->regressed()) out += "\n";
  }
  out +=
      fmt::format("{} samples · {} backend · world size {} · {:.3f} s · tally {}\n\n", run.samples,
                  md_escape(run.backend), run.world_size, run.wall_seconds, kVersion);

  out += "### Results\n\n| metric | key | value |\n|---|---|---|\n";
  for (const auto& [label, res] : in.results.metrics.as_map()) {
    const Value::Map entries = res.is_map() ? res.as_map() : Value::Map{{"", res}};
    bool first = true;
    for (const auto& [key, v] : entries) {
      out += fmt::format(
          "| {} | {} | {} |\n", first ? md_escape(label) : "", md_escape(key),
          md_escape(value_cell(v) +
                    report::interval_suffix(in.results.intervals, label, key,
                                            [](const Value& x) { return format_number(x); })));
      first = false;
    }
  }

  if (cmp != nullptr) {
    out += "\n### Comparison with the baseline\n\n";
    out +=
        "| verdict | key | baseline | value | delta | tolerance | test | note "
        "|\n|---|---|---|---|---|---|---|---|\n";
    // Regressions first: they are what a reader came for.
    std::vector<const KeyDiff*> rows;
    for (const auto& k : cmp->keys) rows.push_back(&k);
    std::stable_sort(rows.begin(), rows.end(), [&](const KeyDiff* a, const KeyDiff* b) {
      return report::verdict_rank(a->verdict) < report::verdict_rank(b->verdict);
    });
    for (const KeyDiff* k : rows) {
      const bool one_sided = k->verdict == Verdict::Missing || k->verdict == Verdict::New;
      out += fmt::format("| {} | {}{} | {} | {} | {} | {} | {} | {} |\n", verdict_badge(k->verdict),
                         md_escape(k->name()), md_escape(k->element),
                         k->verdict == Verdict::New ? "—" : md_escape(format_number(k->baseline)),
                         k->verdict == Verdict::Missing ? "—" : md_escape(format_number(k->value)),
                         arrow_delta(*k),
                         one_sided || !k->delta ? ""
                         : k->tolerance == 0    ? "exact"
                                                : fmt::format("±{:.3g}", k->tolerance),
                         k->test ? md_escape(report::paired_test_text(*k->test)) : "",
                         md_escape(k->note));
    }
  }
  if (in.trends != nullptr) out += drift_markdown(*in.trends);
  return out;
}

}  // namespace tally
