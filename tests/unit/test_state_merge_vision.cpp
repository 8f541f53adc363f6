// The states of the detection, keypoint and segmentation metrics on the SDK 2 contract (issue 17):
// each field declares its reduction (TALLY_STATE) and the base class merges the ranks.
//   - A checkpoint holds the fields in the order the old MSGPACK_DEFINE packed them: the bytes
//     save() writes are those of the old state struct, and they restore.
//   - What the merge cannot accept is an error, never a crash or a read out of range: ranks that
//     disagree on the number of keypoints (InputError), corrupt gathered records or counts from a
//     rank, a checkpoint whose sizes do not fit the configuration (RuntimeError).
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <msgpack.hpp>

#include "metric_harness.hpp"
#include "support/expect_error.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/state.hpp"

namespace tally::test {
namespace {

// ---- the state structs as the old code declared them (MSGPACK_DEFINE, same fields and order) ----

struct OldCocoRecords {
  PackedVector<std::int32_t> img_groups, group_cat, group_ndets, group_gts;
  PackedVector<double> score;
  PackedVector<std::uint64_t> bits;
  MSGPACK_DEFINE(img_groups, group_cat, group_ndets, group_gts, score, bits)
};
struct OldCocoState {
  PackedVector<std::int64_t> img_ids;
  std::vector<OldCocoRecords> kinds;
  MSGPACK_DEFINE(img_ids, kinds)
};
struct OldVocState {
  PackedVector<std::int32_t> cls;
  PackedVector<double> score;
  PackedVector<std::uint64_t> bits;
  PackedVector<std::int64_t> num_gts;
  std::int64_t images = 0;
  MSGPACK_DEFINE(cls, score, bits, num_gts, images)
};
struct OldRecallState {
  PackedVector<std::int64_t> hits;
  std::int64_t num_gts = 0;
  std::int64_t images = 0;
  MSGPACK_DEFINE(hits, num_gts, images)
};
struct OldMeanIoUState {
  PackedVector<std::int64_t> counts;
  std::int64_t n = 0;
  MSGPACK_DEFINE(counts, n)
};
struct OldCountState {
  std::int64_t k = 0;
  std::int64_t n = 0;
  PackedVector<std::int64_t> counts;
  MSGPACK_DEFINE(k, n, counts)
};
struct OldDistanceState {
  std::int64_t k = 0;
  std::int64_t n = 0;
  PackedVector<float> dist;
  MSGPACK_DEFINE(k, n, dist)
};

template <class T>
msgpack::sbuffer pack_of(const T& v) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, v);
  return buf;
}

template <class T>
T unpack_as(const msgpack::sbuffer& buf) {
  const auto h = msgpack::unpack(buf.data(), buf.size());
  return h.get().as<T>();
}

std::string bytes(const msgpack::sbuffer& b) { return std::string(b.data(), b.size()); }

/// A fresh metric restored from the msgpack bytes `saved`.
std::shared_ptr<Metric> restore_from(const std::function<std::shared_ptr<Metric>()>& make,
                                     const msgpack::sbuffer& saved) {
  auto m = make();
  m->restore(bytes_of(saved));
  return m;
}

// ---- data ---------------------------------------------------------------------------------------

/// n images, image i with i % 4 ground-truth boxes (label i % 3) and detections near them, plus a
/// stray detection; every tensor ragged, img_id dense.
Batch det_batch(std::int64_t n, std::int64_t first_id = 1) {
  Batch b;
  Batch::Ragged pb, ps, pl, gb, gl;
  std::vector<std::int64_t> ids;
  for (std::int64_t i = 0; i < n; ++i) {
    ids.push_back(first_id + i);
    std::vector<double> gbox, pbox, score;
    std::vector<std::int64_t> glab, plab;
    for (std::int64_t g = 0; g < i % 4; ++g) {
      const double x = 10.0 * static_cast<double>(g + i % 5);
      gbox.insert(gbox.end(), {x, x, x + 20 + static_cast<double>(g), x + 30});
      glab.push_back((i + g) % 3);
      pbox.insert(pbox.end(), {x + 1, x + 2, x + 21, x + 29 + static_cast<double>(i % 3)});
      plab.push_back((i + g) % 3);
      score.push_back(0.3 + 0.05 * static_cast<double>((i * 7 + g) % 13));
    }
    pbox.insert(pbox.end(), {200, 200, 240, 260});
    plab.push_back(i % 3);
    score.push_back(0.5);
    const auto ng = static_cast<std::int64_t>(glab.size()),
               nd = static_cast<std::int64_t>(plab.size());
    gb.push_back(Tensor::from_vector(gbox, {ng, 4}));
    gl.push_back(Tensor::from_vector(glab));
    pb.push_back(Tensor::from_vector(pbox, {nd, 4}));
    pl.push_back(Tensor::from_vector(plab));
    ps.push_back(Tensor::from_vector(score));
  }
  b.set("img_id", Tensor::from_vector(ids));
  b.set_ragged("pred_bboxes", pb);
  b.set_ragged("pred_scores", ps);
  b.set_ragged("pred_labels", pl);
  b.set_ragged("gt_bboxes", gb);
  b.set_ragged("gt_labels", gl);
  return b;
}

Batch pose_batch(std::int64_t n, std::int64_t k, std::int64_t salt = 0) {
  const std::int64_t d = 2;
  std::vector<double> p(static_cast<std::size_t>(n * k * d)), g(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    g[i] = static_cast<double>((i * 37 + static_cast<std::size_t>(salt)) % 101);
    p[i] = g[i] + static_cast<double>((i * 13) % 7) - 3.0;
  }
  Batch b;
  b.set("pred_coords", Tensor::from_vector(p, {n, k, d}));
  b.set("gt_coords", Tensor::from_vector(g, {n, k, d}));
  std::vector<bool> m(static_cast<std::size_t>(n * k));
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = i % 5 != 0;
  b.set("mask", Tensor::from_vector(m, {n, k}));
  const std::vector<double> size(static_cast<std::size_t>(n * d), 40.0);
  for (const char* f : {"bbox_size", "head_size", "torso_size"})
    b.set(f, Tensor::from_vector(size, {n, d}));
  b.set("box_size", Tensor::from_vector(std::vector<double>(static_cast<std::size_t>(n), 40.0)));
  return b;
}

Batch seg_batch(std::int64_t n, std::int64_t classes) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n * 4 * 5)), g(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    g[i] = static_cast<std::int64_t>((i * 7) % static_cast<std::size_t>(classes));
    p[i] = static_cast<std::int64_t>((i * 7 + i / 3) % static_cast<std::size_t>(classes));
  }
  Batch b;
  b.set("pred_sem_seg", Tensor::from_vector(p, {n, 4, 5}));
  b.set("gt_sem_seg", Tensor::from_vector(g, {n, 4, 5}));
  return b;
}

struct Config {
  std::string type;
  Value::Map params;
};

const std::vector<Config>& count_keypoint_metrics() {
  static const std::vector<Config> m = {
      {"PCKAccuracy", {{"norm_item", Value::Array{"bbox", "head", "torso"}}}},
      {"MpiiPCKAccuracy", {{"norm_item", Value::Array{"bbox"}}}},
      {"JhmdbPCKAccuracy", {}},
      {"KeypointAUC", {}}};
  return m;
}
const std::vector<Config>& distance_keypoint_metrics() {
  static const std::vector<Config> m = {
      {"KeypointEndPointError", {}},
      {"KeypointNME", {{"norm_mode", "use_norm_item"}, {"norm_item", "box_size"}}}};
  return m;
}

const Value::Map kCoco = {{"metric", Value::Array{Value("bbox"), Value("proposal")}}};
const Value::Map kVoc = {{"num_classes", Value(3)}};
const Value::Map kMeanIoU = {{"num_classes", Value(4)}};

// ---- checkpoints: the old layout ----------------------------------------------------------------

/// Feeds `batches` to a metric, then checks that save() writes the bytes the old state struct
/// packs (after a round trip through it), that they restore, and that the restored metric
/// computes the same bits locally and synced.
template <class Old>
void expect_old_layout(const std::string& type, const Value::Map& params,
                       const std::vector<Batch>& batches) {
  SCOPED_TRACE(type);
  const auto make = [&] { return make_metric(type, params); };
  const auto m = make();
  for (const Batch& b : batches) m->add(b);
  const msgpack::sbuffer saved = pack_state(*m);
  const Old old = unpack_as<Old>(saved);  // the new checkpoint reads as the old struct ...
  const msgpack::sbuffer old_bytes = pack_of(old);
  EXPECT_EQ(bytes(old_bytes), bytes(saved));  // ... and the old struct packs the same bytes
  const auto back = restore_from(make, old_bytes);
  const Value want = m->compute_local();
  EXPECT_TRUE(same_bits(back->compute_local(), want));
  EXPECT_TRUE(same_bits(compute_states(*make(), {back}), want));
  EXPECT_EQ(bytes(pack_state(*back)), bytes(saved));
}

TEST(StateLayout, DetectionCheckpointsKeepTheOldFieldOrder) {
  expect_old_layout<OldCocoState>("COCODetection", kCoco, {det_batch(5), det_batch(4, 6)});
  expect_old_layout<OldVocState>("VOCMeanAP", kVoc, {det_batch(5), det_batch(4, 6)});
  expect_old_layout<OldRecallState>("ProposalRecall", {}, {det_batch(5), det_batch(4, 6)});
}

TEST(StateLayout, SegmentationAndKeypointCheckpointsKeepTheOldFieldOrder) {
  expect_old_layout<OldMeanIoUState>("MeanIoU", kMeanIoU, {seg_batch(3, 4), seg_batch(2, 4)});
  for (const auto& [type, params] : count_keypoint_metrics())
    expect_old_layout<OldCountState>(type, params, {pose_batch(4, 16), pose_batch(3, 16, 5)});
  for (const auto& [type, params] : distance_keypoint_metrics())
    expect_old_layout<OldDistanceState>(type, params, {pose_batch(4, 16), pose_batch(3, 16, 5)});
}

// ---- keypoints: ranks that disagree on K, ranks without data ------------------------------------

TEST(KeypointMerge, RanksWithAnotherNumberOfKeypointsAreAnInputError) {
  for (const auto& list : {count_keypoint_metrics(), distance_keypoint_metrics()})
    for (const auto& [type, params] : list) {
      SCOPED_TRACE(type);
      const auto make = [&] { return make_metric(type, params); };
      for (const auto& [k0, k1] : {std::pair{16, 17}, std::pair{17, 16}, std::pair{16, 20}}) {
        auto a = make(), b = make(), c = make();
        a->add(pose_batch(3, k0));
        c->add(pose_batch(2, k1));  // b saw nothing: it does not take part in the agreement
        const std::string msg = error_of<InputError>([&] { compute_states(*make(), {a, b, c}); });
        EXPECT_HAS(msg, "rank 2 disagrees with an earlier rank");
      }
    }
}

TEST(KeypointMerge, RanksWithoutDataGiveTheResultOfTheOthers) {
  for (const auto& list : {count_keypoint_metrics(), distance_keypoint_metrics()})
    for (const auto& [type, params] : list) {
      SCOPED_TRACE(type);
      const auto make = [&] { return make_metric(type, params); };
      auto whole = make();
      whole->add(pose_batch(3, 16));
      whole->add(pose_batch(4, 16, 9));
      const Value want = whole->compute_local();
      auto a = make(), b = make();
      a->add(pose_batch(3, 16));
      b->add(pose_batch(4, 16, 9));
      // Empty ranks first, between and last, with and without an empty batch.
      auto empty = make(), empty_batch = make();
      empty_batch->add(pose_batch(0, 16));
      for (const auto& ranks : std::vector<std::vector<std::shared_ptr<Metric>>>{
               {empty, a, b}, {a, empty, b}, {a, b, empty}, {empty_batch, a, empty, b}})
        EXPECT_TRUE(same_bits(compute_states(*make(), ranks), want));
      // No rank with samples: "no samples", on any number of ranks.
      EXPECT_HAS(error_of<InputError>([&] {
                   compute_states(*make(), {empty, empty_batch});
                 }),
                 "no samples");
    }
}

/// Payloads in rank order (RankPayload moves, it does not copy).
template <class... P>
std::vector<RankPayload> payloads(P&&... p) {
  std::vector<RankPayload> v;
  (v.push_back(std::forward<P>(p)), ...);
  return v;
}

/// The gathered payload of `m` with `edit` applied to its state (read as `Old`, the fields the
/// metric gathers when it gathers them all).
template <class Old>
RankPayload edited(const Metric& m, const std::function<void(Old&)>& edit) {
  RankPayload p = sync_payload(m);
  Old s = unpack_as<Old>(p.gathered);
  edit(s);
  p.gathered = pack_of(s);
  return p;
}

TEST(KeypointMerge, CorruptCountsFromARankAreARuntimeError) {
  // The PCK-like metrics learn K from the data: their counters are gathered and added on rank 0.
  const std::vector<std::function<void(OldCountState&)>> corruptions = {
      [](OldCountState& s) { s.counts[3] = -5; },                     // a negative count
      [](OldCountState& s) { s.counts[0] = INT64_MAX; },              // overflows when added
      [](OldCountState& s) { s.counts[0] = std::int64_t{1} << 62; },  // over 2^62 in all
      [](OldCountState& s) { s.counts.pop_back(); },                  // another size
      [](OldCountState& s) { s.n = -1; },                             // a negative count
      [](OldCountState& s) { s.counts.push_back(0); }};               // another size
  for (const auto& [type, params] : count_keypoint_metrics()) {
    SCOPED_TRACE(type);
    const auto make = [&] { return make_metric(type, params); };
    auto a = make(), b = make();
    a->add(pose_batch(3, 16));
    b->add(pose_batch(2, 16, 3));
    ASSERT_EQ(a->summed_size(), 0u);  // every field gathered
    for (std::size_t i = 0; i < corruptions.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_THROW(compute_payloads(*make(), payloads(sync_payload(*a),
                                                      edited<OldCountState>(*b, corruptions[i]))),
                   RuntimeError);
    }
  }
}

TEST(KeypointMerge, DistancesThatDoNotFitTheirCountsAreARuntimeError) {
  for (const auto& [type, params] : distance_keypoint_metrics()) {
    SCOPED_TRACE(type);
    const auto make = [&] { return make_metric(type, params); };
    auto a = make();
    a->add(pose_batch(3, 16));
    // n travels in the summed counts, k and the distances are gathered.
    ASSERT_EQ(a->summed_size(), 1u);
    const auto with = [&](std::int64_t n, std::function<void(OldDistanceState&)> edit) {
      RankPayload p = sync_payload(*a);
      p.sums = {n};
      msgpack::sbuffer buf;
      {
        const auto h = msgpack::unpack(p.gathered.data(), p.gathered.size());
        // The gathered fields: k and dist (n is summed).
        std::pair<std::int64_t, PackedVector<float>> g;
        const auto& arr = h.get().via.array;
        ASSERT_EQ(arr.size, 2u);
        arr.ptr[0].convert(g.first);
        arr.ptr[1].convert(g.second);
        OldDistanceState s{g.first, n, g.second};
        edit(s);
        msgpack::packer<msgpack::sbuffer> pk(buf);
        pk.pack_array(2);
        pk.pack(s.k);
        pk.pack(s.dist);
      }
      p.gathered = std::move(buf);
      EXPECT_THROW(compute_payloads(*make(), payloads(std::move(p))), RuntimeError);
    };
    with(4, [](OldDistanceState&) {});                        // one sample more than distances
    with(3, [](OldDistanceState& s) { s.dist.pop_back(); });  // one distance short
    with(3, [](OldDistanceState& s) { s.k = -16; });          // not a size
    with(std::int64_t{1} << 40, [](OldDistanceState& s) { s.k = std::int64_t{1} << 40; });
    with(-3, [](OldDistanceState&) {});  // a negative count
  }
}

// ---- detection: corrupt records or counts from a rank
// --------------------------------------------

TEST(DetectionMerge, CorruptCocoRecordsFromARankAreARuntimeError) {
  const auto make = [&] { return make_metric("COCODetection", kCoco); };
  auto a = make(), b = make();
  a->add(det_batch(5));
  b->add(det_batch(6, 6));
  ASSERT_EQ(a->summed_size(), 0u);
  const std::vector<std::function<void(OldCocoState&)>> corruptions = {
      [](OldCocoState& s) { s.kinds.pop_back(); },  // another number of kinds
      [](OldCocoState& s) { s.kinds.push_back(s.kinds[0]); },
      [](OldCocoState& s) { s.img_ids.push_back(99); },        // an image without records
      [](OldCocoState& s) { s.kinds[0].img_groups[1] = -1; },  // negative group counts
      [](OldCocoState& s) {                                    // that wrap to the total
        s.kinds[0].img_groups[1] = -1;
        s.kinds[0].img_groups[2] += 1;
      },
      [](OldCocoState& s) { s.kinds[1].group_ndets[0] = -2; },      // negative detections
      [](OldCocoState& s) { s.kinds[0].group_ndets[2] += 1; },      // more than the scores
      [](OldCocoState& s) { s.kinds[0].bits.pop_back(); },          // bits short
      [](OldCocoState& s) { s.kinds[1].group_gts.pop_back(); },     // counts short
      [](OldCocoState& s) { s.kinds[0].group_cat.push_back(1); }};  // a group too many
  for (std::size_t i = 0; i < corruptions.size(); ++i) {
    SCOPED_TRACE(i);
    // The corrupt rank first (its state is where the merge starts) and last.
    EXPECT_THROW(compute_payloads(
                     *make(), payloads(edited<OldCocoState>(*a, corruptions[i]), sync_payload(*b))),
                 RuntimeError);
    EXPECT_THROW(compute_payloads(
                     *make(), payloads(sync_payload(*a), edited<OldCocoState>(*b, corruptions[i]))),
                 RuntimeError);
  }
  // Unchanged payloads give the result of one rank.
  auto whole = make();
  whole->add(det_batch(5));
  whole->add(det_batch(6, 6));
  EXPECT_TRUE(same_bits(compute_payloads(*make(), payloads(sync_payload(*a), sync_payload(*b))),
                        whole->compute_local()));
}

TEST(DetectionMerge, CorruptVocPredictionsOrCountsFromARankAreARuntimeError) {
  const auto make = [&] { return make_metric("VOCMeanAP", kVoc); };
  auto a = make(), b = make();
  a->add(det_batch(5));
  b->add(det_batch(4, 6));
  // num_gts and images are summed (fixed sizes), the predictions gathered: cls, score, bits.
  ASSERT_EQ(a->summed_size(), 3u * 1u + 1u);
  using Gathered =
      std::tuple<PackedVector<std::int32_t>, PackedVector<double>, PackedVector<std::uint64_t>>;
  const auto edit_gathered = [&](const std::function<void(Gathered&)>& edit) {
    RankPayload p = sync_payload(*b);
    Gathered g = unpack_as<Gathered>(p.gathered);
    edit(g);
    p.gathered = pack_of(g);
    return p;
  };
  for (const auto& edit : std::vector<std::function<void(Gathered&)>>{
           [](Gathered& g) { std::get<0>(g)[0] = 3; },  // class outside [0, num_classes)
           [](Gathered& g) { std::get<0>(g)[1] = -1; },
           [](Gathered& g) { std::get<0>(g).pop_back(); },  // fewer classes than scores
           [](Gathered& g) { std::get<2>(g).pop_back(); },  // bits short
           [](Gathered& g) { std::get<1>(g).push_back(0.5); }})
    EXPECT_THROW(compute_payloads(*make(), payloads(sync_payload(*a), edit_gathered(edit))),
                 RuntimeError);
  for (const std::int64_t bad : {std::int64_t{-5}, INT64_MAX, std::int64_t{1} << 62}) {
    RankPayload p = sync_payload(*b);
    p.sums[1] = bad;
    EXPECT_THROW(compute_payloads(*make(), payloads(std::move(p))), RuntimeError) << bad;
  }
}

// Two ranks whose sizes are wrong in opposite ways: one sends a class without its score, the
// other a score without its class. Merged, the arrays have one length and could pass for a whole
// state; the per-rank check (TypedMetric::check_rank) names the first rank that cannot be.
TEST(DetectionMerge, RanksWhoseErrorsCancelOutAreStillCaught) {
  const auto make = [&] { return make_metric("VOCMeanAP", kVoc); };
  auto a = make(), b = make();
  a->add(det_batch(5));
  b->add(det_batch(4, 6));
  using Gathered =
      std::tuple<PackedVector<std::int32_t>, PackedVector<double>, PackedVector<std::uint64_t>>;
  const auto edit_rank = [&](Metric& m, const std::function<void(Gathered&)>& edit) {
    RankPayload p = sync_payload(m);
    Gathered g = unpack_as<Gathered>(p.gathered);
    edit(g);
    p.gathered = pack_of(g);
    return p;
  };
  auto more_classes = edit_rank(*a, [](Gathered& g) { std::get<0>(g).push_back(0); });
  auto more_scores = edit_rank(*b, [](Gathered& g) {
    const auto words = std::get<2>(g).size() / std::get<1>(g).size();
    std::get<1>(g).push_back(0.5);
    for (std::size_t w = 0; w < words; ++w) std::get<2>(g).push_back(0);
  });
  try {
    compute_payloads(*make(), payloads(std::move(more_classes), std::move(more_scores)));
    FAIL() << "two ranks whose sizes cancel out must fail";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("the state of rank 0 is corrupt"), std::string::npos)
        << e.what();
  }
}

TEST(DetectionMerge, BadSummedCountsAreARuntimeError) {
  for (const auto& [type, params, batch] : std::vector<std::tuple<std::string, Value::Map, Batch>>{
           {"ProposalRecall", {}, det_batch(5)}, {"MeanIoU", kMeanIoU, seg_batch(3, 4)}}) {
    SCOPED_TRACE(type);
    auto a = make_metric(type, params);
    a->add(batch);
    ASSERT_FALSE(a->gathers());  // every field is summed
    for (const std::int64_t bad : {std::int64_t{-5}, INT64_MAX, std::int64_t{1} << 62}) {
      RankPayload p = sync_payload(*a);
      p.sums[0] = bad;
      EXPECT_THROW(compute_payloads(*make_metric(type, params), payloads(std::move(p))),
                   RuntimeError)
          << bad;
    }
  }
}

// ---- checkpoints that do not fit the configuration
// ------------------------------------------------

TEST(StateLayout, ACheckpointOfAnotherConfigurationIsARuntimeErrorAtCompute) {
  // Refused when restored (TypedMetric::check_restored: counts of another size, what the
  // metric's check_rank finds), or at the latest by compute: never read out of range.
  const auto check = [](const std::string& type, const Value::Map& params,
                        const msgpack::sbuffer& saved) {
    SCOPED_TRACE(type);
    const auto make = [&] { return make_metric(type, params); };
    EXPECT_THROW(restore_from(make, saved)->compute_local(), RuntimeError);
  };
  OldMeanIoUState iou{PackedVector<std::int64_t>(9, 1), 2};  // 3 x 3 for num_classes 4
  check("MeanIoU", kMeanIoU, pack_of(iou));
  OldRecallState recall{PackedVector<std::int64_t>(5, 1), 3, 1};  // 3 x 10 counters by default
  check("ProposalRecall", {}, pack_of(recall));
  OldVocState voc;
  voc.num_gts.assign(2, 1);  // num_classes 3
  check("VOCMeanAP", kVoc, pack_of(voc));
  OldCocoState coco{PackedVector<std::int64_t>{1}, std::vector<OldCocoRecords>(1)};  // 2 kinds
  check("COCODetection", kCoco, pack_of(coco));
  for (const auto& [type, params] : count_keypoint_metrics())
    check(type, params, pack_of(OldCountState{16, 2, PackedVector<std::int64_t>(7, 0)}));
  for (const auto& [type, params] : distance_keypoint_metrics())
    check(type, params, pack_of(OldDistanceState{16, 2, PackedVector<float>(31, 1.0f)}));
}

}  // namespace
}  // namespace tally::test
