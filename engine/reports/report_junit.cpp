// JUnit XML in the Jenkins/Surefire shape CI tools read (GitLab's `artifacts:reports:junit`,
// dorny/test-reporter, Jenkins): testsuites > testsuite > testcase, each testcase a metric key.
#include <unistd.h>

#include <array>
#include <cmath>

#include <fmt/format.h>

#include "report_common.hpp"
#include "tally/reports/reports.hpp"
#include "tally/sdk/version.hpp"

namespace tally {

namespace {

using report::xml_escape;

std::string hostname() {
  std::array<char, 256> buf{};
  if (::gethostname(buf.data(), buf.size() - 1) != 0) return "localhost";
  return buf.data();
}

std::string tolerance_text(const KeyDiff& k) {
  if (!k.delta) return "n/a";
  return fmt::format("{:.6g} (atol {:.6g} + rtol {:.6g} x |baseline|)", k.tolerance, k.tol.atol,
                     k.tol.rtol);
}

// The paired test's lines of a testcase's text.
std::string test_text(const PairedTest& t) {
  std::string out = fmt::format("test: {}\n", report::paired_test_text(t));
  if (!std::isnan(t.difference)) out += fmt::format("test difference: {:.6g}\n", t.difference);
  if (t.units) out += fmt::format("test units: {}\n", t.units);
  if (t.method == "McNemar exact")
    out += fmt::format("test discordant units: {} worse, {} better\n", t.worse, t.better);
  if (!t.gate.empty()) out += fmt::format("test verdict: {}\n", t.gate);
  return out;
}

struct Case {
  std::string classname, name, body;  // body: the child elements, already XML
  bool failed = false, skipped = false;
};

Case case_for(const KeyDiff& k) {
  Case c;
  c.classname = k.label;
  c.name = k.key.empty() ? k.label : k.key;
  const bool integral = k.baseline.is_int() && k.value.is_int();
  const std::string where = k.element.empty() ? "" : fmt::format(" at {}", k.element);
  switch (k.verdict) {
    case Verdict::Regressed: {
      c.failed = true;
      std::string message =
          k.delta ? fmt::format("{} regressed{}: {} -> {} (delta {}, tolerance {:.6g}, {})",
                                k.name(), where, format_number(k.baseline), format_number(k.value),
                                format_delta(k.delta, integral), k.tolerance, better_name(k.better))
                  : fmt::format("{} regressed: {}", k.name(), k.note);
      if (k.test) message += "; test: " + report::paired_test_text(*k.test);
      std::string text = fmt::format(
          "key: {}{}\nbaseline: {}\nvalue: {}\ndelta: {}\ntolerance: {}\ndirection: {}\n", k.name(),
          k.element, format_number(k.baseline), format_number(k.value),
          k.delta ? format_delta(k.delta, integral) : "n/a", tolerance_text(k),
          better_name(k.better));
      if (k.test) text += test_text(*k.test);
      if (!k.note.empty()) text += fmt::format("note: {}\n", k.note);
      for (const auto& e : k.elements)
        if (e.verdict == Verdict::Regressed)
          text += fmt::format("  {}{}: {} -> {} (delta {}, tolerance {:.6g})\n", k.name(), e.index,
                              format_number(e.baseline), format_number(e.value),
                              format_delta(e.delta, e.baseline.is_int() && e.value.is_int()),
                              e.tolerance);
      if (k.regressed_count > k.elements.size())
        text += fmt::format("  ... {} regressed elements in all\n", k.regressed_count);
      c.body = fmt::format("<failure type=\"regression\" message=\"{}\">{}</failure>",
                           xml_escape(message), xml_escape(text));
      break;
    }
    case Verdict::Missing:
      c.skipped = true;
      c.body = fmt::format(
          "<skipped message=\"{}\"/>",
          xml_escape(fmt::format("{} is in the baseline but not in the results", k.name())));
      break;
    case Verdict::New:
      c.body = fmt::format(
          "<system-out>{}</system-out>",
          xml_escape(fmt::format("value: {}\nnew: not in the baseline\n", format_number(k.value))));
      break;
    default: {
      std::string text = fmt::format("value{}: {}\nbaseline: {}\n", k.element,
                                     format_number(k.value), format_number(k.baseline));
      if (k.delta)
        text += fmt::format("delta: {}\ntolerance: {}\n", format_delta(k.delta, integral),
                            tolerance_text(k));
      text += fmt::format("verdict: {}\n", verdict_name(k.verdict));
      if (k.test) text += test_text(*k.test);
      if (!k.note.empty()) text += fmt::format("note: {}\n", k.note);
      c.body = fmt::format("<system-out>{}</system-out>", xml_escape(text));
    }
  }
  return c;
}

}  // namespace

std::string junit_report(const ReportInput& in) {
  std::vector<Case> cases;
  if (in.comparison != nullptr) {
    for (const auto& k : in.comparison->keys) cases.push_back(case_for(k));
  } else {
    for (const auto& [label, res] : in.results.metrics.as_map()) {
      const Value::Map entries = res.is_map() ? res.as_map() : Value::Map{{"", res}};
      for (const auto& [key, v] : entries) {
        Case c;
        c.classname = label;
        c.name = key.empty() ? label : key;
        c.body = fmt::format("<system-out>{}</system-out>",
                             xml_escape(fmt::format("value: {}\nno baseline\n", format_number(v))));
        cases.push_back(std::move(c));
      }
    }
  }
  std::size_t failures = 0, skipped = 0;
  for (const auto& c : cases) {
    failures += c.failed;
    skipped += c.skipped;
  }
  const auto& run = in.results.run;
  const std::string time = fmt::format("{:.3f}", std::max(0.0, run.wall_seconds));
  const std::string suite = in.title.empty() ? "tally" : fmt::format("tally: {}", in.title);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format(
      "<testsuites name=\"tally\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" "
      "time=\"{}\">\n",
      cases.size(), failures, skipped, time);
  out += fmt::format(
      "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" "
      "time=\"{}\" "
      "timestamp=\"{}\" hostname=\"{}\">\n",
      xml_escape(suite), cases.size(), failures, skipped, time, report::utc_timestamp(),
      xml_escape(hostname()));
  out += "    <properties>\n";
  const auto property = [&](std::string_view name, const std::string& value) {
    out += fmt::format("      <property name=\"{}\" value=\"{}\"/>\n", name, xml_escape(value));
  };
  property("tally_version", kVersion);
  property("config", run.config);
  property("backend", run.backend);
  property("world_size", std::to_string(run.world_size));
  property("samples", std::to_string(run.samples));
  if (in.comparison != nullptr) {
    property("baseline", in.comparison->baseline_source);
    property("comparison", in.comparison->summary());
  }
  out += "    </properties>\n";
  for (const auto& c : cases)
    out += fmt::format("    <testcase name=\"{}\" classname=\"{}\" time=\"0\">{}</testcase>\n",
                       xml_escape(c.name), xml_escape(c.classname), c.body);
  const std::string summary = in.comparison != nullptr
                                  ? fmt::format("{} (baseline: {})\n", in.comparison->summary(),
                                                in.comparison->baseline_source)
                                  : std::string("no baseline: every key passes\n");
  out += fmt::format("    <system-out>{}</system-out>\n", xml_escape(summary));
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

}  // namespace tally
