// Pieces the torchmetrics-named segmentation metrics (DiceScore, GeneralizedDiceScore) share:
// reading preds / target in torchmetrics' input formats (one-hot [N, C, ...] or index [N, ...])
// into per-image, per-class overlap counts (|P & T|, |P|, |T|), torchmetrics'
// include_background, and exact sums of per-image values (ExactSum) for the averages over
// images.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/exact_sum.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/state.hpp"

namespace tally::segmentation {

inline constexpr const char* kPreds = "preds";
inline constexpr const char* kTarget = "target";

inline ParamSpec seg_num_classes_param() {
  return param("num_classes", ParamType::Int,
               "Number of classes C (torchmetrics' num_classes): index maps hold ids in [0, C), "
               "one-hot maps have C channels.");
}
inline ParamSpec include_background_param(bool def) {
  return param("include_background", ParamType::Bool,
               "Whether class 0 (the background) counts; false drops it (when C > 1), as "
               "torchmetrics.")
      .def(def);
}
inline ParamSpec input_format_param() {
  return param("input_format", ParamType::String,
               "one-hot: preds and target [N, C, ...] (integer 0/1 or bool masks, or float scores "
               "whose argmax over C is the class); index: [N, ...] class ids.")
      .def("one-hot")
      .choices({"one-hot", "index"});
}
inline std::vector<InputSpec> seg_inputs() {
  return {InputSpec{kPreds,
                    "Predicted segmentation: [N, C, ...] one-hot / scores or [N, ...] class ids "
                    "(input_format); 1 to 3 spatial dimensions.",
                    true},
          InputSpec{kTarget, "Ground-truth segmentation, as preds.", true}};
}

/// Per image and class (after include_background): |P & T|, |P|, |T| as int64, image-major:
/// at [i * classes + c].
struct Overlaps {
  std::int64_t images = 0, classes = 0;
  std::vector<std::int64_t> inter, pred, target;
};

namespace overlap_detail {

/// preds and target in the layout input_format names ([N, C, ...] or [N, ...], 1 to 3 spatial
/// dimensions, C channels), of one shape, and of a dtype the format takes.
inline void check_layout(const InputChecker& check, const Tensor& p, const Tensor& t,
                         std::int64_t num_classes, bool one_hot) {
  const std::int64_t lead = one_hot ? 2 : 1;
  const char* layout =
      one_hot ? "[N, C, ...] (input_format one-hot)" : "[N, ...] (input_format index)";
  for (const auto& [field, x] : {std::pair{kPreds, &p}, std::pair{kTarget, &t}}) {
    if (x->dim() < lead + 1 || x->dim() > lead + 3)
      check.fail(field, std::string("must be ") + layout + " with 1 to 3 spatial dimensions, got " +
                            x->describe());
    if (one_hot && x->size(1) != num_classes)
      check.fail(field, "has " + std::to_string(x->size(1)) + " channels, num_classes is " +
                            std::to_string(num_classes) + " (" + x->describe() + ")");
  }
  if (p.shape() != t.shape())
    check.fail(kPreds, "has shape " + p.describe() + ", '" + std::string(kTarget) + "' has " +
                           t.describe());
}

inline void check_dtypes(const InputChecker& check, const Tensor& p, const Tensor& t,
                         bool one_hot) {
  for (const auto& [field, x] : {std::pair{kPreds, &p}, std::pair{kTarget, &t}}) {
    const bool ok =
        one_hot ? (is_floating(x->dtype()) || is_integral(x->dtype()) || x->dtype() == DType::Bool)
                : is_integral(x->dtype());
    if (!ok)
      check.fail(field, std::string(one_hot ? "must hold 0/1 masks or float scores"
                                            : "must hold integer class ids") +
                            ", got " + x->describe());
  }
}

/// The overlap counts of one batch, per image and class (all classes), image-major.
class OverlapCounter {
 public:
  OverlapCounter(const InputChecker& check, std::int64_t n, std::int64_t k, std::int64_t pixels,
                 bool one_hot, std::int64_t first)
      : inter(static_cast<std::size_t>(n * k), 0),
        ps(static_cast<std::size_t>(n * k), 0),
        ts(static_cast<std::size_t>(n * k), 0),
        check_(check),
        n_(n),
        k_(k),
        pixels_(pixels),
        one_hot_(one_hot),
        first_(first) {}

  /// Both sides as class ids per pixel (index maps, or float one-hot scores by their argmax).
  void count_by_ids(const Tensor& p, const Tensor& t) {
    for (std::int64_t i = 0; i < n_; ++i) {
      ids_of(p, kPreds, i, pid_);
      ids_of(t, kTarget, i, tid_);
      count_ids(i);
    }
  }

  /// At least one side is a 0/1 mask: per-class sums of the masks (a float side: its argmax
  /// one-hot).
  void count_by_masks(const Tensor& p, const Tensor& t, bool floats, bool floatt) {
    const std::int64_t n = n_, k = k_, pixels = pixels_;
    std::vector<std::uint8_t> pm, tm;
    pm = mask_of(p, kPreds, floats);
    tm = mask_of(t, kTarget, floatt);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t c = 0; c < k; ++c) {
        const auto at = static_cast<std::size_t>((i * k + c) * pixels);
        std::int64_t a = 0, b = 0, both = 0;
        for (std::int64_t j = 0; j < pixels; ++j) {
          const auto x = pm[at + static_cast<std::size_t>(j)],
                     y = tm[at + static_cast<std::size_t>(j)];
          a += x;
          b += y;
          both += x & y;
        }
        ps[static_cast<std::size_t>(i * k + c)] = a;
        ts[static_cast<std::size_t>(i * k + c)] = b;
        inter[static_cast<std::size_t>(i * k + c)] = both;
      }
  }

  std::vector<std::int64_t> inter, ps, ts;  // |P & T|, |P|, |T| at [i * classes + c]

 private:
  void count_ids(std::int64_t i) {
    const std::int64_t k = k_, pixels = pixels_;
    const std::vector<std::int64_t>& pid = pid_;
    const std::vector<std::int64_t>& tid = tid_;
    auto* in = inter.data() + i * k;
    auto* pp = ps.data() + i * k;
    auto* tt = ts.data() + i * k;
    for (std::int64_t j = 0; j < pixels; ++j) {
      const auto a = pid[static_cast<std::size_t>(j)], b = tid[static_cast<std::size_t>(j)];
      ++pp[a];
      ++tt[b];
      in[a] += a == b ? 1 : 0;
    }
  }

  // Class ids per pixel of image i of tensor x: index maps as they are, float one-hot scores by
  // their argmax over C (torch.argmax: the first maximum).
  void ids_of(const Tensor& x, const char* field, std::int64_t i,
              std::vector<std::int64_t>& ids) const {
    const InputChecker& check = check_;
    const std::int64_t k = k_, pixels = pixels_, first = first_;
    ids.resize(static_cast<std::size_t>(pixels));
    if (!one_hot_) {
      visit_integral(x, [&](const auto* v) {
        const auto* img = v + i * pixels;
        for (std::int64_t j = 0; j < pixels; ++j) {
          const auto id = static_cast<std::int64_t>(img[j]);
          if (static_cast<std::uint64_t>(id) >= static_cast<std::uint64_t>(k))
            check.fail(field, "image " + std::to_string(first + i) + ", pixel " +
                                  std::to_string(j) + ": class id " + std::to_string(id) +
                                  " is outside [0, " + std::to_string(k) + ")");
          ids[static_cast<std::size_t>(j)] = id;
        }
      });
      return;
    }
    visit_floating(x, [&](const auto* v) {
      const auto* img = v + i * k * pixels;
      for (std::int64_t j = 0; j < pixels; ++j) {
        std::int64_t best = 0;
        for (std::int64_t c = 0; c < k; ++c) {
          const auto s = img[c * pixels + j];
          if (std::isnan(s))
            check.fail(field, "image " + std::to_string(first + i) + ", class " +
                                  std::to_string(c) + ", pixel " + std::to_string(j) +
                                  ": score is NaN");
          if (s > img[best * pixels + j]) best = c;
        }
        ids[static_cast<std::size_t>(j)] = best;
      }
    });
  }

  std::vector<std::uint8_t> binary_mask(const Tensor& x, const char* field) const {
    const InputChecker& check = check_;
    const std::int64_t k = k_, pixels = pixels_, first = first_;
    // Integer (or bool) one-hot masks: 0/1 only (torchmetrics multiplies whatever it gets).
    std::vector<std::uint8_t> m(static_cast<std::size_t>(x.numel()));
    const auto put = [&](const auto* v) {
      for (std::int64_t e = 0; e < x.numel(); ++e) {
        const auto val = static_cast<std::int64_t>(v[e]);
        if (val != 0 && val != 1)
          check.fail(field, "image " + std::to_string(first + e / (k * pixels)) + ", class " +
                                std::to_string((e / pixels) % k) + ": value " +
                                std::to_string(val) + " in a one-hot mask (expected 0 or 1)");
        m[static_cast<std::size_t>(e)] = static_cast<std::uint8_t>(val);
      }
    };
    if (x.dtype() == DType::Bool)
      put(static_cast<const std::uint8_t*>(x.data()));
    else
      visit_integral(x, put);
    return m;
  }

  std::vector<std::uint8_t> mask_of(const Tensor& x, const char* field, bool is_float) const {
    const std::int64_t n = n_, k = k_, pixels = pixels_;
    if (!is_float) return binary_mask(x, field);
    std::vector<std::uint8_t> m(static_cast<std::size_t>(x.numel()), 0);
    std::vector<std::int64_t> ids;
    for (std::int64_t i = 0; i < n; ++i) {
      ids_of(x, field, i, ids);
      for (std::int64_t j = 0; j < pixels; ++j)
        m[static_cast<std::size_t>((i * k + ids[static_cast<std::size_t>(j)]) * pixels + j)] = 1;
    }
    return m;
  }

  const InputChecker& check_;
  std::int64_t n_, k_, pixels_;
  bool one_hot_;
  std::int64_t first_;
  std::vector<std::int64_t> pid_, tid_;  // class ids of one image
};

}  // namespace overlap_detail

/// Reads one batch. `first` is the number of images this rank saw before (for messages).
inline void read_overlaps(const InputChecker& check, const Batch& batch, std::int64_t num_classes,
                          bool one_hot, bool include_background, std::int64_t first, Overlaps& o) {
  const Tensor& p = check.tensor(batch, kPreds);
  const Tensor& t = check.tensor(batch, kTarget);
  overlap_detail::check_layout(check, p, t, num_classes, one_hot);
  const std::int64_t lead = one_hot ? 2 : 1;
  const std::int64_t n = p.size(0), k = num_classes;
  std::int64_t pixels = 1;
  for (std::int64_t d = lead; d < p.dim(); ++d) pixels *= p.size(d);
  overlap_detail::check_dtypes(check, p, t, one_hot);
  overlap_detail::OverlapCounter counts(check, n, k, pixels, one_hot, first);
  const bool floats = is_floating(p.dtype()), floatt = is_floating(t.dtype());
  if (!one_hot || (floats && floatt))
    counts.count_by_ids(p, t);
  else
    counts.count_by_masks(p, t, floats, floatt);
  // torchmetrics' _ignore_background: drop class 0 when there is more than one class.
  const std::int64_t skip = !include_background && k > 1 ? 1 : 0;
  o.images = n;
  o.classes = k - skip;
  o.inter.clear();
  o.pred.clear();
  o.target.clear();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t c = skip; c < k; ++c) {
      const auto at = static_cast<std::size_t>(i * k + c);
      o.inter.push_back(counts.inter[at]);
      o.pred.push_back(counts.ps[at]);
      o.target.push_back(counts.ts[at]);
    }
}

/// Adds `values` (slots of them) to the exact accumulators `words` (slots x kWords), creating
/// them on first use. RuntimeError when a restored state does not hold `slots` accumulators.
inline void add_exact(ExactSums& words, const std::vector<double>& values, std::size_t slots,
                      const std::string& owner) {
  std::vector<ExactSum> acc(slots);
  if (!words.empty()) {
    if (words.size() != slots * ExactSum::kWords || !words.normalized())
      tally::throw_owned<RuntimeError>(
          owner, std::string("the restored state is corrupt: its sums are not ") +
                     std::to_string(slots) + " normalized accumulators");
    for (std::size_t s = 0; s < slots; ++s) acc[s].merge(words.data() + s * ExactSum::kWords);
  }
  for (std::size_t v = 0; v < values.size(); ++v) acc[v % slots].add(values[v]);
  words.resize(slots * ExactSum::kWords);
  for (std::size_t s = 0; s < slots; ++s) {
    acc[s].normalize();
    std::copy(acc[s].words().begin(), acc[s].words().end(),
              words.begin() + static_cast<std::ptrdiff_t>(s * ExactSum::kWords));
  }
}

/// The exact sums of `words`, slots of them (empty words: zeros). RuntimeError for a corrupt
/// state.
inline std::vector<double> exact_values(const ExactSums& words, std::size_t slots,
                                        const std::string& owner) {
  std::vector<double> out(slots, 0.0);
  if (words.empty()) return out;
  if (words.mismatched() || words.size() != slots * ExactSum::kWords || !words.normalized())
    tally::throw_owned<RuntimeError>(owner, std::string("the state is corrupt"));
  for (std::size_t s = 0; s < slots; ++s) {
    ExactSum a;
    a.merge(words.data() + s * ExactSum::kWords);
    out[s] = a.value();
  }
  return out;
}

}  // namespace tally::segmentation
