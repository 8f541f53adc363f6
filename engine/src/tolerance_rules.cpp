// Tolerance rules (tally/settings.hpp): read from a tolerances file or from regression.tolerances
// written inline in a config, with the place of every entry for messages.
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "config.hpp"
#include "tally/sdk/error.hpp"
#include "tally/settings.hpp"

namespace tally {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail_at(const Located& l, const std::string& msg) {
  throw ConfigError(l.where.empty() ? msg : fmt::format("{}: {}", l.where, msg));
}

std::string found_text(const Located& l) {
  if (l.value.is_null()) return "nothing";
  if (l.value.is_string()) return fmt::format("'{}'", l.value.as_string());
  if (l.value.is_float() && !std::isfinite(l.value.as_double()))  // JSON would say null
    return fmt::format("{}", l.value.as_double());
  return l.value.to_json();
}

}  // namespace

std::vector<ToleranceRule> parse_tolerance_rules(const Located& map, const std::string& what) {
  std::vector<ToleranceRule> rules;
  if (map.value.is_null()) return rules;
  if (!map.value.is_map())
    fail_at(map, fmt::format("{} expects a map of KEY_PATTERN: {{rtol: X, atol: Y}}, found {}",
                             what, found_text(map)));
  for (const auto& [pattern, entry] : map.children) {
    ToleranceRule rule;
    rule.pattern = pattern;
    rule.where = entry.key_where.empty() ? entry.where : entry.key_where;
    if (pattern.empty()) fail_at(entry, fmt::format("{}: an empty key pattern", what));
    if (!entry.value.is_map())
      fail_at(entry,
              fmt::format("{}: '{}' expects a map such as {{rtol: 0.01, atol: 0.002}}, found {}",
                          what, pattern, found_text(entry)));
    for (const auto& [field, v] : entry.children) {
      if (field == "rtol" || field == "atol") {
        if (!v.value.is_number() || !std::isfinite(v.value.as_double()) || v.value.as_double() < 0)
          fail_at(v, fmt::format("{}: '{}': {} expects a finite number >= 0, found {}", what,
                                 pattern, field, found_text(v)));
        (field == "rtol" ? rule.rtol : rule.atol) = v.value.as_double();
      } else if (field == "better") {
        const std::string b = v.value.is_string() ? v.value.as_string() : std::string();
        if (b == "higher")
          rule.better = Better::Higher;
        else if (b == "lower")
          rule.better = Better::Lower;
        else if (b == "neither")
          rule.better = Better::Neither;
        else
          fail_at(v, fmt::format("{}: '{}': better expects higher, lower or neither, found {}",
                                 what, pattern, found_text(v)));
      } else {
        const std::string& w = v.key_where.empty() ? v.where : v.key_where;
        throw ConfigError(fmt::format("{}{}: '{}': unknown key '{}' (expected rtol, atol, better)",
                                      w.empty() ? "" : w + ": ", what, pattern, field));
      }
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

std::vector<ToleranceRule> read_tolerance_rules(const fs::path& file) {
  return parse_tolerance_rules(load_yaml_file(file, "tolerances"),
                               fmt::format("tolerances '{}'", file.string()));
}

}  // namespace tally
