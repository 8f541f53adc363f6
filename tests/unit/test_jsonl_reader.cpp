// The jsonl reader plugin (plugins/readers/jsonl), loaded through the registry, on .jsonl files
// written here: every value kind, dotted paths and flattened keys, dtype and dense/ragged rules,
// CRLF, a byte-order mark, UTF-8, blank lines, an empty file, sharding over 1..4 ranks, and bad
// files with the messages they must give.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "config.hpp"
#include "metric_harness.hpp"
#include "registry.hpp"
#include "support/process.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/reader.hpp"

namespace fs = std::filesystem;
using tally::DType;
using tally::ShardInfo;
using tally::Value;

namespace {

class JsonlReaderTest : public ::testing::Test {
 protected:
  fs::path write(const std::string& text, const std::string& name = "d.jsonl") const {
    const fs::path p = dir_ / name;
    tally::test::write_text(p, text);
    return p;
  }

  static std::shared_ptr<tally::Reader> make_reader(
      const fs::path& path, const std::vector<std::pair<std::string, std::string>>& fields = {},
      std::int64_t batch_size = 4096, ShardInfo shard = {}) {
    Value::Map given{{"path", path.string()}, {"batch_size", Value(static_cast<long>(batch_size))}};
    if (!fields.empty()) {
      Value::Map m;
      for (const auto& [k, v] : fields) m.emplace_back(k, v);
      given.emplace_back("fields", Value(m));
    }
    return tally::test::make_reader("jsonl", given, shard);
  }

  // The message of the InputError that opening or reading gives, "" if none.
  static std::string input_error(const fs::path& path,
                                 const std::vector<std::pair<std::string, std::string>>& f = {}) {
    return tally::test::read_error([&] { return make_reader(path, f); });
  }

  tally::test::TempDir dir_;
};

std::vector<std::string> strings_of(const tally::Text& t, std::int64_t i) {
  const auto s = t[i];
  return {s.begin(), s.end()};
}

TEST_F(JsonlReaderTest, EveryKindFromTheFirstLine) {
  const fs::path p = write(
      "{\"pred\": \"a b\", \"refs\": [\"x\", \"y\"], \"ok\": true, \"n\": 3, \"score\": 0.5, "
      "\"kp\": [[1, 2], [3, 4]], \"meta\": {\"id\": 7, \"lang\": \"en\"}}\n"
      "{\"pred\": \"\", \"refs\": [], \"ok\": false, \"n\": -4, \"score\": 2, "
      "\"kp\": [[5, 6.5], [7, 8]], \"meta\": {\"id\": 8, \"lang\": \"de\"}}\n");
  auto reader = make_reader(p);
  EXPECT_EQ(reader->fields(), (std::vector<std::string>{"pred", "refs", "ok", "n", "score", "kp",
                                                        "meta.id", "meta.lang"}));
  EXPECT_EQ(reader->total_samples(), 2);
  auto b = reader->next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(strings_of(b->single_text("pred"), 0), std::vector<std::string>{"a b"});
  EXPECT_EQ(strings_of(b->single_text("pred"), 1), std::vector<std::string>{""});
  EXPECT_EQ(strings_of(b->text("refs"), 0), (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(b->text("refs")[1].empty());
  EXPECT_EQ(b->tensor("ok").dtype(), DType::Bool);
  EXPECT_EQ(b->tensor("ok").data_as<bool>()[1], false);
  EXPECT_EQ(b->tensor("n").dtype(), DType::I64);
  EXPECT_EQ(b->tensor("n").data_as<std::int64_t>()[1], -4);
  EXPECT_EQ(b->tensor("score").dtype(), DType::F64);  // 0.5 then 2: float64
  EXPECT_EQ(b->tensor("score").data_as<double>()[1], 2.0);
  const tally::Tensor& kp = b->tensor("kp");  // one 6.5 makes the whole field float64
  EXPECT_EQ(kp.dtype(), DType::F64);
  EXPECT_EQ(kp.shape(), (std::vector<std::int64_t>{2, 2, 2}));
  EXPECT_EQ(kp.data_as<double>()[5], 6.5);
  EXPECT_EQ(b->tensor("meta.id").data_as<std::int64_t>()[1], 8);
  EXPECT_EQ(strings_of(b->single_text("meta.lang"), 1), std::vector<std::string>{"de"});
  EXPECT_FALSE(reader->next().has_value());
}

TEST_F(JsonlReaderTest, DottedPathsRaggedArraysCrlfBomUtf8) {
  const fs::path p = write(
      "\xEF\xBB\xBF{\"a\": {\"b\": {\"c\": \"caf\\u00e9 \xE4\xB8\xAD\"}}, \"pts\": [1, 2, 3]}\r\n"
      "{\"a\": {\"b\": {\"c\": \"\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3\"}}, \"pts\": [4]}\r\n"
      "\r\n   \n");
  auto reader = make_reader(p, {{"text", "a.b.c"}, {"pts", "pts"}});
  EXPECT_EQ(reader->total_samples(), 2);  // the blank lines at the end are not samples
  auto b = reader->next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->single_text("text")[0][0], "caf\xC3\xA9 \xE4\xB8\xAD");
  EXPECT_EQ(b->single_text("text")[1][0], "\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3");
  ASSERT_TRUE(b->is_ragged("pts"));  // shapes [3] and [1]
  EXPECT_EQ(b->ragged("pts")[0].shape(), std::vector<std::int64_t>{3});
  EXPECT_EQ(b->ragged("pts")[1].data_as<std::int64_t>()[0], 4);
}

// Arrays of true/false (per-box ignore flags) are bool tensors: dense when every line has the same
// shape, ragged otherwise, and `[]` on the first line takes the bool kind from a later line.
TEST_F(JsonlReaderTest, BoolArrays) {
  const fs::path p = write(
      "{\"flags\": [true, false], \"grid\": [[true], [false]], \"late\": []}\n"
      "{\"flags\": [false], \"grid\": [[false], [true]], \"late\": [true, true]}\n");
  auto b = make_reader(p)->next();
  ASSERT_TRUE(b.has_value());
  ASSERT_TRUE(b->is_ragged("flags"));
  EXPECT_EQ(b->ragged("flags")[0].dtype(), DType::Bool);
  EXPECT_EQ(b->ragged("flags")[0].data_as<bool>()[1], false);
  EXPECT_EQ(b->ragged("flags")[1].shape(), std::vector<std::int64_t>{1});
  const tally::Tensor& grid = b->tensor("grid");
  EXPECT_EQ(grid.dtype(), DType::Bool);
  EXPECT_EQ(grid.shape(), (std::vector<std::int64_t>{2, 2, 1}));
  EXPECT_EQ(grid.data_as<bool>()[3], true);
  ASSERT_TRUE(b->is_ragged("late"));
  EXPECT_EQ(b->ragged("late")[0].numel(), 0);
  EXPECT_EQ(b->ragged("late")[1].dtype(), DType::Bool);
  EXPECT_EQ(b->ragged("late")[1].data_as<bool>()[0], true);
}

TEST_F(JsonlReaderTest, ShardsAreContiguousOnOneToFourRanks) {
  std::string text;
  for (int i = 0; i < 23; ++i)
    text += "{\"i\": " + std::to_string(i) + ", \"s\": \"w" + std::to_string(i) + "\"}\n";
  const fs::path p = write(text);
  for (int world = 1; world <= 4; ++world) {
    std::vector<std::int64_t> all;
    for (int rank = 0; rank < world; ++rank) {
      auto reader = make_reader(p, {}, 4, ShardInfo{rank, world});
      const auto range = tally::ShardRange::of(23, ShardInfo{rank, world});
      EXPECT_EQ(reader->shard_samples(), range.size());
      std::int64_t at = range.begin;
      while (auto b = reader->next()) {
        EXPECT_LE(b->size(), 4);
        for (std::int64_t i = 0; i < b->size(); ++i) {
          all.push_back(b->tensor("i").data_as<std::int64_t>()[i]);
          EXPECT_EQ(b->single_text("s")[i][0], "w" + std::to_string(at++));
        }
      }
    }
    ASSERT_EQ(all.size(), 23u) << world;
    for (std::int64_t i = 0; i < 23; ++i) EXPECT_EQ(all[static_cast<std::size_t>(i)], i);
  }
}

TEST_F(JsonlReaderTest, EmptyFile) {
  const fs::path p = write("");
  auto reader = make_reader(p, {{"pred", "pred"}});
  EXPECT_EQ(reader->total_samples(), 0);
  EXPECT_FALSE(reader->next().has_value());
  EXPECT_NE(input_error(p).find("is empty"), std::string::npos);
}

TEST_F(JsonlReaderTest, BadFilesNameFileLineFieldAndProblem) {
  const auto expect_error = [&](const std::string& text, const std::string& want,
                                const std::vector<std::pair<std::string, std::string>>& f = {}) {
    const fs::path p = write(text);
    const std::string got = input_error(p, f);
    EXPECT_NE(got.find(want), std::string::npos) << "got: " << got << "\nwant: " << want;
    EXPECT_NE(got.find(p.string()), std::string::npos) << got;
  };
  expect_error("{\"a\": 1}\n{\"a\": tru}\n", "d.jsonl:2:");  // bad JSON, column
  expect_error("{\"a\": 1}\n{\"a\": tru}\n", "invalid JSON");
  expect_error("{\"a\": \"x\"}\n\n{\"a\": \"y\"}\n", "d.jsonl:2: blank line");
  expect_error("{\"a\": \"x\"}\n[1, 2]\n", "d.jsonl:2: expected a JSON object, found an array");
  expect_error("{\"a\": \"x\"}\n{\"a\": 3}\n",
               "d.jsonl:2: field 'a': expected a string (as on line 1), found a number");
  expect_error("{\"a\": 1}\n{\"a\": \"3\"}\n",
               "d.jsonl:2: field 'a': expected a number (as on line 1), found a string");
  expect_error("{\"a\": [\"x\"]}\n{\"a\": [\"y\", 2]}\n",
               "field 'a': expected a list of strings (as on line 1), found an array holding a "
               "number");
  expect_error("{\"a\": [[1, 2], [3]]}\n", "a ragged nested array");
  expect_error("{\"a\": null}\n", "found null");
  // `[]` on the first line takes its kind from a later line (test_detection_input.cpp); a later
  // line must still agree with it.
  expect_error("{\"a\": []}\n{\"a\": [\"x\", 2]}\n", "d.jsonl:2: field 'a'");
  expect_error("{\"a\": []}\n{\"a\": [null]}\n",
               "d.jsonl:2: field 'a': expected an array of strings, numbers or bools");
  expect_error("{\"a\": [true, 1]}\n",
               "d.jsonl:1: field 'a': expected an array of numbers "
               "(as on line 1), found an array mixing bools and numbers");
  expect_error("{\"a\": [true]}\n{\"a\": []}\n{\"a\": [2]}\n",
               "d.jsonl:3: field 'a': expected an array of numbers (as on line 1), found an array "
               "of numbers where line 1 has bools");
  expect_error("{\"a\": {\"b\": 1}}\n{\"a\": {}}\n", "field 'x' (key 'a.b'): the key is missing",
               {{"x", "a.b"}});
  expect_error("{\"a\": \"\xC3\x28\"}\n", "d.jsonl:1:");  // invalid UTF-8
  EXPECT_THROW(make_reader(dir_ / "missing.jsonl", {{"a", "a"}}), tally::InputError);
  EXPECT_THROW(make_reader(write("{\"a\": 1}\n"), {}, 0), tally::ConfigError);
}

}  // namespace
