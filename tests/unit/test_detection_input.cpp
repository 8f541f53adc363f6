// Detection data as users have it, and COCO geometry (issue 16): the real detection, jsonl and
// coco_json plugins through the Registry.
//
//   - Per-image fields read the same whether a reader makes them ragged or dense [N, n, ...]
//     (tally::PerSample): the jsonl reader makes a field dense when every image has the same
//     number of boxes. Integer boxes read as float64; `[]` is an image with no boxes.
//   - COCO masks: polygons far outside the image rasterise in memory bounded by the image (the
//     same masks as maskApi.c's walk over every upsampled point); coordinates, RLE sizes and counts
//     out of range, and values of the wrong type, are one InputError naming the file, the entry
//     and the key.
//
// Expected values:
//   - tests/reference/expected_voc.json, section "users", written by tests/reference/voc.py with
//     mmeval 0.2.1 (VOCMeanAP and ProposalRecall; each metric records its exact call) on
//     tests/data/detection/voc_users_*.jsonl;
//   - the maskApi.c rasteriser as tally shipped it before (a straight port: rleFrPoly walks every
//     upsampled point), kept below as `walk_every_point`: the new one must give its masks
//     exactly; pycocotools 2.0.11's masks for polygons far outside the image are in
//     tests/reference/expected_coco.json ("masks", the last 5 cases: MaskApi tests of
//     test_detection_coco.cpp) and its segm stats for polygon results ("segm_polygons").
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/input.hpp"
#include "tally_support/mask.hpp"

namespace tally::test {
namespace {

namespace mask = tally::support::mask;
namespace fs = std::filesystem;

/// Expects f to throw one InputError: one line holding every part.
void expect_input_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  const std::string msg = error_of<InputError>(f);
  for (const auto& part : parts) EXPECT_HAS(msg, part);
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

const Json& expected_voc() { return expected_json("tests/reference/expected_voc.json"); }

/// Every batch of a jsonl file read as `ranks` ranks in batches of `batch_size`: one list of
/// batches a rank.
std::vector<std::vector<Batch>> read_jsonl(const fs::path& path, int ranks,
                                           std::int64_t batch_size) {
  std::vector<std::vector<Batch>> out;
  for (int r = 0; r < ranks; ++r) {
    auto reader =
        make_reader("jsonl", {{"path", Value(path.string())}, {"batch_size", Value(batch_size)}},
                    ShardInfo{r, ranks});
    out.emplace_back();
    while (auto b = reader->next()) out.back().push_back(b->clone());
  }
  return out;
}

/// One metric a rank fed that rank's batches; their states synced to a fresh instance, as the
/// engine syncs them (counts summed, the rest packed and gathered).
Value run_batches(const std::string& type, const Value::Map& params,
                  const std::vector<std::vector<Batch>>& per_rank) {
  std::vector<std::shared_ptr<Metric>> ranks;
  for (const auto& batches : per_rank) {
    ranks.push_back(make_metric(type, params));
    for (const Batch& b : batches) ranks.back()->add(b);
  }
  return compute_states(*make_metric(type, params), ranks);
}

class VocAsUsersHaveIt : public ::testing::TestWithParam<std::string> {};

// Every image with the same box count (dense fields), integer boxes, images with no boxes:
// mmeval's values for batch sizes 1, 2, 3, 7 and the whole file, on 1 to 7 ranks.
TEST_P(VocAsUsersHaveIt, MatchesMmevalForAnyBatchSizeAndRankCount) {
  const Json& section = expected_voc().at("users").at(GetParam());
  const fs::path data = source_path(section.at("data").get<std::string>());
  {
    // What the reader makes of the file: the layouts this test is about.
    const auto whole = read_jsonl(data, 1, 1 << 20);
    ASSERT_EQ(whole.size(), 1u);
    ASSERT_EQ(whole[0].size(), 1u);
    const Batch& b = whole[0][0];
    if (GetParam() == "same_count") {
      EXPECT_FALSE(b.is_ragged("pred_bboxes"));  // dense [N, 3, 4]
      EXPECT_EQ(b.tensor("pred_bboxes").shape(), (std::vector<std::int64_t>{b.size(), 3, 4}));
      EXPECT_EQ(b.tensor("gt_bboxes").dtype(), DType::I64);  // integer pixels
    } else {
      EXPECT_TRUE(b.is_ragged("pred_bboxes"));
      EXPECT_EQ(b.ragged("pred_bboxes")[0].shape(), std::vector<std::int64_t>{0});  // `[]`
    }
  }
  for (const auto& m : section.at("metrics")) {
    const std::string type = m.at("metric").get<std::string>();
    const Value::Map params = to_map(m.at("params"));
    const Value one = run_batches(type, params, read_jsonl(data, 1, 1 << 20));
    expect_matches(one, m.at("expected"), GetParam() + " " + type, type, 1e-12);
    for (int ranks = 1; ranks <= 7; ++ranks)
      for (const std::int64_t batch : {1, 2, 3, 7}) {
        const Value got = run_batches(type, params, read_jsonl(data, ranks, batch));
        EXPECT_TRUE(same_bits(got, one)) << type << ": " << ranks << " ranks, batches of " << batch
                                         << ": " << got.to_json() << " vs " << one.to_json();
      }
  }
  print_rel_diffs("mmeval 0.2.1");
}

INSTANTIATE_TEST_SUITE_P(Mmeval, VocAsUsersHaveIt, ::testing::Values("same_count", "empty_int"));

// ---- dense and ragged, integer and float, empty ------------------------------------------------

/// The dense fields of `b` as ragged ones (one tensor a sample), other fields as they are.
Batch as_ragged(const Batch& b) {
  Batch out;
  for (const auto& [name, field] : b.fields()) {
    const auto* t = std::get_if<Tensor>(&field);
    if (t == nullptr || t->dim() < 2) {
      if (t != nullptr) out.set(name, *t);
      continue;
    }
    Batch::Ragged r;
    for (std::int64_t i = 0; i < t->size(0); ++i) {
      const Tensor row = t->slice(i, i + 1);
      std::vector<std::int64_t> shape(row.shape().begin() + 1, row.shape().end());
      r.push_back(Tensor::view(row.data(), row.dtype(), shape).clone());
    }
    out.set_ragged(name, r);
  }
  return out;
}

/// Boxes of `images` images with `n` boxes each: a dense [images, n, 4] float64 tensor with
/// integer-valued coordinates (so that an int64 copy holds the same numbers).
Tensor boxes(std::mt19937& rng, std::int64_t images, std::int64_t n) {
  std::vector<double> v;
  std::uniform_int_distribution<int> xy(0, 150), side(4, 60);
  for (std::int64_t i = 0; i < images * n; ++i) {
    const double x = xy(rng), y = xy(rng);
    v.insert(v.end(), {x, y, x + side(rng), y + side(rng)});
  }
  return Tensor::from_vector(v, {images, n, 4});
}

Tensor to_int64(const Tensor& t) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<std::int64_t>(t.data_as<double>()[i]);
  return Tensor::from_vector(v, t.shape());
}

Batch dense_detections(std::mt19937& rng, std::int64_t images) {
  Batch b;
  std::vector<std::int64_t> ids(static_cast<std::size_t>(images)), pl, gl;
  std::vector<double> scores;
  for (std::int64_t i = 0; i < images; ++i) ids[static_cast<std::size_t>(i)] = 100 + i;
  std::uniform_int_distribution<int> label(0, 2);
  std::uniform_real_distribution<double> score(0, 1);
  for (std::int64_t i = 0; i < images * 4; ++i) {
    pl.push_back(label(rng));
    scores.push_back(score(rng));
  }
  for (std::int64_t i = 0; i < images * 3; ++i) gl.push_back(label(rng));
  b.set("img_id", Tensor::from_vector(ids));
  b.set("pred_bboxes", boxes(rng, images, 4));
  b.set("pred_scores", Tensor::from_vector(scores, {images, 4}));
  b.set("pred_labels", Tensor::from_vector(pl, {images, 4}));
  b.set("gt_bboxes", boxes(rng, images, 3));
  b.set("gt_labels", Tensor::from_vector(gl, {images, 3}));
  return b;
}

struct MetricCase {
  std::string type;
  Value::Map params;
};

std::vector<MetricCase> every_detection_metric() {
  return {{"VOCMeanAP", {{"num_classes", Value(3)}}},
          {"ProposalRecall", {}},
          {"COCODetection", {}},
          {"COCODetection", {{"metric", Value::Array{Value("proposal")}}}}};
}

// A field's layout (dense or ragged) and the boxes' dtype (float64 or integer) do not change
// any detection metric's result, for any batch size and rank count.
TEST(DetectionInput, DenseRaggedAndIntegerBoxesGiveTheSameResults) {
  std::mt19937 rng(16);
  const Batch dense = dense_detections(rng, 11);
  const Batch ragged = as_ragged(dense);
  ASSERT_TRUE(ragged.is_ragged("pred_bboxes"));
  Batch ints = dense;
  ints.set("pred_bboxes", to_int64(dense.tensor("pred_bboxes")));
  ints.set("gt_bboxes", to_int64(dense.tensor("gt_bboxes")));
  const Batch ints_ragged = as_ragged(ints);
  for (const auto& c : every_detection_metric()) {
    const auto make = [&] { return make_metric(c.type, c.params); };
    const Value want = run_ranks(make, ragged, contiguous_shards(ragged.size(), 1));
    for (const Batch* data : std::vector<const Batch*>{&dense, &ints, &ints_ragged})
      for (int ranks : {1, 2, 3, 7})
        for (std::int64_t batch : {1, 2, 3, 7}) {
          RunOptions opt;
          opt.batch_size = batch;
          const Value got = run_ranks(make, *data, contiguous_shards(data->size(), ranks), opt);
          EXPECT_TRUE(same_bits(got, want))
              << c.type << ": " << ranks << " ranks, batches of " << batch << ": " << got.to_json()
              << " vs " << want.to_json();
        }
  }
}

// `[]` for an image's boxes, scores and labels (a 1-D empty tensor of any dtype, as a reader
// gives it) is an image with no boxes: the same as [0, 4] / [0] tensors.
TEST(DetectionInput, AnEmptyListIsAnImageWithNoBoxes) {
  std::mt19937 rng(3);
  const Batch dense = dense_detections(rng, 5);
  Batch shaped = as_ragged(dense), listed = shaped;
  for (const char* side : {"pred", "gt"}) {
    const std::string bx = std::string(side) + "_bboxes", lb = std::string(side) + "_labels";
    Batch::Ragged b1 = shaped.ragged(bx), b2 = b1, l1 = shaped.ragged(lb), l2 = l1;
    b1[2] = Tensor::zeros(DType::F64, {0, 4});
    b2[2] = Tensor::zeros(DType::I64, {0});  // `[]` read as an integer list
    l1[2] = Tensor::zeros(DType::I64, {0});
    l2[2] = Tensor::zeros(DType::F64, {0});  // `[]` read as a float list
    shaped.set_ragged(bx, b1);
    listed.set_ragged(bx, b2);
    shaped.set_ragged(lb, l1);
    listed.set_ragged(lb, l2);
  }
  Batch::Ragged s1 = shaped.ragged("pred_scores"), s2 = s1;
  s1[2] = Tensor::zeros(DType::F64, {0});
  s2[2] = Tensor::zeros(DType::I64, {0});
  shaped.set_ragged("pred_scores", s1);
  listed.set_ragged("pred_scores", s2);
  for (const auto& c : every_detection_metric()) {
    const auto make = [&] { return make_metric(c.type, c.params); };
    const Value want = run_ranks(make, shaped, contiguous_shards(shaped.size(), 1));
    for (int ranks : {1, 2, 3})
      EXPECT_TRUE(same_bits(run_ranks(make, listed, contiguous_shards(listed.size(), ranks)), want))
          << c.type << " on " << ranks << " ranks";
  }
}

// Integers that a float64 cannot hold exactly are refused, naming the field and the sample.
TEST(DetectionInput, IntegerBoxesBeyondTwoToThe53AreRefused) {
  std::mt19937 rng(5);
  Batch b = as_ragged(dense_detections(rng, 3));
  Batch::Ragged r = b.ragged("gt_bboxes");
  std::vector<std::int64_t> v(12, 5);
  v[6] = (std::int64_t{1} << 53) + 1;
  r[1] = Tensor::from_vector(v, {3, 4});
  b.set_ragged("gt_bboxes", r);
  for (const auto& c : every_detection_metric()) {
    const auto m = make_metric(c.type, c.params);
    expect_input_error([&] { m->add(b); }, {"gt_bboxes", "sample 1", "2^53"});
  }
}

// The SDK accessor itself: dense rows, ragged tensors, and the errors.
TEST(PerSample, DenseRowsAndRaggedTensorsReadAlike) {
  const InputChecker check{"metric 'm' (M)"};
  Batch b;
  std::vector<float> v(24);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  b.set("boxes", Tensor::from_vector(v, {3, 2, 4}));
  b.set_ragged("lists", {Tensor::from_vector(std::vector<std::int64_t>{1}),
                         Tensor::from_vector(std::vector<std::int64_t>{}),
                         Tensor::from_vector(std::vector<std::int64_t>{2, 3})});
  b.set_text("text", Text::from_strings({"a", "b", "c"}));
  Tensor row;
  {
    const PerSample boxes(b, "boxes", check);
    EXPECT_FALSE(boxes.is_ragged());
    EXPECT_EQ(boxes.size(), 3);
    row = boxes[std::int64_t{2}];
  }
  b = Batch{};  // the row keeps the field's memory alive
  EXPECT_EQ(row.shape(), (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(row.data_as<float>()[0], 16.0f);
  EXPECT_EQ(row.data_as<float>()[7], 23.0f);
  Batch c;
  c.set_ragged("lists", {Tensor::from_vector(std::vector<std::int64_t>{2, 3})});
  c.set_text("text", Text::from_strings({"a"}));
  const PerSample lists(c, "lists", check);
  EXPECT_TRUE(lists.is_ragged());
  EXPECT_EQ(lists[std::size_t{0}].data_as<std::int64_t>()[1], 3);
  expect_input_error([&] { PerSample(c, "text", check); }, {"metric 'm' (M)", "'text'", "text"});
  expect_input_error([&] { PerSample(c, "nope", check); }, {"'nope'", "missing"});
  EXPECT_FALSE(PerSample::if_present(c, "nope", check).has_value());
}

// ---- the jsonl reader: `[]` --------------------------------------------------------------------

/// A file in the temp folder named for this process: ctest runs each test in its own process,
/// in parallel, and tests that write the same name would read each other's files.
fs::path write_file(const std::string& name, const std::string& text) {
  const fs::path p =
      fs::temp_directory_path() / ("tally_det_input_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

// A field whose first line holds `[]` takes its kind from its first non-empty array (numbers
// or strings); a field empty on every line is numeric; an empty image's sample is [0].
TEST(DetectionInput, JsonlEmptyListsTakeTheKindOfTheFirstNonEmptyOne) {
  const fs::path p = write_file("empty.jsonl",
                                "{\"b\": [], \"s\": [], \"t\": [], \"z\": []}\n"
                                "{\"b\": [], \"s\": [0.5], \"t\": [\"x\"], \"z\": []}\n"
                                "{\"b\": [[1, 2, 3, 4]], \"s\": [0.25], \"t\": [], \"z\": []}\n");
  for (const std::int64_t batch : {1, 2, 3}) {
    auto reader = make_reader("jsonl", {{"path", Value(p.string())}, {"batch_size", Value(batch)}});
    std::int64_t line = 0;
    while (auto b = reader->next()) {
      const InputChecker check{"test"};
      const PerSample boxes(*b, "b", check), scores(*b, "s", check), z(*b, "z", check);
      for (std::int64_t i = 0; i < b->size(); ++i, ++line) {
        EXPECT_EQ(boxes[i].dtype(), DType::I64);
        EXPECT_EQ(boxes[i].numel(), line == 2 ? 4 : 0) << line;
        EXPECT_EQ(scores[i].dtype(), DType::F64);
        EXPECT_EQ(scores[i].numel(), line == 0 ? 0 : 1);
        EXPECT_EQ(z[i].numel(), 0);
        EXPECT_EQ(b->text("t")[i].size(), line == 1 ? 1u : 0u);
      }
    }
    EXPECT_EQ(line, 3);
  }
  // Later lines must still agree with the kind the file gives the field.
  const fs::path bad = write_file("bad.jsonl", "{\"b\": []}\n{\"b\": 3}\n");
  expect_input_error(
      [&] {
        make_reader("jsonl", {{"path", Value(bad.string())}});
      },
      {"bad.jsonl:2", "'b'", "expected an array"});
  fs::remove(p);
  fs::remove(bad);
}

// ---- the polygon rasteriser ---------------------------------------------------------------------

/// maskApi.c's rleFrPoly as tally shipped it before issue 16 (a straight port: it walks every
/// upsampled point of every edge). The reference for the bounded rasteriser, on coordinates
/// small enough for its arrays.
mask::Rle walk_every_point(const double* xy, std::size_t k, std::uint32_t h, std::uint32_t w) {
  const double scale = 5;
  std::vector<int> x(k + 1), y(k + 1);
  for (std::size_t j = 0; j < k; ++j) x[j] = static_cast<int>(scale * xy[j * 2 + 0] + .5);
  for (std::size_t j = 0; j < k; ++j) y[j] = static_cast<int>(scale * xy[j * 2 + 1] + .5);
  x[k] = x[0];
  y[k] = y[0];
  std::size_t m = 0;
  for (std::size_t j = 0; j < k; ++j)
    m += static_cast<std::size_t>(std::max(std::abs(x[j] - x[j + 1]), std::abs(y[j] - y[j + 1]))) +
         1;
  std::vector<int> u(m), v(m);
  m = 0;
  for (std::size_t j = 0; j < k; ++j) {
    int xs = x[j], xe = x[j + 1], ys = y[j], ye = y[j + 1];
    const int dx = std::abs(xe - xs), dy = std::abs(ys - ye);
    const bool flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
    if (flip) {
      std::swap(xs, xe);
      std::swap(ys, ye);
    }
    const double s = dx == 0 && dy == 0 ? 0.0
                     : dx >= dy         ? static_cast<double>(ye - ys) / dx
                                        : static_cast<double>(xe - xs) / dy;
    if (dx >= dy) {
      for (int d = 0; d <= dx; ++d) {
        const int t = flip ? dx - d : d;
        u[m] = t + xs;
        v[m] = static_cast<int>(ys + s * t + .5);
        ++m;
      }
    } else {
      for (int d = 0; d <= dy; ++d) {
        const int t = flip ? dy - d : d;
        v[m] = t + ys;
        u[m] = static_cast<int>(xs + s * t + .5);
        ++m;
      }
    }
  }
  std::vector<std::uint32_t> a;
  for (std::size_t j = 1; j < m; ++j) {
    if (u[j] == u[j - 1]) continue;
    double xd = static_cast<double>(u[j] < u[j - 1] ? u[j] : u[j] - 1);
    xd = (xd + .5) / scale - .5;
    if (std::floor(xd) != xd || xd < 0 || xd > w - 1.0) continue;
    double yd = static_cast<double>(v[j] < v[j - 1] ? v[j] : v[j - 1]);
    yd = (yd + .5) / scale - .5;
    yd = std::ceil(std::clamp(yd, 0.0, static_cast<double>(h)));
    a.push_back(static_cast<std::uint32_t>(xd) * h + static_cast<std::uint32_t>(yd));
  }
  a.push_back(h * w);
  std::sort(a.begin(), a.end());
  std::uint32_t p = 0;
  for (auto& e : a) {
    const std::uint32_t t = e;
    e -= p;
    p = t;
  }
  mask::Rle r{h, w, {}};
  std::size_t j = 0;
  r.cnts.push_back(a[j++]);
  while (j < a.size()) {
    if (a[j] > 0) {
      r.cnts.push_back(a[j++]);
    } else {
      ++j;
      if (j < a.size()) r.cnts.back() += a[j++];
    }
  }
  return r;
}

// Random polygons inside, across and far outside the image (up to 2e5 px away), with repeated
// points, integer and fifth-of-a-pixel coordinates (the rounding traps), and empty images: the
// same RLE as walking every upsampled point.
TEST(MaskGeometry, PolygonsAnywhereGiveTheMasksOfTheFullWalk) {
  std::mt19937_64 rng(16);
  int compared = 0;
  for (const double span : {60.0, 300.0, 4000.0, 4e4, 4e5}) {
    // The full walk takes time in the span: fewer polygons far out.
    const int n = span > 1e5 ? 3 : span > 1e4 ? 30 : 400;
    for (int it = 0; it < n; ++it) {
      std::uint32_t h = 1 + static_cast<std::uint32_t>(rng() % 40),
                    w = 1 + static_cast<std::uint32_t>(rng() % 40);
      if (it % 50 == 0)
        h = static_cast<std::uint32_t>(rng() % 3), w = static_cast<std::uint32_t>(rng() % 3);
      const std::size_t k = 3 + rng() % 6;
      std::uniform_real_distribution<double> d(-span / 2, span / 2 + 40);
      std::vector<double> xy(2 * k);
      for (auto& v : xy) {
        v = d(rng);
        if (rng() % 4 == 0) v = std::round(v);
        if (rng() % 7 == 0) v = std::round(v * 5) / 5 + 0.1 * static_cast<double>(rng() % 3);
      }
      if (rng() % 5 == 0) xy[2] = xy[0], xy[3] = xy[1];
      const mask::Rle want = walk_every_point(xy.data(), k, h, w);
      const mask::Rle got = mask::rle_from_poly(xy.data(), k, h, w);
      ASSERT_EQ(got.cnts, want.cnts) << "h " << h << " w " << w << " span " << span;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 3 * 400 + 30 + 3);
}

// Coordinates at the bound (1e8: 5e8 upsampled points an edge for the full walk) rasterise in
// memory bounded by the image; a polygon covering the image covers every pixel; values beyond
// the bound or NaN are clamped (never undefined behaviour; readers refuse them first).
TEST(MaskGeometry, CoordinatesAtTheBoundAreBoundedAndDefined) {
  const double big = mask::kMaxCoordinate;
  const double cover[8] = {-big, -big, big, -big, big, big, -big, big};
  const mask::Rle all = mask::rle_from_poly(cover, 4, 480, 640);
  EXPECT_EQ(mask::rle_area(all), 480u * 640u);
  const double sliver[6] = {-big, 5, big, 7, 3, big};
  const mask::Rle s = mask::rle_from_poly(sliver, 3, 480, 640);
  std::uint64_t sum = 0;
  for (const auto c : s.cnts) sum += c;
  EXPECT_EQ(sum, 480u * 640u);
  const double nan = std::nan("");
  for (const double bad : {1e9, -1e12, 1e300, nan, std::numeric_limits<double>::infinity()}) {
    const double xy[6] = {bad, 5, 20, bad, 3, 30};
    const mask::Rle r = mask::rle_from_poly(xy, 3, 50, 60);
    sum = 0;
    for (const auto c : r.cnts) sum += c;
    EXPECT_EQ(sum, 50u * 60u) << bad;
  }
  EXPECT_TRUE(mask::coordinate_ok(big));
  EXPECT_FALSE(mask::coordinate_ok(std::nextafter(big, 2 * big)));
  EXPECT_FALSE(mask::coordinate_ok(nan));
  EXPECT_TRUE(mask::size_ok(65535, 65537));
  EXPECT_FALSE(mask::size_ok(65536, 65536));  // h * w = 2^32
  EXPECT_FALSE(mask::size_ok(std::int64_t{1} << 31, 1));
  EXPECT_FALSE(mask::size_ok(-1, 1));
}

/// rleToString on int64 counts (so that a count outside uint32 can be written).
std::string encode(std::vector<std::int64_t> xs) {
  std::string s;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    std::int64_t x = xs[i];
    if (i > 2) x -= xs[i - 2];
    bool more = true;
    while (more) {
      char c = static_cast<char>(x & 0x1f);
      x >>= 5;
      more = (c & 0x10) ? x != -1 : x != 0;
      if (more) c = static_cast<char>(c | 0x20);
      s.push_back(static_cast<char>(c + 48));
    }
  }
  return s;
}

/// `s` as a JSON string literal.
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

// Compressed RLE strings whose counts leave [0, 2^32) are refused, not cut to 32 bits.
TEST(MaskGeometry, CompressedCountsOutsideUint32AreRefused) {
  mask::Rle r;
  EXPECT_TRUE(mask::rle_from_string(encode({2, 3, 1}), 2, 3, r));
  EXPECT_EQ(r.cnts, (std::vector<std::uint32_t>{2, 3, 1}));
  for (const std::int64_t bad :
       {std::int64_t{1} << 32, (std::int64_t{1} << 32) + 6, std::int64_t{-1}})
    EXPECT_FALSE(mask::rle_from_string(encode({bad, 0, 0}), 2, 3, r)) << bad;
  // Deltas (counts after the third are stored as differences) that take a count below zero or
  // past 2^32 - 1.
  EXPECT_FALSE(mask::rle_from_string(encode({1, 5, 1, -3}), 2, 5, r));
  EXPECT_FALSE(mask::rle_from_string(encode({1, 4294967295, 1, 4294967296}), 2, 5, r));
}

// ---- the coco_json reader: geometry and types
// ----------------------------------------------------

std::string gt_json(const std::string& image, const std::string& annotation) {
  return "{\"images\": [" + image +
         "], \"categories\": [{\"id\": 1}], \"annotations\": [{\"id\": 1, \"image_id\": 1, "
         "\"category_id\": 1, \"bbox\": [1, 1, 4, 4], \"area\": 16, \"segmentation\": [[1, 1, 5, "
         "1, 5, 5, 1, 5]]}, " +
         annotation + "]}";
}

const std::string kImage = "{\"id\": 1, \"height\": 20, \"width\": 30}";
const std::string kResult =
    "[{\"image_id\": 1, \"category_id\": 1, \"bbox\": [1, 1, 4, 4], \"score\": 0.5}]";

/// Reads an annotations / results pair with masks; the error it throws must hold `parts`.
void expect_coco_error(const std::string& gt, const std::string& res,
                       const std::vector<std::string>& parts, const std::string& masks = "true") {
  const fs::path g = write_file("gt.json", gt), r = write_file("res.json", res);
  expect_input_error(
      [&] {
        make_reader("coco_json", {{"annotations", Value(g.string())},
                                  {"results", Value(r.string())},
                                  {"masks", Value(masks)}});
      },
      parts);
}

// Coordinates, RLE sizes and counts out of range: exit 2 naming the annotation and the key,
// before anything is allocated by their size.
TEST(CocoJsonGeometry, OutOfRangeValuesNameTheAnnotationAndTheKey) {
  const std::string ann =
      "{\"id\": 7, \"image_id\": 1, \"category_id\": 1, \"area\": 3, \"bbox\": [0, 0, 2, 2], ";
  // Polygon and box coordinates beyond 1e8 (maskApi.c would walk billions of points, or
  // overflow int).
  for (const std::string v : {"1e9", "-3.5e8", "100000001", "1e308"}) {
    expect_coco_error(gt_json(kImage, ann + "\"segmentation\": [[1, 1, " + v + ", 1, 5, 5]]}"),
                      kResult, {"annotations[1] (id 7)", "'segmentation'", "out of range"});
    expect_coco_error(gt_json(kImage,
                              "{\"id\": 7, \"image_id\": 1, \"category_id\": 1, "
                              "\"area\": 3, \"bbox\": [0, " +
                                  v + ", 2, 2]}"),
                      kResult, {"annotations[1] (id 7)", "'bbox'", "out of range"}, "false");
    expect_coco_error(
        gt_json(kImage, ann + "\"segmentation\": [[1, 1, 9, 1, 5, 5]]}"),
        "[{\"image_id\": 1, \"category_id\": 1, \"bbox\": [1, 1, " + v + ", 4], \"score\": 0.5}]",
        {"results", "[0] (image_id 1)", "'bbox'", "out of range"});
  }
  // RLE sizes and counts: 32-bit cuts, sizes that cannot be masks, counts that do not cover
  // the image.
  const auto rle = [&](const std::string& size, const std::string& counts) {
    return gt_json(kImage, ann + "\"segmentation\": {\"size\": " + size +
                               ", \"counts\": " + counts + "}, \"iscrowd\": 1}");
  };
  expect_coco_error(rle("[20, 30]", "[4294967296, 600]"), kResult,
                    {"annotations[1] (id 7)", "'segmentation.counts'", "4294967296"});
  expect_coco_error(rle("[20, 30]", "[18446744073709551615]"), kResult,
                    {"annotations[1] (id 7)", "'segmentation.counts'"});
  expect_coco_error(rle("[20, 30]", "[-1, 601]"), kResult,
                    {"annotations[1] (id 7)", "'segmentation.counts'"});
  expect_coco_error(rle("[4294967316, 30]", "[600]"), kResult,
                    {"annotations[1] (id 7)", "'segmentation.size'"});
  expect_coco_error(rle("[2147483648, 1]", "[600]"), kResult,
                    {"annotations[1] (id 7)", "'segmentation.size'"});
  expect_coco_error(rle("[65536, 65536]", "[600]"), kResult,
                    {"annotations[1] (id 7)", "'segmentation.size'"});
  expect_coco_error(rle("[20]", "[600]"), kResult,
                    {"annotations[1] (id 7)", "'segmentation.size'"});
  // A size that is not a list (once a simdjson assertion: SIGABRT), or holds a non-integer.
  for (const std::string size : {"\"x\"", "7", "{}", "[20, \"30\"]", "[20.5, 30]", "[20, 30, 1]"})
    expect_coco_error(rle(size, "[600]"), kResult,
                      {"annotations[1] (id 7)", "'segmentation.size'"});
  expect_coco_error(rle("[20, 30]", "[500, 99]"), kResult,
                    {"annotation id 7", "covers 599 pixels", "600"});
  expect_coco_error(rle("[20, 31]", "[620]"), kResult, {"annotation id 7", "20x31", "20x30"});
  for (const std::vector<std::int64_t>& counts : std::vector<std::vector<std::int64_t>>{
           {std::int64_t{1} << 32, 0}, {0, (std::int64_t{1} << 32) + 600}, {100, 400, 100, -250}})
    expect_coco_error(rle("[20, 30]", json_string(encode(counts))), kResult,
                      {"annotations[1] (id 7)", "'segmentation.counts'", "malformed"});
  // Image sizes: a side of 2^31 or more; h * w of 2^32 or more with masks.
  for (const std::string im : {"{\"id\": 1, \"height\": 2147483648, \"width\": 30}",
                               "{\"id\": 1, \"height\": 20, \"width\": -4}"})
    expect_coco_error(gt_json(im, ann + "\"segmentation\": [[1, 1, 9, 1, 5, 5]]}"), kResult,
                      {"images[0] (id 1)", "out of range"});
  expect_coco_error(gt_json("{\"id\": 1, \"height\": 65536, \"width\": 65536}",
                            ann + "\"segmentation\": [[1, 1, 9, 1, 5, 5]]}"),
                    kResult, {"annotation id", "65536x65536", "2^32"});
  // Result RLE counts of 2^32 or more.
  expect_coco_error(gt_json(kImage, ann + "\"segmentation\": [[1, 1, 9, 1, 5, 5]]}"),
                    "[{\"image_id\": 1, \"category_id\": 1, \"segmentation\": {\"size\": [20, "
                    "30], \"counts\": [4294967896]}, \"score\": 0.5}]",
                    {"results", "[0] (image_id 1)", "'segmentation.counts'"}, "auto");
}

// Values of the wrong type, missing keys, boxes of 3 numbers, segmentations of the wrong type:
// one line naming the file, the entry (and its id) and the key, not a raw simdjson message.
TEST(CocoJsonGeometry, TypeErrorsNameTheFileTheEntryAndTheKey) {
  const std::string head = "{\"id\": 7, \"image_id\": 1, \"category_id\": 1, \"area\": 3";
  const std::string seg = ", \"segmentation\": [[1, 1, 9, 1, 5, 5]]";
  struct Case {
    std::string annotation, key;
  };
  for (const Case& c : std::vector<Case>{
           {head + ", \"bbox\": [0, 0, 2]" + seg + "}", "'bbox'"},
           {head + ", \"bbox\": [0, 0, 2, \"4\"]" + seg + "}", "'bbox'"},
           {head + ", \"bbox\": \"0 0 2 2\"" + seg + "}", "'bbox'"},
           {"{\"id\": 7, \"image_id\": \"1\", \"category_id\": 1, \"area\": 3, \"bbox\": [0, 0, "
            "2, 2]" +
                seg + "}",
            "'image_id'"},
           {"{\"id\": 7, \"image_id\": 1, \"category_id\": 1.5, \"area\": 3, \"bbox\": [0, 0, 2, "
            "2]" +
                seg + "}",
            "'category_id'"},
           {"{\"id\": 7, \"image_id\": 1, \"category_id\": 1, \"area\": \"big\", \"bbox\": [0, 0, "
            "2, 2]" +
                seg + "}",
            "'area'"},
           {head + ", \"iscrowd\": \"no\", \"bbox\": [0, 0, 2, 2]" + seg + "}", "'iscrowd'"},
           {head + ", \"bbox\": [0, 0, 2, 2], \"segmentation\": 5}", "'segmentation'"},
           {head + ", \"bbox\": [0, 0, 2, 2], \"segmentation\": [5, 6]}", "'segmentation'"},
           {head + ", \"bbox\": [0, 0, 2, 2], \"segmentation\": [[1, \"x\", 3, 4, 5, 6]]}",
            "'segmentation'"},
           {head + ", \"bbox\": [0, 0, 2, 2], \"segmentation\": {\"size\": [20, 30], \"counts\": "
                   "{}}}",
            "'segmentation.counts'"},
           {head + ", \"bbox\": [0, 0, 2, 2], \"segmentation\": {\"counts\": [600]}}",
            "'size' and 'counts'"},
           {head + seg + "}", "no 'bbox'"},
       })
    expect_coco_error(gt_json(kImage, c.annotation), kResult,
                      {"gt.json", "annotations[1] (id 7)", c.key});
  // An annotation without an id is named by its index.
  expect_coco_error(gt_json(kImage,
                            "{\"image_id\": 1, \"category_id\": 1, \"area\": 3, \"bbox\": "
                            "[0, 0, 2, 2]" +
                                seg + "}"),
                    kResult, {"gt.json", "annotations[1]", "no 'id'"});
  expect_coco_error(gt_json("{\"id\": 1, \"height\": \"20\", \"width\": 30}",
                            "{\"id\": 8, \"image_id\": 1, \"category_id\": 1, \"area\": 3, "
                            "\"bbox\": [0, 0, 2, 2]" +
                                seg + "}"),
                    kResult, {"gt.json", "images[0] (id 1)", "'height'", "an integer"});
  expect_coco_error("[1, 2]", kResult, {"gt.json", "expected an object"});
  expect_coco_error("{\"images\": 5}", kResult, {"gt.json", "'images'", "expected a list"});
  const std::string gt = gt_json(kImage,
                                 "{\"id\": 7, \"image_id\": 1, \"category_id\": 1, "
                                 "\"area\": 3, \"bbox\": [0, 0, 2, 2]" +
                                     seg + "}");
  for (const auto& [res, key] : std::vector<std::pair<std::string, std::string>>{
           {"[{\"image_id\": 1, \"category_id\": 1, \"bbox\": [1, 1, 4, 4], \"score\": \"x\"}]",
            "'score'"},
           {"[{\"image_id\": 1, \"category_id\": 1, \"bbox\": [1, 1, 4], \"score\": 0.5}]",
            "'bbox'"},
           {"[{\"image_id\": 1, \"category_id\": [1], \"bbox\": [1, 1, 4, 4], \"score\": 0.5}]",
            "'category_id'"},
           {"[{\"image_id\": 1, \"category_id\": 1, \"bbox\": [1, 1, 4, 4]}]", "no 'score'"},
           {"[{\"image_id\": 1, \"category_id\": 1, \"bbox\": [1, 1, 4, 4], \"score\": 0.5, "
            "\"segmentation\": \"abc\"}]",
            "'segmentation'"},
       })
    expect_coco_error(gt, res, {"res.json", "[0] (image_id 1)", key});
  expect_coco_error(gt,
                    "[{\"image_id\": 1, \"category_id\": 1, \"bbox\": [1, 1, 4, 4], "
                    "\"score\": 0.5}, 7]",
                    {"res.json", "[1]", "expected an object"});
}

// Result polygons: accepted with a box (pycocotools' loadRes keeps them and annToRLE rasterises
// them at the image's size: the stats are checked against pycocotools in
// test_detection_coco.cpp, case segm_polygons); without a box, refused with the reason.
TEST(CocoJsonGeometry, ResultPolygonsNeedABoxAsInPycocotools) {
  const std::string gt = gt_json(kImage,
                                 "{\"id\": 7, \"image_id\": 1, \"category_id\": 1, "
                                 "\"area\": 30, \"bbox\": [0, 0, 6, 5], "
                                 "\"segmentation\": [[0, 0, 6, 0, 6, 5, 0, 5]]}");
  const fs::path g = write_file("gt_ok.json", gt);
  const fs::path r = write_file(
      "res_poly.json",
      "[{\"image_id\": 1, \"category_id\": 1, \"bbox\": [0, 0, 6, 5], \"score\": 0.9, "
      "\"segmentation\": [[0, 0, 6, 0, 6, 5, 0, 5]]}, {\"image_id\": 1, \"category_id\": 1, "
      "\"bbox\": [1, 1, 4, 4], \"score\": 0.5, \"segmentation\": [[-1.5e5, 1, 5, 1, 5, 5]]}]");
  auto reader = make_reader("coco_json", {{"annotations", Value(g.string())},
                                          {"results", Value(r.string())},
                                          {"masks", Value("auto")}});
  const auto b = reader->next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->ragged("pred_rle_lengths")[0].numel(), 2);
  const auto* areas = b->ragged("pred_areas")[0].data_as<double>();
  EXPECT_EQ(areas[0], 30.0);  // loadRes: w * h of the box
  EXPECT_EQ(areas[1], 16.0);
  const auto m = make_metric("COCODetection", {{"metric", Value::Array{Value("segm")}}});
  m->add(*b);
  expect_coco_error(gt,
                    "[{\"image_id\": 1, \"category_id\": 1, \"score\": 0.9, \"segmentation\": "
                    "[[0, 0, 6, 0, 6, 5, 0, 5]]}]",
                    {"res.json", "[0] (image_id 1)", "'segmentation'", "need a 'bbox'"}, "auto");
}

}  // namespace
}  // namespace tally::test
