// The detection plugin's COCODetection and the coco_json reader, loaded as the real plugin
// libraries through the Registry; and the maskApi.c port (plugins/support: tally_support/mask.hpp).
//
// Expected values:
//   - tests/data/coco_val2014_100/expected.json: the 12 COCOeval stats of pycocotools 2.0.11 for
//     bbox and segm on real COCO val2014 data (published with faster_coco_eval's tests; SOURCE.md
//     there); they must match to 1e-12.
//   - tests/reference/expected_coco.json, written by tests/reference/coco.py with pycocotools
//     2.0.11 / numpy 2.3.5 (each case records its exact COCOeval call): generated data with
//     ties, crowds, id 0, >100 detections per image, custom thresholds and maxDets; and
//     pycocotools.mask results for the RLE port.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"
#include "tally_support/mask.hpp"

namespace tally::test {
namespace {

namespace mask = tally::support::mask;

const Json& expected_file() { return expected_json("tests/reference/expected_coco.json"); }

std::filesystem::path fixture_dir() { return source_path("tests/data/coco_val2014_100"); }

/// Every image of a COCO pair as one batch, through the coco_json reader plugin.
Batch read_coco(const std::filesystem::path& ann, const std::filesystem::path& res,
                const std::string& masks = "auto", ShardInfo shard = {},
                std::int64_t block_bytes = 8 << 20, int threads = 1) {
  auto reader = make_reader("coco_json",
                            {{"annotations", Value(ann.string())},
                             {"results", Value(res.string())},
                             {"masks", Value(masks)},
                             {"batch_size", Value(1 << 30)},
                             {"block_bytes", Value(block_bytes)},
                             {"threads", Value(threads)}},
                            shard, "reader 'coco_json'");
  auto b = reader->next();
  if (!b) return Batch{};
  EXPECT_FALSE(reader->next().has_value());
  return b->clone();
}

std::shared_ptr<Metric> coco(const Value::Map& params) {
  return make_metric("COCODetection", params);
}

Value run_one(const Value::Map& params, const Batch& data, std::int64_t batch_size = 1 << 30) {
  RunOptions opt;
  opt.batch_size = batch_size;
  return run_ranks([&] { return coco(params); }, data, contiguous_shards(data.size(), 1), opt);
}

/// Equal bit for bit, NaN equal to NaN (to_json writes NaN as null, doubles round-trip).
::testing::AssertionResult same(const Value& a, const Value& b) {
  if (a == b || a.to_json() == b.to_json()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << a.to_json() << "\n  vs " << b.to_json();
}

/// The result on 1 rank, then the same bit for bit on 2, 3, 4, 7 ranks, with an empty rank, in
/// other batch sizes and with threads.
Value run_everywhere(Value::Map params, const Batch& data) {
  const Value one = run_one(params, data);
  for (int ranks : {2, 3, 4, 7}) {
    EXPECT_TRUE(same(
        run_ranks([&] { return coco(params); }, data, contiguous_shards(data.size(), ranks)), one))
        << ranks << " ranks";
  }
  RunOptions small;
  small.batch_size = 7;
  small.add_empty_batches = true;
  EXPECT_TRUE(same(
      run_ranks([&] { return coco(params); }, data, contiguous_shards(data.size(), 3, 1), small),
      one))
      << "3 ranks, rank 1 empty, batches of 7";
  params.emplace_back("threads", Value(3));
  EXPECT_TRUE(same(run_one(params, data, 13), one)) << "threads 3, batches of 13";
  return one;
}

// ---- the real-data fixture ---------------------------------------------------------------------

void check_fixture(const std::string& kind, const std::string& results_file) {
  const Json gold = load_json(fixture_dir() / "expected.json");
  const Batch data =
      read_coco(fixture_dir() / "instances_val2014_100.json", fixture_dir() / results_file);
  ASSERT_EQ(data.size(), 100);
  const Value r = run_everywhere({{"metric", Value::Array{Value(kind)}}}, data);
  const std::vector<std::string> names = {"mAP",    "mAP_50",   "mAP_75",   "mAP_s",
                                          "mAP_m",  "mAP_l",    "AR@1",     "AR@10",
                                          "AR@100", "AR_s@100", "AR_m@100", "AR_l@100"};
  ASSERT_EQ(r.size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    const double want = gold.at(kind)[i].get<double>();
    const double got = r.at(kind + "_" + names[i]).as_double();
    const double rel = std::abs(got - want) / std::abs(want);
    record_rel_diff("COCODetection " + kind + " (fixture)", rel);
    EXPECT_LE(rel, 1e-12) << kind << " " << names[i] << ": expected " << want << ", got " << got;
  }
  print_rel_diffs("pycocotools 2.0.11 (fixture expected.json)");
}

TEST(COCODetection, FixtureBboxMatchesPycocotools) {
  check_fixture("bbox", "instances_val2014_fakebbox100_results.json");
}

TEST(COCODetection, FixtureSegmMatchesPycocotools) {
  check_fixture("segm", "instances_val2014_fakesegm100_results.json");
}

// ---- generated data against pycocotools ---------------------------------------------------------

class GeneratedCase : public ::testing::TestWithParam<std::string> {};

/// A result against a case's expected map to 1e-12 (null there is NaN: the classwise AP of a
/// category without ground truth).
void expect_case(const Value& got, const Json& want, const std::string& where) {
  expect_matches(got, want, where, "COCODetection (generated)", 1e-12);
}

Batch generated(const std::string& results) {
  const Json& d = expected_file().at("data");
  return read_coco(source_path(d.at("gt").get<std::string>()),
                   source_path(d.at(results).get<std::string>()));
}

TEST_P(GeneratedCase, MatchesPycocotools) {
  const Json& c = find_case(expected_file(), GetParam());
  Value::Map params = to_value(c.at("params")).as_map();
  const std::string results = c.contains("results") ? c.at("results").get<std::string>() : "bbox";
  Batch data = generated(results);
  if (GetParam() == "bbox_xyxy") {
    // The same boxes as x1, y1, x2, y2 = x, y, x + w, y + h.
    Batch xyxy;
    for (const auto& [name, field] : data.fields()) {
      if (name == "pred_bboxes_xywh" || name == "gt_bboxes_xywh") {
        Batch::Ragged boxes;
        for (const auto& t : std::get<Batch::Ragged>(field)) {
          std::vector<double> v(t.data_as<double>(), t.data_as<double>() + t.numel());
          for (std::size_t i = 0; i + 3 < v.size(); i += 4) v[i + 2] += v[i], v[i + 3] += v[i + 1];
          boxes.push_back(Tensor::from_vector(v, t.shape()));
        }
        xyxy.set_ragged(name == "gt_bboxes_xywh" ? "gt_bboxes" : "pred_bboxes", boxes);
      } else if (name != "pred_bboxes_xywh") {
        if (std::holds_alternative<Tensor>(field))
          xyxy.set(name, std::get<Tensor>(field));
        else
          xyxy.set_ragged(name, std::get<Batch::Ragged>(field));
      }
    }
    data = xyxy;
  }
  const Value r = run_everywhere(params, data);
  expect_case(r, c.at("expected"), GetParam());
  print_rel_diffs("pycocotools 2.0.11");
}

INSTANTIATE_TEST_SUITE_P(Coco, GeneratedCase,
                         ::testing::Values("bbox", "bbox_classwise", "segm", "segm_polygons",
                                           "proposal", "proposal_nums", "bbox_iou_thrs",
                                           "bbox_max_dets", "bbox_xyxy", "bbox_no_cats",
                                           "segm_no_cats", "bbox_img_ids", "proposal_img_ids"));

TEST(COCODetection, ExampleConfigDataMatchesPycocotools) {
  // configs/examples/detection.yaml: one results file holding bbox and segmentation, so loadRes
  // gives every result the area w*h, for segm too.
  const Json& c = find_case(expected_file(), "example");
  const Batch data =
      read_coco(source_path("configs/examples/data/detection/instances_val2014_40.json"),
                source_path("configs/examples/data/detection/results_val2014_40.json"));
  Value got = run_everywhere({{"metric", Value::Array{Value("bbox"), Value("segm")}}}, data);
  const Value prop = run_one({{"metric", Value::Array{Value("proposal")}}}, data);
  for (const auto& [k, v] : prop.as_map()) got.set(k, v);
  expect_case(got, c.at("expected"), "example");
  print_rel_diffs("pycocotools 2.0.11");
}

TEST(COCODetection, SeveralKindsAtOnceEqualEachAlone) {
  const Batch data = generated("segm");  // segm results: boxes are the masks' tight boxes
  const Value both = run_one({{"metric", Value::Array{Value("segm"), Value("bbox")}}}, data);
  const Value segm = run_one({{"metric", Value::Array{Value("segm")}}}, data);
  const Value bbox = run_one({{"metric", Value::Array{Value("bbox")}}}, data);
  for (const auto& [k, v] : segm.as_map()) EXPECT_EQ(both.at(k), v) << k;
  for (const auto& [k, v] : bbox.as_map()) EXPECT_EQ(both.at(k), v) << k;
  expect_case(segm, find_case(expected_file(), "segm").at("expected"), "segm");
}

TEST(COCODetection, BinaryMasksEqualRleInput) {
  // The segm case again with every mask given as a row-major bool [n, H, W] tensor (encoded by
  // rle_encode_row_major) instead of RLE counts: the same result, bit for bit.
  const Batch rle = generated("segm");
  Batch masks;
  const auto to_masks = [&](const std::string& side) {
    const auto& counts = rle.ragged(side + "_rle_counts");
    const auto& lengths = rle.ragged(side + "_rle_lengths");
    const Tensor& hs = rle.tensor("height");
    const Tensor& ws = rle.tensor("width");
    Batch::Ragged out;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      const auto h = static_cast<std::uint32_t>(hs.data_as<std::int64_t>()[i]);
      const auto w = static_cast<std::uint32_t>(ws.data_as<std::int64_t>()[i]);
      const auto n = lengths[i].numel();
      Tensor t = Tensor::zeros(DType::Bool, {n, h, w});
      auto* px = t.mutable_data_as<bool>();
      const std::uint32_t* c = counts[i].data_as<std::uint32_t>();
      std::vector<std::uint8_t> col(static_cast<std::size_t>(h) * w);
      for (std::int64_t j = 0; j < n; ++j) {
        const auto len = static_cast<std::size_t>(lengths[i].data_as<std::int32_t>()[j]);
        mask::Rle r{h, w, std::vector<std::uint32_t>(c, c + len)};
        c += len;
        EXPECT_TRUE(mask::rle_decode(r, col.data()));
        for (std::uint32_t x = 0; x < w; ++x)
          for (std::uint32_t y = 0; y < h; ++y)
            px[static_cast<std::size_t>(j) * h * w + y * w + x] = col[x * h + y] != 0;
      }
      out.push_back(t);
    }
    return out;
  };
  for (const auto& [name, field] : rle.fields()) {
    if (name.find("_rle_") != std::string::npos) continue;
    if (std::holds_alternative<Tensor>(field))
      masks.set(name, std::get<Tensor>(field));
    else
      masks.set_ragged(name, std::get<Batch::Ragged>(field));
  }
  masks.set_ragged("pred_masks", to_masks("pred"));
  masks.set_ragged("gt_masks", to_masks("gt"));
  const Value::Map params{{"metric", Value::Array{Value("segm")}}};
  EXPECT_TRUE(same(run_one(params, masks), run_one(params, rle)));
  expect_case(run_one(params, masks), find_case(expected_file(), "segm").at("expected"),
              "segm (binary masks)");
}

TEST(COCODetection, RepeatedImagesFromSamplerPaddingCountOnce) {
  const Batch data = generated("bbox");
  const Value::Map params{{"metric", Value::Array{Value("bbox"), Value("proposal")}}};
  const Value one = run_one(params, data);
  // Overlapping shards: images 30..44 reach rank 0 and rank 1; the tail again on rank 2.
  const std::vector<Shard> padded = {{0, 45}, {30, 60}, {50, 60}};
  EXPECT_EQ(run_ranks([&] { return coco(params); }, data, padded), one);
}

TEST(CocoJsonReader, SmallParseBlocksGiveTheSameData) {
  // The results are parsed in blocks of whole elements; with tiny blocks every boundary case
  // happens (many blocks, elements longer than a block: the block grows).
  const Json& d = expected_file().at("data");
  const auto gt = source_path(d.at("gt").get<std::string>());
  for (const char* kind : {"bbox", "segm"}) {
    const auto res = source_path(d.at(kind).get<std::string>());
    const Value::Map params{{"metric", Value::Array{Value(kind)}}};
    const Value whole = run_one(params, read_coco(gt, res));
    for (std::int64_t block : {64, 1000, 4096})
      for (int threads : {1, 2})
        EXPECT_TRUE(same(run_one(params, read_coco(gt, res, "auto", {}, block, threads)), whole))
            << kind << ", blocks of " << block << " bytes, " << threads << " threads";
  }
}

TEST(CocoJsonReader, AnnotationsReadInChunksWhateverTheLayout) {
  // The annotations' "annotations" list is read a block at a time (AnnotationChunks), the rest
  // of the file as one small document. A layout that could trip a scan: "annotations" before
  // "images", strings holding brackets, quotes, backslashes and the key itself, an RLE object
  // inside an annotation, nested empty lists, whitespace everywhere; and, as masks are not read
  // here (the "segmentation" values are blanked before the parse), a string "segmentation" just
  // before a key whose value is a list, and a "segmentation" key deeper down. Every block size
  // and thread count gives the annotations as they are written.
  const auto dir = std::filesystem::temp_directory_path();
  const auto gt = dir / "tally_chunks_gt.json", res = dir / "tally_chunks_res.json";
  const auto write = [](const std::filesystem::path& p, const char* text) {
    std::FILE* f = std::fopen(p.c_str(), "w");
    std::fputs(text, f);
    std::fclose(f);
  };
  write(gt, R"( {
  "info": {"note": "\"annotations\": [ {\"id\": 1} ], \\", "x": [[], [[]], {}]} ,
  "annotations" : [
    {"id": 11, "image_id": 2, "category_id": 1, "bbox": [0, 0, 10, 10], "area": 100.5,
     "caption": "a \"}],[{\" trap \\", "iscrowd": 0},
    { "id" : 12 , "image_id" : 1 , "category_id" : 1 , "tag" : "segmentation" ,
      "bbox" : [ 5 , 5 , 4 , 4 ] , "segmentation" : [ [ 5 , 5 , 9 , 5 , 9 , 9 ] ] ,
      "area" : 16 , "extra" : { "segmentation" : [ 1 ] , "k" : [ { } , [ ] ] } } ,
    {"id": 13, "image_id": 2, "category_id": 2, "bbox": [1, 2, 3, 4], "area": 12,
     "segmentation": {"size": [20, 20], "counts": "ab]}{["}, "iscrowd": 1}
  ],
  "images": [{"id": 1, "height": 20, "width": 20, "file_name": "]}.jpg"},
             {"id": 2, "height": 20, "width": 20}],
  "categories": [{"id": 1, "name": "a,{b}"}, {"id": 2, "name": "c"}]
} )");
  write(res, R"([{"image_id": 2, "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.9}])");
  for (std::int64_t block : {64, 100, 8 << 20})
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::to_string(block) + " bytes, " + std::to_string(threads) + " threads");
      const Batch b = read_coco(gt, res, "false", {}, block, threads);
      ASSERT_EQ(b.size(), 2);
      const auto ids = [&](std::int64_t i) {
        const Tensor& t = b.ragged("gt_ids")[static_cast<std::size_t>(i)];
        return std::vector<std::int64_t>(t.data_as<std::int64_t>(),
                                         t.data_as<std::int64_t>() + t.numel());
      };
      EXPECT_EQ(ids(0), (std::vector<std::int64_t>{12}));
      EXPECT_EQ(ids(1), (std::vector<std::int64_t>{11, 13}));
      const Tensor& areas = b.ragged("gt_areas")[1];
      EXPECT_EQ(areas.data_as<double>()[0], 100.5);
      const double* box = b.ragged("gt_bboxes_xywh")[0].data_as<double>();
      EXPECT_EQ(std::vector<double>(box, box + 4), (std::vector<double>{5, 5, 4, 4}));
      EXPECT_EQ(b.ragged("gt_iscrowd")[1].data_as<std::uint8_t>()[1], 1);
    }
  // What the chunks cannot follow is read whole, and named as before.
  write(gt, R"({"images": [{"id": 1}], "annotations": {"id": 3}, "categories": []})");
  try {
    read_coco(gt, res);
    ADD_FAILURE() << "no error for annotations that are not a list";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'annotations': expected a list"), std::string::npos)
        << e.what();
  }
  write(gt, R"({"images": [{"id": 2}], "annotations": [{"id": 3, "image_id": 2,)");
  EXPECT_THROW(read_coco(gt, res), InputError);  // truncated
  write(gt, R"({"images": [{"id": 2}], "annotations": [7], "categories": []})");
  try {
    read_coco(gt, res);
    ADD_FAILURE() << "no error for an annotation that is not an object";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("annotations[0]: expected an object"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(gt);
  std::filesystem::remove(res);
}

TEST(COCODetection, ReaderShardsEqualOneReader) {
  const Json& d = expected_file().at("data");
  const Value::Map params{{"metric", Value::Array{Value("bbox")}}};
  const auto gt = source_path(d.at("gt").get<std::string>());
  const auto res = source_path(d.at("bbox").get<std::string>());
  const Value one = run_one(params, read_coco(gt, res));
  for (int world : {2, 3, 7}) {
    std::vector<std::shared_ptr<Metric>> ranks;
    std::int64_t total = 0;
    for (int r = 0; r < world; ++r) {
      const Batch b = read_coco(gt, res, "auto", ShardInfo{r, world});
      total += b.size();
      ranks.push_back(coco(params));
      if (b.size() > 0) ranks.back()->add(b);
    }
    EXPECT_EQ(total, 60);
    EXPECT_EQ(compute_states(*coco(params), ranks), one) << world << " reader shards";
  }
}

// ---- the per-image C++ API and bad input --------------------------------------------------------

Batch one_image(std::vector<double> pred_box, double score, std::string box_field = "pred_bboxes") {
  Batch b;
  b.set("img_id", Tensor::from_vector(std::vector<std::int64_t>{7}));
  b.set_ragged(box_field, {Tensor::from_vector(pred_box, {1, 4})});
  b.set_ragged("pred_scores", {Tensor::from_vector(std::vector<double>{score})});
  b.set_ragged("pred_labels", {Tensor::from_vector(std::vector<std::int64_t>{1})});
  b.set_ragged("gt_bboxes", {Tensor::from_vector(std::vector<double>{0, 0, 10, 10}, {1, 4})});
  b.set_ragged("gt_labels", {Tensor::from_vector(std::vector<std::int64_t>{1})});
  return b;
}

TEST(COCODetection, PerImageApiExample) {
  // Precision is tp / (tp + fp + eps) with eps = np.spacing(1), as pycocotools: 1 / (1 + eps).
  const double one = 1.0 / (1.0 + 0x1p-52);
  const Value r = run_one({}, one_image({0, 0, 10, 10}, 0.9));
  EXPECT_EQ(r.at("bbox_mAP").as_double(), one);
  EXPECT_EQ(r.at("bbox_AR@100").as_double(), 1.0);
  EXPECT_EQ(r.at("bbox_mAP_s").as_double(), one);  // area 100 < 32^2
  EXPECT_EQ(r.at("bbox_mAP_l").as_double(), -1.0);
  // The same box as xywh.
  const Value r2 = run_one({}, one_image({0, 0, 10, 10}, 0.9, "pred_bboxes_xywh"));
  EXPECT_EQ(r2.at("bbox_mAP").as_double(), one);
}

TEST(COCODetection, ProposalKeepsOnlyCatIds) {
  // pycocotools with useCats = 0 still gathers only the categories of params.catIds.
  Batch b;
  b.set("img_id", Tensor::from_vector(std::vector<std::int64_t>{3}));
  b.set_ragged("pred_bboxes_xywh",
               {Tensor::from_vector(std::vector<double>{0, 0, 10, 10, 50, 50, 5, 5}, {2, 4})});
  b.set_ragged("pred_scores", {Tensor::from_vector(std::vector<double>{0.9, 0.5})});
  b.set_ragged("pred_labels", {Tensor::from_vector(std::vector<std::int64_t>{2, 1})});
  b.set_ragged("gt_bboxes_xywh", {Tensor::from_vector(std::vector<double>{0, 0, 10, 10}, {1, 4})});
  b.set_ragged("gt_labels", {Tensor::from_vector(std::vector<std::int64_t>{1})});
  const Value::Array proposal{Value("proposal")};
  EXPECT_EQ(run_one({{"metric", proposal}}, b).at("AR@1").as_double(), 1.0);
  EXPECT_EQ(run_one({{"metric", proposal}, {"cat_ids", Value::Array{Value(1)}}}, b)
                .at("AR@1")
                .as_double(),
            0.0);
}

TEST(COCODetection, BadInputIsAnInputError) {
  const auto bad = [](const Batch& b, const std::string& field) {
    auto m = coco({});
    try {
      m->add(b);
      ADD_FAILURE() << "no error for " << field;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  };
  bad(one_image({0, 0, 10, 10}, std::nan("")), "pred_scores");
  bad(one_image({0, std::nan(""), 10, 10}, 0.5), "pred_bboxes");
  Batch b = one_image({0, 0, 10, 10}, 0.5);
  b.set_ragged("pred_bboxes", {Tensor::from_vector(std::vector<double>{0, 0, 10}, {1, 3})});
  bad(b, "pred_bboxes");
  b = one_image({0, 0, 10, 10}, 0.5);
  b.set_ragged("pred_labels", {Tensor::from_vector(std::vector<std::int64_t>{-3})});
  bad(b, "pred_labels");
  b = one_image({0, 0, 10, 10}, 0.5);
  b.set_ragged("pred_labels", {Tensor::from_vector(std::vector<std::int64_t>{1, 2})});
  bad(b, "pred_labels");
  Batch nobox;
  nobox.set("img_id", Tensor::from_vector(std::vector<std::int64_t>{1}));
  nobox.set_ragged("pred_scores", {Tensor::from_vector(std::vector<double>{0.5})});
  nobox.set_ragged("pred_labels", {Tensor::from_vector(std::vector<std::int64_t>{1})});
  nobox.set_ragged("gt_labels", {Tensor::from_vector(std::vector<std::int64_t>{1})});
  bad(nobox, "pred_bboxes");
  // segm without masks
  auto segm = coco({{"metric", Value::Array{Value("segm")}}});
  EXPECT_THROW(segm->add(one_image({0, 0, 10, 10}, 0.5)), InputError);
  // no images at all
  EXPECT_THROW(compute_states(*coco({}), {coco({})}), InputError);
}

TEST(COCODetection, BadParametersAreConfigErrors) {
  EXPECT_THROW(coco({{"metric", Value::Array{Value("obb")}}}), ConfigError);
  EXPECT_THROW(coco({{"proposal_nums", Value::Array{}}}), ConfigError);
  EXPECT_THROW(coco({{"proposal_nums", Value::Array{Value(100), Value(10), Value(1)}}}),
               ConfigError);
  EXPECT_THROW(coco({{"proposal_nums", Value::Array{Value(1)}}, {"max_dets", Value(5)}}),
               ConfigError);
  const auto areas = [](Value::Map m) { return coco({{"area_ranges", Value(std::move(m))}}); };
  const auto range = [](double lo, double hi) { return Value(Value::Array{Value(lo), Value(hi)}); };
  EXPECT_NO_THROW(areas({{"all", range(0, 1e10)}, {"tiny", range(0, 100)}}));
  EXPECT_THROW(areas({{"small", range(0, 100)}}), ConfigError);  // no 'all'
  EXPECT_THROW(areas({{"all", range(10, 0)}}), ConfigError);
  EXPECT_THROW(areas({{"all", range(0, 1)}, {"a b", range(0, 1)}}), ConfigError);
  EXPECT_THROW(areas({{"all", range(0, 1)}, {"50", range(0, 1)}}), ConfigError);
  EXPECT_THROW(areas({{"all", Value(3)}}), ConfigError);
  EXPECT_THROW(coco({{"area_ranges", Value::Array{Value(0), Value(1)}}}), ConfigError);
  EXPECT_THROW(coco({{"kpt_oks_sigmas", Value::Array{Value(0.1), Value(-0.2)}}}), ConfigError);
  EXPECT_THROW(coco({{"iou_thrs", Value::Array{Value(1.5)}}}), ConfigError);
  // One AP without categories: no AP per category to report.
  EXPECT_THROW(coco({{"use_cats", false}, {"classwise", true}}), ConfigError);
  EXPECT_THROW(coco({{"threads", Value(0)}}), ConfigError);
  EXPECT_THROW(coco({{"classes", Value::Array{Value("a")}}}), ConfigError);
}

// ---- keypoints and pycocotools' parameters
// -------------------------------------------------------

const Json& params_file() { return expected_json("tests/reference/expected_coco_params.json"); }

class ParamsCase : public ::testing::TestWithParam<std::string> {};

TEST_P(ParamsCase, MatchesPycocotools) {
  // tests/reference/coco_params.py: pycocotools 2.0.11 COCOeval (keypoints, and bbox with area
  // ranges and maxDets of the user's choosing), each case's call recorded there.
  const Json& c = find_case(params_file(), GetParam());
  const Json& d = params_file().at("data");
  const auto files = c.at("data");
  const Batch data = read_coco(source_path(d.at(files[0].get<std::string>()).get<std::string>()),
                               source_path(d.at(files[1].get<std::string>()).get<std::string>()));
  const Value r = run_everywhere(to_value(c.at("params")).as_map(), data);
  expect_matches(r, c.at("expected"), GetParam(), "COCODetection (params)", 1e-12);
  EXPECT_EQ(r.size(), c.at("expected").size()) << r.to_json();
  print_rel_diffs("pycocotools 2.0.11");
}

INSTANTIATE_TEST_SUITE_P(Coco, ParamsCase,
                         ::testing::Values("keypoints", "keypoints_sigmas", "keypoints_no_cats",
                                           "keypoints_params", "bbox_area_ranges", "bbox_curves",
                                           "bbox_calibration", "bbox_confusion", "bbox_f_scores",
                                           "bbox_f_scores_05"));

// ---- TIDE
// ---------------------------------------------------------------------------------------

class TideCase : public ::testing::TestWithParam<std::string> {};

TEST_P(TideCase, MatchesTidecv) {
  // tests/reference/tide.py: tidecv 1.0.1's TIDE().evaluate(...) run, then fix_main_errors(),
  // fix_special_errors() and count_errors(), divided by 100 (COCODetection's scale); each case's
  // call recorded there. The fixture cases read tests/data/coco_val2014_100.
  const Json& file = expected_json("tests/reference/expected_tide.json");
  const Json& c = find_case(file, GetParam());
  const Json& d = file.at("data");
  const auto files = c.at("data");
  const std::filesystem::path gt =
      source_path(d.at(files[0].get<std::string>()).get<std::string>());
  const std::filesystem::path res =
      source_path(d.at(files[1].get<std::string>()).get<std::string>());
  const Value r = run_everywhere(to_value(c.at("params")).as_map(), read_coco(gt, res));
  Value tide = Value::map();  // the TIDE keys (the others are pycocotools', checked above)
  for (const auto& [k, v] : r.as_map())
    if (k.find("_tide_") != std::string::npos) tide.set(k, v);
  expect_matches(tide, c.at("expected"), GetParam(), "COCODetection (tide)", 1e-12);
  print_rel_diffs("tidecv 1.0.1");
}

INSTANTIATE_TEST_SUITE_P(Tide, TideCase,
                         ::testing::Values("bbox", "bbox_thresholds", "bbox_max_dets",
                                           "bbox_cat_ids", "example", "fixture_bbox",
                                           "fixture_segm"));

TEST(COCODetection, TideBadParametersAreConfigErrors) {
  for (const auto& [params, what] : std::vector<std::pair<Value::Map, std::string>>{
           {{{"tide", Value(true)}, {"tide_pos_thresh", Value(0.0)}}, "tide_pos_thresh"},
           {{{"tide", Value(true)}, {"tide_bg_thresh", Value(0.7)}}, "tide_bg_thresh"},
           {{{"tide", Value(true)}, {"tide_max_dets", Value(0)}}, "tide_max_dets"},
           {{{"tide", Value(true)}, {"use_cats", Value(false)}}, "use_cats"},
           {{{"tide", Value(true)}, {"metric", Value(Value::Array{Value("proposal")})}}, "bbox"}}) {
    try {
      coco(params);
      ADD_FAILURE() << "no error for " << what;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
}

// ---- LVIS
// ----------------------------------------------------------------------------------------

class LvisCase : public ::testing::TestWithParam<std::string> {};

TEST_P(LvisCase, MatchesLvisApi) {
  // tests/reference/lvis_detection.py: lvis 0.5.3 LVISEval on synthetic LVIS data (federated
  // lists, frequencies, > 300 results per image, zero areas), each case's call recorded there.
  const Json& file = expected_json("tests/reference/expected_lvis.json");
  const Json& c = find_case(file, GetParam());
  const Json& d = file.at("data");
  const Batch data = read_coco(source_path(d.at("gt").get<std::string>()),
                               source_path(d.at("res").get<std::string>()));
  Value::Map params = to_value(c.at("params")).as_map();
  const auto lvis = [&](Value::Map p) { return make_metric("LVISDetection", p); };
  const Value one =
      run_ranks([&] { return lvis(params); }, data, contiguous_shards(data.size(), 1));
  for (int ranks : {2, 3, 7})
    EXPECT_TRUE(same(
        run_ranks([&] { return lvis(params); }, data, contiguous_shards(data.size(), ranks)), one))
        << ranks << " ranks";
  params.emplace_back("threads", Value(2));
  EXPECT_TRUE(
      same(run_ranks([&] { return lvis(params); }, data, contiguous_shards(data.size(), 1)), one))
      << "threads 2";
  expect_matches(one, c.at("expected"), GetParam(), "LVISDetection", 1e-12);
  print_rel_diffs("lvis 0.5.3");
}

INSTANTIATE_TEST_SUITE_P(Lvis, LvisCase,
                         ::testing::Values("bbox", "segm", "bbox_max_dets", "bbox_subset"));

TEST(CocoJsonReader, LvisFieldsAndTheirErrors) {
  const Json& file = expected_json("tests/reference/expected_lvis.json");
  const auto gt = source_path(file.at("data").at("gt").get<std::string>());
  const auto res = source_path(file.at("data").at("res").get<std::string>());
  const Batch b = read_coco(gt, res);
  ASSERT_TRUE(b.has("neg_category_ids"));
  ASSERT_TRUE(b.has("not_exhaustive_category_ids"));
  ASSERT_TRUE(b.has("gt_frequency"));
  // lvis_synthetic.json's first image (id 2000): the lists as the file holds them.
  const Json doc = load_json(gt);
  const Json& first = doc.at("images")[0];
  const Tensor& neg = b.ragged("neg_category_ids")[0];
  ASSERT_EQ(neg.numel(), static_cast<std::int64_t>(first.at("neg_category_ids").size()));
  for (std::int64_t k = 0; k < neg.numel(); ++k)
    EXPECT_EQ(neg.data_as<std::int32_t>()[k], first.at("neg_category_ids")[k].get<std::int32_t>());
  // A category's frequency must be r, c or f; the lists must be lists of ids.
  const auto tmp = std::filesystem::temp_directory_path() / "tally_lvis_bad.json";
  const auto expect_error = [&](const std::string& json, const std::string& words) {
    {
      std::FILE* f = std::fopen(tmp.c_str(), "w");
      std::fputs(json.c_str(), f);
      std::fclose(f);
    }
    try {
      read_coco(tmp, res);
      ADD_FAILURE() << "no error for " << json;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_error(R"({"images": [{"id": 2000}], "annotations": [],
                   "categories": [{"id": 1, "frequency": "x"}]})",
               "key 'frequency'");
  expect_error(R"({"images": [{"id": 2000, "neg_category_ids": 3}], "annotations": [],
                   "categories": [{"id": 1}]})",
               "neg_category_ids");
  std::filesystem::remove(tmp);
}

TEST(LVISDetection, BadParametersAreConfigErrors) {
  const auto lvis = [](Value::Map p) { return make_metric("LVISDetection", p); };
  EXPECT_THROW(lvis({{"metric", Value::Array{Value("proposal")}}}), ConfigError);
  EXPECT_THROW(lvis({{"metric", Value::Array{Value("keypoints")}}}), ConfigError);
  EXPECT_THROW(lvis({{"use_cats", false}}), ConfigError);
  EXPECT_THROW(lvis({{"max_dets", Value(0)}}), ConfigError);
  EXPECT_NO_THROW(lvis({{"max_dets", Value(1000)}, {"metric", Value::Array{Value("segm")}}}));
}

/// One image, one person: ground truth with 3 keypoints, a detection.
Batch keypoint_image(std::vector<double> pred, std::vector<double> gt,
                     std::vector<std::int64_t> pred_shape = {1, 3, 3}) {
  Batch b;
  b.set("img_id", Tensor::from_vector(std::vector<std::int64_t>{7}));
  b.set_ragged("pred_keypoints", {Tensor::from_vector(pred, pred_shape)});
  b.set_ragged("pred_scores", {Tensor::from_vector(std::vector<double>{0.9})});
  b.set_ragged("pred_labels", {Tensor::from_vector(std::vector<std::int64_t>{1})});
  b.set_ragged("gt_keypoints", {Tensor::from_vector(gt, {1, 3, 3})});
  b.set_ragged("gt_bboxes_xywh", {Tensor::from_vector(std::vector<double>{0, 0, 40, 40}, {1, 4})});
  b.set_ragged("gt_areas", {Tensor::from_vector(std::vector<double>{1600})});
  b.set_ragged("gt_labels", {Tensor::from_vector(std::vector<std::int64_t>{1})});
  return b;
}

TEST(COCODetection, KeypointsPerfectMatchAndShapes) {
  // A detection on the ground truth's keypoints: OKS 1, every precision 1 / (1 + 2^-52)
  // (pycocotools' eps), so AP at area all and medium is 1 to within 2^-52 (the mean of 101 such
  // values), AR 1; large has no data (-1).
  const Value::Map params = {{"metric", Value::Array{Value("keypoints")}},
                             {"kpt_oks_sigmas", Value::Array{Value(0.1), Value(0.2), Value(0.3)}}};
  const std::vector<double> gt = {10, 10, 2, 20, 20, 1, 0, 0, 0};
  const std::vector<double> pred = {10, 10, 0.9, 20, 20, 0.8, 35, 5, 0.1};
  const Value r = run_one(params, keypoint_image(pred, gt));
  EXPECT_NEAR(r.at("keypoints_mAP").as_double(), 1.0, 3e-16);
  EXPECT_NEAR(r.at("keypoints_mAP_m").as_double(), 1.0, 3e-16);
  EXPECT_EQ(r.at("keypoints_mAP_l").as_double(), -1.0);
  EXPECT_EQ(r.at("keypoints_AR@20").as_double(), 1.0);
  // [n, 3K] reads as [n, K, 3].
  EXPECT_TRUE(same(run_one(params, keypoint_image(pred, gt, {1, 9})), r));
  // Wrong K: an input error naming the field and the expected shape.
  try {
    run_one(params, keypoint_image({1, 2, 3, 4, 5, 6}, gt, {1, 2, 3}));
    ADD_FAILURE() << "no error for 2 keypoints where the sigmas give 3";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pred_keypoints"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[n, 3, 3]"), std::string::npos) << e.what();
  }
  Batch missing = keypoint_image(pred, gt);
  Batch b;
  for (const auto& [name, field] : missing.fields())
    if (name != "gt_keypoints") {
      if (std::holds_alternative<Tensor>(field))
        b.set(name, std::get<Tensor>(field));
      else
        b.set_ragged(name, std::get<Batch::Ragged>(field));
    }
  EXPECT_THROW(run_one(params, b), InputError);
  // No labelled keypoint (num_keypoints 0): the ground truth is ignored, nothing to recall.
  const Value none = run_one(params, keypoint_image(pred, {10, 10, 0, 20, 20, 0, 0, 0, 0}));
  EXPECT_EQ(none.at("keypoints_mAP").as_double(), -1.0);
}

TEST(CocoJsonReader, BadFilesAreInputErrors) {
  const Json& d = expected_file().at("data");
  const auto gt = source_path(d.at("gt").get<std::string>());
  EXPECT_THROW(read_coco(gt, "/nonexistent/results.json"), InputError);
  const auto tmp = std::filesystem::temp_directory_path() / "tally_det_bad_results.json";
  {
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    std::fputs("[{\"image_id\": 424242, \"category_id\": 1, \"bbox\": [0,0,1,1], \"score\": 0.5}]",
               f);
    std::fclose(f);
  }
  try {
    read_coco(gt, tmp);
    ADD_FAILURE() << "no error for an unknown image";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("424242"), std::string::npos) << e.what();
  }
  {
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    std::fputs("[{\"image_id\": 0, \"category_id\": 1, \"bbox\": [0,0,1,1], \"score\": \"x\"}]", f);
    std::fclose(f);
  }
  EXPECT_THROW(read_coco(gt, tmp), InputError);
  std::filesystem::remove(tmp);
}

// ---- the maskApi.c port -------------------------------------------------------------------------

mask::Rle from_polygons(const Json& c) {
  const auto h = c.at("h").get<std::uint32_t>(), w = c.at("w").get<std::uint32_t>();
  std::vector<mask::Rle> parts;
  for (const auto& p : c.at("polygons")) {
    const auto xy = p.get<std::vector<double>>();
    parts.push_back(mask::rle_from_poly(xy.data(), xy.size() / 2, h, w));
  }
  return mask::rle_merge(parts, false);
}

TEST(MaskApi, PolygonsAreaBboxStringMatchPycocotools) {
  for (const auto& c : expected_file().at("masks").at("cases")) {
    const mask::Rle r = from_polygons(c);
    EXPECT_EQ(r.cnts, c.at("counts").get<std::vector<std::uint32_t>>());
    EXPECT_EQ(mask::rle_to_string(r), c.at("string").get<std::string>());
    EXPECT_EQ(mask::rle_area(r), c.at("area").get<std::uint32_t>());
    double bb[4];
    mask::rle_to_bbox(r, bb);
    EXPECT_EQ(std::vector<double>(bb, bb + 4), c.at("bbox").get<std::vector<double>>());
    mask::Rle back;
    ASSERT_TRUE(mask::rle_from_string(c.at("string").get<std::string>(), r.h, r.w, back));
    EXPECT_EQ(back.cnts, r.cnts);
    // decode -> encode round trip
    std::vector<std::uint8_t> pixels(static_cast<std::size_t>(r.h) * r.w);
    ASSERT_TRUE(mask::rle_decode(r, pixels.data()));
    EXPECT_EQ(mask::rle_encode(pixels.data(), r.h, r.w).cnts, r.cnts);
  }
}

TEST(MaskApi, BboxEqualsMaskApiDivisionsOnAnySize) {
  // rle_to_bbox divides by a multiplication with 1 / h, corrected: the same box as maskApi.c's
  // `%` and `/` (written out here) on random masks, heights from 1 to 2^31 - 1 and counts up to
  // h * w just below 2^32.
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 4000; ++trial) {
    const std::uint32_t h =
        trial % 4 == 0   ? 1 + static_cast<std::uint32_t>(rng() % 7)
        : trial % 4 == 1 ? (std::uint32_t{1} << 31) - 1 - static_cast<std::uint32_t>(rng() % 1000)
                         : 1 + static_cast<std::uint32_t>(rng() % 5000);
    const std::uint64_t total_max = (std::uint64_t{1} << 32) - 1;
    const auto w =
        static_cast<std::uint32_t>(std::max<std::uint64_t>(1, (total_max / h) - rng() % 3));
    const std::uint64_t total = std::uint64_t{h} * w;
    mask::Rle r{h, w, {}};
    std::uint64_t left = total;
    while (left > 0) {
      const std::uint64_t c = std::min<std::uint64_t>(left, 1 + rng() % (1 + total / 9));
      r.cnts.push_back(static_cast<std::uint32_t>(c));
      left -= c;
    }
    double bb[4];
    mask::rle_to_bbox(r, bb);
    std::uint32_t xs = w, ys = h, xe = 0, ye = 0, cc = 0;
    const std::size_t m = (r.cnts.size() / 2) * 2;
    for (std::size_t j = 0; j < m; ++j) {
      const std::uint32_t start = cc;
      cc += r.cnts[j];
      if (j % 2 == 0 || r.cnts[j] == 0) continue;
      const std::uint32_t y0 = start % h, x0 = (start - y0) / h;
      const std::uint32_t y1 = (cc - 1) % h, x1 = (cc - 1 - y1) / h;
      xs = std::min(xs, x0);
      xe = std::max(xe, x1);
      if (x0 < x1) {
        ys = 0;
        ye = h - 1;
      } else {
        ys = std::min(ys, y0);
        ye = std::max(ye, y1);
      }
    }
    const std::vector<double> want =
        m == 0
            ? std::vector<double>{0, 0, 0, 0}
            : std::vector<double>{double(xs), double(ys), double(xe - xs + 1), double(ye - ys + 1)};
    ASSERT_EQ(std::vector<double>(bb, bb + 4), want) << "h " << h << " w " << w;
  }
}

TEST(MaskApi, IouMatchesPycocotools) {
  const Json& m = expected_file().at("masks");
  std::vector<mask::Rle> rles;
  for (const auto& c : m.at("cases")) rles.push_back(from_polygons(c));
  for (const auto& e : m.at("ious")) {
    const mask::Rle& a = rles[e.at("d").get<std::size_t>()];
    mask::Rle d = a, g;
    if (e.contains("shifted")) {
      d = mask::Rle{a.h, a.w, e.at("shifted").get<std::vector<std::uint32_t>>()};
      g = a;
    } else {
      g = rles[e.at("g").get<std::size_t>()];
    }
    const bool crowd = e.at("crowd").get<int>() != 0;
    double db[4], gb[4];
    mask::rle_to_bbox(d, db);
    mask::rle_to_bbox(g, gb);
    const double iou = mask::rle_iou_one(d, g, crowd, mask::bb_iou_one(db, gb, crowd));
    EXPECT_EQ(iou, e.at("iou").get<double>()) << e.dump();
  }
}

TEST(MaskApi, CorruptInputIsRejected) {
  mask::Rle r;
  EXPECT_FALSE(mask::rle_from_string("\x7f", 2, 2, r));
  EXPECT_FALSE(mask::rle_from_string("h", 2, 2, r));  // continuation bit on the last char
  mask::Rle big{2, 2, {1, 9}};
  std::vector<std::uint8_t> px(4);
  EXPECT_FALSE(mask::rle_decode(big, px.data()));
  // Different sizes merge into an empty 0x0 mask, as maskApi.c does.
  const mask::Rle m = mask::rle_merge({mask::Rle{2, 2, {4}}, mask::Rle{3, 2, {6}}}, false);
  EXPECT_EQ(m.h, 0u);
  EXPECT_TRUE(m.cnts.empty());
}

}  // namespace
}  // namespace tally::test
