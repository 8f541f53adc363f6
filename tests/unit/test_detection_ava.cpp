// AVAMeanAP (plugins/detection/ava_map.cpp), loaded as the real libtally_detection.so through the
// Registry, its predictions read by the real jsonl reader: values against mmeval on 1-7 ranks,
// the documented example, and bad files and inputs.
//
// Expected values come from tests/reference/expected_ava.json, written by tests/reference/ava.py
// with mmeval 0.2.1 (versions and the exact call are recorded in the file), unless a test says
// otherwise.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "support/expect_error.hpp"
#include "support/process.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() { return expected_json("tests/reference/expected_ava.json"); }

/// Every line of a jsonl file of the source tree as one batch, read by the jsonl reader.
Batch load_lines(const std::string& relative) {
  auto reader = make_reader("jsonl", {{"path", Value(source_path(relative).string())},
                                      {"batch_size", Value(std::int64_t{1} << 20)}});
  auto batch = reader->next();
  return batch ? *batch : Batch{};
}

/// A case's parameters with its file paths made absolute (they are relative to the repository).
Value::Map params_of(const Json& c) {
  Value::Map m = to_map(c.at("params"));
  for (auto& [k, v] : m)
    if (k.ends_with("_file")) v = Value(source_path(v.as_string()).string());
  return m;
}

const RankSweep kSweep{{std::int64_t{1} << 30, 7}, 5, 3};

class AvaReference : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map (mmeval.AVAMeanAP over the same frames; the call is in the
// case's "call").
TEST_P(AvaReference, MatchesMmevalOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  const Value got = run_all_rank_counts("AVAMeanAP", params_of(c),
                                        load_lines(c.at("data").get<std::string>()), {}, kSweep);
  expect_matches(got, c.at("expected"), GetParam(), "AVAMeanAP");
  print_rel_diffs("mmeval");
}

INSTANTIATE_TEST_SUITE_P(Ava, AvaReference, ::testing::ValuesIn(case_names(expected_file())),
                         param_name);

class AvaFiles : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const auto p = dir_ / name;
    write_text(p, text);
    return p.string();
  }
  TempDir dir_;
};

Batch frame(const std::string& video, std::int64_t t, std::vector<double> boxes,
            std::vector<double> scores, std::vector<std::int64_t> labels) {
  Batch b;
  b.set_text("video_id", Text::from_flat({video}, {0, 1}));
  b.set("timestamp", Tensor::from_vector<std::int64_t>({t}));
  const auto n = static_cast<std::int64_t>(scores.size());
  b.set_ragged("pred_bboxes", {Tensor::from_vector(boxes, {n, 4})});
  b.set_ragged("pred_scores", {Tensor::from_vector(scores, {n})});
  b.set_ragged("pred_labels", {Tensor::from_vector(labels, {n})});
  return b;
}

// Expected, by hand: one ground-truth box of action 1 predicted exactly (IoU 1) -> AP 1 for action
// 1, the only class with ground truth -> mAP 1; a second, lower-scored copy of the box is a false
// positive after the true one: precision 1 at recall 1 still -> mAP 1; the box predicted for action
// 3 (no ground truth) does not count.
TEST_F(AvaFiles, HandCheckedFrame) {
  const Value::Map p{{"ann_file", write("gt.csv", "vid,0902,0.1,0.2,0.5,0.9,1,0\n")},
                     {"label_file", write("map.pbtxt",
                                          "item {\n  name: \"a\"\n  id: 1\n}\n"
                                          "item {\n  name: \"b\"\n  id: 3\n}\n")},
                     {"classwise", true}};
  const Value r =
      run_single("AVAMeanAP", p,
                 frame("vid", 902, {0.1, 0.2, 0.5, 0.9, 0.1, 0.2, 0.5, 0.9, 0.1, 0.2, 0.5, 0.9},
                       {0.9, 0.5, 0.7}, {0, 0, 2}));
  EXPECT_EQ(r.at("mAP@0.5IOU").as_double(), 1.0);
  EXPECT_EQ(r.at("AP@0.5IOU_classwise").at("a").as_double(), 1.0);
  EXPECT_TRUE(std::isnan(r.at("AP@0.5IOU_classwise").at("b").as_double()));
}

// The integer columns (timestamp, action id) fit in int64 or are an error naming the file, row
// and column: a 23-digit timestamp would saturate and name another frame. Spaces around and a '+'
// are read as Python's int() reads them.
TEST_F(AvaFiles, IntegerColumnsAreRangeChecked) {
  const std::string map = write("map.pbtxt", "item {\n  name: \"a\"\n  id: 1\n}\n");
  const auto ava = [&](const std::string& ann, const std::string& exclude) {
    Value::Map p{{"ann_file", write("ann.csv", ann)}, {"label_file", map}};
    if (!exclude.empty()) p.emplace_back("exclude_file", write("exclude.csv", exclude));
    return config_error("AVAMeanAP", p);
  };
  const std::string box = "0.1,0.1,0.5,0.5";
  EXPECT_EQ(ava("v1,0902," + box + ",1\n", ""), "");
  EXPECT_EQ(ava("v1, +902 ," + box + ",1\n", "v1, 0903\n"), "");
  for (const std::string ts :
       {"12345678901234567890123", "-99999999999999999999", "9223372036854775808"}) {
    SCOPED_TRACE(ts);
    EXPECT_HAS(ava("v1,0902," + box + ",1\nv1," + ts + "," + box + ",1\n", ""),
               "parameter 'ann_file' row 2 column timestamp: the integer '" + ts +
                   "' is out of range (expected [-9223372036854775808, 9223372036854775807])");
    EXPECT_HAS(ava("v1,0902," + box + ",1\n", "v1," + ts + "\n"),
               "parameter 'exclude_file' row 1 column timestamp: the integer '" + ts +
                   "' is out of range");
  }
  EXPECT_HAS(ava("v1,0902," + box + ",100000000000000000000000\n", ""),
             "row 1 column action_id: the integer '100000000000000000000000' is out of range");
  for (const std::string bad : {"9.5", "0x10", "12a", "--1", "+-1"})
    EXPECT_HAS(
        ava("v1," + bad + "," + box + ",1\n", ""),
        "parameter 'ann_file' row 1 column timestamp: expected an integer, found '" + bad + "'");
  EXPECT_HAS(config_error("AVAMeanAP", {{"ann_file", write("one.csv", "v1,0902," + box + ",1\n")},
                                        {"label_file", write("big.pbtxt",
                                                             "item {\n  name: \"a\"\n  id: "
                                                             "99999999999999999999999\n}\n")}}),
             "parameter 'label_file' line 3: expected an id from 1 to 2^20");
}

TEST_F(AvaFiles, BadFilesAndInputsAreNamed) {
  const std::string map = write("map.pbtxt", "item {\n  name: \"a\"\n  id: 1\n}\n");
  const std::string gt = write("gt.csv", "vid,0902,0.1,0.2,0.5,0.9,1,0\n");
  EXPECT_HAS(config_error("AVAMeanAP", {{"ann_file", write("bad.csv", "vid,0902,0.1,0.2\n")},
                                        {"label_file", map}}),
             "parameter 'ann_file' row 1: expected 7 or 8 columns, found 4");
  EXPECT_HAS(
      config_error("AVAMeanAP", {{"ann_file", write("bad2.csv", "vid,0902,0.1,x,0.5,0.9,1,0\n")},
                                 {"label_file", map}}),
      "row 1: expected a number, found 'x'");
  EXPECT_HAS(config_error("AVAMeanAP", {{"ann_file", gt}, {"label_file", write("e.pbtxt", "")}}),
             "parameter 'label_file' lists no class");
  EXPECT_HAS(
      config_error("AVAMeanAP",
                   {{"ann_file", gt}, {"label_file", map}, {"custom_classes", Value::Array{5}}}),
      "parameter 'custom_classes' holds 5, which the label map does not list");
  EXPECT_HAS(config_error("AVAMeanAP", {{"ann_file", gt},
                                        {"label_file", map},
                                        {"exclude_file", write("x.csv", "vid\n")}}),
             "parameter 'exclude_file' row 1: expected 2 columns");
  EXPECT_HAS(config_error("AVAMeanAP",
                          {{"ann_file", (dir_ / "missing.csv").string()}, {"label_file", map}}),
             "cannot open (no such file)");
  const Value::Map ok{{"ann_file", gt}, {"label_file", map}};
  EXPECT_HAS(input_error("AVAMeanAP", ok, frame("vid", 902, {0.1, 0.2, 0.5, 0.9}, {0.9}, {-1})),
             "metric 'AVAMeanAP': field 'pred_labels' sample 0 holds -1");
  EXPECT_HAS(
      input_error("AVAMeanAP", ok, frame("vid", 902, {0.1, 0.2, 0.5, 0.9}, {std::nan("")}, {0})),
      "field 'pred_scores' sample 0 holds NaN or an infinity");
  Batch wrong = frame("vid", 902, {0.1, 0.2, 0.5, 0.9}, {0.9}, {0});
  wrong.set_ragged("pred_scores", {Tensor::from_vector<double>({0.9, 0.8}, {2})});
  EXPECT_HAS(input_error("AVAMeanAP", ok, wrong), "field 'pred_scores' sample 0 must be [1]");
}

}  // namespace
}  // namespace tally::test
