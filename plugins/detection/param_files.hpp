// Files that detection metrics read from their parameters (OIDMeanAP's class hierarchy and label
// CSV, AVAMeanAP's annotations, label map and exclusions): read whole, bounded, and CSV split as
// Python's csv.reader splits it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "tally/sdk/params.hpp"

namespace tally::detection {

/// A whole regular file of at most `max_bytes`, or ConfigError on parameter `param`.
inline std::string read_param_file(const Params& p, std::string_view param,
                                   std::uintmax_t max_bytes = std::uintmax_t{64} << 20) {
  const std::string path = p.get_string(param);
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st))
    p.fail(param, "'" + path + "': cannot open (no such file)");
  if (!std::filesystem::is_regular_file(st)) p.fail(param, "'" + path + "': not a regular file");
  const std::string limit = std::to_string(max_bytes >> 20) + " MiB";
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size > max_bytes)
    p.fail(param, "'" + path + "': larger than " + limit + " (or its size cannot be read)");
  std::ifstream in(path, std::ios::binary);
  if (!in) p.fail(param, "'" + path + "': cannot open");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > max_bytes) p.fail(param, "'" + path + "': larger than " + limit);
  return text;
}

/// The rows of a CSV text as Python's csv.reader (default dialect) splits them: ',' separated,
/// '"' quoted fields with "" for a quote, "\n", "\r\n" or "\r" ending a row.
inline std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool in_quotes = false, field_started = false, any = false;
  const auto end_row = [&] {
    if (any || field_started || !row.empty()) {
      row.push_back(field);
      rows.push_back(std::move(row));
    } else {
      rows.emplace_back();  // a blank line: csv.reader gives []
    }
    row.clear();
    field.clear();
    field_started = any = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_quotes) {
      if (ch == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        field += ch;
      }
      continue;
    }
    if (ch == '"' && !field_started) {
      in_quotes = field_started = any = true;
    } else if (ch == ',') {
      row.push_back(field);
      field.clear();
      field_started = false;
      any = true;
    } else if (ch == '\n' || ch == '\r') {
      end_row();
      if (ch == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    } else {
      field += ch;
      field_started = any = true;
    }
  }
  if (any || field_started || !row.empty()) end_row();
  return rows;
}

}  // namespace tally::detection
