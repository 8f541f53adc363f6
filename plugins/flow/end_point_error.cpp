// EndPointError: the mean end-point error of optical flow over the valid pixels.
//
// Formula. For sample i with predicted and true flow [H, W, 2] and valid pixels
// V_i = {p : valid_mask_p >= 0.5} (every pixel without a mask; and |gt_p| < max_flow when
// max_flow is set):
//   e_p     = sqrt((u_p - u'_p)^2 + (v_p - v'_p)^2)        in the flows' dtype
//   epe_i   = mean of e_p over V_i                        (numpy's pairwise float sum; the mean is
//             float(sum / n) computed in float64, as numpy.mean divides by a numpy.intp)
//   EPE     = (sum_i epe_i * n_i) / (sum_i n_i),  n_i = |V_i|
// where the products and the running sum are in the flows' dtype (float32 flows: float32, as
// mmeval multiplies a float32 array by a Python int), summed in dataset order, and the final
// division is by the total count cast to that dtype.
//
// Reference: mmeval.metrics.EndPointError (mmeval 0.2.1, end_point_error.py, the NumPy branch),
// bit for bit. Key: "EPE", in pixels. Differences from mmeval, on purpose:
//   - a sample with no valid pixel contributes nothing; mmeval takes the mean of an empty array
//     (NaN), and NaN * 0 turns the whole dataset's EPE into NaN;
//   - with no valid pixel at all EPE is NaN (written as null), as mmeval's 0/0;
//   - max_flow is not an mmeval parameter: it is the rule of RAFT's and mmflow's evaluations
//     (pixels whose true flow is max_flow or longer are not counted); null (the default) is
//     mmeval's behaviour.
//
// Example (mmeval's docstring): pred [[[10, 5], [0.1, 3]], [[3, 15.2], [2.4, 4.5]]],
// gt [[[10.1, 4.8], [10, 3]], [[6, 10.2], [2, 4.1]]], valid_mask [[1, 1], [1, 0]]
//   -> {"EPE": 5.318186230865093}
//
// State: per sample, epe_i (as float64) and n_i, concatenated in rank order (= dataset order) at
// a sync and reduced in that order at compute: the result is the same, bit for bit, on any number
// of ranks. The sample count is summed; the flows' dtype must agree between the ranks that set it.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "tally/sdk/input.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/numpy_math.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"

namespace tally::flow {
namespace {

constexpr const char* kPred = "pred_flow";
constexpr const char* kGt = "gt_flow";
constexpr const char* kValid = "valid_mask";

struct FlowState {
  std::int32_t dtype_bytes = 0;  // 4: float32 flows, 8: float64; 0 until a batch was seen
  std::int64_t n = 0;
  PackedVector<double> epe;           // [n] per-sample mean EPE (a float32 value when 4)
  PackedVector<std::int64_t> pixels;  // [n] valid pixels per sample
  TALLY_STATE(agree(dtype_bytes, 0), sum(n), concat(epe), concat(pixels))
};

template <class A, class B>
using Wider = std::conditional_t<(sizeof(A) >= sizeof(B)), A, B>;

class EndPointError final : public TypedMetric<FlowState> {
 public:
  explicit EndPointError(const Params& p) : check_(p.owner_or("EndPointError")) {
    if (p.has("max_flow")) {
      max_flow_ = p.get_double("max_flow");
      if (!(max_flow_ > 0)) p.fail("max_flow", fmt::format("must be > 0, got {}", max_flow_));
      has_max_flow_ = true;
    }
  }

 protected:
  void update(FlowState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Tensor& pred = check_.tensor(batch, kPred);
    const Tensor& gt = check_.tensor(batch, kGt);
    for (const auto* f : {&pred, &gt})
      if (!is_floating(f->dtype()))
        check_.fail(f == &pred ? kPred : kGt,
                    "must hold float32 or float64 flow, got " + f->describe());
    check_.dims(pred, kPred, 4, "[N, H, W, 2]");
    if (pred.size(3) != 2)
      check_.fail(kPred, "must be [N, H, W, 2] (u, v per pixel), got " + pred.describe());
    if (gt.shape() != pred.shape())
      check_.fail(kGt, "must have the shape of '" + std::string(kPred) + "' " + pred.describe() +
                           ", got " + gt.describe());
    const std::int64_t n = pred.size(0), hw = pred.size(1) * pred.size(2);
    const Tensor* valid = nullptr;
    if (batch.has(kValid)) {
      valid = &check_.tensor(batch, kValid);
      if (valid->dim() != 3 || valid->size(0) != n || valid->size(1) != pred.size(1) ||
          valid->size(2) != pred.size(2))
        check_.fail(kValid, fmt::format("must be [N, H, W] = [{}, {}, {}], got {}", n, pred.size(1),
                                        pred.size(2), valid->describe()));
    }
    // mask[i * hw + p]: 1 when pixel p of sample i counts (valid_mask >= 0.5).
    std::vector<unsigned char> mask(static_cast<std::size_t>(n * hw), 1);
    if (valid) {
      if (valid->dtype() == DType::Bool) {
        const bool* v = valid->data_as<bool>();
        for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = v[i] ? 1 : 0;
      } else if (is_floating(valid->dtype())) {
        visit_floating(*valid, [&](const auto* v) {
          for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = v[i] >= 0.5 ? 1 : 0;
        });
      } else {
        visit_integral(*valid, [&](const auto* v) {
          for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = v[i] >= 1 ? 1 : 0;
        });
      }
    }
    visit_floating(pred, [&](const auto* p) {
      visit_floating(gt, [&](const auto* g) {
        using T = Wider<std::remove_cv_t<std::remove_pointer_t<decltype(p)>>,
                        std::remove_cv_t<std::remove_pointer_t<decltype(g)>>>;
        const std::int32_t bytes = sizeof(T);
        if (state.dtype_bytes != 0 && state.dtype_bytes != bytes)
          check_.fail(kPred, fmt::format("holds float{} flow, earlier batches float{}", 8 * bytes,
                                         8 * state.dtype_bytes));
        // Accumulated apart and appended at the end: a batch that fails leaves the state as it
        // was.
        FlowState local;
        local.n = state.n;
        accumulate<T>(local, p, g, mask, n, hw);
        state.dtype_bytes = bytes;
        state.epe.insert(state.epe.end(), local.epe.begin(), local.epe.end());
        state.pixels.insert(state.pixels.end(), local.pixels.begin(), local.pixels.end());
        state.n += n;
      });
    });
  }

  Value compute(const FlowState& all) const override {
    if (all.epe.size() != static_cast<std::size_t>(all.n) || all.pixels.size() != all.epe.size())
      tally::throw_owned<RuntimeError>(check_.owner(), "the state is inconsistent");
    if (all.n == 0) check_.fail("no samples");
    const double epe = all.dtype_bytes == 4 ? reduce<float>(all) : reduce<double>(all);
    Value out = Value::map();
    out.set("EPE", epe);
    return out;
  }

 private:
  template <class T, class TP, class TG>
  void accumulate(FlowState& state, const TP* p, const TG* g,
                  const std::vector<unsigned char>& mask, std::int64_t n, std::int64_t hw) const {
    const T max_flow = max_flow_value<T>();
    std::vector<T> e;
    e.reserve(static_cast<std::size_t>(hw));
    for (std::int64_t i = 0; i < n; ++i) {
      e.clear();
      for (std::int64_t px = 0; px < hw; ++px) {
        const std::int64_t at = (i * hw + px) * 2;
        if (!mask[static_cast<std::size_t>(i * hw + px)]) continue;
        const TG gu = g[at], gv = g[at + 1];
        if (has_max_flow_ && !(std::sqrt(TG(0) + gu * gu + gv * gv) < static_cast<TG>(max_flow)))
          continue;
        const T du = static_cast<T>(p[at]) - static_cast<T>(gu);
        const T dv = static_cast<T>(p[at + 1]) - static_cast<T>(gv);
        const T v = std::sqrt(T(0) + du * du + dv * dv);
        if (std::isnan(v))
          check_.fail(
              std::isnan(p[at]) || std::isnan(p[at + 1]) ? kPred : kGt,
              fmt::format("sample {} pixel {}: the flow of a valid pixel is NaN", state.n + i, px));
        e.push_back(v);
      }
      const auto cnt = static_cast<std::int64_t>(e.size());
      // numpy.mean: the T sum divided by a numpy.intp, computed in float64, stored as T.
      const double mean = cnt > 0 ? static_cast<double>(numpy::mean(e)) : 0.0;
      state.epe.push_back(mean);
      state.pixels.push_back(cnt);
    }
    state.n += n;
  }

  /// max_flow as the flows' dtype compares a Python float (float32: cast to float32).
  template <class T>
  T max_flow_value() const {
    if (!has_max_flow_) return T(0);
    if (max_flow_ > static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::infinity();
    return static_cast<T>(max_flow_);
  }

  /// mmeval's compute_metric: sum(epe_i * n_i) / sum(n_i) in T, in dataset order.
  template <class T>
  static double reduce(const FlowState& s) {
    T total = T(0);
    std::int64_t pixels = 0;
    for (std::int64_t i = 0; i < s.n; ++i) {
      const std::int64_t c = s.pixels[static_cast<std::size_t>(i)];
      if (c == 0) continue;  // mmeval: NaN * 0 (see the header)
      total = total + static_cast<T>(s.epe[static_cast<std::size_t>(i)]) * static_cast<T>(c);
      pixels += c;
    }
    if (pixels == 0) return std::numeric_limits<double>::quiet_NaN();
    return static_cast<double>(total / static_cast<T>(pixels));
  }

  InputChecker check_;
  double max_flow_ = 0.0;
  bool has_max_flow_ = false;
};

ComponentInfo end_point_error_info() {
  return with_results(
      metric<EndPointError>(
          "EndPointError",
          "End-point error of optical flow: the mean Euclidean distance between predicted and true "
          "flow vectors over the valid pixels, per-sample means weighted by their valid pixels. "
          "mmeval's EndPointError (bit for bit, float32 or float64 as the flows); key EPE, in "
          "pixels. A sample with no valid pixel is skipped (mmeval: NaN).",
          {param("max_flow", ParamType::Float,
                 "Not in mmeval: when set, pixels whose true flow is at least this long are not "
                 "counted (RAFT's and mmflow's rule, e.g. 400). Null: every valid pixel counts.")
               .optional()
               .nullable()},
          {InputSpec{kPred, "Predicted flow [N, H, W, 2] (u, v), float32 or float64.", true},
           InputSpec{kGt,
                     "True flow [N, H, W, 2], float32 or float64; NaN is allowed at pixels the "
                     "valid_mask excludes.",
                     true},
           InputSpec{kValid,
                     "Valid pixels [N, H, W]: float (valid when >= 0.5, mmeval's rule), bool or "
                     "integers (valid when >= 1); absent: every pixel is valid.",
                     false}}),
      {{"EPE", Better::Lower, Plot::None, "mean end-point error, in pixels"}});
}
TALLY_COMPONENT(end_point_error_info)

}  // namespace
}  // namespace tally::flow

TALLY_PLUGIN("flow", "0.1.0")
