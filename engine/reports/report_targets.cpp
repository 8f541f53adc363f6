// Where a run's results and reports go (the CLI's `tally run` and `tally compare`, Python's
// tally.run): one set of checks and one staging, so both write alike.
#include <fmt/format.h>

#include "tally/reports/reports.hpp"

namespace tally {

ReportTargets ReportTargets::of(const OutputPaths& configured) {
  const auto named = [](const std::optional<std::filesystem::path>& p,
                        const char* key) -> std::optional<OutputTarget> {
    if (!p) return std::nullopt;
    return OutputTarget{*p, key};
  };
  return {named(configured.json, "output.json"), named(configured.junit, "output.junit"),
          named(configured.markdown, "output.markdown"), named(configured.html, "output.html")};
}

void ReportTargets::check_writable() const {
  for (const auto* t : {&json, &junit, &markdown, &html})
    if (*t) tally::check_writable((*t)->path, (*t)->what);
}

void ReportTargets::stage(OutputSet& out, const ReportInput& input,
                          const std::string& chartjs) const {
  if (json) out.stage(json->path, input.results.to_json(), json->what);
  if (junit) out.stage(junit->path, junit_report(input), junit->what);
  if (markdown) out.stage(markdown->path, markdown_report(input), markdown->what);
  if (html) out.stage(html->path, html_report(input, chartjs), html->what);
}

Results read_baseline(const RegressionSettings& regression, const std::string& config) {
  std::error_code ec;
  if (!std::filesystem::exists(regression.baseline, ec))
    throw InputError(fmt::format(
        "{}: the baseline '{}' does not exist; write it with 'tally run {} --update-baseline'",
        regression.where, regression.baseline.string(), config));
  return read_results_json(regression.baseline);
}

}  // namespace tally
