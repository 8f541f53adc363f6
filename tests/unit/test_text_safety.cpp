// Text from outside (configs, file names, plugins, data): the UTF-8 check that config text passes
// before any work, and the escaping of what is only reported (tally/text_safety.hpp).
#include <gtest/gtest.h>

#include <string>

#include "config.hpp"
#include "tally/sdk/error.hpp"
#include "tally/text_safety.hpp"

using tally::escape_for_terminal;
using tally::escape_invalid_utf8;
using tally::invalid_utf8_offset;

TEST(TextSafety, WellFormedUtf8IsValid) {
  for (const std::string& s : std::vector<std::string>{
           "", "plain ascii", "caf\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac", "\xf0\x9f\x98\x80",
           "\xf4\x8f\xbf\xbf" /* U+10FFFF */, "\xed\x9f\xbf" /* U+D7FF */, "\xee\x80\x80",
           std::string("nul\0inside", 10), "\x1b[31m" /* controls are valid UTF-8 */}) {
    EXPECT_EQ(invalid_utf8_offset(s), std::nullopt) << escape_for_terminal(s);
    EXPECT_EQ(escape_invalid_utf8(s), s);
  }
}

TEST(TextSafety, IllFormedUtf8IsFoundAtItsOffset) {
  const std::pair<std::string, std::size_t> cases[] = {
      {"\xff", 0},
      {"ab\xfe", 2},
      {"ab\x80", 2},                 // a stray continuation byte
      {"abc\xc3", 3},                // truncated at the end
      {"abc\xc3x", 3},               // a lead byte without its continuation
      {"\xe6\x97", 0},               // truncated 3-byte sequence
      {"x\xc0\x80", 1},              // overlong NUL
      {"x\xc1\xbf", 1},              // overlong
      {"\xe0\x80\x80", 0},           // overlong 3-byte
      {"\xf0\x80\x80\x80", 0},       // overlong 4-byte
      {"ok \xed\xa0\x80", 3},        // a UTF-16 surrogate
      {"\xf4\x90\x80\x80", 0},       // above U+10FFFF
      {"\xf5\x80\x80\x80", 0},       // never a lead byte
      {"caf\xc3\xa9 \xe9t\xe9", 6},  // Latin-1 after valid UTF-8
  };
  for (const auto& [text, offset] : cases) {
    EXPECT_EQ(invalid_utf8_offset(text), offset) << escape_for_terminal(text);
    EXPECT_EQ(invalid_utf8_offset(escape_invalid_utf8(text)), std::nullopt);
  }
  EXPECT_EQ(escape_invalid_utf8("caf\xc3\xa9 \xe9t\xe9"), "caf\xc3\xa9 \\xe9t\\xe9");
  EXPECT_EQ(escape_invalid_utf8("a\xc3"), "a\\xc3");
  EXPECT_EQ(escape_invalid_utf8("\xed\xa0\x80"), "\\xed\\xa0\\x80");
}

TEST(TextSafety, ControlCharactersNeverReachATerminalRaw) {
  EXPECT_EQ(escape_for_terminal("\x1b[2J\x1b[31mred"), "\\x1b[2J\\x1b[31mred");
  EXPECT_EQ(escape_for_terminal("a\rb\nc\bd\x07"), "a\\x0db\\x0ac\\x08d\\x07");
  EXPECT_EQ(escape_for_terminal(std::string("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(escape_for_terminal("del\x7f"), "del\\x7f");
  EXPECT_EQ(escape_for_terminal("tab\tkept"), "tab\tkept");
  // C1 controls: as UTF-8 (U+009B, CSI) and as a raw byte (not UTF-8).
  EXPECT_EQ(escape_for_terminal("\xc2\x9b"
                                "2J"),
            "\\xc2\\x9b2J");
  EXPECT_EQ(escape_for_terminal("\x9b"
                                "2J"),
            "\\x9b2J");
  EXPECT_EQ(escape_for_terminal("\xc2\x85"), "\\xc2\\x85");
  // Code points that reorder or break the line.
  EXPECT_EQ(escape_for_terminal("abc\xe2\x80\xae"
                                "fed"),
            "abc\\u{202e}fed");
  EXPECT_EQ(escape_for_terminal("\xe2\x80\xa8"), "\\u{2028}");
  EXPECT_EQ(escape_for_terminal("\xe2\x81\xa6"), "\\u{2066}");
  // Printable text is kept as it is.
  for (const std::string s : {"Accuracy top1", "caf\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac",
                              "\xc2\xb1 0.01", "\xf0\x9f\x98\x80", "\xc2\xa0nbsp"})
    EXPECT_EQ(escape_for_terminal(s), s);
  // Whatever the bytes, the result has no control byte and is valid UTF-8.
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::string shown = escape_for_terminal(all + "\xc2\x80\xc2\x9f");
  EXPECT_EQ(invalid_utf8_offset(shown), std::nullopt);
  for (const char c : shown) {
    const auto u = static_cast<unsigned char>(c);
    EXPECT_FALSE((u < 0x20 && c != '\t') || u == 0x7f) << static_cast<int>(u);
  }
  EXPECT_EQ(shown.find("\xc2\x80"), std::string::npos);
}

TEST(TextSafety, RequireUtf8NamesWhereWhatAndTheOffset) {
  EXPECT_NO_THROW(tally::require_utf8("fine \xc3\xa9", "eval.yaml:3:5", "the value"));
  try {
    tally::require_utf8("ab\xff\x1b", "eval.yaml:3:5", "the value of 'name'");
    FAIL() << "no error";
  } catch (const tally::ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "eval.yaml:3:5: the value of 'name' is not valid UTF-8: byte 0xff at offset 2 "
                 "(\"ab\\xff\\x1b\")");
  }
}

namespace {
std::string parse_error(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  try {
    tally::Config::parse(yaml, "eval.yaml", ".", sets);
  } catch (const tally::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

// Config text (labels, data paths, any key or value) must be UTF-8, as YAML says: refused before
// any work, naming the place, the key and the byte offset; not an exit 1 from a JSON writer after
// the run.
TEST(TextSafety, ConfigTextThatIsNotUtf8IsRefusedNamingTheKeyAndOffset) {
  const std::string data = "data:\n  type: npy\n  fields:\n    x: x.npy\n";
  struct Case {
    std::string yaml, expected;
  };
  const Case cases[] = {
      {data + "metrics:\n  - type: Accuracy\n    name: top\xff"
              "1\n",
       "eval.yaml:7:11: the value of 'name' is not valid UTF-8: byte 0xff at offset 3"},
      {"data:\n  type: npy\n  fields:\n    x: scores\xe9.npy\n",
       "eval.yaml:4:8: the value of 'x' is not valid UTF-8: byte 0xe9 at offset 6"},
      {"data:\n  type: npy\n  fields:\n    x\xc3: x.npy\n",
       "eval.yaml:4:5: the key is not valid UTF-8: byte 0xc3 at offset 1 (\"x\\xc3\")"},
      {"plugins:\n  paths: [ok, \"b\xc0\xaf"
       "d\"]\n",
       "eval.yaml:2:15: the value is not valid UTF-8: byte 0xc0 at offset 1"},
      {"output:\n  json: 'r\xed\xa0\x80.json'\n",
       "the value of 'json' is not valid UTF-8: byte 0xed at offset 1"},
  };
  for (const auto& c : cases) {
    const auto msg = parse_error(c.yaml);
    EXPECT_NE(msg.find(c.expected), std::string::npos) << msg;
  }
  // From --set too.
  const auto msg = parse_error(data + "metrics:\n  - type: Accuracy\n", {"metrics.0.name=x\xff"});
  EXPECT_NE(msg.find("is not valid UTF-8: byte 0xff at offset 1"), std::string::npos) << msg;
  // Escapes that YAML turns into controls are valid UTF-8: accepted here, escaped when printed.
  EXPECT_EQ(parse_error(data + "metrics:\n  - type: Accuracy\n    name: \"\\e[31mred\"\n"),
            "(no error)");
}
