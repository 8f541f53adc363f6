// The detection plugin's OIDMeanAP, loaded as the real plugin library through the Registry:
// values against mmeval, independence from the number of ranks, bad input and bad hierarchy files.
//
// Expected values come from tests/reference/expected_oid.json, written by tests/reference/oid.py
// with mmeval 0.2.1 (each case records its exact mmeval call) on tests/data/detection/
// oid_data.json (40 images, float32 boxes and scores, no tied scores, group-of boxes, image-level
// labels) and the class hierarchy tests/data/detection/oid_hierarchy.json + oid_labels.csv.
// Case oid_thrs_scales_group: mmeval 0.2.1 raises on it; its values come from mmeval's code with
// the bookkeeping fixed (OIDMeanAPFixed in oid.py; see the case's "note").
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() { return expected_json("tests/reference/expected_oid.json"); }

/// oid_data.json as a batch: one sample per image, ragged fields (float32 boxes and scores,
/// int64 labels, group-of flags and image-level labels).
const Batch& oid_data() {
  static const Batch b = [] {
    const Json images = load_json(source_path(expected_file().at("data").get<std::string>()));
    Batch out;
    for (const char* name : {"pred_bboxes", "gt_bboxes"})
      out.set_ragged(name, json_ragged_floats(images, name, 4));
    out.set_ragged("pred_scores", json_ragged_floats(images, "pred_scores", 0));
    for (const char* name : {"pred_labels", "gt_labels", "gt_is_group_of", "gt_image_level_labels"})
      out.set_ragged(name, json_ragged_ints(images, name));
    return out;
  }();
  return b;
}

/// A case's params with the hierarchy files as absolute paths (the config would resolve them
/// against its folder).
Value::Map case_params(const Json& c) {
  Value::Map p = to_map(c.at("params"));
  for (auto& [k, v] : p)
    if (k == "hierarchy_file" || k == "label_file") v = Value(source_path(v.as_string()).string());
  return p;
}

class OidCase : public ::testing::TestWithParam<std::string> {};

// Every case equal to mmeval bit for bit (relative difference 0), on 1, 2, 3, 4 and 7 ranks in
// batches of every size, with an empty rank (run_all_rank_counts: bit for bit).
TEST_P(OidCase, MatchesMmevalOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  const std::string type = c.at("metric").get<std::string>();
  RankSweep sweep;
  sweep.batch_sizes = {std::int64_t{1} << 30, 3};
  sweep.empty_rank_batch_size = 2;
  sweep.first_rank_empty_batch_size = 5;
  const Value got = run_all_rank_counts(type, case_params(c), oid_data(), {}, sweep);
  expect_matches(got, c.at("expected"), GetParam(), type, 0.0);
  print_rel_diffs(c.contains("note") ? "mmeval 0.2.1 (fixed, see note)" : "mmeval 0.2.1");
}

INSTANTIATE_TEST_SUITE_P(Mmeval, OidCase, ::testing::ValuesIn(case_names(expected_file())),
                         param_name);

std::string data_file(const std::string& name) {
  return source_path("tests/data/detection/" + name).string();
}

Value::Map with_hierarchy(Value::Map p) {
  p.emplace_back("hierarchy_file", Value(data_file("oid_hierarchy.json")));
  p.emplace_back("label_file", Value(data_file("oid_labels.csv")));
  return p;
}

Batch one_image(double score, std::int64_t pred_label, std::int64_t gt_label) {
  Batch b;
  b.set_ragged("pred_bboxes", {Tensor::from_vector(std::vector<double>{0, 0, 10, 10}, {1, 4})});
  b.set_ragged("pred_scores", {Tensor::from_vector(std::vector<double>{score})});
  b.set_ragged("pred_labels", {Tensor::from_vector(std::vector<std::int64_t>{pred_label})});
  b.set_ragged("gt_bboxes", {Tensor::from_vector(std::vector<double>{0, 0, 10, 10}, {1, 4})});
  b.set_ragged("gt_labels", {Tensor::from_vector(std::vector<std::int64_t>{gt_label})});
  return b;
}

// The header comment's example (worked by hand): Cat (1) is a child of Animal (0) in
// oid_hierarchy.json; the box and the prediction also count as Animal.
TEST(OIDMeanAP, DocExample) {
  const auto params = with_hierarchy({{"num_classes", Value(10)}, {"classwise", Value(true)}});
  const Value r = run_single("OIDMeanAP", params, one_image(0.9, 1, 1));
  EXPECT_EQ(r.at("AP50").as_double(), 1.0);
  EXPECT_EQ(r.at("mAP").as_double(), 1.0);
  const auto& cw = r.at("AP50_classwise").as_array();
  EXPECT_EQ(cw[0].as_double(), 1.0);  // Animal, from the hierarchy
  EXPECT_EQ(cw[1].as_double(), 1.0);  // Cat
  // A Dog prediction on the Cat box: Dog is not in the image, so it is dropped, but its copy as
  // Animal (an ancestor of Dog, and of Cat) takes the box's Animal copy: Cat AP 0, Animal AP 1.
  const Value r2 =
      run_single("OIDMeanAP", with_hierarchy({{"num_classes", Value(10)}}), one_image(0.9, 2, 1));
  EXPECT_EQ(r2.at("AP50").as_double(), 0.5);
  // Without get_supercategory only Cat has ground truth, and the Dog prediction is dropped.
  const Value r3 =
      run_single("OIDMeanAP",
                 with_hierarchy({{"num_classes", Value(10)}, {"get_supercategory", Value(false)}}),
                 one_image(0.9, 2, 1));
  EXPECT_EQ(r3.at("AP50").as_double(), 0.0);
}

// A group-of box takes any number of predictions inside it as one TP (worked by hand): two
// small predictions inside a group-of Person box, one prediction elsewhere (FP).
TEST(OIDMeanAP, GroupOfBoxIsOneTruePositive) {
  Batch b;
  b.set_ragged(
      "pred_bboxes",
      {Tensor::from_vector(std::vector<float>{10, 10, 20, 20, 30, 30, 40, 40, 200, 200, 220, 220},
                           {3, 4})});
  b.set_ragged("pred_scores", {Tensor::from_vector(std::vector<float>{0.9f, 0.8f, 0.7f})});
  b.set_ragged("pred_labels", {Tensor::from_vector(std::vector<std::int64_t>{0, 0, 0})});
  b.set_ragged("gt_bboxes", {Tensor::from_vector(std::vector<float>{0, 0, 100, 100}, {1, 4})});
  b.set_ragged("gt_labels", {Tensor::from_vector(std::vector<std::int64_t>{0})});
  b.set_ragged("gt_is_group_of", {Tensor::from_vector(std::vector<std::int64_t>{1})});
  const Value r = run_single("OIDMeanAP", {{"num_classes", Value(1)}}, b);
  EXPECT_EQ(r.at("AP50").as_double(), 1.0);       // entries: TP (.9), FP (.7): recall 1 at prec 1
  Tensor flag = Tensor::zeros(DType::Bool, {1});  // the flags as bool: the same
  static_cast<bool*>(flag.mutable_data())[0] = true;
  Batch bb = b;
  bb.set_ragged("gt_is_group_of", {flag});
  EXPECT_EQ(run_single("OIDMeanAP", {{"num_classes", Value(1)}}, bb).at("AP50").as_double(), 1.0);
  const Value r2 =
      run_single("OIDMeanAP", {{"num_classes", Value(1)}, {"use_group_of", Value(false)}}, b);
  EXPECT_EQ(r2.at("AP50").as_double(), 0.0);  // no prediction has IoU >= .5 with the box
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("tally_oid_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            std::to_string(reinterpret_cast<std::uintptr_t>(this)));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return (path / name).string();
  }
};

TEST(OIDMeanAP, BadInputIsAnInputError) {
  const Value::Map p = with_hierarchy({{"num_classes", Value(10)}});
  EXPECT_NE(input_error("OIDMeanAP", p, one_image(std::nan(""), 1, 1)).find("NaN"),
            std::string::npos);
  EXPECT_NE(input_error("OIDMeanAP", p, one_image(0.5, 10, 1))
                .find("field 'pred_labels' sample 0: class id 10 is outside [0, 10)"),
            std::string::npos);
  EXPECT_NE(input_error("OIDMeanAP", p, one_image(0.5, 1, -1)).find("field 'gt_labels'"),
            std::string::npos);
  Batch b = one_image(0.5, 1, 1);
  b.set_ragged("gt_is_group_of", {Tensor::from_vector(std::vector<std::int64_t>{1, 0})});
  EXPECT_NE(input_error("OIDMeanAP", p, b)
                .find("field 'gt_is_group_of' sample 0: has 2 values, "
                      "expected 1"),
            std::string::npos);
  b.set_ragged("gt_is_group_of", {Tensor::from_vector(std::vector<std::int64_t>{2})});
  EXPECT_NE(input_error("OIDMeanAP", p, b).find("flags must be 0 / 1"), std::string::npos);
  Batch c = one_image(0.5, 1, 1);
  c.set_ragged("gt_image_level_labels", {Tensor::from_vector(std::vector<std::int64_t>{3, 12})});
  EXPECT_NE(input_error("OIDMeanAP", p, c).find("field 'gt_image_level_labels'"),
            std::string::npos);
  Batch d = one_image(0.5, 1, 1);
  d.set_ragged("gt_bboxes", {Tensor::from_vector(std::vector<double>{0, 0, 10}, {1, 3})});
  EXPECT_NE(input_error("OIDMeanAP", p, d).find("field 'gt_bboxes' sample 0: must be [n, 4]"),
            std::string::npos);
  Batch nolabels;
  nolabels.set_ragged("pred_bboxes",
                      {Tensor::from_vector(std::vector<double>{0, 0, 10, 10}, {1, 4})});
  nolabels.set_ragged("pred_scores", {Tensor::from_vector(std::vector<double>{0.5})});
  EXPECT_NE(input_error("OIDMeanAP", p, nolabels).find("'pred_labels' is missing"),
            std::string::npos);
}

TEST(OIDMeanAP, BadParametersAndHierarchyFilesAreConfigErrors) {
  const auto err = [](Value::Map p) { return config_error("OIDMeanAP", p); };
  EXPECT_NE(err({}).find("num_classes"), std::string::npos);
  EXPECT_NE(
      err({{"num_classes", Value(2)}, {"iou_thrs", Value::Array{Value(0.5), Value(0.75)}}})
          .find("parameter 'iof_thrs' must have one threshold per IoU threshold (2), found 1"),
      std::string::npos);
  EXPECT_NE(err({{"num_classes", Value(2)}, {"hierarchy_file", Value(data_file("x.json"))}})
                .find("parameter 'label_file' is missing"),
            std::string::npos);
  EXPECT_NE(err({{"num_classes", Value(2)}, {"eval_mode", Value("x")}}), "");
  // The test hierarchy has 10 classes.
  EXPECT_NE(err(with_hierarchy({{"num_classes", Value(9)}}))
                .find("parameter 'label_file' has 10 classes (rows), num_classes is 9"),
            std::string::npos);
  TempDir dir;
  const std::string labels = data_file("oid_labels.csv");
  const auto hier = [&](const std::string& json) {
    return err({{"num_classes", Value(10)},
                {"hierarchy_file", Value(dir.write("h.json", json))},
                {"label_file", Value(labels)}});
  };
  EXPECT_NE(hier("{\"Subcategory\": [").find("parameter 'hierarchy_file' is not valid JSON"),
            std::string::npos);
  EXPECT_NE(hier("{\"Subcategory\": [{\"LabelName\": \"/m/nope\"}]}")
                .find("root.Subcategory[0]: label name '/m/nope' is not in label_file"),
            std::string::npos);
  EXPECT_NE(hier("{\"Subcategory\": {\"LabelName\": \"/m/0jbk\"}}")
                .find("\"Subcategory\" must be a list"),
            std::string::npos);
  EXPECT_NE(hier(std::string(300, '[') + std::string(300, ']')).find("nested deeper than 256"),
            std::string::npos);
  EXPECT_EQ(hier("{\"LabelName\": \"/m/0bl9f\"}"), "");  // no subcategories: no hierarchy
  EXPECT_NE(err({{"num_classes", Value(10)},
                 {"hierarchy_file", Value(dir.path.string() + "/missing.json")},
                 {"label_file", Value(labels)}})
                .find("cannot open"),
            std::string::npos);
  EXPECT_NE(err({{"num_classes", Value(10)},
                 {"hierarchy_file", Value(dir.path.string())},
                 {"label_file", Value(labels)}})
                .find("not a regular file"),
            std::string::npos);
  const auto csv = [&](const std::string& text, std::int64_t n) {
    return err({{"num_classes", Value(n)},
                {"hierarchy_file", Value(dir.write("e.json", "{}"))},
                {"label_file", Value(dir.write("l.csv", text))}});
  };
  EXPECT_EQ(csv("/m/a,A\r\n/m/b,\"B, b\"\r\n", 2), "");
  EXPECT_NE(csv("/m/a,A\n/m/a,B\n", 2).find("row 2: label name '/m/a' is listed twice"),
            std::string::npos);
  EXPECT_NE(csv("/m/a,A\n\n/m/b,B\n", 3).find("row 2: expected 2 columns"), std::string::npos);
  EXPECT_NE(csv("/m/a\n", 1).find("row 1: expected 2 columns"), std::string::npos);
}

}  // namespace
}  // namespace tally::test
