// Pieces the keypoint metrics share: the input fields and their checks, mmeval's normalised
// keypoint distance (mmeval.metrics.utils.keypoint.calc_distances, reproduced in NumPy's
// arithmetic), PCK counting, and the two metric bases (exact counts, or per-keypoint distances).
//
// Inputs, one row per instance (mmeval's add() takes them as dicts of [1, K, D] arrays):
//   pred_coords [N, K, D] float32/float64   predicted keypoint coordinates
//   gt_coords   [N, K, D] float32/float64   ground-truth coordinates
//   mask        [N, K]    bool (or integers, non-zero = visible): mmeval's keypoints_visible
//   bbox_size, head_size, torso_size [N, D] float32/float64: the normalisers of PCK, PCKh, tPCK
//
// calc_distances, as mmeval computes it for instance i and keypoint k:
//   a row of the normaliser with any component == 0 masks the whole instance out;
//   a component <= 0 (then negative) is replaced by 1e6;
//   d_ik = float32( || (pred_ik - gt_ik) / norm_i ||_2 )   or -1 when masked out.
// The arithmetic follows NumPy's type promotion: pred - gt in the wider of the two coordinate
// dtypes, the division and the norm in the wider of that and the normaliser's dtype, and the
// distance is stored as float32 (mmeval's `np.full((N, K), -1, dtype=np.float32)`).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "numpy_reduce.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"

namespace tally::keypoints {

inline constexpr const char* kPred = "pred_coords";
inline constexpr const char* kGt = "gt_coords";
inline constexpr const char* kMask = "mask";
inline constexpr const char* kBbox = "bbox_size";
inline constexpr const char* kHead = "head_size";
inline constexpr const char* kTorso = "torso_size";

inline InputSpec pred_input() {
  return {kPred, "Predicted keypoint coordinates [N, K, D], float32 or float64 (no NaN).", true};
}
inline InputSpec gt_input() {
  return {kGt, "Ground-truth keypoint coordinates [N, K, D], same shape, float32 or float64.",
          true};
}
inline InputSpec mask_input() {
  return {kMask,
          "Keypoint visibility [N, K], bool (or integers: non-zero = visible); invisible "
          "keypoints are ignored (mmeval's keypoints_visible).",
          true};
}

// ---- inputs -----------------------------------------------------------------------------------

/// The checked coordinate inputs of one batch.
struct Coords {
  const Tensor* pred = nullptr;
  const Tensor* gt = nullptr;
  std::vector<unsigned char> mask;  // [n * k], 0 or 1
  std::int64_t n = 0, k = 0, d = 0;
};

/// InputError naming the first NaN of the float tensor `t` whose rows are samples of `per_row`
/// values grouped by `group` (a keypoint's D coordinates).
inline void check_no_nan(const InputChecker& check, const Tensor& t, const char* field,
                         std::int64_t first_sample, std::int64_t per_row, std::int64_t group,
                         const char* what) {
  visit_floating(t, [&](const auto* xs) {
    const std::int64_t total = t.numel();
    if (!detail::any_nan(xs, total)) return;
    for (std::int64_t i = 0; i < total; ++i) {
      if (!std::isnan(xs[i])) continue;
      const std::int64_t row = per_row > 0 ? i / per_row : 0;
      if (group > 0)
        check.fail(field, fmt::format("sample {} keypoint {}: {} is NaN", first_sample + row,
                                      (i % per_row) / group, what));
      check.fail(field, fmt::format("sample {}: {} is NaN", first_sample + row, what));
    }
  });
}

/// A float32/float64 tensor field; InputError otherwise.
inline const Tensor& float_field(const InputChecker& check, const Batch& batch, const char* field) {
  const Tensor& t = check.tensor(batch, field);
  if (!is_floating(t.dtype()))
    check.fail(field, "must hold float32 or float64 values, got " + t.describe());
  return t;
}

/// pred_coords, gt_coords and mask of a batch, checked: [N, K, D] floats of one shape (D >= 1,
/// or exactly `want_d` when > 0), no NaN, a [N, K] bool or integer mask.
inline Coords read_coords(const InputChecker& check, const Batch& batch, std::int64_t first,
                          std::int64_t want_d = 0) {
  Coords c;
  c.pred = &float_field(check, batch, kPred);
  c.gt = &float_field(check, batch, kGt);
  check.dims(*c.pred, kPred, 3, "[N, K, D]");
  if (c.gt->shape() != c.pred->shape())
    check.fail(kGt, "must have the shape of '" + std::string(kPred) + "' " + c.pred->describe() +
                        ", got " + c.gt->describe());
  c.n = c.pred->size(0);
  c.k = c.pred->size(1);
  c.d = c.pred->size(2);
  if (c.k < 1) check.fail(kPred, "has no keypoints (" + c.pred->describe() + ")");
  if (c.d < 1) check.fail(kPred, "has no coordinates (" + c.pred->describe() + ")");
  if (want_d > 0 && c.d != want_d)
    check.fail(kPred, fmt::format("must hold {}-D coordinates [N, K, {}], got {}", want_d, want_d,
                                  c.pred->describe()));
  check_no_nan(check, *c.pred, kPred, first, c.k * c.d, c.d, "a coordinate");
  check_no_nan(check, *c.gt, kGt, first, c.k * c.d, c.d, "a coordinate");
  const Tensor& m = check.tensor(batch, kMask);
  if (m.dtype() != DType::Bool && !is_integral(m.dtype()))
    check.fail(kMask, "must hold bool (or integer) visibility flags, got " + m.describe());
  if (m.dim() != 2 || m.size(0) != c.n || m.size(1) != c.k)
    check.fail(kMask, fmt::format("must be [N, K] = [{}, {}] like '{}', got {}", c.n, c.k, kPred,
                                  m.describe()));
  c.mask.resize(static_cast<std::size_t>(c.n * c.k));
  if (m.dtype() == DType::Bool) {
    const bool* b = m.data_as<bool>();
    for (std::size_t i = 0; i < c.mask.size(); ++i) c.mask[i] = b[i] ? 1 : 0;
  } else {
    visit_integral(m, [&](const auto* v) {
      for (std::size_t i = 0; i < c.mask.size(); ++i) c.mask[i] = v[i] != 0 ? 1 : 0;
    });
  }
  return c;
}

/// A normaliser field [N, cols] (float32/float64, no NaN) for a batch of n instances.
inline const Tensor& read_norm(const InputChecker& check, const Batch& batch, const char* field,
                               std::int64_t n, std::int64_t cols, std::int64_t first) {
  const Tensor& t = float_field(check, batch, field);
  if (t.dim() != 2 || t.size(0) != n || t.size(1) != cols)
    check.fail(field,
               fmt::format("must be [N, {}] = [{}, {}], got {}", cols, n, cols, t.describe()));
  check_no_nan(check, t, field, first, cols, 0, "a size");
  return t;
}

// ---- distances --------------------------------------------------------------------------------

template <class A, class B>
using Wider = std::conditional_t<(sizeof(A) >= sizeof(B)), A, B>;

template <class TP, class TG, class TN>
void distances_typed(const TP* pred, const TG* gt, const unsigned char* mask, const TN* norm,
                     std::int64_t n, std::int64_t k, std::int64_t d, bool shift_pred,
                     bool zero_masks, float* out) {
  using D1 = Wider<TP, TG>;  // pred - gt
  using D2 = Wider<D1, TN>;  // (pred - gt) / norm, squared, summed, sqrt
  std::vector<TN> nf(static_cast<std::size_t>(d));
  for (std::int64_t i = 0; i < n; ++i) {
    bool zero = false;
    for (std::int64_t j = 0; j < d; ++j) {
      const TN v = norm[i * d + j];
      zero |= zero_masks && v == TN(0);
      nf[static_cast<std::size_t>(j)] = v <= TN(0) ? TN(1e6) : v;
    }
    for (std::int64_t kk = 0; kk < k; ++kk) {
      float& o = out[i * k + kk];
      if (zero || !mask[i * k + kk]) {
        o = -1.0f;
        continue;
      }
      const std::int64_t at = (i * k + kk) * d;
      D2 sum = D2(0);
      for (std::int64_t j = 0; j < d; ++j) {
        // mmeval's MpiiPCKAccuracy adds 1.0 to the predictions in their own dtype.
        const TP p = shift_pred ? static_cast<TP>(pred[at + j] + TP(1)) : pred[at + j];
        const D1 diff = static_cast<D1>(p) - static_cast<D1>(gt[at + j]);
        const D2 x = static_cast<D2>(diff) / static_cast<D2>(nf[static_cast<std::size_t>(j)]);
        sum += x * x;
      }
      o = static_cast<float>(std::sqrt(sum));
    }
  }
}

/// mmeval's calc_distances for a batch: out[i * K + k] = the float32 distance of keypoint k of
/// instance i, -1 when masked out. `norm` holds [n, D] normalisers (float32 or float64).
/// zero_masks = false reproduces a second call of calc_distances on the same normaliser array,
/// which the first call modified in place (zeros and negatives already replaced by 1e6, so no
/// instance is masked out for its normaliser): mmeval's MpiiPCKAccuracy does that.
inline std::vector<float> distances(const Coords& c, const Tensor& norm, bool shift_pred = false,
                                    bool zero_masks = true) {
  std::vector<float> out(static_cast<std::size_t>(c.n * c.k));
  visit_floating(*c.pred, [&](const auto* p) {
    visit_floating(*c.gt, [&](const auto* g) {
      visit_floating(norm, [&](const auto* nf) {
        distances_typed(p, g, c.mask.data(), nf, c.n, c.k, c.d, shift_pred, zero_masks, out.data());
      });
    });
  });
  return out;
}

/// Adds, per keypoint, the valid distances (!= -1) to valid[k] (when not null) and those below
/// `thr` to hits[k]; the comparison is done in T (float: a Python float threshold; double: a
/// numpy.float64 one).
template <class T>
void count_below(const std::vector<float>& dist, std::int64_t n, std::int64_t k, T thr,
                 std::int64_t* valid, std::int64_t* hits) {
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t kk = 0; kk < k; ++kk) {
      const float v = dist[static_cast<std::size_t>(i * k + kk)];
      if (v == -1.0f) continue;
      if (valid) ++valid[kk];
      hits[kk] += static_cast<std::int64_t>(static_cast<T>(v) < thr);
    }
  }
}

/// mmeval's keypoint_pck_accuracy from exact counts: acc_k = hits_k / valid_k (-1 when
/// valid_k == 0), avg = numpy.mean of the acc_k >= 0 (0 when there are none), cnt = their number.
struct PckSummary {
  std::vector<double> acc;
  double avg = 0.0;
  std::int64_t cnt = 0;
};

inline PckSummary pck_summary(const std::int64_t* valid, const std::int64_t* hits, std::int64_t k) {
  PckSummary s;
  std::vector<double> ok;
  for (std::int64_t j = 0; j < k; ++j) {
    const double a =
        valid[j] > 0 ? static_cast<double>(hits[j]) / static_cast<double>(valid[j]) : -1.0;
    s.acc.push_back(a);
    if (a >= 0) ok.push_back(a);
  }
  s.cnt = static_cast<std::int64_t>(ok.size());
  if (s.cnt > 0) s.avg = numpy::mean(ok);
  return s;
}

/// "PCK@0.2": mmeval's f"{name}@{thr}".
inline std::string at_key(const char* name, double thr) {
  return std::string(name) + "@" + numpy::python_float_repr(thr);
}

// ---- PCK with bbox / head / torso normalisers ---------------------------------------------------

/// mmeval's norm_item values, the fields they read and the key prefixes they give, in the order
/// mmeval's PCKAccuracy evaluates them (whatever the order in norm_item).
inline constexpr const char* kNormItems[3] = {"bbox", "head", "torso"};
inline constexpr const char* kNormFields[3] = {kBbox, kHead, kTorso};
inline constexpr const char* kNormKeys[3] = {"PCK", "PCKh", "tPCK"};

struct NormItems {
  bool on[3] = {false, false, false};
};

inline NormItems read_norm_items(const Params& p) {
  NormItems items;
  const auto names = p.get_string_list("norm_item");
  if (names.empty()) p.fail("norm_item", "must name at least one of bbox, head, torso");
  for (const auto& name : names) {
    bool known = false;
    for (int j = 0; j < 3; ++j)
      if (name == kNormItems[j]) items.on[j] = known = true;
    if (!known) p.fail("norm_item", "must be among bbox, head, torso; got '" + name + "'");
  }
  return items;
}

inline ParamSpec thr_param(double def) {
  return param("thr", ParamType::Float,
               "Threshold of the normalised distance: a keypoint is correct when its distance "
               "divided by the normaliser is below thr (compared in float32, as mmeval's float32 "
               "distances with a Python float). Printed in the keys as Python prints it "
               "(PCK@0.2).")
      .def(def);
}

inline ParamSpec norm_item_param(const char* def) {
  return param("norm_item", ParamType::StringList,
               "The normalisers, one or several of: bbox (field bbox_size, key PCK@thr), head "
               "(head_size, PCKh@thr), torso (torso_size, tPCK@thr).")
      .def(Value::Array{Value(def)})
      .choices({"bbox", "head", "torso"});
}

inline std::vector<InputSpec> pck_inputs() {
  return {pred_input(),
          gt_input(),
          mask_input(),
          {kBbox, "Bounding-box size [N, D] (width, height), float; needed with norm_item bbox.",
           false},
          {kHead, "Head size [N, D], float; needed with norm_item head.", false},
          {kTorso, "Torso size [N, D], float; needed with norm_item torso.", false}};
}

/// Counts, for each enabled item j (except those `skip` names), the valid keypoints into
/// counts[(2j) K ...] and those below thr (float32 comparison) into counts[(2j + 1) K ...].
inline void count_pck_items(const InputChecker& check, const Batch& batch, const Coords& c,
                            std::int64_t first, const NormItems& items, double thr,
                            std::int64_t* counts, const NormItems& skip = {}) {
  for (int j = 0; j < 3; ++j) {
    if (!items.on[j] || skip.on[j]) continue;
    const Tensor& norm = read_norm(check, batch, kNormFields[j], c.n, c.d, first);
    const std::vector<float> dist = distances(c, norm);
    count_below<float>(dist, c.n, c.k, numpy::weak_scalar<float>(thr), counts + 2 * j * c.k,
                       counts + (2 * j + 1) * c.k);
  }
}

// ---- metric bases -----------------------------------------------------------------------------

/// The number of cells of a [rows x k] state, or nothing when it is not a size (a corrupt state).
inline std::optional<std::size_t> state_size(std::int64_t rows, std::int64_t k) {
  std::int64_t cells = 0;
  if (rows < 0 || k < 0 || __builtin_mul_overflow(rows, k, &cells)) return std::nullopt;
  return static_cast<std::size_t>(cells);
}

/// State of the PCK-like metrics: exact int64 counters, `groups` rows of K. Across ranks: k must
/// agree (a rank without data has 0), n and the counters are summed (checked). K comes from the
/// data, so the counters are gathered and added on rank 0, not reduced in place.
struct CountState {
  std::int64_t k = 0;                 // keypoints; 0 until a batch was seen
  std::int64_t n = 0;                 // instances
  PackedVector<std::int64_t> counts;  // [groups * k]
  TALLY_STATE(agree(k, 0), sum(n), sum(counts))
};

class CountMetric : public TypedMetric<CountState> {
 public:
  CountMetric(std::string owner, std::int64_t groups) : check_(std::move(owner)), groups_(groups) {}

 protected:
  /// Adds the batch into counts [groups * c.k] (zeroed before the first batch).
  virtual void count(const Batch& batch, const Coords& c, std::int64_t first,
                     std::int64_t* counts) const = 0;
  /// The results from the counters summed over every rank.
  virtual Value results(const std::vector<std::int64_t>& counts, std::int64_t k,
                        std::int64_t n) const = 0;
  /// The coordinate dimension required (0: any).
  virtual std::int64_t coord_dims() const { return 0; }
  /// Checks the number of keypoints of the first batch (InputError when unusable).
  virtual void check_keypoints(std::int64_t /*k*/) const {}

  void update(CountState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Coords c = read_coords(check_, batch, state.n, coord_dims());
    if (state.k == 0)
      check_keypoints(c.k);
    else if (state.k != c.k)
      check_.fail(kPred, fmt::format("has {} keypoints, earlier batches had {}", c.k, state.k));
    // Counted apart and added at the end: a batch that fails leaves the state as it was.
    std::vector<std::int64_t> local(static_cast<std::size_t>(groups_ * c.k), 0);
    count(batch, c, state.n, local.data());
    if (state.k == 0) {
      state.k = c.k;
      state.counts.assign(local.size(), 0);
    }
    for (std::size_t i = 0; i < local.size(); ++i) state.counts[i] += local[i];
    state.n += c.n;
  }

  /// The number of keypoints is learned from the data: the counters have no size before it.
  bool reducible() const override { return false; }

  // A rank's counters fit its own number of keypoints; a rank that saw no data has none.
  void check_rank(const CountState& s, std::size_t) const override {
    const auto cells = state_size(groups_, s.k);
    if (!cells || s.counts.size() != *cells || (s.k == 0 && s.n != 0))
      throw RuntimeError(fmt::format("{} counters and {} instances for {} keypoints x {} groups",
                                     s.counts.size(), s.n, s.k, groups_));
  }

  Value compute(const CountState& all) const override {
    const auto cells = state_size(groups_, all.k);
    if (!cells || all.counts.size() != *cells)
      tally::throw_owned<RuntimeError>(check_.owner(), "the state is inconsistent");
    if (all.n == 0) check_.fail("no samples");
    return results(all.counts, all.k, all.n);
  }

  InputChecker check_;
  std::int64_t groups_;
};

/// State of the mean-distance metrics: the float32 distance of every keypoint (-1 = masked out),
/// instance-major, kept so that compute sums them in mmeval's order (keypoint-major over the
/// whole dataset) whatever the sharding. Across ranks: k must agree (a rank without data has 0),
/// n is summed, the distances are concatenated in rank order (dataset order).
struct DistanceState {
  std::int64_t k = 0;
  std::int64_t n = 0;
  PackedVector<float> dist;  // [n * k]
  TALLY_STATE(agree(k, 0), sum(n), concat(dist))
};

class DistanceMetric : public TypedMetric<DistanceState> {
 public:
  explicit DistanceMetric(std::string owner) : check_(std::move(owner)) {}

 protected:
  /// The distances of a batch [c.n * c.k].
  virtual std::vector<float> batch_distances(const Batch& batch, const Coords& c,
                                             std::int64_t first) const = 0;
  virtual std::int64_t coord_dims() const { return 0; }
  virtual void check_keypoints(std::int64_t /*k*/, std::int64_t /*first*/) const {}
  virtual const char* key() const = 0;

  void update(DistanceState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Coords c = read_coords(check_, batch, state.n, coord_dims());
    if (state.k != 0 && state.k != c.k)
      check_.fail(kPred, fmt::format("has {} keypoints, earlier batches had {}", c.k, state.k));
    check_keypoints(c.k, state.n);
    const std::vector<float> d = batch_distances(batch, c, state.n);
    state.k = c.k;
    state.dist.insert(state.dist.end(), d.begin(), d.end());
    state.n += c.n;
  }

  // A rank's distances are whole rows of its own number of keypoints.
  void check_rank(const DistanceState& s, std::size_t) const override {
    if (s.k < 0 ||
        (s.k == 0 ? !s.dist.empty() : s.dist.size() % static_cast<std::size_t>(s.k) != 0))
      throw RuntimeError(fmt::format("{} distances for {} keypoints a row", s.dist.size(), s.k));
  }

  /// mmeval: distance_valid = distances.T[distances.T != -1] (keypoint-major), then
  /// float32 distance_valid.sum() / max(1, len(distance_valid)).
  Value compute(const DistanceState& all) const override {
    const std::int64_t k = all.k, n = all.n;
    const auto cells = state_size(n, k);
    if (!cells || all.dist.size() != *cells)
      tally::throw_owned<RuntimeError>(check_.owner(), "the state is inconsistent");
    if (n == 0) check_.fail("no samples");
    std::vector<float> valid;
    valid.reserve(*cells);
    for (std::int64_t kk = 0; kk < k; ++kk)
      for (std::int64_t i = 0; i < n; ++i) {
        const float v = all.dist[static_cast<std::size_t>(i * k + kk)];
        if (v != -1.0f) valid.push_back(v);
      }
    const auto cnt = static_cast<std::int64_t>(valid.size());
    const float total = numpy::sum(valid);
    // np.float32 / Python int: the int is cast to float32 (NEP 50).
    const float mean = total / static_cast<float>(std::max<std::int64_t>(1, cnt));
    Value out = Value::map();
    out.set(key(), static_cast<double>(mean));
    return out;
  }

  InputChecker check_;
};

}  // namespace tally::keypoints
