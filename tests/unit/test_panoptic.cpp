// The panoptic plugin (plugins/panoptic: PanopticQuality, ModifiedPanopticQuality) and the
// coco_panoptic reader (plugins/readers/coco_panoptic), loaded as the real libraries through the
// Registry: values against torchmetrics 1.9.0 on 1, 2, 3, 4 and 7 ranks (with an empty rank, in
// several batch sizes, bit for bit), the reader's fields and shards on real ranks, torch's
// reductions, and every bad input and parameter.
//
// Expected values come from tests/reference/expected_panoptic.json, written by
// tests/reference/panoptic.py with torchmetrics 1.9.0 (the versions and, for each case, the exact
// call are recorded in the file; null there is NaN), unless a test says otherwise. The data of the
// cases without "inputs" is configs/examples/data/panoptic, read with the coco_panoptic reader.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "../../plugins/panoptic/torch_reduce.hpp"
#include "metric_harness.hpp"
#include "support/png_bytes.hpp"
#include "support/process.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/reader.hpp"

namespace fs = std::filesystem;

namespace tally::test {
namespace {

const Json& expected_file() { return expected_json("tests/reference/expected_panoptic.json"); }

/// 1, 2, 3, 4 and 7 ranks in whole shards and batches of 3 and 1; batches of 2 beside an empty
/// rank, and rank 0 empty.
const RankSweep kSweep{{std::int64_t{1} << 30, 3, 1}, 2, 4};

Value::Map reader_params(const fs::path& gt_json, const fs::path& gt_dir, const fs::path& pred_json,
                         const fs::path& pred_dir, std::int64_t batch_size = 7) {
  return {{"annotations", gt_json.string()},
          {"annotation_dir", gt_dir.string()},
          {"predictions", pred_json.string()},
          {"prediction_dir", pred_dir.string()},
          {"batch_size", Value(static_cast<long>(batch_size))}};
}

Value::Map example_params(std::int64_t batch_size = 7) {
  const Json& d = expected_file().at("data");
  const auto p = [&](const char* k) { return source_path(d.at(k).get<std::string>()); };
  return reader_params(p("annotations"), p("annotation_dir"), p("predictions"), p("prediction_dir"),
                       batch_size);
}

std::vector<Batch> read_batches(const Value::Map& params, ShardInfo shard = {}) {
  auto reader = make_reader("coco_panoptic", params, shard);
  std::vector<Batch> out;
  while (auto b = reader->next()) out.push_back(std::move(*b));
  return out;
}

/// The batches as one: ragged fields appended, the dense img_id concatenated.
Batch concat(const std::vector<Batch>& batches) {
  Batch all;
  std::vector<std::int64_t> ids;
  std::map<std::string, Batch::Ragged> ragged;
  std::vector<std::string> order;
  for (const Batch& b : batches) {
    for (const auto& [name, field] : b.fields()) {
      if (b.is_ragged(name)) {
        if (!ragged.count(name)) order.push_back(name);
        for (const Tensor& t : b.ragged(name)) ragged[name].push_back(t);
      }
    }
    const Tensor& t = b.tensor("img_id");
    ids.insert(ids.end(), t.data_as<std::int64_t>(), t.data_as<std::int64_t>() + t.numel());
  }
  all.set("img_id", Tensor::from_vector(ids));
  for (const auto& name : order) all.set_ragged(name, ragged[name]);
  return all;
}

/// The example dataset, read once on one rank.
const Batch& example_data() {
  static const Batch data = concat(read_batches(example_params()));
  return data;
}

/// The inputs of a case: inline ones, or the example dataset.
Batch case_data(const Json& c) {
  return c.contains("inputs") ? load_inputs(c.at("inputs")) : example_data();
}

std::string one_line(const std::string& m) {
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  return m;
}

// ---- values against torchmetrics, 1..7 ranks -------------------------------------------------

class ReferenceCase : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map (torchmetrics 1.9.0; the call is the case's "call").
TEST_P(ReferenceCase, MatchesTorchmetricsOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  const Value got = check_case(c, case_data(c), GetParam(), kSweep);
  print_rel_diffs("torchmetrics 1.9.0");
  // Not only to 1e-9: the same bits (the IoU sums are exact, the means in torch's order).
  const Value want = to_value(c.at("expected"));
  for (const auto& [key, value] : want.as_map()) {
    if (!value.is_float()) continue;
    EXPECT_TRUE(same_bits(got.at(key), value) || (got.at(key).is_float() && value.is_null()))
        << key << ": " << got.at(key).to_json() << " vs " << value.to_json();
  }
}

INSTANTIATE_TEST_SUITE_P(Panoptic, ReferenceCase, ::testing::ValuesIn(case_names(expected_file())),
                         param_name);

// Expected: section "example" of expected_panoptic.json, each metric labelled as in
// configs/examples/panoptic.yaml.
TEST(PanopticQuality, ExampleMetricsMatchTorchmetrics) {
  const Json& ex = expected_file().at("example");
  ASSERT_EQ(example_data().size(), ex.at("samples").get<std::int64_t>());
  const std::map<std::string, std::pair<std::string, Value::Map>> metrics = {
      {"PanopticQuality",
       {"PanopticQuality",
        {{"allow_unknown_preds_category", true},
         {"return_sq_and_rq", true},
         {"return_per_class", true}}}},
      {"pq_crowd_void",
       {"PanopticQuality",
        {{"allow_unknown_preds_category", true}, {"return_sq_and_rq", true}, {"crowd", "void"}}}},
      {"ModifiedPanopticQuality",
       {"ModifiedPanopticQuality", {{"allow_unknown_preds_category", true}}}}};
  ASSERT_EQ(ex.at("results").size(), metrics.size());
  for (const auto& [label, spec] : metrics) {
    const Value got = run_all_rank_counts(spec.first, spec.second, example_data(), label, kSweep);
    expect_matches(got, ex.at("results").at(label), "example." + label, spec.first);
  }
  print_rel_diffs("torchmetrics 1.9.0");
}

// ---- the reader --------------------------------------------------------------------------------

// Expected: the ground truth JSON itself: every segment's area (written by panoptic.py from the
// id maps, numpy) is the number of pixels the reader gives it, with its category; void is (-1, 0);
// gt_crowd lists the iscrowd segments; thing_ids / stuff_ids follow isthing; ids ascend.
TEST(CocoPanopticReader, FieldsFollowTheJson) {
  const Batch& d = example_data();
  const Json gt =
      load_json(source_path(expected_file().at("data").at("annotations").get<std::string>()));
  std::map<std::int64_t, const Json*> anns;
  for (const auto& a : gt.at("annotations")) anns[a.at("image_id").get<std::int64_t>()] = &a;
  ASSERT_EQ(d.size(), static_cast<std::int64_t>(anns.size()));
  const auto* ids = d.tensor("img_id").data_as<std::int64_t>();
  EXPECT_TRUE(std::is_sorted(ids, ids + d.size()));
  std::int64_t crowds = 0;
  for (std::int64_t i = 0; i < d.size(); ++i) {
    SCOPED_TRACE("image " + std::to_string(ids[i]));
    const Json& a = *anns.at(ids[i]);
    const Tensor& g = d.ragged("gt_panoptic")[static_cast<std::size_t>(i)];
    const Tensor& p = d.ragged("pred_panoptic")[static_cast<std::size_t>(i)];
    ASSERT_EQ(g.dtype(), DType::I32);
    ASSERT_EQ(g.dim(), 3);
    EXPECT_EQ(g.size(2), 2);
    EXPECT_EQ(p.shape(), g.shape());
    std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> seen;  // id -> (cat, area)
    const auto* m = g.data_as<std::int32_t>();
    for (std::int64_t j = 0; j < g.numel() / 2; ++j) {
      if (m[2 * j + 1] == 0) {
        EXPECT_EQ(m[2 * j], -1);
        continue;
      }
      auto& [cat, area] = seen[m[2 * j + 1]];
      cat = m[2 * j];
      ++area;
    }
    std::set<std::pair<std::int64_t, std::int64_t>> want_crowd;
    ASSERT_EQ(seen.size(), a.at("segments_info").size());
    for (const auto& s : a.at("segments_info")) {
      const auto id = s.at("id").get<std::int64_t>();
      ASSERT_TRUE(seen.count(id)) << id;
      EXPECT_EQ(seen[id].first, s.at("category_id").get<std::int64_t>());
      EXPECT_EQ(seen[id].second, s.at("area").get<std::int64_t>());
      if (s.at("iscrowd").get<int>() == 1)
        want_crowd.emplace(s.at("category_id").get<std::int64_t>(), id);
    }
    const Tensor& c = d.ragged("gt_crowd")[static_cast<std::size_t>(i)];
    ASSERT_EQ(c.dim(), 2);
    EXPECT_EQ(c.size(1), 2);
    std::set<std::pair<std::int64_t, std::int64_t>> got_crowd;
    for (std::int64_t k = 0; k < c.size(0); ++k)
      got_crowd.emplace(c.data_as<std::int32_t>()[2 * k], c.data_as<std::int32_t>()[2 * k + 1]);
    EXPECT_EQ(got_crowd, want_crowd);
    crowds += c.size(0);
    const auto ids_of = [&](const char* f) {
      const Tensor& t = d.ragged(f)[static_cast<std::size_t>(i)];
      return std::vector<std::int64_t>(t.data_as<std::int64_t>(),
                                       t.data_as<std::int64_t>() + t.numel());
    };
    EXPECT_EQ(ids_of("thing_ids"), (std::vector<std::int64_t>{1, 3, 5}));
    EXPECT_EQ(ids_of("stuff_ids"), (std::vector<std::int64_t>{7, 9, 12}));
  }
  EXPECT_GT(crowds, 0);
}

// Expected: the single-rank results (case "pq_sq_rq"), bit for bit, when each of 2..7 real
// reader ranks feeds its own metric; the ranks' image ids are contiguous blocks in id order.
TEST(CocoPanopticReader, ShardsOnRealRanksGiveTheSameBits) {
  const Json& c = find_case(expected_file(), "pq_sq_rq");
  const Value::Map params = to_map(c.at("params"));
  const Value one = run_single("PanopticQuality", params, example_data());
  expect_matches(one, c.at("expected"), "pq_sq_rq", "PanopticQuality");
  for (int world : {2, 3, 4, 7}) {
    std::vector<std::shared_ptr<Metric>> ranks;
    std::vector<std::int64_t> ids;
    for (int r = 0; r < world; ++r) {
      ranks.push_back(make_metric("PanopticQuality", params));
      for (const Batch& b : read_batches(example_params(3), ShardInfo{r, world})) {
        ranks.back()->add(b);
        const Tensor& t = b.tensor("img_id");
        ids.insert(ids.end(), t.data_as<std::int64_t>(), t.data_as<std::int64_t>() + t.numel());
      }
    }
    const Tensor& all = example_data().tensor("img_id");
    EXPECT_EQ(ids, std::vector<std::int64_t>(all.data_as<std::int64_t>(),
                                             all.data_as<std::int64_t>() + all.numel()));
    EXPECT_TRUE(same_bits(compute_states(*make_metric("PanopticQuality", params), ranks), one))
        << world << " ranks";
  }
}

/// A writable copy of the example data, its JSONs loaded for editing.
struct DataCopy {
  TempDir dir;
  Json gt, pred;
  DataCopy() {
    const Json& d = expected_file().at("data");
    for (const char* k : {"annotation_dir", "prediction_dir"})
      fs::copy(source_path(d.at(k).get<std::string>()), dir / k, fs::copy_options::recursive);
    gt = load_json(source_path(d.at("annotations").get<std::string>()));
    pred = load_json(source_path(d.at("predictions").get<std::string>()));
  }
  Value::Map params(std::int64_t batch_size = 7) {
    write_text(dir / "gt.json", gt.dump());
    write_text(dir / "pred.json", pred.dump());
    return reader_params(dir / "gt.json", dir / "annotation_dir", dir / "pred.json",
                         dir / "prediction_dir", batch_size);
  }
  /// The InputError of reading every batch ("" if none).
  std::string error() {
    const Value::Map p = params();
    return one_line(read_error([&] { return make_reader("coco_panoptic", p); }));
  }
  /// The ground-truth annotation of image `id`.
  Json& gt_ann(std::int64_t id) {
    for (auto& a : gt.at("annotations"))
      if (a.at("image_id") == id) return a;
    throw std::runtime_error("no image " + std::to_string(id));
  }
  Json& pred_ann(std::int64_t id) {
    for (auto& a : pred.at("annotations"))
      if (a.at("image_id") == id) return a;
    throw std::runtime_error("no image " + std::to_string(id));
  }
};

// Expected, by construction: 3 images on 4..7 ranks leave ranks without images; the results equal
// the one-rank run's bit for bit.
TEST(CocoPanopticReader, RanksWithoutImagesTakePart) {
  DataCopy data;
  Json keep = Json::array(), keep_pred = Json::array();
  for (std::size_t i = 0; i < 3; ++i) {
    keep.push_back(data.gt.at("annotations")[i]);
    keep_pred.push_back(data.pred_ann(keep.back().at("image_id").get<std::int64_t>()));
  }
  data.gt["annotations"] = keep;
  data.pred["annotations"] = keep_pred;
  const Value::Map params = data.params(2);
  const Value::Map metric = {{"allow_unknown_preds_category", true}, {"return_sq_and_rq", true}};
  const Value one = run_single("PanopticQuality", metric, concat(read_batches(params)));
  for (int world : {4, 5, 7}) {
    std::vector<std::shared_ptr<Metric>> ranks;
    int empty = 0;
    for (int r = 0; r < world; ++r) {
      ranks.push_back(make_metric("PanopticQuality", metric));
      const auto batches = read_batches(params, ShardInfo{r, world});
      empty += batches.empty();
      for (const Batch& b : batches) ranks.back()->add(b);
    }
    EXPECT_EQ(empty, world - 3);
    EXPECT_TRUE(same_bits(compute_states(*make_metric("PanopticQuality", metric), ranks), one));
  }
}

TEST(CocoPanopticReader, BadInputsAreOneLineInputErrors) {
  const std::int64_t a = 1026, b = 1000;  // image 1000 is 64x64, 1026 48x80
  {
    DataCopy d;
    d.gt_ann(a)["file_name"] = "missing.png";
    const auto m = d.error();
    EXPECT_HAS(m, "missing.png");
    EXPECT_HAS(m, "no such file");
    EXPECT_HAS(m, "image_id 1026");
  }
  {
    DataCopy d;  // a prediction of another size than its ground truth
    fs::copy_file(d.dir / "annotation_dir" / d.gt_ann(b).at("file_name").get<std::string>(),
                  d.dir / "prediction_dir" / d.pred_ann(a).at("file_name").get<std::string>(),
                  fs::copy_options::overwrite_existing);
    const auto m = d.error();
    EXPECT_HAS(m, "is 64x64 pixels (width x height), expected 80x48");
    EXPECT_HAS(m, "the size of its ground truth");
  }
  {
    DataCopy d;  // 'images' says another size
    for (auto& im : d.gt.at("images"))
      if (im.at("id") == a) im["height"] = 50;
    const auto m = d.error();
    EXPECT_HAS(m, "expected 80x50, the size that 'images' of");
  }
  {
    DataCopy d;  // a pixel id that segments_info does not list
    const std::int64_t id = d.gt_ann(a).at("segments_info")[0].at("id");
    d.gt_ann(a).at("segments_info").erase(0);
    const auto m = d.error();
    EXPECT_HAS(m, "has segment id " + std::to_string(id));
    EXPECT_HAS(m, "does not list");
  }
  {
    DataCopy d;  // a listed segment absent from the PNG
    d.pred_ann(a).at("segments_info").push_back({{"id", 4242}, {"category_id", 1}});
    const auto m = d.error();
    EXPECT_HAS(m, "segment id 4242 (category_id 1)");
    EXPECT_HAS(m, "no pixel of");
  }
  {
    DataCopy d;
    d.gt_ann(a).at("segments_info")[0]["category_id"] = 77;
    EXPECT_HAS(d.error(), "category_id 77, which is not in 'categories'");
  }
  {
    DataCopy d;
    d.gt_ann(a).at("segments_info")[0]["id"] = 0;
    EXPECT_HAS(d.error(), "key 'id': 0 is outside [1, 16777216)");
  }
  {
    DataCopy d;
    d.gt_ann(a).at("segments_info").push_back(d.gt_ann(a).at("segments_info")[0]);
    EXPECT_HAS(d.error(), "is listed twice in segments_info");
  }
  {
    DataCopy d;
    Json& list = d.pred.at("annotations");
    for (std::size_t i = 0; i < list.size(); ++i)
      if (list[i].at("image_id") == a) list.erase(i);
    EXPECT_HAS(d.error(), "no prediction for image_id 1026");
  }
  {
    DataCopy d;
    d.pred.at("annotations").push_back(d.pred_ann(a));
    d.pred.at("annotations").back()["image_id"] = 5;
    EXPECT_HAS(d.error(), "image_id 5 is not in the ground truth's annotations");
  }
  {
    DataCopy d;
    d.gt.at("annotations").push_back(d.gt_ann(a));
    EXPECT_HAS(d.error(), "image_id 1026 has two annotations");
  }
  {
    DataCopy d;
    d.gt.erase("categories");
    EXPECT_HAS(d.error(), "no 'categories' list");
  }
  {
    DataCopy d;
    d.gt.at("categories")[0].erase("isthing");
    EXPECT_HAS(d.error(), "no 'isthing'");
  }
  {
    DataCopy d;
    d.gt_ann(a)["segments_info"] = "none";
    EXPECT_HAS(d.error(), "key 'segments_info': expected a list, found the string \"none\"");
  }
  {
    DataCopy d;
    const Value::Map p = d.params();
    write_text(d.dir / "pred.json", "{\"annotations\": [");
    const auto m = one_line(read_error([&] { return make_reader("coco_panoptic", p); }));
    EXPECT_HAS(m, "pred.json': not valid JSON");
  }
  {
    DataCopy d;  // a grayscale PNG (a segmentation label map) where an RGB one is expected
    fs::copy_file(source_path("configs/examples/data/segmentation/gt/camera.png"),
                  d.dir / "prediction_dir" / d.pred_ann(a).at("file_name").get<std::string>(),
                  fs::copy_options::overwrite_existing);
    const auto m = d.error();
    EXPECT_HAS(m, "a panoptic PNG is 8-bit RGB (or RGBA)");
  }
  {
    DataCopy d;
    Value::Map p = d.params();
    for (auto& [k, v] : p)
      if (k == "annotation_dir") v = (d.dir / "nowhere").string();
    const auto m = one_line(read_error([&] { return make_reader("coco_panoptic", p); }));
    EXPECT_HAS(m, "annotation_dir");
    EXPECT_HAS(m, "does not exist");
  }
}

// A file_name that leaves its folder is an error naming the JSON, the annotation and the name,
// before anything is opened: absolute, with a '..' part, with a NUL; and a name inside the
// folder that is a link out of it.
TEST(CocoPanopticReader, FileNamesStayInsideTheirFolder) {
  const std::int64_t a = 1026;
  const std::vector<std::string> names{"/etc/passwd", "../x.png",   "sub/../../x.png",
                                       "..",          "./../x.png", std::string("a\0.png", 6)};
  for (const std::string& name : names) {
    for (const bool gt_side : {true, false}) {
      SCOPED_TRACE(name + (gt_side ? " (ground truth)" : " (prediction)"));
      DataCopy d;
      (gt_side ? d.gt_ann(a) : d.pred_ann(a))["file_name"] = name;
      const auto m = d.error();
      EXPECT_HAS(m, gt_side ? "annotations '" : "predictions '");
      EXPECT_HAS(m, "(image_id 1026): key 'file_name': the string");
      EXPECT_HAS(m, "expected a name relative to the PNG folder that stays inside it");
    }
  }
  // A link inside the folder to a PNG outside it (a real PNG: only the place is wrong), and a
  // link to /etc/passwd.
  for (const std::string target : {"outside.png", "/etc/passwd"}) {
    SCOPED_TRACE(target);
    DataCopy d;
    const fs::path gt_png =
        d.dir / "annotation_dir" / d.gt_ann(a).at("file_name").get<std::string>();
    fs::path to = target;
    if (target == "outside.png") {
      to = d.dir / target;
      fs::copy_file(gt_png, to);
    }
    fs::remove(gt_png);
    fs::create_symlink(to, gt_png);
    const auto m = d.error();
    EXPECT_HAS(m, "coco_panoptic reader: ground truth of sample");
    EXPECT_HAS(m, "resolves to " + fs::canonical(to).string() + ", outside its folder");
  }
}

// The pixels of a batch are checked against max_batch_pixels from the PNG headers before one is
// decoded: an image larger than the budget, a batch whose images pass it together, and a
// 12000x12000 image in a 430 KB file under the default budget (2^26 pixels); each an error naming
// the image and its size.
TEST(CocoPanopticReader, BatchPixelsAreBoundedBeforeDecoding) {
  const std::int64_t a = 1026;  // 80x48 (3840 pixels), the second image; the first 64x64
  {
    DataCopy d;
    Value::Map p = d.params(1);
    p.emplace_back("max_batch_pixels", Value(3000L));
    const auto m = one_line(read_error([&] { return make_reader("coco_panoptic", p); }));
    EXPECT_HAS(m, "image_id 1000)");
    EXPECT_HAS(m, "is 64x64 pixels (4096); alone more than max_batch_pixels 3000");
  }
  {
    DataCopy d;  // one image fits, two do not
    Value::Map p = d.params(2);
    p.emplace_back("max_batch_pixels", Value(6000L));
    const auto m = one_line(read_error([&] { return make_reader("coco_panoptic", p); }));
    EXPECT_HAS(m,
               "is 80x48 pixels (3840); with the batch's images before it, 7936 pixels, more "
               "than max_batch_pixels 6000");
    EXPECT_HAS(m, "give a smaller batch_size or a larger max_batch_pixels");
    // The same images one a batch (the largest 80x64: 5120 pixels) are read.
    Value::Map one = d.params(1);
    one.emplace_back("max_batch_pixels", Value(6000L));
    EXPECT_EQ(read_batches(one).size(), d.gt.at("annotations").size());
  }
  for (const auto& [w, h] : {std::pair{12000u, 12000u}, std::pair{1u << 20, 65u}}) {
    SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h));
    DataCopy d;
    for (auto& im : d.gt.at("images"))
      if (im.at("id") == a) im["width"] = w, im["height"] = h;
    for (const char* side : {"annotation_dir", "prediction_dir"}) {
      const Json& ann = std::string(side) == "annotation_dir" ? d.gt_ann(a) : d.pred_ann(a);
      write_text(d.dir / side / ann.at("file_name").get<std::string>(),
                 png_declaring(w, h, 2, 8, 430000));
    }
    const Value::Map p = d.params(1);
    const auto m = one_line(read_error([&] { return make_reader("coco_panoptic", p); }));
    EXPECT_HAS(m, "ground truth of sample 1 (image_id 1026)");
    EXPECT_HAS(m, fmt::format("is {}x{} pixels ({}); alone more than max_batch_pixels 67108864", w,
                              h, std::uint64_t{w} * h));
  }
  {
    DataCopy d;
    Value::Map p = d.params();
    p.emplace_back("max_batch_pixels", Value(0L));
    EXPECT_THROW(make_reader("coco_panoptic", p), ConfigError);
  }
}

// Expected, by construction: annotation_dir and prediction_dir default to the JSONs' paths
// without their extension (panopticapi's pq_compute), giving the same data.
TEST(CocoPanopticReader, FoldersDefaultToTheJsonPathsWithoutExtension) {
  DataCopy d;
  fs::rename(d.dir / "annotation_dir", d.dir / "gt");
  fs::rename(d.dir / "prediction_dir", d.dir / "pred");
  d.params();
  const Batch got = concat(read_batches({{"annotations", (d.dir / "gt.json").string()},
                                         {"predictions", (d.dir / "pred.json").string()}}));
  const Value::Map metric = {{"allow_unknown_preds_category", true}};
  EXPECT_TRUE(same_bits(run_single("PanopticQuality", metric, got),
                        run_single("PanopticQuality", metric, example_data())));
}

TEST(CocoPanopticReader, BadParametersAreConfigErrors) {
  Value::Map p = example_params();
  for (auto& [k, v] : p)
    if (k == "batch_size") v = 0;
  EXPECT_HAS(error_of<ConfigError>([&] { make_reader("coco_panoptic", p); }), "batch_size");
  EXPECT_HAS(error_of<ConfigError>([&] {
               make_reader("coco_panoptic", {{"annotations", "x.json"}});
             }),
             "predictions");
}

// ---- the metric's inputs and choices -----------------------------------------------------------

/// The example data with the predicted points of category 99 made `to` (category, instance 0).
Batch with_unknown_as(std::int32_t to) {
  Batch out = example_data();
  Batch::Ragged preds;
  for (const Tensor& t : example_data().ragged("pred_panoptic")) {
    Tensor c = t.clone();
    auto* m = c.mutable_data_as<std::int32_t>();
    for (std::int64_t j = 0; j < c.numel() / 2; ++j)
      if (m[2 * j] == 99) m[2 * j] = to, m[2 * j + 1] = 0;
    preds.push_back(c);
  }
  out.set_ragged("pred_panoptic", preds);
  return out;
}

// Expected: case "pq" (torchmetrics with allow_unknown_preds_category=True, where 99 is void): void
// predictions (-1, void_category) need no allow_unknown_preds_category; with void_category null
// they are an unknown category again.
TEST(PanopticQuality, VoidPredictionsNeedNoAllowUnknown) {
  const Json& c = find_case(expected_file(), "pq");
  const Batch voided = with_unknown_as(-1);
  const Value got = run_all_rank_counts("PanopticQuality", {}, voided, {}, kSweep);
  expect_matches(got, c.at("expected"), "pq (99 as void)", "PanopticQuality");
  EXPECT_TRUE(
      same_bits(got, run_single("PanopticQuality", to_map(c.at("params")), example_data())));
  const auto m = one_line(input_error("PanopticQuality", {{"void_category", nullptr}}, voided));
  EXPECT_HAS(m, "category id -1 is neither a thing nor a stuff");
}

TEST(PanopticQuality, UnknownPredictedCategoriesAreInputErrorsByDefault) {
  const auto m = one_line(input_error("PanopticQuality", {}, example_data()));
  EXPECT_HAS(m, "metric 'PanopticQuality': field 'pred_panoptic' sample ");
  EXPECT_HAS(m,
             "category id 99 is neither a thing nor a stuff (things [1, 3, 5], stuffs [7, 9, 12])");
  EXPECT_HAS(m, "allow_unknown_preds_category: true");
  EXPECT_HAS(one_line(input_error("ModifiedPanopticQuality", {}, example_data())),
             "category id 99");
}

Batch maps(std::vector<std::int64_t> pred, std::vector<std::int64_t> gt,
           std::vector<std::int64_t> shape) {
  Batch b;
  b.set("pred_panoptic", Tensor::from_vector(pred, shape));
  b.set("gt_panoptic", Tensor::from_vector(gt, shape));
  return b;
}

TEST(PanopticQuality, BadInputsAreOneLineInputErrors) {
  const Value::Map cats = {{"things", Value::Array{1}}, {"stuffs", Value::Array{2}}};
  // [1, 2, 2, 2]: one 2x2 image.
  const std::vector<std::int64_t> ok = {1, 5, 1, 5, 2, 0, 2, 0};
  {
    Batch b;
    b.set("pred_panoptic", Tensor::from_vector(ok, {1, 2, 2, 2}));
    b.set("gt_panoptic",
          Tensor::from_vector(std::vector<std::int64_t>{1, 5, 1, 5, 2, 0}, {1, 2, 3}));
    EXPECT_HAS(one_line(input_error("PanopticQuality", cats, b)),
               "field 'gt_panoptic' sample 0: must be an integer map [*spatial, 2]");
  }
  {
    Batch b;
    b.set("pred_panoptic", Tensor::from_vector(ok, {1, 2, 2, 2}));
    b.set("gt_panoptic", Tensor::from_vector(ok, {1, 1, 4, 2}));
    EXPECT_HAS(one_line(input_error("PanopticQuality", cats, b)),
               "field 'pred_panoptic' sample 0: has shape [2, 2, 2], 'gt_panoptic' has [1, 4, 2]");
  }
  {
    Batch b;
    b.set("pred_panoptic",
          Tensor::from_vector(std::vector<double>(ok.begin(), ok.end()), {1, 2, 2, 2}));
    b.set("gt_panoptic", Tensor::from_vector(ok, {1, 2, 2, 2}));
    EXPECT_HAS(one_line(input_error("PanopticQuality", cats, b)), "got f64[2, 2, 2]");
  }
  {
    const std::vector<std::int64_t> bad = {1, 5, 3, 5, 2, 0, 2, 0};  // 3: unknown
    EXPECT_HAS(one_line(input_error("PanopticQuality", cats, maps(bad, ok, {1, 2, 2, 2}))),
               "sample 0 pixel (row 0, column 1): category id 3 is neither a thing nor a stuff "
               "(things [1], stuffs [2])");
  }
  {
    Value::Map p = cats;
    p.emplace_back("crowd", "void");
    EXPECT_HAS(one_line(input_error("PanopticQuality", p, maps(ok, ok, {1, 2, 2, 2}))),
               "field 'gt_crowd' is missing from the batch: crowd 'void' needs");
  }
  EXPECT_HAS(one_line(input_error("PanopticQuality", {}, maps(ok, ok, {1, 2, 2, 2}))),
             "field 'thing_ids' is missing from the batch: without the parameters 'things' and "
             "'stuffs'");
  {
    Batch b = maps(ok, ok, {1, 2, 2, 2});
    b.set_ragged("thing_ids", {Tensor::from_vector(std::vector<std::int64_t>{1, 2})});
    b.set_ragged("stuff_ids", {Tensor::from_vector(std::vector<std::int64_t>{2})});
    EXPECT_HAS(one_line(input_error("PanopticQuality", {}, b)),
               "category 2 is both a thing and a stuff");
  }
  {
    // Categories that change between samples.
    Batch b = example_data().slice(0, 2);
    b.set_ragged("thing_ids",
                 {b.ragged("thing_ids")[0], Tensor::from_vector(std::vector<std::int64_t>{1, 3})});
    EXPECT_HAS(
        one_line(input_error("PanopticQuality", {{"allow_unknown_preds_category", true}}, b)),
        "sample 1: things [1, 3], stuffs [7, 9, 12] differ from sample 0's");
  }
  {
    Batch empty = example_data().slice(0, 0);
    EXPECT_HAS(
        one_line(input_error("PanopticQuality", {{"allow_unknown_preds_category", true}}, empty)),
        "no samples");
  }
}

// Expected, by hand: one 2x2 image, gt a thing (1, 5) over the top row and stuff 2 below; the
// prediction matches both exactly, so pq 1; the dense and the ragged form agree, and so do maps of
// uint8 and int16.
TEST(PanopticQuality, AnyIntegerDtypeDenseOrRagged) {
  const Value::Map cats = {
      {"things", Value::Array{1}}, {"stuffs", Value::Array{2}}, {"return_sq_and_rq", true}};
  const std::vector<std::int64_t> m = {1, 5, 1, 5, 2, 0, 2, 9};  // stuff instance ids are ignored
  const Value want = run_single("PanopticQuality", cats, maps(m, m, {1, 2, 2, 2}));
  EXPECT_EQ(want.at("pq").as_double(), 1.0);
  EXPECT_EQ(want.at("rq").as_double(), 1.0);
  Batch b;
  b.set_ragged("pred_panoptic",
               {Tensor::from_vector(std::vector<std::uint8_t>(m.begin(), m.end()), {2, 2, 2})});
  b.set_ragged("gt_panoptic",
               {Tensor::from_vector(std::vector<std::int16_t>(m.begin(), m.end()), {2, 2, 2})});
  EXPECT_TRUE(same_bits(run_single("PanopticQuality", cats, b), want));
}

TEST(PanopticQuality, BadParametersAreConfigErrors) {
  EXPECT_HAS(config_error("PanopticQuality", {{"things", Value::Array{1}}}),
             "parameter 'stuffs' must be given together with 'things'");
  EXPECT_HAS(config_error("PanopticQuality",
                          {{"things", Value::Array{1, 2}}, {"stuffs", Value::Array{2}}}),
             "must be distinct; both hold category 2");
  EXPECT_HAS(
      config_error("PanopticQuality", {{"things", Value::Array{}}, {"stuffs", Value::Array{}}}),
      "are both empty");
  EXPECT_HAS(
      config_error("PanopticQuality", {{"things", Value::Array{-1}}, {"stuffs", Value::Array{2}}}),
      "parameter 'void_category' -1 is one of the things or stuffs");
  EXPECT_HAS(config_error("PanopticQuality", {{"crowd", "ignore"}}), "crowd");
  EXPECT_HAS(config_error("ModifiedPanopticQuality", {{"return_sq_and_rq", true}}),
             "return_sq_and_rq");
  EXPECT_HAS(config_error("PanopticQuality", {{"things", "1"}, {"stuffs", Value::Array{2}}}),
             "things");
  EXPECT_EQ(config_error("PanopticQuality", {{"things", Value::Array{-1}},
                                             {"stuffs", Value::Array{2}},
                                             {"void_category", nullptr}}),
            "");
}

TEST(PanopticQuality, IsDocumented) {
  for (const char* name : {"PanopticQuality", "ModifiedPanopticQuality"})
    expect_documented(name, "panoptic");
}

// ---- torch's reductions ------------------------------------------------------------------------

// Expected: "torch_reductions" of expected_panoptic.json (torch 2.15.0's sum and mean), bit for
// bit.
TEST(PanopticTorchReduce, SumAndMeanAreTorchsBitForBit) {
  namespace tr = tally::panoptic::torch_cpu;
  for (const auto& r : expected_file().at("torch_reductions")) {
    const auto values = r.at("values").get<std::vector<double>>();
    const auto n = static_cast<std::int64_t>(values.size());
    double sum = 0, mean = 0;
    if (r.at("dtype") == "float32") {
      const std::vector<float> x(values.begin(), values.end());
      sum = tr::sum(x.data(), n);
      mean = tr::mean(x.data(), n);
    } else {
      sum = tr::sum(values.data(), n);
      mean = tr::mean(values.data(), n);
    }
    SCOPED_TRACE(r.at("dtype").get<std::string>() + " n=" + std::to_string(n));
    EXPECT_EQ(sum, r.at("sum").get<double>());
    if (r.at("mean").is_null())
      EXPECT_TRUE(std::isnan(mean));
    else
      EXPECT_EQ(mean, r.at("mean").get<double>());
  }
}

}  // namespace
}  // namespace tally::test
