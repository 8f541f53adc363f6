// Helpers the report writers share: escaping for XML/HTML, Markdown and JSON inside <script>,
// and walking the results in a stable order.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tally/records.hpp"
#include "tally/reports/compare.hpp"
#include "tally/sdk/value.hpp"
#include "value_json.hpp"

namespace tally::report {

/// Valid UTF-8 with no control characters but tab and newline: invalid bytes and controls
/// become U+FFFD. Labels are user text; XML 1.0 forbids most control characters outright.
std::string clean_text(std::string_view s);

/// &, <, >, " and ' escaped (for element text and double-quoted attributes), after clean_text.
std::string xml_escape(std::string_view s);
inline std::string html_escape(std::string_view s) { return xml_escape(s); }

/// For a Markdown table cell: HTML-significant characters as entities, Markdown punctuation
/// backslash-escaped, '|' escaped, newlines as spaces.
std::string md_escape(std::string_view s);

/// JSON text safe inside <script type="application/json">: '<', '>' and '&' as \u escapes, so no
/// "</script>" or "<!--" can appear whatever the strings hold.
std::string script_json(const nlohmann::ordered_json& j);

/// A Value as JSON (NaN and infinities as null), as the results JSON writes it.
inline nlohmann::ordered_json to_json(const Value& v) { return detail::value_to_json(v); }

/// " [low, high]" of a scalar key's bootstrap interval (Results::intervals), numbers formatted
/// by `fmt_number`; empty when the results have no interval for the key.
template <class F>
std::string interval_suffix(const Value& intervals, std::string_view label, std::string_view key,
                            F&& fmt_number) {
  if (!intervals.is_map()) return {};
  const Value* metrics = intervals.find("metrics");
  if (metrics == nullptr || !metrics->is_map()) return {};
  const Value* per_label = metrics->find(label);
  if (per_label == nullptr || !per_label->is_map()) return {};
  const Value* iv = per_label->find(key);
  if (iv == nullptr || !iv->is_map()) return {};
  const Value* lo = iv->find("low");
  const Value* hi = iv->find("high");
  if (lo == nullptr || hi == nullptr) return {};
  return " [" + fmt_number(*lo) + ", " + fmt_number(*hi) + "]";
}

/// A paired test in one line: "p = 0.003 (McNemar exact), Δ 95% CI [-0.012, -0.004]".
std::string paired_test_text(const PairedTest& t);

/// A verdict's name usable in a CSS class or an id: "within-noise" for "within noise".
std::string verdict_slug(Verdict v);

/// Where a verdict sorts in the comparison tables: what a reader came for first (regressed,
/// missing, changed, within noise, new, improved, ok).
int verdict_rank(Verdict v);

/// "2024-05-01T12:34:56" (UTC, now).
std::string utc_timestamp();

/// A non-empty array of numbers (null for NaN).
bool numbers_only(const Value& v);

/// A curve result: {"x": [...], "y": [...]} of numbers, of equal lengths (Plot::Curve).
bool is_curve(const Value& v);

}  // namespace tally::report
