// The counting both panoptic metrics share (panoptic_common.hpp). Per image, as torchmetrics 1.9's
// _prepocess_inputs and _panoptic_quality_update_sample do:
//   1. every point's (category_id, instance_id) becomes a segment ("colour"): a stuff's instance id
//      is 0 (one segment per stuff category), a category that is neither a thing nor a stuff is
//      void (in the ground truth always; in the prediction only with allow_unknown_preds_category
//      or when it is void_category, else an InputError), and with crowd 'void' the ground truth's
//      crowd segments are void too;
//   2. areas, each segment's overlap with the other map's void, and the intersections of
//      prediction and ground-truth segments of one category are counted;
//   3. a pair's IoU is inter / (area_p - void_p + area_t - void_t - inter), in float32 as
//      torchmetrics computes it (an int64 tensor over an int64 tensor is float32), and a pair with
//      IoU > 0.5 is a true positive (for the modified metric's stuffs: every pair with IoU > 0 adds
//      its IoU, and each ground-truth segment counts one);
//   4. an unmatched ground-truth (prediction) segment is a false negative (positive) unless more
//      than half of it is void in the other map (void / area <= 0.5 in float32 counts it).
// Every count is an integer and the IoUs are summed as exact integers (kLimbs), so the state does
// not depend on the order of images, batches or ranks.
#include "panoptic_common.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "torch_reduce.hpp"

namespace tally::panoptic {
namespace {

constexpr std::uint32_t kVoid = std::numeric_limits<std::uint32_t>::max();
constexpr std::int64_t kMaxPoints = std::int64_t{1} << 40;  // IoUs stay >= 2^-40 (kLimbs)
constexpr std::int64_t kLimbMask = (std::int64_t{1} << kLimbBits) - 1;

struct Segment {
  std::int64_t cls = 0;
  std::int64_t area = 0;
  std::int64_t void_overlap = 0;  // points of it that are void in the other map
  bool matched = false;
};

struct Key {
  std::int64_t cls, inst;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  std::size_t operator()(const Key& k) const noexcept {
    const auto a = static_cast<std::uint64_t>(k.cls) * 0x9E3779B97F4A7C15ull;
    return static_cast<std::size_t>(
        a ^ (static_cast<std::uint64_t>(k.inst) + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2)));
  }
};

/// One map's points as segment indices (kVoid for void points) and its segments.
struct Labelled {
  std::vector<std::uint32_t> index;
  std::vector<Segment> segments;
};

std::string shape_of(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

/// "pixel (row 3, column 7)" for an [H, W, 2] map, "point 17" otherwise.
std::string point_name(const Tensor& t, std::int64_t j) {
  if (t.dim() == 3) return fmt::format("pixel (row {}, column {})", j / t.size(1), j % t.size(1));
  return fmt::format("point {} (flattened)", j);
}

/// Adds one IoU (a float32 >= 2^-40) to the limbs of one class.
void add_iou(std::int64_t* limbs, float iou) {
  __extension__ using u128 = unsigned __int128;
  const double scaled = std::ldexp(static_cast<double>(iou), 64);  // exact: a power-of-2 scale
  const auto u = static_cast<u128>(scaled);                        // exact: a whole number
  for (int k = 0; k < kLimbs; ++k)
    limbs[k] += static_cast<std::int64_t>((u >> (k * kLimbBits)) & static_cast<u128>(kLimbMask));
}

/// The IoU sum of one class from its limbs: the exact sum, rounded once.
double iou_sum(const std::int64_t* limbs) {
  __extension__ using u128 = unsigned __int128;
  u128 total = 0;
  for (int k = 0; k < kLimbs; ++k) total += static_cast<u128>(limbs[k]) << (k * kLimbBits);
  return std::ldexp(static_cast<double>(total), -64);
}

std::vector<std::int64_t> sorted_unique(std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

/// The first id in both sorted lists, if any.
std::optional<std::int64_t> common_id(const std::vector<std::int64_t>& a,
                                      const std::vector<std::int64_t>& b) {
  std::vector<std::int64_t> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  if (both.empty()) return std::nullopt;
  return both.front();
}

}  // namespace

// ---- Categories --------------------------------------------------------------------------------

std::int64_t Categories::class_of(std::int64_t id) const {
  auto it = std::lower_bound(things.begin(), things.end(), id);
  if (it != things.end() && *it == id) return it - things.begin();
  it = std::lower_bound(stuffs.begin(), stuffs.end(), id);
  if (it != stuffs.end() && *it == id) return num_things() + (it - stuffs.begin());
  return -1;
}

std::vector<std::int64_t> Categories::encode() const {
  std::vector<std::int64_t> v{num_things()};
  v.insert(v.end(), things.begin(), things.end());
  v.insert(v.end(), stuffs.begin(), stuffs.end());
  return v;
}

Categories Categories::decode(const std::vector<std::int64_t>& v) {
  if (v.empty() || v[0] < 0 || v[0] > static_cast<std::int64_t>(v.size()) - 1)
    throw RuntimeError("the state's categories are corrupt");
  Categories c;
  c.things.assign(v.begin() + 1, v.begin() + 1 + v[0]);
  c.stuffs.assign(v.begin() + 1 + v[0], v.end());
  return c;
}

std::string Categories::describe() const {
  return fmt::format("things [{}], stuffs [{}]", fmt::join(things, ", "), fmt::join(stuffs, ", "));
}

// ---- Qualities ---------------------------------------------------------------------------------

namespace {

template <class T, class V>
T masked_mean(const std::vector<V>& values, const std::vector<float>& den, std::int64_t begin,
              std::int64_t end) {
  std::vector<T> kept;
  for (std::int64_t c = begin; c < end; ++c)
    if (den[static_cast<std::size_t>(c)] > 0.0f)
      kept.push_back(static_cast<T>(values[static_cast<std::size_t>(c)]));
  return torch_cpu::mean(kept.data(), static_cast<std::int64_t>(kept.size()));
}

}  // namespace

double Qualities::mean_pq(std::int64_t begin, std::int64_t end) const {
  return masked_mean<double>(pq, den, begin, end);
}
double Qualities::mean_sq(std::int64_t begin, std::int64_t end) const {
  return masked_mean<double>(sq, den, begin, end);
}
double Qualities::mean_rq(std::int64_t begin, std::int64_t end) const {
  // A float32 mean of float32 values, widened as torch.stack widens it.
  return static_cast<double>(masked_mean<float>(rq, den, begin, end));
}

// ---- the metric --------------------------------------------------------------------------------

PanopticBase::PanopticBase(const Params& p, bool modified, const char* type)
    : modified_(modified),
      allow_unknown_(p.get_bool("allow_unknown_preds_category")),
      crowd_void_(p.get_string("crowd") == "void"),
      check_(p.owner_or(type)) {
  if (p.has("void_category")) void_category_ = p.get_int("void_category");
  const bool has_things = p.has("things"), has_stuffs = p.has("stuffs");
  if (has_things != has_stuffs)
    p.fail(has_things ? "stuffs" : "things",
           "must be given together with '" + std::string(has_things ? "things" : "stuffs") +
               "' (or neither: then both come from the data's thing_ids and stuff_ids, which the "
               "coco_panoptic reader reads from the categories' isthing)");
  if (has_things) {
    Categories c;
    c.things = sorted_unique(p.get_int_list("things"));
    c.stuffs = sorted_unique(p.get_int_list("stuffs"));
    if (const auto both = common_id(c.things, c.stuffs))
      p.fail("stuffs", fmt::format("and 'things' must be distinct; both hold category {}", *both));
    if (c.size() == 0) p.fail("things", "and 'stuffs' are both empty; give at least one category");
    if (c.size() > kMaxSize)
      p.fail("things",
             fmt::format("and 'stuffs' hold {} categories, more than {}", c.size(), kMaxSize));
    if (void_category_ && c.class_of(*void_category_) >= 0)
      p.fail("void_category",
             fmt::format("{} is one of the things or stuffs; void must be another id (or null)",
                         *void_category_));
    fixed_ = std::move(c);
  }
}

PanopticState PanopticBase::initial_state() const {
  PanopticState s;
  if (fixed_) {
    const auto c = static_cast<std::size_t>(fixed_->size());
    s.tp.assign(c, 0);
    s.fp.assign(c, 0);
    s.fn.assign(c, 0);
    s.iou.assign(c * kLimbs, 0);
  }
  return s;
}

Categories PanopticBase::categories_of(const Batch& batch, std::int64_t first) const {
  for (const char* f : {kThingIds, kStuffIds})
    if (!batch.has(f))
      check_.fail(f,
                  "is missing from the batch: without the parameters 'things' and 'stuffs' the "
                  "categories come from the data's thing_ids and stuff_ids (the coco_panoptic "
                  "reader gives them); give things and stuffs");
  const PerSample things(batch, kThingIds, check_), stuffs(batch, kStuffIds, check_);
  const auto ids = [&](const PerSample& field, const char* name, std::int64_t i) {
    const Tensor t = field[i];
    if (!is_integral(t.dtype()) || t.dim() != 1)
      check_.fail(name, fmt::format("sample {}: must be a 1-D list of integer category ids, got {}",
                                    first + i, t.describe()));
    std::vector<std::int64_t> v(static_cast<std::size_t>(t.numel()));
    visit_integral(t, [&](const auto* d) {
      for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<std::int64_t>(d[k]);
    });
    return sorted_unique(std::move(v));
  };
  Categories c;
  for (std::int64_t i = 0; i < batch.size(); ++i) {
    Categories here;
    here.things = ids(things, kThingIds, i);
    here.stuffs = ids(stuffs, kStuffIds, i);
    if (i == 0) {
      c = std::move(here);
      if (const auto both = common_id(c.things, c.stuffs))
        check_.fail(kThingIds, fmt::format("sample {}: category {} is both a thing and a stuff",
                                           first, *both));
      if (c.size() == 0)
        check_.fail(kThingIds, fmt::format("sample {}: no things and no stuffs", first));
      if (c.size() > kMaxSize)
        check_.fail(kThingIds, fmt::format("sample {}: {} categories, more than {}", first,
                                           c.size(), kMaxSize));
      if (void_category_ && c.class_of(*void_category_) >= 0)
        check_.fail(kThingIds,
                    fmt::format("sample {}: category {} is void_category; void must be another "
                                "id (set void_category)",
                                first, *void_category_));
    } else if (here.things != c.things || here.stuffs != c.stuffs) {
      check_.fail(kThingIds, fmt::format("sample {}: {} differ from sample {}'s {}", first + i,
                                         here.describe(), first, c.describe()));
    }
  }
  return c;
}

void PanopticBase::update(PanopticState& state, const Batch& batch) {
  if (batch.fields().empty() || batch.size() == 0) return;
  const PerSample pred(batch, kPred, check_), gt(batch, kGt, check_);
  std::optional<PerSample> crowd;
  if (crowd_void_) {
    if (!batch.has(kCrowd))
      check_.fail(kCrowd,
                  "is missing from the batch: crowd 'void' needs each image's crowd segments as "
                  "[K, 2] (category_id, instance_id) rows (the coco_panoptic reader gives them)");
    crowd.emplace(batch, kCrowd, check_);
  }
  // The batch is counted into a copy first: a batch with a bad image adds nothing.
  PanopticState into = state;
  Categories cats;
  if (fixed_) {
    cats = *fixed_;
  } else {
    cats = categories_of(batch, state.n);
    const std::vector<std::int64_t> code = cats.encode();
    if (into.categories.empty()) {
      const auto c = static_cast<std::size_t>(cats.size());
      into.categories.assign(code.begin(), code.end());
      into.tp.assign(c, 0);
      into.fp.assign(c, 0);
      into.fn.assign(c, 0);
      into.iou.assign(c * kLimbs, 0);
    } else if (!std::equal(code.begin(), code.end(), into.categories.begin(),
                           into.categories.end())) {
      check_.fail(kThingIds,
                  fmt::format("sample {}: {} differ from an earlier sample's {}", state.n,
                              cats.describe(), Categories::decode(into.categories).describe()));
    }
  }
  for (std::int64_t i = 0; i < batch.size(); ++i) {
    const Tensor p = pred[i], g = gt[i];
    const std::int64_t sample = state.n + i;
    for (const auto& [t, name] : {std::pair{&p, kPred}, std::pair{&g, kGt}}) {
      if (t->is_cuda())
        check_.fail(name,
                    fmt::format("sample {}: is a CUDA tensor; only CPU tensors are read", sample));
      if (!is_integral(t->dtype()) || t->dim() < 2 || t->size(-1) != 2)
        check_.fail(name, fmt::format("sample {}: must be an integer map [*spatial, 2] of "
                                      "(category_id, instance_id), e.g. [H, W, 2]; got {}",
                                      sample, t->describe()));
    }
    if (p.shape() != g.shape())
      check_.fail(kPred, fmt::format("sample {}: has shape {}, '{}' has {}", sample,
                                     shape_of(p.shape()), kGt, shape_of(g.shape())));
    if (p.numel() / 2 > kMaxPoints)
      check_.fail(kPred,
                  fmt::format("sample {}: {} points, more than 2^40", sample, p.numel() / 2));
    std::optional<Tensor> c;
    if (crowd) {
      c = (*crowd)[i];
      if (!is_integral(c->dtype()) || c->dim() != 2 || c->size(1) != 2)
        check_.fail(kCrowd, fmt::format("sample {}: must be [K, 2] integer (category_id, "
                                        "instance_id) rows, got {}",
                                        sample, c->describe()));
    }
    count_image(into, cats, p, g, c ? &*c : nullptr, sample);
  }
  into.n += batch.size();
  state = std::move(into);
}

namespace {

/// The crowd segments of one image: sorted (category_id, instance_id) pairs.
using CrowdSet = std::vector<std::pair<std::int64_t, std::int64_t>>;

/// Labels the points of one map (element type T, n points of (category_id, instance_id)).
/// `unknown` is called with the point of a category that is neither a thing nor a stuff and that
/// must not be void; it throws.
template <class T, class Unknown>
void label(const T* d, std::int64_t n, const Categories& cats, const CrowdSet* crowd,
           bool unknown_is_void, std::optional<std::int64_t> void_category, Labelled& out,
           const Unknown& unknown) {
  out.index.resize(static_cast<std::size_t>(n));
  out.segments.clear();
  std::unordered_map<Key, std::uint32_t, KeyHash> ids;
  bool have_last = false;
  std::int64_t last_cat = 0, last_inst = 0;
  std::uint32_t last = kVoid;
  for (std::int64_t j = 0; j < n; ++j) {
    const auto cat = static_cast<std::int64_t>(d[2 * j]);
    const auto inst = static_cast<std::int64_t>(d[2 * j + 1]);
    if (!have_last || cat != last_cat || inst != last_inst) {
      have_last = true;
      last_cat = cat;
      last_inst = inst;
      last = kVoid;
      const std::int64_t cls = cats.class_of(cat);
      if (crowd && std::binary_search(crowd->begin(), crowd->end(), std::pair{cat, inst})) {
        last = kVoid;
      } else if (cls < 0) {
        if (!unknown_is_void && !(void_category && *void_category == cat)) unknown(j, cat);
      } else {
        const Key key{cls, cats.is_stuff(cls) ? 0 : inst};
        const auto [it, added] =
            ids.try_emplace(key, static_cast<std::uint32_t>(out.segments.size()));
        if (added) {
          if (out.segments.size() >= kVoid - 1)
            throw InputError("more than 2^32 - 2 segments in one image");
          out.segments.push_back(Segment{cls, 0, 0, false});
        }
        last = it->second;
      }
    }
    out.index[static_cast<std::size_t>(j)] = last;
    if (last != kVoid) ++out.segments[last].area;
  }
}

}  // namespace

void PanopticBase::count_image(PanopticState& s, const Categories& cats, const Tensor& pred,
                               const Tensor& gt, const Tensor* crowd, std::int64_t sample) {
  const std::int64_t n = pred.numel() / 2;
  CrowdSet crowd_set;
  if (crowd) {
    visit_integral(*crowd, [&](const auto* d) {
      for (std::int64_t k = 0; k < crowd->size(0); ++k)
        crowd_set.emplace_back(static_cast<std::int64_t>(d[2 * k]),
                               static_cast<std::int64_t>(d[2 * k + 1]));
    });
    std::sort(crowd_set.begin(), crowd_set.end());
  }
  Labelled p, g;
  visit_integral(pred, [&](const auto* d) {
    label(d, n, cats, nullptr, allow_unknown_, void_category_, p,
          [&](std::int64_t j, std::int64_t cat) {
            check_.fail(kPred,
                        fmt::format("sample {} {}: category id {} is neither a thing nor a stuff "
                                    "({}); set allow_unknown_preds_category: true to count such "
                                    "points as void",
                                    sample, point_name(pred, j), cat, cats.describe()));
          });
  });
  visit_integral(gt, [&](const auto* d) {
    label(d, n, cats, crowd ? &crowd_set : nullptr, true, void_category_, g,
          [](std::int64_t, std::int64_t) {});
  });

  // Void overlaps and same-category intersections. Pairs are keyed by (pred << 32 | gt).
  std::unordered_map<std::uint64_t, std::int64_t> pairs;
  std::uint64_t last_key = ~std::uint64_t{0};
  std::int64_t* last_count = nullptr;
  for (std::int64_t j = 0; j < n; ++j) {
    const std::uint32_t a = p.index[static_cast<std::size_t>(j)];
    const std::uint32_t b = g.index[static_cast<std::size_t>(j)];
    if (a == kVoid) {
      if (b != kVoid) ++g.segments[b].void_overlap;
      continue;
    }
    if (b == kVoid) {
      ++p.segments[a].void_overlap;
      continue;
    }
    if (p.segments[a].cls != g.segments[b].cls) continue;
    const std::uint64_t key = (std::uint64_t{a} << 32) | b;
    if (key != last_key) {
      last_key = key;
      last_count = &pairs[key];
    }
    ++*last_count;
  }

  std::int64_t* tp = s.tp.data();
  std::int64_t* fp = s.fp.data();
  std::int64_t* fn = s.fn.data();
  std::int64_t* iou = s.iou.data();
  const auto ratio = [](std::int64_t a, std::int64_t b) {
    return static_cast<float>(a) / static_cast<float>(b);  // torchmetrics: float32
  };
  for (const auto& [key, inter] : pairs) {
    Segment& ps = p.segments[key >> 32];
    Segment& gs = g.segments[key & 0xFFFFFFFFu];
    const std::int64_t uni = ps.area - ps.void_overlap + gs.area - gs.void_overlap - inter;
    const float v = ratio(inter, uni);
    const auto c = static_cast<std::size_t>(gs.cls);
    if (modified_ && cats.is_stuff(gs.cls)) {
      if (v > 0.0f) add_iou(iou + c * kLimbs, v);
    } else if (v > 0.5f) {
      ps.matched = gs.matched = true;
      ++tp[c];
      add_iou(iou + c * kLimbs, v);
    }
  }
  for (const Segment& seg : g.segments) {
    const auto c = static_cast<std::size_t>(seg.cls);
    if (modified_ && cats.is_stuff(seg.cls)) {
      ++tp[c];  // the modified metric's stuff: the number of ground-truth segments
      continue;
    }
    if (!seg.matched && ratio(seg.void_overlap, seg.area) <= 0.5f) ++fn[c];
  }
  for (const Segment& seg : p.segments) {
    if (modified_ && cats.is_stuff(seg.cls)) continue;
    if (!seg.matched && ratio(seg.void_overlap, seg.area) <= 0.5f)
      ++fp[static_cast<std::size_t>(seg.cls)];
  }
}

void PanopticBase::check_rank(const PanopticState& s, std::size_t rank) const {
  (void)rank;
  if (fixed_) return;  // the counts were summed by the engine: their sizes are fixed
  const std::size_t c =
      s.categories.empty() ? 0 : static_cast<std::size_t>(Categories::decode(s.categories).size());
  if (s.tp.size() != c || s.fp.size() != c || s.fn.size() != c || s.iou.size() != c * kLimbs)
    throw RuntimeError(fmt::format("its counts are not those of {} categories", c));
}

std::pair<Categories, Qualities> PanopticBase::qualities(const PanopticState& all) const {
  if (all.n == 0) check_.fail("no samples");
  Categories cats = fixed_ ? *fixed_ : Categories::decode(all.categories);
  const auto c = static_cast<std::size_t>(cats.size());
  if (all.tp.size() != c || all.fp.size() != c || all.fn.size() != c ||
      all.iou.size() != c * kLimbs)
    check_.fail_runtime(std::string("the state's counts are not those of ") + std::to_string(c) +
                        " categories");
  Qualities q;
  q.pq.resize(c);
  q.sq.resize(c);
  q.rq.resize(c);
  q.den.resize(c);
  for (std::size_t k = 0; k < c; ++k) {
    const std::int64_t tp = all.tp[k], fp = all.fp[k], fn = all.fn[k];
    // torchmetrics' _panoptic_quality_compute, operation for operation: sq in float64, the
    // denominator and rq in float32 (int32 counts times a Python float are float32).
    q.sq[k] = tp > 0 ? iou_sum(all.iou.data() + k * kLimbs) / static_cast<double>(tp) : 0.0;
    q.den[k] =
        (static_cast<float>(tp) + 0.5f * static_cast<float>(fp)) + 0.5f * static_cast<float>(fn);
    q.rq[k] = q.den[k] > 0.0f ? static_cast<float>(tp) / q.den[k] : 0.0f;
    q.pq[k] = q.sq[k] * static_cast<double>(q.rq[k]);
  }
  return {std::move(cats), std::move(q)};
}

// ---- the schema --------------------------------------------------------------------------------

std::vector<ParamSpec> common_params() {
  return {
      param("things", ParamType::IntList,
            "Category ids of the countable things (torchmetrics' `things`). Unset (with stuffs "
            "unset): read from the data's thing_ids (the coco_panoptic reader: categories with "
            "isthing 1).")
          .optional()
          .nullable(),
      param("stuffs", ParamType::IntList,
            "Category ids of the uncountable stuffs (torchmetrics' `stuffs`; a stuff's instance "
            "id is ignored). Unset (with things unset): read from the data's stuff_ids.")
          .optional()
          .nullable(),
      param("allow_unknown_preds_category", ParamType::Bool,
            "A predicted category that is neither a thing nor a stuff counts as void; false: it "
            "is an input error (torchmetrics'). Ground-truth points of such categories are "
            "always void.")
          .def(false),
      param("void_category", ParamType::Int,
            "The category id of void (unlabelled) points: void in both maps, in predictions "
            "even when allow_unknown_preds_category is false. The coco_panoptic reader writes "
            "void (PNG id 0) as -1. null: no such id (torchmetrics has none: there, void "
            "predictions need allow_unknown_preds_category).")
          .def(-1)
          .nullable(),
      param("crowd", ParamType::String,
            "What a crowd segment of the ground truth (COCO iscrowd 1; field gt_crowd) is. "
            "'segment': an ordinary segment, as torchmetrics sees it (torchmetrics has no crowd "
            "notion). 'void': its points are void, so it is never matched nor a false negative, "
            "and a predicted segment more than half over crowd or void is not a false positive "
            "(close to panopticapi's pq_compute, which also ignores crowds, but counts only the "
            "crowd of the prediction's own category and keeps crowd points in the IoU's union).")
          .def("segment")
          .choices({"segment", "void"}),
  };
}

std::vector<InputSpec> common_inputs() {
  return {
      InputSpec{kPred,
                "Predicted panoptic map per image: [H, W, 2] (or any [*spatial, 2]) integer "
                "(category_id, instance_id) per point; ragged, or dense [N, H, W, 2].",
                true},
      InputSpec{kGt, "Ground-truth panoptic map per image, the shape of pred_panoptic.", true},
      InputSpec{kCrowd,
                "Per image, the ground truth's crowd segments as [K, 2] (category_id, "
                "instance_id) rows; read with crowd 'void'.",
                false},
      InputSpec{kThingIds, "Per image, the thing category ids (when 'things' is unset).", false},
      InputSpec{kStuffIds, "Per image, the stuff category ids (when 'stuffs' is unset).", false},
  };
}

}  // namespace tally::panoptic
