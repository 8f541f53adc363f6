// The detection plugin's VOCMeanAP and ProposalRecall, loaded as the real plugin library through
// the Registry: values against mmeval, independence from the number of ranks, bad input.
//
// Expected values come from tests/reference/expected_voc.json, written by tests/reference/voc.py
// with mmeval 0.2.1 (each case records its exact mmeval call) on tests/data/detection/
// voc_data.json (float32 boxes and scores, no tied scores).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() { return expected_json("tests/reference/expected_voc.json"); }

/// voc_data.json as a batch: one sample per image, ragged fields (float32 boxes and scores,
/// int64 labels).
const Batch& voc_data() {
  static const Batch b = [] {
    const Json images = load_json(source_path(expected_file().at("data").get<std::string>()));
    Batch out;
    for (const char* name : {"pred_bboxes", "gt_bboxes", "gt_bboxes_ignore"})
      out.set_ragged(name, json_ragged_floats(images, name, 4));
    out.set_ragged("pred_scores", json_ragged_floats(images, "pred_scores", 0));
    for (const char* name : {"pred_labels", "gt_labels", "gt_labels_ignore"})
      out.set_ragged(name, json_ragged_ints(images, name));
    return out;
  }();
  return b;
}

class VocCase : public ::testing::TestWithParam<std::string> {};

TEST_P(VocCase, MatchesMmevalOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  const std::string type = c.at("metric").get<std::string>();
  const Value::Map params = to_map(c.at("params"));
  const auto make = [&] { return make_metric(type, params); };
  const Batch& data = voc_data();
  const Value one = run_ranks(make, data, contiguous_shards(data.size(), 1));
  expect_matches(one, c.at("expected"), GetParam(), type, 1e-12);
  for (int ranks : {2, 3, 4, 7})
    EXPECT_EQ(run_ranks(make, data, contiguous_shards(data.size(), ranks)), one) << ranks;
  RunOptions small;
  small.batch_size = 3;
  small.add_empty_batches = true;
  EXPECT_EQ(run_ranks(make, data, contiguous_shards(data.size(), 4, 2), small), one)
      << "4 ranks, rank 2 empty, batches of 3";
  print_rel_diffs("mmeval 0.2.1");
}

INSTANTIATE_TEST_SUITE_P(Mmeval, VocCase,
                         ::testing::Values("voc_area", "voc_11points_scales", "voc_legacy_keep",
                                           "voc_legacy_scales", "recall_default",
                                           "recall_nums_thrs", "recall_legacy"));

Batch one_image(double score, std::int64_t label) {
  Batch b;
  b.set_ragged("pred_bboxes", {Tensor::from_vector(std::vector<double>{0, 0, 10, 10}, {1, 4})});
  b.set_ragged("pred_scores", {Tensor::from_vector(std::vector<double>{score})});
  b.set_ragged("pred_labels", {Tensor::from_vector(std::vector<std::int64_t>{label})});
  b.set_ragged("gt_bboxes", {Tensor::from_vector(std::vector<double>{0, 0, 10, 10}, {1, 4})});
  b.set_ragged("gt_labels", {Tensor::from_vector(std::vector<std::int64_t>{0})});
  return b;
}

TEST(VOCMeanAP, DocExample) {
  const auto m = [] { return make_metric("VOCMeanAP", {{"num_classes", Value(1)}}); };
  const Batch b = one_image(0.9, 0);
  const Value r = run_ranks(m, b, contiguous_shards(1, 1));
  EXPECT_EQ(r.at("AP50").as_double(), 1.0);
  EXPECT_EQ(r.at("mAP").as_double(), 1.0);
  const auto pr = [] { return make_metric("ProposalRecall", {}); };
  const Value r2 = run_ranks(pr, b, contiguous_shards(1, 1));
  EXPECT_EQ(r2.at("AR@1").as_double(), 1.0);
}

TEST(VOCMeanAP, BadInputIsAnInputError) {
  auto m = make_metric("VOCMeanAP", {{"num_classes", Value(1)}});
  EXPECT_THROW(m->add(one_image(std::nan(""), 0)), InputError);
  EXPECT_THROW(m->add(one_image(0.5, 3)), InputError);
  Batch b = one_image(0.5, 0);
  b.set_ragged("gt_bboxes_ignore", {Tensor::from_vector(std::vector<double>{0, 0, 1, 1}, {1, 4})});
  EXPECT_THROW(m->add(b), InputError);  // labels of the ignored boxes missing
  Batch nolabels;
  nolabels.set_ragged("pred_bboxes",
                      {Tensor::from_vector(std::vector<double>{0, 0, 10, 10}, {1, 4})});
  EXPECT_THROW(m->add(nolabels), InputError);
  EXPECT_THROW(make_metric("VOCMeanAP", {}), ConfigError);  // num_classes is required
  EXPECT_THROW(make_metric("VOCMeanAP", {{"num_classes", Value(2)}, {"eval_mode", Value("x")}}),
               ConfigError);
  EXPECT_THROW(make_metric("VOCMeanAP",
                           {{"num_classes", Value(2)}, {"scale_ranges", Value::Array{Value(1)}}}),
               ConfigError);
  auto pr = make_metric("ProposalRecall", {});
  Batch bad = one_image(0.5, 0);
  bad.set_ragged("gt_bboxes", {Tensor::from_vector(std::vector<double>{0, 0, 10}, {1, 3})});
  EXPECT_THROW(pr->add(bad), InputError);
  EXPECT_THROW(make_metric("ProposalRecall", {{"proposal_nums", Value::Array{Value(0)}}}),
               ConfigError);
}

}  // namespace
}  // namespace tally::test
