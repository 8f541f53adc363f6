#include "tally/text_safety.hpp"

#include <cstdint>

#include <fmt/format.h>

#include "tally/sdk/error.hpp"

namespace tally {

namespace {

// The length of the well-formed UTF-8 sequence at text[i] (Unicode 15, table 3-7), 0 if none.
std::size_t sequence_length(std::string_view text, std::size_t i) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (text.size() - i < n) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

std::uint32_t code_point(std::string_view seq) noexcept {
  const auto b = [&](std::size_t k) { return static_cast<std::uint32_t>(seq[k]) & 0xFFu; };
  switch (seq.size()) {
    case 1:
      return b(0);
    case 2:
      return ((b(0) & 0x1Fu) << 6) | (b(1) & 0x3Fu);
    case 3:
      return ((b(0) & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
    default:
      return ((b(0) & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) |
             (b(3) & 0x3Fu);
  }
}

void append_bytes_escaped(std::string& out, std::string_view bytes) {
  for (const char c : bytes) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
}

bool moves_the_cursor(std::uint32_t cp) noexcept {
  return cp == 0x2028 || cp == 0x2029 ||                // line and paragraph separators
         (cp >= 0x202A && cp <= 0x202E) ||              // bidi embeddings and overrides
         (cp >= 0x2066 && cp <= 0x2069) ||              // bidi isolates
         cp == 0x200E || cp == 0x200F || cp == 0x061C;  // direction marks
}

template <class OnValid>
std::string escape(std::string_view text, OnValid on_valid) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t n = sequence_length(text, i);
    if (n == 0) {
      append_bytes_escaped(out, text.substr(i, 1));
      ++i;
      continue;
    }
    on_valid(out, text.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

std::optional<std::size_t> invalid_utf8_offset(std::string_view text) noexcept {
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t n = sequence_length(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

void require_utf8(std::string_view text, std::string_view where, std::string_view what) {
  const auto bad = invalid_utf8_offset(text);
  if (!bad) return;
  throw ConfigError(fmt::format("{}: {} is not valid UTF-8: byte 0x{:02x} at offset {} (\"{}\")",
                                where, what, static_cast<unsigned char>(text[*bad]), *bad,
                                escape_for_terminal(text)));
}

std::string escape_invalid_utf8(std::string_view text) {
  return escape(text, [](std::string& out, std::string_view seq) { out += seq; });
}

std::string escape_for_terminal(std::string_view text) {
  return escape(text, [](std::string& out, std::string_view seq) {
    const std::uint32_t cp = code_point(seq);
    if ((cp < 0x20 && cp != '\t') || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F))
      append_bytes_escaped(out, seq);
    else if (moves_the_cursor(cp))
      out += fmt::format("\\u{{{:04x}}}", cp);
    else
      out += seq;
  });
}

}  // namespace tally
