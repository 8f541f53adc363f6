// The shared pieces of the text metrics (see common.hpp).
#include <unicode/locid.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/uclean.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common.hpp"
#include "tally/sdk/error.hpp"

namespace tally::text {

namespace {

/// Length of the valid UTF-8 sequence at s[i], 0 when it is not one (overlong forms, surrogates
/// and code points above U+10FFFF are invalid, as in Python's decoder).
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  std::size_t n = 0;
  char32_t c = 0, min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2, c = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, c = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, c = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    c = (c << 6) | (b & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
  return n;
}

char32_t decode_at(std::string_view s, std::size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const std::size_t n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  char32_t c = b0 & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (std::size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return c;
}

bool is_ascii(std::string_view s) {
  for (const char ch : s)
    if (static_cast<unsigned char>(ch) >= 0x80) return false;
  return true;
}

std::string encode(const std::u32string& cps) {
  std::string out;
  out.reserve(cps.size());
  for (const char32_t c : cps) append_utf8(c, out);
  return out;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (s.find(from) == std::string::npos) return;
  std::string out;
  std::size_t pos = 0;
  while (true) {
    const auto at = s.find(from, pos);
    if (at == std::string::npos) break;
    out.append(s, pos, at - pos);
    out.append(to);
    pos = at + from.size();
  }
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

/// re.sub(r'(X)(Y)', repl, s) for single-character classes X, Y: a left-to-right scan that
/// consumes each match, as Python's regex engine does. `before`/`after` say whether the
/// replacement puts a space before the first group, between the groups and after the second.
template <class X, class Y>
std::u32string sub_pair(const std::u32string& s, X x, Y y, bool space_before, bool space_after) {
  std::u32string out;
  out.reserve(s.size() + s.size() / 4);
  std::size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && x(s[i]) && y(s[i + 1])) {
      if (space_before) out += U' ';
      out += s[i];
      out += U' ';
      out += s[i + 1];
      if (space_after) out += U' ';
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

/// re.sub(r'(X)', r' \1 ', s).
template <class X>
std::u32string pad_class(const std::u32string& s, X x) {
  std::u32string out;
  out.reserve(s.size() + s.size() / 4);
  for (const char32_t c : s) {
    if (x(c)) {
      out += U' ';
      out += c;
      out += U' ';
    } else {
      out += c;
    }
  }
  return out;
}

bool ascii_digit(char32_t c) { return c >= U'0' && c <= U'9'; }

bool gc_in(char32_t c, std::uint32_t mask) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & mask) != 0;
}

}  // namespace

// ---- inputs ---------------------------------------------------------------------------------

const Text& text_input(const Batch& batch, const char* field, const InputChecker& check,
                       std::int64_t first_sample, std::size_t min_strings, bool exactly) {
  if (!batch.has(field)) {
    std::string have;
    for (const auto& f : batch.fields()) have += (have.empty() ? "" : ", ") + f.first;
    check.fail(field,
               "is missing from the batch (it has: " + (have.empty() ? "no fields" : have) + ")");
  }
  if (!batch.is_text(field))
    check.fail(field,
               batch.is_ragged(field)
                   ? "must be a text field (strings), got a ragged tensor field"
                   : "must be a text field (strings), got " + batch.tensor(field).describe());
  const Text& t = batch.text(field);
  for (std::int64_t i = 0; i < t.size(); ++i) {
    const auto strings = t[i];
    if (exactly ? strings.size() != min_strings : strings.size() < min_strings)
      check.fail(field, fmt::format("sample {}: expected {} {} string{}, found {}",
                                    first_sample + i, exactly ? "exactly" : "at least", min_strings,
                                    min_strings == 1 ? "" : "s", strings.size()));
    for (std::size_t k = 0; k < strings.size(); ++k) {
      const std::string& s = strings[k];
      for (std::size_t b = 0; b < s.size();) {
        const std::size_t n = utf8_length(s, b);
        if (n == 0)
          check.fail(field, fmt::format("sample {}: string {} is not valid UTF-8 (byte {})",
                                        first_sample + i, k, b));
        b += n;
      }
    }
  }
  return t;
}

void same_size(const Text& a, const char* field_a, const Text& b, const char* field_b,
               const InputChecker& check) {
  if (a.size() != b.size())
    check.fail(field_a, fmt::format("has {} samples, '{}' has {}", a.size(), field_b, b.size()));
}

// ---- Python string semantics ----------------------------------------------------------------

void decode_utf8(std::string_view s, std::u32string& out) {
  for (std::size_t i = 0; i < s.size();) out += decode_at(s, i);
}

void append_utf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool py_isspace(char32_t c) noexcept {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string py_lower(std::string_view s) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& ch : out)
      if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
    return out;
  }
  icu::UnicodeString u =
      icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<std::int32_t>(s.size())));
  u.toLower(icu::Locale::getRoot());
  std::string out;
  u.toUTF8String(out);
  return out;
}

std::string py_upper(std::string_view s) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& ch : out)
      if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
    return out;
  }
  icu::UnicodeString u =
      icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<std::int32_t>(s.size())));
  u.toUpper(icu::Locale::getRoot());
  std::string out;
  u.toUTF8String(out);
  return out;
}

void py_split(std::string_view s, std::vector<std::string_view>& out) {
  std::size_t i = 0, start = 0;
  bool in_word = false;
  while (i < s.size()) {
    const std::size_t at = i;
    const char32_t c = decode_at(s, i);
    if (py_isspace(c)) {
      if (in_word) out.push_back(s.substr(start, at - start));
      in_word = false;
    } else if (!in_word) {
      start = at;
      in_word = true;
    }
  }
  if (in_word) out.push_back(s.substr(start));
}

std::string_view py_rstrip(std::string_view s) {
  std::size_t end = 0;
  for (std::size_t i = 0; i < s.size();) {
    const char32_t c = decode_at(s, i);
    if (!py_isspace(c)) end = i;
  }
  return s.substr(0, end);
}

std::string_view py_strip(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t next = i;
    if (!py_isspace(decode_at(s, next))) break;
    i = next;
  }
  return py_rstrip(s.substr(i));
}

void code_points(std::string_view s, std::vector<std::string_view>& out) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t at = i;
    decode_at(s, i);
    out.push_back(s.substr(at, i - at));
  }
}

namespace {

// ICU keeps caches (the root locale, case mappings, compiled break rules) for the life of the
// library. This plugin is what brings libicuuc into a tally process, and unloading the plugin
// unloads ICU with its caches still allocated: memory lost for good (LeakSanitizer reports it in
// every test that loads and releases the text plugin). u_cleanup() at unload frees them; ICU
// initialises itself again if anything in the process uses it later.
struct IcuCleanupAtUnload {
  ~IcuCleanupAtUnload() { u_cleanup(); }
} icu_cleanup_at_unload;

}  // namespace

bool has_cjk(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const char32_t c = decode_at(s, i);
    if (c >= 0x4E00 && c <= 0x9FA5) return true;
  }
  return false;
}

struct SymbolFilter::Impl {
  bool fast = false;
  std::unique_ptr<icu::RegexPattern> pattern;
};

SymbolFilter::SymbolFilter(const std::string& pattern) : impl_(new Impl) {
  if (pattern == kDefaultInvalidSymbol || pattern == "[^A-Za-z0-9\u4e00-\u9fa5]") {
    impl_->fast = true;
    return;
  }
  UErrorCode status = U_ZERO_ERROR;
  UParseError where{};
  impl_->pattern.reset(
      icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(icu::StringPiece(
                                     pattern.data(), static_cast<std::int32_t>(pattern.size()))),
                                 where, status));
  if (U_FAILURE(status)) {
    delete impl_;
    impl_ = nullptr;
    throw ConfigError(fmt::format("invalid regular expression '{}' (at offset {}): {}", pattern,
                                  where.offset, u_errorName(status)));
  }
}

SymbolFilter::~SymbolFilter() { delete impl_; }

std::string SymbolFilter::remove(std::string_view s) const {
  std::string out;
  if (impl_->fast) {
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
      const std::size_t at = i;
      const char32_t c = decode_at(s, i);
      if ((c >= U'A' && c <= U'Z') || (c >= U'a' && c <= U'z') || (c >= U'0' && c <= U'9') ||
          (c >= 0x4E00 && c <= 0x9FA5))
        out.append(s.substr(at, i - at));
    }
    return out;
  }
  UErrorCode status = U_ZERO_ERROR;
  const icu::UnicodeString u =
      icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<std::int32_t>(s.size())));
  std::unique_ptr<icu::RegexMatcher> m(impl_->pattern->matcher(u, status));
  const icu::UnicodeString r = m->replaceAll(icu::UnicodeString(), status);
  if (U_FAILURE(status))
    throw InputError(
        fmt::format("invalid_symbol: the regular expression failed: {}", u_errorName(status)));
  r.toUTF8String(out);
  return out;
}

// ---- sacrebleu tokenizers -------------------------------------------------------------------

std::string sacrebleu_tokenize(SacreTokenizer t, std::string_view line) {
  switch (t) {
    case SacreTokenizer::None:
      return std::string(line);
    case SacreTokenizer::Char: {
      // " ".join(line): the caller's split drops the whitespace characters themselves.
      std::string out;
      for (std::size_t i = 0; i < line.size();) {
        const std::size_t at = i;
        decode_at(line, i);
        if (at != 0) out += ' ';
        out.append(line.substr(at, i - at));
      }
      return out;
    }
    case SacreTokenizer::T13a: {
      std::string s(line);
      replace_all(s, "<skipped>", "");
      replace_all(s, "-\n", "");
      replace_all(s, "\n", " ");
      if (s.find('&') != std::string::npos) {
        replace_all(s, "&quot;", "\"");
        replace_all(s, "&amp;", "&");
        replace_all(s, "&lt;", "<");
        replace_all(s, "&gt;", ">");
      }
      std::u32string u = U" ";
      decode_utf8(s, u);
      u += U' ';
      // tokenizer_re.TokenizerRegexp, pattern by pattern.
      u = pad_class(u, [](char32_t c) {
        return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
               (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == 0x2F;
      });
      const auto dot_comma = [](char32_t c) { return c == U'.' || c == U','; };
      const auto non_digit = [](char32_t c) { return !ascii_digit(c); };
      u = sub_pair(u, non_digit, dot_comma, false, true);
      u = sub_pair(u, dot_comma, non_digit, true, false);
      u = sub_pair(
          u, ascii_digit, [](char32_t c) { return c == U'-'; }, false, true);
      return encode(u);
    }
    case SacreTokenizer::Intl: {
      std::u32string u;
      decode_utf8(line, u);
      const auto number = [](char32_t c) { return gc_in(c, U_GC_N_MASK); };
      const auto not_number = [&](char32_t c) { return !number(c); };
      const auto punct = [](char32_t c) { return gc_in(c, U_GC_P_MASK); };
      u = sub_pair(u, not_number, punct, false, true);
      u = sub_pair(u, punct, not_number, true, false);
      u = pad_class(u, [](char32_t c) { return gc_in(c, U_GC_S_MASK); });
      return encode(u);
    }
  }
  return std::string(line);
}

namespace {

// TercomTokenizer.ASIAN_PUNCT and FULL_WIDTH_PUNCT.
bool tercom_asian_punct(char32_t c) {
  return c == 0x3001 || c == 0x3002 || (c >= 0x3008 && c <= 0x3011) ||
         (c >= 0x3014 && c <= 0x301F) || (c >= 0xFF61 && c <= 0xFF65) || c == 0x30FB;
}
bool tercom_full_width_punct(char32_t c) {
  return c == 0xFF0E || c == 0xFF0C || c == 0xFF1F || c == 0xFF1A || c == 0xFF1B || c == 0xFF01 ||
         c == 0xFF02 || c == 0xFF08 || c == 0xFF09;
}
// The character classes _normalize_asian pads with spaces. Its three kana rules are anchored at
// the start of the string, which after _normalize_general_and_western is a space: they never
// match, and are left out.
bool tercom_asian_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x31C0 && c <= 0x31EF) || (c >= 0x2E80 && c <= 0x2EFF) ||
         (c >= 0x3300 && c <= 0x33FF) || (c >= 0xF900 && c <= 0xFAFF) ||
         (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0x3200 && c <= 0x3F22) || tercom_asian_punct(c) ||
         tercom_full_width_punct(c);
}

}  // namespace

std::string tercom_tokenize(const TercomOptions& o, std::string_view sent) {
  if (sent.empty()) return {};
  std::string s = o.case_sensitive ? std::string(sent) : py_lower(sent);
  std::u32string u;
  if (o.normalized) {
    replace_all(s, "\n-", "");
    replace_all(s, "\n", " ");
    replace_all(s, "&quot;", "\"");
    replace_all(s, "&amp;", "&");
    replace_all(s, "&lt;", "<");
    replace_all(s, "&gt;", ">");
    u = U" ";
    decode_utf8(s, u);
    u += U' ';
    u = pad_class(u, [](char32_t c) {
      return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
             (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == 0x2F;
    });
    {  // "'s " -> " 's " ('s$ cannot match: the string ends with the space added above)
      std::u32string out;
      for (std::size_t i = 0; i < u.size();) {
        if (i + 2 < u.size() && u[i] == U'\'' && u[i + 1] == U's' && u[i + 2] == U' ') {
          out += U" 's ";
          i += 3;
        } else {
          out += u[i++];
        }
      }
      u.swap(out);
    }
    const auto dot_comma = [](char32_t c) { return c == U'.' || c == U','; };
    const auto non_digit = [](char32_t c) { return !ascii_digit(c); };
    u = sub_pair(u, non_digit, dot_comma, false, true);
    u = sub_pair(u, dot_comma, non_digit, true, false);
    u = sub_pair(
        u, ascii_digit, [](char32_t c) { return c == U'-'; }, false, true);
    if (o.asian_support) u = pad_class(u, tercom_asian_char);
  } else {
    decode_utf8(s, u);
  }
  if (o.no_punct) {
    std::u32string out;
    for (const char32_t c : u) {
      const bool punct = c == U'.' || c == U',' || c == U'?' || c == U':' || c == U';' ||
                         c == U'!' || c == U'"' || c == U'(' || c == U')';
      if (punct) continue;
      if (o.asian_support && (tercom_asian_punct(c) || tercom_full_width_punct(c))) continue;
      out += c;
    }
    u.swap(out);
  }
  std::string joined = encode(u);
  std::vector<std::string_view> words;
  py_split(joined, words);
  std::string out;
  for (const auto w : words) {
    if (!out.empty()) out += ' ';
    out.append(w);
  }
  return out;
}

// ---- sequences ------------------------------------------------------------------------------

void NgramIds::extend(const std::vector<std::int32_t>& prev,
                      const std::vector<std::int32_t>& tokens, int n,
                      std::vector<std::int32_t>& out) {
  out.clear();
  const auto len = static_cast<std::int64_t>(tokens.size());
  for (std::int64_t i = 0; i + n <= len; ++i) {
    const std::uint64_t key =
        (static_cast<std::uint64_t>(static_cast<std::uint32_t>(prev[static_cast<std::size_t>(i)]))
         << 32) |
        static_cast<std::uint32_t>(tokens[static_cast<std::size_t>(i + n - 1)]);
    const auto [it, added] = table_.try_emplace(key, static_cast<std::int32_t>(table_.size()));
    (void)added;
    out.push_back(it->second);
  }
}

std::int64_t SequenceMatcher::matched(const std::vector<std::int32_t>& a,
                                      const std::vector<std::int32_t>& b, std::int32_t alphabet) {
  a_ = &a;
  b_ = &b;
  const auto la = static_cast<std::int64_t>(a.size());
  const auto lb = static_cast<std::int64_t>(b.size());
  const auto k = static_cast<std::size_t>(alphabet);
  // b2j: the positions of each element in b, ascending; "popular" elements (more than 1% + 1 of
  // a b of 200 or more) are left out, as difflib's autojunk does.
  start_.assign(k + 1, 0);
  for (const auto x : b) ++start_[static_cast<std::size_t>(x) + 1];
  if (lb >= 200) {
    const std::int64_t ntest = lb / 100 + 1;
    for (std::size_t x = 1; x <= k; ++x)
      if (start_[x] > ntest) start_[x] = 0;
  }
  for (std::size_t x = 0; x < k; ++x) start_[x + 1] += start_[x];
  pos_.resize(static_cast<std::size_t>(lb));
  std::vector<std::int64_t>& fill = cursor_;
  fill.assign(start_.begin(), start_.end() - 1);
  for (std::int64_t j = 0; j < lb; ++j) {
    const auto x = static_cast<std::size_t>(b[static_cast<std::size_t>(j)]);
    if (fill[x] < start_[x + 1]) pos_[static_cast<std::size_t>(fill[x]++)] = j;
  }
  for (auto& v : len_) v.assign(static_cast<std::size_t>(lb), 0);
  for (auto& v : stamp_) v.assign(static_cast<std::size_t>(lb), -1);

  std::int64_t total = 0;
  queue_.clear();
  queue_.push_back({0, la, 0, lb});
  while (!queue_.empty()) {
    const Span s = queue_.back();
    queue_.pop_back();
    const Match m = longest(s.alo, s.ahi, s.blo, s.bhi);
    if (m.k == 0) continue;
    total += m.k;
    if (s.alo < m.i && s.blo < m.j) queue_.push_back({s.alo, m.i, s.blo, m.j});
    if (m.i + m.k < s.ahi && m.j + m.k < s.bhi)
      queue_.push_back({m.i + m.k, s.ahi, m.j + m.k, s.bhi});
  }
  return total;
}

SequenceMatcher::Match SequenceMatcher::longest(std::int64_t alo, std::int64_t ahi,
                                                std::int64_t blo, std::int64_t bhi) {
  const auto& a = *a_;
  const auto& b = *b_;
  std::int64_t besti = alo, bestj = blo, bestsize = 0;
  ++row_;  // a row no one wrote: j2len starts empty
  for (std::int64_t i = alo; i < ahi; ++i) {
    const std::int64_t r = ++row_;
    auto& cur_len = len_[r & 1];
    auto& cur_stamp = stamp_[r & 1];
    const auto& prev_len = len_[(r - 1) & 1];
    const auto& prev_stamp = stamp_[(r - 1) & 1];
    const auto x = static_cast<std::size_t>(a[static_cast<std::size_t>(i)]);
    if (x + 1 >= start_.size()) continue;
    for (std::int64_t p = start_[x]; p < start_[x + 1]; ++p) {
      const std::int64_t j = pos_[static_cast<std::size_t>(p)];
      if (j < blo) continue;
      if (j >= bhi) break;
      const auto ju = static_cast<std::size_t>(j);
      const std::int64_t k = (j > 0 && prev_stamp[ju - 1] == r - 1 ? prev_len[ju - 1] : 0) + 1;
      cur_len[ju] = k;
      cur_stamp[ju] = r;
      if (k > bestsize) besti = i - k + 1, bestj = j - k + 1, bestsize = k;
    }
  }
  // Extend over equal elements on both sides (no junk: isjunk is None).
  while (besti > alo && bestj > blo &&
         a[static_cast<std::size_t>(besti - 1)] == b[static_cast<std::size_t>(bestj - 1)])
    --besti, --bestj, ++bestsize;
  while (besti + bestsize < ahi && bestj + bestsize < bhi &&
         a[static_cast<std::size_t>(besti + bestsize)] ==
             b[static_cast<std::size_t>(bestj + bestsize)])
    ++bestsize;
  return {besti, bestj, bestsize};
}

std::int64_t Levenshtein::distance(const std::vector<std::int32_t>& a,
                                   const std::vector<std::int32_t>& b, std::int32_t alphabet) {
  const auto m = static_cast<std::int64_t>(a.size());
  const auto n = static_cast<std::int64_t>(b.size());
  if (m == 0) return n;
  if (n == 0) return m;
  const auto words = static_cast<std::size_t>((m + 63) / 64);
  const std::size_t need = static_cast<std::size_t>(alphabet) * words;
  if (peq_.size() < need) peq_.resize(need, 0);
  for (std::int64_t i = 0; i < m; ++i)
    peq_[static_cast<std::size_t>(a[static_cast<std::size_t>(i)]) * words +
         static_cast<std::size_t>(i / 64)] |= std::uint64_t{1} << (i % 64);
  vp_.assign(words, ~std::uint64_t{0});
  vn_.assign(words, 0);
  const std::uint64_t last = std::uint64_t{1} << ((m - 1) % 64);
  std::int64_t dist = m;
  for (const auto c : b) {
    const std::uint64_t* pm = peq_.data() + static_cast<std::size_t>(c) * words;
    std::uint64_t hp_carry = 1, hn_carry = 0;
    for (std::size_t w = 0; w < words; ++w) {
      const std::uint64_t vn = vn_[w], vp = vp_[w];
      const std::uint64_t x = pm[w] | hn_carry;
      const std::uint64_t d0 = (((x & vp) + vp) ^ vp) | x | vn;
      std::uint64_t hp = vn | ~(d0 | vp);
      std::uint64_t hn = d0 & vp;
      const std::uint64_t hp_in = hp_carry, hn_in = hn_carry;
      if (w + 1 < words) {
        hp_carry = hp >> 63;
        hn_carry = hn >> 63;
      } else {
        dist += static_cast<std::int64_t>((hp & last) != 0);
        dist -= static_cast<std::int64_t>((hn & last) != 0);
      }
      hp = (hp << 1) | hp_in;
      hn = (hn << 1) | hn_in;
      vp_[w] = hn | ~(d0 | hp);
      vn_[w] = hp & d0;
    }
  }
  for (std::int64_t i = 0; i < m; ++i)
    peq_[static_cast<std::size_t>(a[static_cast<std::size_t>(i)]) * words +
         static_cast<std::size_t>(i / 64)] = 0;
  return dist;
}

}  // namespace tally::text
