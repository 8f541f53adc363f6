#include "report_common.hpp"

#include <algorithm>

#include <chrono>
#include <cmath>
#include <ctime>

#include <fmt/format.h>

namespace tally::report {

std::string clean_text(std::string_view s) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 && c != '\t' && c != '\n')
        out += kReplacement;
      else if (c == 0x7F)
        out += kReplacement;
      else
        out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A multi-byte sequence: its length from the lead byte, then continuation bytes; overlong
    // forms, surrogates and code points past U+10FFFF are invalid.
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0Fu;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07u;
    }
    bool ok = len != 0 && i + len <= s.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    if (ok) {
      if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
          (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        ok = false;
      // C1 controls and the non-characters XML does not allow.
      if (cp >= 0x80 && cp <= 0x9F) ok = false;
      if (cp == 0xFFFE || cp == 0xFFFF) ok = false;
    }
    if (!ok) {
      out += kReplacement;
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

std::string xml_escape(std::string_view s) {
  const std::string clean = clean_text(s);
  std::string out;
  out.reserve(clean.size());
  for (char c : clean) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string md_escape(std::string_view s) {
  const std::string clean = clean_text(s);
  std::string out;
  out.reserve(clean.size());
  for (char c : clean) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\n':
      case '\t':
        out += ' ';
        break;
      case '|':
      case '\\':
      case '`':
      case '*':
      case '_':
      case '[':
      case ']':
      case '#':
      case '~':
      case '!':
        out += '\\';
        out += c;
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string script_json(const nlohmann::ordered_json& j) {
  // error_handler::replace: invalid UTF-8 in a string becomes U+FFFD instead of throwing.
  const std::string text = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;  // only inside strings: JSON has no '<' elsewhere
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string paired_test_text(const PairedTest& t) {
  std::string out = format_p_value(t);
  if (!t.method.empty()) out += fmt::format(" ({})", t.method);
  if (!std::isnan(t.low) && !std::isnan(t.high))
    out += fmt::format(", Δ {:g}% CI [{:.3g}, {:.3g}]", 100 * (1 - t.alpha), t.low, t.high);
  return out;
}

std::string verdict_slug(Verdict v) {
  std::string s = verdict_name(v);
  std::replace(s.begin(), s.end(), ' ', '-');
  return s;
}

int verdict_rank(Verdict v) {
  switch (v) {
    case Verdict::Regressed:
      return 0;
    case Verdict::Missing:
      return 1;
    case Verdict::Changed:
      return 2;
    case Verdict::WithinNoise:
      return 3;
    case Verdict::New:
      return 4;
    case Verdict::Improved:
      return 5;
    case Verdict::Ok:
      return 6;
  }
  return 7;
}

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

bool numbers_only(const Value& v) {
  return v.is_array() && v.size() > 0 &&
         std::all_of(v.as_array().begin(), v.as_array().end(),
                     [](const Value& e) { return e.is_number() || e.is_null(); });
}

bool is_curve(const Value& v) {
  if (!v.is_map()) return false;
  const Value* x = v.find("x");
  const Value* y = v.find("y");
  return x && y && numbers_only(*x) && numbers_only(*y) && x->size() == y->size();
}

}  // namespace tally::report
