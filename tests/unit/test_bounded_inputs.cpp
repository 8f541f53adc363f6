// Bounded parsers and sizes (issue 16): YAML alias bombs and deep nesting (configs, --set values,
// tolerances), results and baseline JSON nested too deep, numbers out of range and values of the
// wrong type, .npy headers (nesting, size, dimensions), a mapped .npy truncated while it is read,
// and every metric's size parameters. Each is an error naming the place, never a crash, a hang or
// unbounded memory.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "config.hpp"
#include "metric_harness.hpp"
#include "registry.hpp"
#include "results_io.hpp"
#include "support/expect_error.hpp"
#include "support/npy.hpp"
#include "support/process.hpp"
#include "tally/reports/compare.hpp"
#include "tally/sdk/error.hpp"

namespace fs = std::filesystem;
using tally::Config;
using tally::ConfigError;
using tally::InputError;
using tally::Value;
using tally::test::error_of;
using tally::test::TempDir;
using tally::test::write_text;

namespace {

// ---- YAML ---------------------------------------------------------------------------------------

// "Billion laughs": `levels` anchors, each a list of `fan` aliases of the one before: fan^levels
// nodes from a few hundred bytes. As flow lists, one per line ("a: &a [...]").
std::string laughs_lines(int levels = 9, int fan = 9, const std::string& indent = "") {
  std::string out = indent + "l0: &l0 [" + std::string("lol") + "]\n";
  for (int i = 1; i <= levels; ++i) {
    out += indent + "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int j = 0; j < fan; ++j) out += (j ? ", *l" : "*l") + std::to_string(i - 1);
    out += "]\n";
  }
  return out;
}

// The same with maps (block style): each level a map of `fan` keys, each an alias of the level
// before.
std::string laughs_maps(int levels = 9, int fan = 9) {
  std::string out = "m0: &m0 {x: lol}\n";
  for (int i = 1; i <= levels; ++i) {
    out += "m" + std::to_string(i) + ": &m" + std::to_string(i) + "\n";
    for (int j = 0; j < fan; ++j)
      out += "  k" + std::to_string(j) + ": *m" + std::to_string(i - 1) + "\n";
  }
  return out;
}

std::string nested(std::size_t depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

std::string nested_maps(std::size_t depth) {
  std::string out;
  for (std::size_t i = 0; i < depth; ++i) out += "{a: ";
  out += "1";
  out += std::string(depth, '}');
  return out;
}

const std::string kMetrics = "metrics:\n  - type: Accuracy\n";

std::string parse_error(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  return error_of<ConfigError>([&] { Config::parse(yaml, "eval.yaml", "/tmp", sets); });
}

TEST(YamlBounds, AliasBombsInAConfigAreRefusedNamingThePlace) {
  const std::string expands = "expands to more than 1000000 nodes (YAML aliases?)";
  // Top level, inside a section, block-style maps, a list of lists, a metric parameter.
  for (const std::string& yaml : {
           kMetrics + laughs_lines(),
           kMetrics + "backend:\n  type: nondist\n  extra:\n" + laughs_lines(9, 9, "    "),
           kMetrics + laughs_maps(),
           kMetrics + "backend: {x: [&a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1], &b [*a, *a, *a, *a, *a, "
                      "*a, *a, *a, *a, *a], &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b], &d [*c, "
                      "*c, *c, *c, *c, *c, *c, *c, *c, *c], &e [*d, *d, *d, *d, *d, *d, *d, *d, "
                      "*d, *d], &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e], &g [*f, *f, *f, *f, "
                      "*f, *f, *f, *f, *f, *f]]}\n",
           "metrics:\n  - type: Accuracy\n    topk: &t [1, 2]\n" + laughs_lines(12, 4),
           // Just past the bound: 2 * 2^19 + ... nodes, from 20 levels of two aliases.
           kMetrics + laughs_lines(20, 2),
       }) {
    SCOPED_TRACE(yaml.substr(0, 120));
    const std::string msg = parse_error(yaml);
    EXPECT_HAS(msg, expands);
    EXPECT_HAS(msg, "eval.yaml:");  // file:line:column
  }
}

TEST(YamlBounds, LongScalarsAliasedManyTimesAreRefused) {
  // Few nodes, many bytes: a 1 MiB string aliased 100 times (a map and a list of aliases).
  const std::string big(std::size_t{1} << 20, 'x');
  std::string list = "  x: &s " + big + "\n  y: [";
  for (int i = 0; i < 100; ++i) list += i == 0 ? "*s" : ", *s";
  list += "]\n";
  std::string map = "  x: &s " + big + "\n";
  for (int i = 0; i < 100; ++i) map += "  k" + std::to_string(i) + ": *s\n";
  for (const std::string& body : {list, map}) {
    const std::string msg = parse_error(kMetrics + "backend:\n  type: nondist\n" + body);
    EXPECT_HAS(msg, "expands to more than 64 MiB of text (YAML aliases?)");
    EXPECT_HAS(msg, "eval.yaml:");
  }
}

TEST(YamlBounds, AliasesThatExpandWithinTheBoundStillWork) {
  const Config c = Config::parse(kMetrics + "backend:\n  type: nondist\n  x: " + "&a [1, 2]\n" +
                                     "  y: [*a, *a, *a]\n" + laughs_lines(4, 4, "  "),
                                 "eval.yaml", "/tmp");
  const tally::Located* y = c.backend_params.child("y");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->value.to_json(), "[[1,2],[1,2],[1,2]]");
  ASSERT_NE(c.backend_params.child("l4"), nullptr);
  EXPECT_EQ(c.backend_params.child("l4")->value.size(), 4u);
}

TEST(YamlBounds, AnAliasInsideTheNodeItNamesIsRefused) {
  for (const std::string& yaml : {kMetrics + "backend: &a {x: *a}\n", kMetrics + "x: &a [*a]\n",
                                  kMetrics + "x: &a [1, [2, *a]]\n"}) {
    SCOPED_TRACE(yaml);
    EXPECT_HAS(parse_error(yaml), "a YAML alias refers to a node that contains it");
  }
}

TEST(YamlBounds, DeepNestingIsRefusedNamingThePlace) {
  for (const std::size_t depth : {65u, 2001u, 100000u}) {
    SCOPED_TRACE(depth);
    for (const std::string& value : {nested(depth), nested_maps(depth)}) {
      const std::string msg = parse_error(kMetrics + "backend: {x: " + value + "}\n");
      EXPECT_HAS(msg, "nested deeper than 64 levels");
      EXPECT_HAS(msg, "eval.yaml:3:");
    }
  }
  // Block style (indentation).
  std::string block = kMetrics + "backend:\n";
  for (int i = 1; i < 80; ++i) block += std::string(static_cast<std::size_t>(i) * 2, ' ') + "a:\n";
  EXPECT_HAS(parse_error(block), "nested deeper than 64 levels");
  // 64 levels in all (the section itself is one): accepted.
  const Config ok = Config::parse(kMetrics + "backend: {x: " + nested(62) + "}\n", "e", "/tmp");
  EXPECT_TRUE(ok.backend_params.child("x")->value.is_array());
}

TEST(YamlBounds, SetValuesAreBoundedToo) {
  const std::string bomb =
      "[&a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1], &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a], &c [*b, "
      "*b, *b, *b, *b, *b, *b, *b, *b, *b], &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c], &e [*d, "
      "*d, *d, *d, *d, *d, *d, *d, *d, *d], &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e], &g [*f, "
      "*f, *f, *f, *f, *f, *f, *f, *f, *f]]";
  EXPECT_HAS(parse_error(kMetrics, {"metrics.0.topk=" + bomb}),
             "--set metrics.0.topk: the document expands to more than 1000000 nodes");
  EXPECT_HAS(parse_error(kMetrics, {"backend.x=" + nested(100000)}),
             "--set backend.x: nested deeper than 64 levels");
  EXPECT_HAS(parse_error(kMetrics, {"backend.x=" + nested_maps(3000)}),
             "--set backend.x: nested deeper than 64 levels");
  EXPECT_HAS(parse_error(kMetrics, {"x=&a [*a]"}), "--set x: a YAML alias refers to a node");
  // A key of many components would nest as deep.
  std::string key = "backend";
  for (int i = 0; i < 100000; ++i) key += ".a";
  EXPECT_HAS(parse_error(kMetrics, {key + "=1"}), "components, expected at most 64");
}

TEST(YamlBounds, TolerancesFilesAndInlineTolerancesAreBounded) {
  TempDir dir;
  const auto file = dir / "tol.yaml";
  for (const std::string& text : {laughs_lines(), laughs_maps(), "x: " + nested(100000) + "\n",
                                  "x: " + nested_maps(100000) + "\n"}) {
    write_text(file, text);
    tally::Tolerances t;
    const std::string msg = error_of<ConfigError>([&] { t.add_file(file); });
    EXPECT_HAS(msg, file.string() + ":");
    EXPECT_TRUE(msg.find("expands to more than") != std::string::npos ||
                msg.find("nested deeper than") != std::string::npos)
        << msg;
  }
  EXPECT_HAS(parse_error(kMetrics + "regression:\n  baseline: b.json\n  tolerances:\n" +
                         laughs_lines(9, 9, "    ")),
             "expands to more than");
}

TEST(YamlNumbers, NumbersOutOfTheRangeOfADoubleAreNotInfinity) {
  const Config c = Config::parse(kMetrics + "backend: {a: 1e999, b: -1e400, c: 1e308, d: 1e-999}\n",
                                 "eval.yaml", "/tmp");
  EXPECT_EQ(c.backend_params.child("a")->value, Value("1e999"));
  EXPECT_EQ(c.backend_params.child("b")->value, Value("-1e400"));
  EXPECT_EQ(c.backend_params.child("c")->value, Value(1e308));
  EXPECT_EQ(c.backend_params.child("d")->value.as_double(), 0.0);  // underflow: zero
  // Where a number is expected, the schema check names what was found.
  for (const char* v : {"1e999", "[0.5, -1e999]"}) {
    SCOPED_TRACE(v);
    EXPECT_HAS(error_of<ConfigError>([&] {
                 tally::test::make_metric(
                     "Accuracy", Config::parse(kMetrics + "    thrs: " + v + "\n", "e", "/tmp")
                                     .metrics[0]
                                     .params.value.as_map());
               }),
               "parameter 'thrs' expects float");
  }
}

// ---- results JSON ---------------------------------------------------------------------------

std::string results_error(TempDir& dir, const std::string& text) {
  const auto p = dir / "baseline.json";
  write_text(p, text);
  return error_of<InputError>([&] { tally::read_results_json(p); });
}

std::string results_with(const std::string& value) {
  return "{\"results\": {\"Accuracy\": {\"top1\": " + value + "}}, \"run\": {}}\n";
}

TEST(ResultsJson, DeepNestingIsRefusedNamingTheFileAndLine) {
  TempDir dir;
  for (const std::size_t depth : {65u, 1000u, 100000u}) {
    SCOPED_TRACE(depth);
    std::string maps;
    for (std::size_t i = 0; i < depth; ++i) maps += "{\"a\": ";
    maps += "1" + std::string(depth, '}');
    for (const std::string& json : {nested(depth), maps}) {
      const std::string msg = results_error(dir, results_with(json));
      EXPECT_HAS(msg, "baseline.json");
      EXPECT_HAS(msg, "line 1, column");
      EXPECT_HAS(msg, "nested deeper than 64 levels");
    }
  }
  // 64 levels in all (results, the label and the key take three): accepted.
  const auto p = dir / "ok.json";
  write_text(p, results_with(nested(61)));
  EXPECT_TRUE(tally::read_results_json(p).metrics.find("Accuracy")->find("top1")->is_array());
}

TEST(ResultsJson, NumbersOutOfRangeAreRefusedNamingTheFileAndLine) {
  TempDir dir;
  for (const char* number : {"1e999", "-1e999", "1.5e309", "[0.5, 2e400]"}) {
    SCOPED_TRACE(number);
    const std::string msg = results_error(dir, results_with(number));
    EXPECT_HAS(msg, "baseline.json");
    EXPECT_HAS(msg, "line 1, column");
    EXPECT_HAS(msg, "number overflow");
  }
}

TEST(ResultsJson, NanAndInfinityWordsAreRefusedWithAHint) {
  TempDir dir;
  for (const char* word : {"NaN", "Infinity", "-Infinity", "[1, NaN]"}) {
    SCOPED_TRACE(word);
    const std::string msg = results_error(dir, results_with(word));
    EXPECT_HAS(msg, "baseline.json' is not valid JSON");
    EXPECT_HAS(msg, "is not a JSON value: write null for NaN");
  }
}

TEST(ResultsJson, ValuesThatAreNotNumbersAreRefusedNamingTheKeyPath) {
  TempDir dir;
  EXPECT_HAS(results_error(dir, results_with("\"0.93\"")),
             "\"results.Accuracy.top1\" is the string \"0.93\", expected a number");
  EXPECT_HAS(results_error(dir, results_with("[0.5, \"x\"]")),
             "\"results.Accuracy.top1[1]\" is the string \"x\"");
  EXPECT_HAS(results_error(dir, results_with("true")),
             "\"results.Accuracy.top1\" is the boolean true");
  EXPECT_HAS(results_error(dir, results_with("{\"a\": {\"b\": \"c\"}}")),
             "\"results.Accuracy.top1.a.b\" is the string \"c\"");
  EXPECT_HAS(results_error(dir, "{\"results\": {\"Accuracy\": \"high\"}}"),
             "\"results.Accuracy\" is the string \"high\"");
  // Numbers, null (NaN), arrays, maps, and a curve's axis titles are results.
  const auto p = dir / "ok.json";
  write_text(p, results_with("{\"n\": 3, \"f\": 0.5, \"nan\": null, \"a\": [[1, 2]], \"curve\": "
                             "{\"x\": [0, 1], \"y\": [1, 0], \"x_label\": \"recall\", "
                             "\"y_label\": \"precision\"}}"));
  EXPECT_EQ(tally::read_results_json(p).metrics.find("Accuracy")->find("top1")->size(), 5u);
}

// ---- .npy headers -------------------------------------------------------------------------------

// An .npy file (format 1.0 or 2.0) with header dict `dict` and `data` after it.
std::string npy_with_header(const std::string& dict, const std::string& data = {}) {
  const bool v2 = dict.size() + 11 > 65535;
  std::string header = dict + "\n";
  std::string out = "\x93NUMPY";
  out += v2 ? '\x02' : '\x01';
  out += '\0';
  for (std::size_t i = 0; i < (v2 ? 4u : 2u); ++i)
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string npy_error(TempDir& dir, const std::string& bytes) {
  const auto p = dir / "x.npy";
  write_text(p, bytes);
  return tally::test::read_error([&] {
    return tally::test::make_fields_reader("npy", {{"x", p}}, 4);
  });
}

TEST(NpyHeader, DeepNestingIsRefused) {
  TempDir dir;
  // 10^5 levels take more than the largest header (64 KiB): refused for that, unparsed.
  for (const std::size_t depth : {17u, 1000u, 30000u, 100000u}) {
    SCOPED_TRACE(depth);
    for (const std::string& dict :
         {"{'descr': '<f4', 'fortran_order': False, 'shape': " + nested(depth, '(', ')') + "}",
          "{'descr': " + nested(depth) + ", 'fortran_order': False, 'shape': (1,)}",
          "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': " +
              std::string(depth / 2, '(') + nested(depth - depth / 2) +
              std::string(depth / 2, ')') + "}"}) {
      const std::string msg = npy_error(dir, npy_with_header(dict));
      EXPECT_HAS(msg, "x.npy");
      EXPECT_HAS(msg, depth < 50000 ? "nested deeper than 16 levels" : "expected at most 65536");
    }
  }
}

TEST(NpyHeader, HeadersAndShapesBeyondWhatNumPyWritesAreRefused) {
  TempDir dir;
  // A header longer than any NumPy writes (also when the file is as long as it claims).
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}";
  dict.append(70000, ' ');
  EXPECT_HAS(npy_error(dir, npy_with_header(dict, "abcd")), "expected at most 65536");
  std::string preamble = "\x93NUMPY\x02";
  preamble += '\0';
  preamble += std::string("\xff\xff\xff\x7f", 4);  // a 2 GiB header, the file a few bytes
  EXPECT_HAS(npy_error(dir, preamble + "{}"), "expected at most 65536");
  // More dimensions than NumPy allows.
  std::string shape = "(";
  for (int i = 0; i < 65; ++i) shape += "1, ";
  shape += ")";
  EXPECT_HAS(
      npy_error(
          dir, npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + "}")),
      "'shape' has 65 dimensions, expected at most 64");
  // Sizes whose product overflows.
  for (const char* s : {"(4294967296, 4294967296)", "(9223372036854775807, 2)",
                        "(2, 3037000500, 3037000500)", "(1, 9223372036854775807)"}) {
    SCOPED_TRACE(s);
    EXPECT_HAS(
        npy_error(
            dir, npy_with_header(std::string("{'descr': '<f8', 'fortran_order': False, 'shape': ") +
                                 s + "}")),
        "is too large");
  }
  EXPECT_HAS(npy_error(dir, npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': "
                                            "(99999999999999999999,)}")),
             "integer out of range");
}

// ---- a mapped .npy truncated while it is read --------------------------------------------------

void read_everything(tally::Reader& reader) {
  volatile unsigned char sink = 0;
  while (auto batch = reader.next()) {
    const tally::Tensor& t = batch->tensor("x");
    const auto* bytes = static_cast<const unsigned char*>(t.data());
    for (std::size_t i = 0; i < t.nbytes(); i += 512)
      sink = static_cast<unsigned char>(sink ^ bytes[i]);
  }
}

TEST(NpyTruncatedWhileRead, ExitsWithOneLineNamingTheFile) {
  TempDir dir;
  const auto p = dir / "scores.npy";
  const std::int64_t rows = 4096, cols = 256;  // 4 MiB of float32
  tally::test::write_npy(p, std::vector<float>(static_cast<std::size_t>(rows * cols), 0.5f),
                         {rows, cols});
  // Truncated to a few pages, to the header alone, to nothing, while a batch (a view of the
  // mapping) is being read. (Truncated between batches, the reader's size check throws first:
  // NpyReaderTest.AFileShortenedWithinItsLastPageWhileReadIsARuntimeError.)
  for (const std::uintmax_t size :
       {std::uintmax_t{65536}, std::uintmax_t{128}, std::uintmax_t{0}}) {
    SCOPED_TRACE(size);
    EXPECT_EXIT(
        {
          auto reader = tally::test::make_fields_reader("npy", {{"x", p}}, 64);
          reader->next();
          const auto batch = reader->next();  // rows 64..127: bytes 65664..131199
          fs::resize_file(p, size);
          const tally::Tensor& t = batch->tensor("x");
          const float* v = t.data_as<float>();
          volatile float sum = 0;
          for (std::int64_t i = 0; i < t.numel(); ++i) sum = sum + v[i];
          std::_Exit(0);  // not reached: the truncated pages fault
        },
        ::testing::ExitedWithCode(1),
        "tally: error: npy reader: field 'x' \\(.*scores\\.npy\\): the file was truncated while "
        "it was read");
    tally::test::write_npy(p, std::vector<float>(static_cast<std::size_t>(rows * cols), 0.5f),
                           {rows, cols});
  }
}

TEST(NpyTruncatedWhileRead, TheHandlerIsThereOnlyWhileAFileIsMapped) {
  TempDir dir;
  const auto p = dir / "x.npy";
  tally::test::write_npy(p, std::vector<float>(64, 1.0f));
  struct sigaction before {};
  ASSERT_EQ(sigaction(SIGBUS, nullptr, &before), 0);
  {
    auto reader = tally::test::make_fields_reader("npy", {{"x", p}}, 8);
    struct sigaction during {};
    ASSERT_EQ(sigaction(SIGBUS, nullptr, &during), 0);
    EXPECT_TRUE((during.sa_flags & SA_SIGINFO) != 0);
    EXPECT_NE(reinterpret_cast<void*>(during.sa_sigaction),
              reinterpret_cast<void*>(before.sa_sigaction));
    read_everything(*reader);
  }
  struct sigaction after {};
  ASSERT_EQ(sigaction(SIGBUS, nullptr, &after), 0);
  EXPECT_EQ(reinterpret_cast<void*>(after.sa_sigaction),
            reinterpret_cast<void*>(before.sa_sigaction));
}

// ---- size parameters ----------------------------------------------------------------------------

// A value of each type for the parameters a metric needs (the first choice, where it has some).
Value filler(const tally::ParamSpec& p) {
  using T = tally::ParamType;
  switch (p.type) {
    case T::Bool:
      return Value(false);
    case T::Int:
      return Value(3);
    case T::Float:
      return Value(0.5);
    case T::String:
    case T::Path:
      return p.choices.empty() ? Value("x") : Value(p.choices.front());
    case T::IntList:
      return Value(Value::Array{Value(1)});
    case T::FloatList:
      return Value(Value::Array{Value(0.5)});
    case T::StringList:
      return Value(Value::Array{p.choices.empty() ? Value("x") : Value(p.choices.front())});
    case T::StringMap:
    case T::PathMap:
      return Value::map();
    case T::Any:
      break;
  }
  return Value();
}

// The parameters that size an allocation, by name (the test fails when one is left unbounded).
bool is_size(const std::string& name) {
  for (const char* s : {"num_classes", "num_thrs", "topk", "n_gram", "proposal_nums", "threads",
                        "bins", "crop_border", "num_keypoints"})
    if (name == s) return true;
  return false;
}

TEST(SizeParameters, EveryIntegerParameterOfEveryMetricIsBoundedBeforeAllocating) {
  const std::int64_t huge = 1'000'000'000'000;
  std::size_t sizes_checked = 0;
  for (const auto& c : tally::test::registry().components()) {
    if (c.info->kind != tally::ComponentKind::Metric) continue;
    Value::Map base;
    for (const auto& p : c.info->params)
      if (p.required()) base.emplace_back(p.name, filler(p));
    for (const auto& p : c.info->params) {
      if (p.type != tally::ParamType::Int && p.type != tally::ParamType::IntList) continue;
      SCOPED_TRACE(c.info->name + "." + p.name);
      Value::Map given;
      for (const auto& [k, v] : base)
        if (k != p.name) given.emplace_back(k, v);
      given.emplace_back(
          p.name, p.type == tally::ParamType::Int ? Value(huge) : Value(Value::Array{Value(huge)}));
      std::string error;
      try {
        auto m = tally::test::make_metric(c.info->name, given);
        m->reset();  // the state: whatever a parameter sizes is allocated here at the latest
      } catch (const ConfigError& e) {
        error = e.what();
      }
      if (is_size(p.name)) {
        ++sizes_checked;
        EXPECT_HAS(error, "parameter '" + p.name + "' must be at most");
        EXPECT_HAS(error, "got 1000000000000");
        EXPECT_HAS(error, c.info->name);
      }
    }
  }
  EXPECT_GE(sizes_checked, 10u);
}

TEST(SizeParameters, TheBoundIsOneConstantAndNamesTheParameter) {
  const tally::Params p("metric 'm' (X)", {{"n", Value(std::int64_t{1} << 21)},
                                           {"l", Value(Value::Array{Value(2), Value(-1)})},
                                           {"s", Value("x")}});
  EXPECT_EQ(error_of<ConfigError>([&] { p.get_size("n"); }),
            "metric 'm' (X): parameter 'n' must be at most 1048576, got 2097152");
  EXPECT_EQ(error_of<ConfigError>([&] { p.get_size("n", 1, 100, "why"); }),
            "metric 'm' (X): parameter 'n' must be at most 100 (why), got 2097152");
  // A bound above kMaxSize is kMaxSize.
  EXPECT_HAS(error_of<ConfigError>([&] { p.get_size("n", 1, std::int64_t{1} << 40); }),
             "at most 1048576");
  EXPECT_EQ(error_of<ConfigError>([&] { p.get_size_list("l"); }),
            "metric 'm' (X): parameter 'l' must be >= 1, got -1");
  EXPECT_HAS(error_of<ConfigError>([&] { p.get_size("s"); }), "expects an integer");
  EXPECT_EQ(p.get_size_list("l", -1).size(), 2u);
}

}  // namespace
