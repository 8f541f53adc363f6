// MeanIoU: semantic-segmentation metrics from the pixel confusion matrix.
//
// Formula. Over every pixel of every sample whose ground truth g is not ignore_index, with p the
// predicted class, M[g][p] counts the pixels (rows = ground truth). Per class c:
//   TP_c = M[c][c],  gts_c = sum_p M[c][p],  preds_c = sum_g M[g][c]
//   IoU_c = TP_c / (preds_c + gts_c - TP_c)      Acc_c = Recall_c = TP_c / gts_c
//   Dice_c = 2 TP_c / (preds_c + gts_c)          Precision_c = TP_c / preds_c
//   Fscore_c = (1 + beta^2) (P_c R_c) / (beta^2 P_c + R_c)
//   aAcc  = sum TP / sum gts                     (pixel accuracy)
//   kappa = (po - pe) / (1 - pe), po = aAcc, pe = sum_c gts_c preds_c / (sum gts)^2
//   mIoU, mAcc, mDice, mPrecision, mRecall, mFscore: numpy.nanmean of the per-class values (a
//   class with a 0/0 ratio is NaN and left out of the mean), after replacing NaN by nan_to_num
//   when it is set.
// All divisions are of int64 counts converted to double, and the means use NumPy's pairwise sum,
// so the values are NumPy's to the last bit.
//
// Reference: mmeval 0.2.1 mmeval.metrics.MeanIoU(num_classes, ignore_index, nan_to_num, beta,
// classwise_results): the same keys, the same NaN rules, fractions (mmeval's are fractions too).
// reduce_zero_label (not an mmeval option) is MMSegmentation's: before anything else the ground
// truth 0 becomes 255 (ignored), 255 stays 255 and every other label l becomes l - 1, as in
// mmseg 0.x mmseg.core.evaluation.metrics.intersect_and_union and mmseg 1.x LoadAnnotations; it
// requires ignore_index 255.
//
// Keys: aAcc, mIoU, mAcc, mDice, mPrecision, mRecall, mFscore, kappa and, with
// classwise_results, classwise_results: {IoU, Acc, Dice, Precision, Recall, Fscore}, each an
// array of num_classes values (NaN, written as null, where the class has no pixels).
//
// Example (mmeval's docstring): num_classes 4, gt [[0, 1, 1], [2, 3, 2]], pred [[0, 2, 1],
// [1, 3, 2]] -> aAcc 0.6667, mIoU 0.6667, mAcc 0.75, mDice 0.75, ..., kappa 0.53846.
//
// Inputs: pred_sem_seg and gt_sem_seg, label maps of any integer dtype, dense [N, H, W] or ragged
// (one [H, W] tensor per sample); each sample's two maps have the same shape.
//
// State: the K x K int64 count matrix (one PackedVector) and the sample count, both summed across
// ranks (reduced to rank 0, checked): exact, so any number of ranks gives the same bits. Never
// per-image lists.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "tally/sdk/input.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/numpy_math.hpp"
#include "tally/sdk/parallel.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/simd.hpp"
#include "tally/sdk/state.hpp"

namespace tally::segmentation {
namespace {

constexpr const char* kPred = "pred_sem_seg";
constexpr const char* kGt = "gt_sem_seg";
// The matrix is state on every rank and travels at each sync: 4096^2 int64 = 128 MiB.
constexpr std::int64_t kMaxClasses = 4096;

struct MeanIoUState {
  PackedVector<std::int64_t> counts;  // [K * K], index gt * K + pred
  std::int64_t n = 0;                 // samples
  TALLY_STATE(sum(counts), sum(n))
};

std::string shape_of(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// One field of a batch as per-sample [H, W] maps, dense [N, H, W] or ragged.
class LabelMaps {
 public:
  LabelMaps(const Batch& batch, const char* field, const InputChecker& check, std::int64_t first)
      : field_(field) {
    if (!batch.has(field)) check.tensor(batch, field);  // the "missing, it has: ..." message
    if (batch.is_ragged(field)) {
      ragged_ = &batch.ragged(field);
      for (std::size_t i = 0; i < ragged_->size(); ++i) {
        const Tensor& t = (*ragged_)[i];
        const std::string where = "sample " + std::to_string(first + static_cast<std::int64_t>(i));
        if (t.is_cuda()) check.fail(field, where + ": is a CUDA tensor; MeanIoU reads CPU tensors");
        if (!is_integral(t.dtype()))
          check.fail(field, where + ": must be an integer label map, got " + t.describe());
        if (t.dim() != 2) check.fail(field, where + ": must be 2-D [H, W], got " + t.describe());
      }
    } else {
      dense_ = &check.tensor(batch, field);
      if (!is_integral(dense_->dtype()))
        check.fail(field, "must hold integer label maps, got " + dense_->describe());
      check.dims(*dense_, field, 3, "[N, H, W] (or ragged: one [H, W] map per sample)");
    }
  }

  /// Sample i as a 2-D tensor (a view for dense fields).
  Tensor sample(std::int64_t i) const {
    if (ragged_) return (*ragged_)[static_cast<std::size_t>(i)];
    const auto& s = dense_->shape();
    const std::size_t bytes = static_cast<std::size_t>(s[1] * s[2]) * dtype_size(dense_->dtype());
    return Tensor::view(
        static_cast<const char*>(dense_->data()) + static_cast<std::size_t>(i) * bytes,
        dense_->dtype(), {s[1], s[2]});
  }

 private:
  const char* field_;
  const Batch::Ragged* ragged_ = nullptr;
  const Tensor* dense_ = nullptr;
};

/// Counts label pairs into 4 interleaved uint32 histograms of K*K+1 bins (the last bin takes
/// ignored pixels): four lanes break the store-to-load dependency of runs of equal pixels, which
/// label maps are made of. Used for K <= 256; larger K counts straight into the int64 matrix.
struct LaneHistogram {
  static constexpr int kLanes = 4;
  std::vector<std::uint32_t> bins;  // [kLanes][K*K+1]
  std::size_t stride = 0;
  std::int64_t pending = 0;  // pixels counted since the last flush
};

/// What one thread counts with: its lane histograms (K <= 256) and, for a batch split over
/// several threads (`threads`), its own int64 matrix, added to the state once every thread is
/// done: integer sums, so the state is the same for any number of threads.
struct Counter {
  LaneHistogram lanes;
  std::vector<std::int64_t> own;  // [K * K]; empty for the one-thread path (counts into the state)
};

/// Bin indices of pixels [0, m): gt * K + pred, or `ignored_bin` for pixels whose ground truth is
/// ignore_index. Returns whether a pixel that counts has a class outside [0, K). A branch-free
/// loop the compiler vectorises, compiled for baseline x86-64 and for AVX2 (TALLY_SIMD_CLONES).
/// Idx is uint16 for uint8 maps with K <= 255 (every bin, the ignored one too, below 2^16): the
/// whole loop then runs in 16-bit lanes, 16 pixels per AVX2 step.
template <bool kReduceZeroLabel, class Idx, class P, class G>
TALLY_SIMD_CLONES bool bin_indices(const P* pred, const G* gt, std::int64_t m, std::uint64_t k,
                                   std::int64_t ignore, Idx ignored_bin, Idx* out) {
  // Lanes as narrow as the maps allow; an ignore_index outside their range matches no pixel.
  using W = std::conditional_t<
      sizeof(Idx) == 2, std::int16_t,
      std::conditional_t<sizeof(P) <= 2 && sizeof(G) <= 2, std::int32_t, std::int64_t>>;
  using U = std::make_unsigned_t<W>;
  const W ign = (ignore < std::numeric_limits<W>::min() || ignore > std::numeric_limits<W>::max())
                    ? std::numeric_limits<W>::min()
                    : static_cast<W>(ignore);
  const auto kw = static_cast<U>(k);
  U bad = 0;
#pragma omp simd reduction(| : bad)
  for (std::int64_t j = 0; j < m; ++j) {
    auto g = static_cast<W>(gt[j]);
    if constexpr (kReduceZeroLabel) g = (g == 0 || g == 255) ? W{255} : static_cast<W>(g - 1);
    const auto p = static_cast<W>(pred[j]);
    const auto counted = static_cast<U>(g != ign);
    const auto in_range = static_cast<U>((static_cast<U>(g) < kw) & (static_cast<U>(p) < kw));
    bad |= static_cast<U>(counted & (in_range ^ 1u));
    out[j] = (counted & in_range) != 0
                 ? static_cast<Idx>(static_cast<U>(g) * kw + static_cast<U>(p))
                 : ignored_bin;
  }
  return bad != 0;
}

class MeanIoU final : public TypedMetric<MeanIoUState> {
 public:
  explicit MeanIoU(const Params& p)
      : k_(p.get_size("num_classes", 1, kMaxClasses, "the state is a num_classes^2 int64 matrix")),
        ignore_index_(p.get_int("ignore_index")),
        beta_(p.get_double("beta")),
        classwise_(p.get_bool("classwise_results")),
        reduce_zero_label_(p.get_bool("reduce_zero_label")),
        check_(p.owner_or("MeanIoU")) {
    if (p.has("nan_to_num")) {
      nan_to_num_ = p.get_double("nan_to_num");
      has_nan_to_num_ = true;
      if (std::isnan(nan_to_num_)) p.fail("nan_to_num", "must be a number, not NaN");
    }
    if (std::isnan(beta_)) p.fail("beta", "must be a number, not NaN");
    if (reduce_zero_label_ && ignore_index_ != 255)
      p.fail("reduce_zero_label",
             "maps ground truth 0 to 255 (MMSegmentation's convention), so ignore_index must be "
             "255, got " +
                 std::to_string(ignore_index_));
    threads_ = static_cast<int>(p.get_size("threads", 1, 256));
    counters_.resize(1);  // the others when a batch first runs on several threads
  }

 protected:
  MeanIoUState initial_state() const override {
    MeanIoUState s;
    s.counts.assign(static_cast<std::size_t>(k_ * k_), 0);
    return s;
  }

  void update(MeanIoUState& state, const Batch& batch) override {
    if (batch.fields().empty() || batch.size() == 0) return;
    const LabelMaps pred(batch, kPred, check_, state.n);
    const LabelMaps gt(batch, kGt, check_, state.n);
    const std::int64_t n = batch.size();
    // The maps, their shapes checked before any pixel is read, cut into pieces of rows in
    // dataset order: the unit a thread counts, so that one large image is split too.
    pred_maps_.clear();
    gt_maps_.clear();
    pieces_.clear();
    for (std::int64_t i = 0; i < n; ++i) {
      Tensor p = pred.sample(i);
      Tensor g = gt.sample(i);
      if (p.shape() != g.shape())
        check_.fail(kPred, "sample " + std::to_string(state.n + i) + ": has shape " +
                               shape_of(p.shape()) + ", '" + kGt + "' has " + shape_of(g.shape()));
      for (std::int64_t at = 0; at < p.numel(); at += kPiecePixels)
        pieces_.push_back({i, at, std::min(p.numel(), at + kPiecePixels)});
      pred_maps_.push_back(std::move(p));
      gt_maps_.push_back(std::move(g));
    }
    const std::size_t t = std::min(static_cast<std::size_t>(threads_), pieces_.size());
    if (t <= 1) {
      count_pieces(counters_[0], state.counts.data(), 0, pieces_.size(), state.n);
    } else {
      // Contiguous blocks of pieces, one a thread, each into its own matrix, added up after; the
      // first error in dataset order is the one reported, as on one thread, and a batch that
      // fails adds nothing.
      if (counters_.size() < t) counters_.resize(t);
      const auto cells = static_cast<std::size_t>(k_ * k_);
      const std::size_t m = pieces_.size();
      parallel_for(t, static_cast<int>(t), [&](std::size_t b) {
        Counter& c = counters_[b];
        c.own.assign(cells, 0);
        count_pieces(c, c.own.data(), m * b / t, m * (b + 1) / t, state.n);
      });
      for (std::size_t b = 0; b < t; ++b)
        for (std::size_t i = 0; i < cells; ++i) state.counts[i] += counters_[b].own[i];
    }
    state.n += n;
  }

  Value compute(const MeanIoUState& all) const override {
    const auto k = static_cast<std::size_t>(k_);
    const auto& m = all.counts;
    if (m.size() != k * k)
      check_.fail_runtime(std::string("the state holds ") + std::to_string(m.size()) +
                          " cells, expected " + std::to_string(k * k));
    if (all.n == 0) check_.fail("no samples");

    std::vector<std::int64_t> tp(k), gts(k, 0), preds(k, 0);
    for (std::size_t g = 0; g < k; ++g) {
      tp[g] = m[g * k + g];
      for (std::size_t p = 0; p < k; ++p) {
        gts[g] += m[g * k + p];
        preds[p] += m[g * k + p];
      }
    }
    std::int64_t tp_sum = 0, gts_sum = 0;
    // sum_c gts_c * preds_c <= (sum gts)^2, which passes int64 beyond 3e9 pixels: 128 bits.
    __extension__ using u128 = unsigned __int128;
    u128 gp_sum = 0;
    for (std::size_t c = 0; c < k; ++c) {
      tp_sum += tp[c];
      gts_sum += gts[c];
      gp_sum += static_cast<u128>(gts[c]) * static_cast<u128>(preds[c]);
    }
    const auto ratio = [](std::int64_t a, std::int64_t b) {
      return static_cast<double>(a) / static_cast<double>(b);  // 0/0 = NaN, as NumPy
    };
    std::vector<double> iou(k), acc(k), dice(k), precision(k), recall(k), fscore(k);
    const double b2 = std::pow(beta_, 2.0);
    for (std::size_t c = 0; c < k; ++c) {
      iou[c] = ratio(tp[c], preds[c] + gts[c] - tp[c]);
      acc[c] = ratio(tp[c], gts[c]);
      dice[c] = ratio(2 * tp[c], preds[c] + gts[c]);
      precision[c] = ratio(tp[c], preds[c]);
      recall[c] = ratio(tp[c], gts[c]);
      fscore[c] = (1.0 + b2) * (precision[c] * recall[c]) / (b2 * precision[c] + recall[c]);
    }
    const double po = ratio(tp_sum, gts_sum);
    const u128 total2 = static_cast<u128>(gts_sum) * static_cast<u128>(gts_sum);
    const double pe = static_cast<double>(gp_sum) / static_cast<double>(total2);
    const double kappa = (po - pe) / (1.0 - pe);

    Value out = Value::map();
    out.set("aAcc", po);
    out.set("mIoU", mean(iou));
    out.set("mAcc", mean(acc));
    out.set("mDice", mean(dice));
    out.set("mPrecision", mean(precision));
    out.set("mRecall", mean(recall));
    out.set("mFscore", mean(fscore));
    out.set("kappa", kappa);
    if (classwise_) {
      Value cw = Value::map();
      cw.set("IoU", Value(iou));
      cw.set("Acc", Value(acc));
      cw.set("Dice", Value(dice));
      cw.set("Precision", Value(precision));
      cw.set("Recall", Value(recall));
      cw.set("Fscore", Value(fscore));
      out.set("classwise_results", std::move(cw));
    }
    return out;
  }

 private:
  /// mmeval's _mean: numpy.nan_to_num(values, nan=nan_to_num) when set, then numpy.nanmean.
  double mean(std::vector<double> values) const {
    if (has_nan_to_num_)
      for (double& v : values)
        if (std::isnan(v)) v = nan_to_num_;
    return numpy::nanmean(values);
  }

  /// Pieces [lo, hi) of the batch (`first`: the number of its first sample) into `c`, flushed
  /// into `counts` (a K x K matrix) at the end.
  void count_pieces(Counter& c, std::int64_t* counts, std::size_t lo, std::size_t hi,
                    std::int64_t first) {
    if (k_ <= 256 && c.lanes.bins.empty()) {
      c.lanes.stride = static_cast<std::size_t>(k_ * k_ + 1);
      c.lanes.bins.assign(LaneHistogram::kLanes * c.lanes.stride, 0);
    }
    clear(c.lanes);  // what a batch that failed left there
    for (std::size_t k = lo; k < hi; ++k) {
      const Piece& piece = pieces_[k];
      const Tensor& p = pred_maps_[static_cast<std::size_t>(piece.sample)];
      const Tensor& g = gt_maps_[static_cast<std::size_t>(piece.sample)];
      visit_integral(p, [&](const auto* pp) {
        visit_integral(g, [&](const auto* gg) {
          count(c, counts, pp, gg, piece.begin, piece.end, p.size(1), first + piece.sample);
        });
      });
    }
    flush(c.lanes, counts);
  }

  template <class P, class G>
  void count(Counter& c, std::int64_t* counts, const P* pred, const G* gt, std::int64_t begin,
             std::int64_t end, std::int64_t width, std::int64_t sample) {
    if constexpr (sizeof(P) == 1 && sizeof(G) == 1)
      if (k_ <= 255) return count_as<std::uint16_t>(c, counts, pred, gt, begin, end, width, sample);
    count_as<std::uint32_t>(c, counts, pred, gt, begin, end, width, sample);
  }

  template <class Idx, class P, class G>
  void count_as(Counter& c, std::int64_t* counts, const P* pred, const G* gt, std::int64_t begin,
                std::int64_t end, std::int64_t width, std::int64_t sample) {
    constexpr std::int64_t kChunk = 2048;
    Idx idx[kChunk];
    const auto k = static_cast<std::uint64_t>(k_);
    LaneHistogram& hist = c.lanes;
    const bool lanes = !hist.bins.empty();
    const auto ignored_bin = static_cast<Idx>(k_ * k_);
    for (std::int64_t base = begin; base < end; base += kChunk) {
      const std::int64_t m = std::min(kChunk, end - base);
      const bool bad =
          reduce_zero_label_
              ? bin_indices<true>(pred + base, gt + base, m, k, ignore_index_, ignored_bin, idx)
              : bin_indices<false>(pred + base, gt + base, m, k, ignore_index_, ignored_bin, idx);
      if (bad) {
        flush(hist, counts);
        report_bad(pred + base, gt + base, m, base, width, sample);
      }
      if (lanes) {
        std::uint32_t* bins = hist.bins.data();
        const std::size_t s = hist.stride;
        std::int64_t j = 0;
        for (; j + 4 <= m; j += 4) {
          ++bins[idx[j]];
          ++bins[s + idx[j + 1]];
          ++bins[2 * s + idx[j + 2]];
          ++bins[3 * s + idx[j + 3]];
        }
        for (; j < m; ++j) ++bins[idx[j]];
        // A lane counts at most `pending` pixels: flush long before uint32 could wrap.
        if ((hist.pending += m) >= (std::int64_t{1} << 31)) flush(hist, counts);
      } else {
        for (std::int64_t j = 0; j < m; ++j)
          if (idx[j] != ignored_bin) ++counts[idx[j]];
      }
    }
  }

  /// Adds the lane histograms into the int64 matrix `counts` and clears them.
  void flush(LaneHistogram& lanes, std::int64_t* counts) const {
    if (lanes.bins.empty() || lanes.pending == 0) return;
    const std::size_t cells = static_cast<std::size_t>(k_ * k_);
    for (int l = 0; l < LaneHistogram::kLanes; ++l) {
      const std::uint32_t* b = lanes.bins.data() + static_cast<std::size_t>(l) * lanes.stride;
      for (std::size_t i = 0; i < cells; ++i) counts[i] += b[i];
    }
    clear(lanes);
  }

  static void clear(LaneHistogram& lanes) {
    if (lanes.pending == 0) return;
    std::fill(lanes.bins.begin(), lanes.bins.end(), 0u);
    lanes.pending = 0;
  }

  /// InputError naming the first counted pixel of the chunk with a class outside [0, K).
  template <class P, class G>
  [[noreturn]] void report_bad(const P* pred, const G* gt, std::int64_t m, std::int64_t base,
                               std::int64_t width, std::int64_t sample) const {
    const auto k = static_cast<std::uint64_t>(k_);
    const std::string range = "[0, " + std::to_string(k_) + ")";
    for (std::int64_t j = 0; j < m; ++j) {
      const auto raw = static_cast<std::int64_t>(gt[j]);
      std::int64_t g = raw;
      if (reduce_zero_label_) g = (g == 0 || g == 255) ? 255 : g - 1;
      if (g == ignore_index_) continue;
      const auto p = static_cast<std::int64_t>(pred[j]);
      const std::int64_t pixel = base + j;
      const std::string where = "sample " + std::to_string(sample) + " pixel (row " +
                                std::to_string(pixel / width) + ", column " +
                                std::to_string(pixel % width) + "): class id ";
      if (static_cast<std::uint64_t>(g) >= k) {
        if (reduce_zero_label_)
          check_.fail(kGt, where + std::to_string(raw) + " is outside [1, " + std::to_string(k_) +
                               "] (reduce_zero_label: 0 and 255 are ignored, l counts as l - 1)");
        check_.fail(kGt, where + std::to_string(raw) + " is outside " + range +
                             " and is not ignore_index " + std::to_string(ignore_index_));
      }
      if (static_cast<std::uint64_t>(p) >= k)
        check_.fail(kPred, where + std::to_string(p) + " is outside " + range +
                               " (only pixels whose ground truth is ignore_index may hold "
                               "other values)");
    }
    check_.fail("internal error: a bad pixel was flagged but not found");
  }

  std::int64_t k_;
  std::int64_t ignore_index_;
  double beta_;
  bool classwise_;
  bool reduce_zero_label_;
  double nan_to_num_ = 0.0;
  bool has_nan_to_num_ = false;
  InputChecker check_;
  int threads_ = 1;
  std::vector<Counter> counters_;  // [0]: the one-thread path's; one a thread of a split batch
  // One batch's work: its maps (views) and their pieces.
  struct Piece {
    std::int64_t sample, begin, end;  // pixels [begin, end) of the batch's sample
  };
  static constexpr std::int64_t kPiecePixels = std::int64_t{1} << 18;
  std::vector<Tensor> pred_maps_, gt_maps_;
  std::vector<Piece> pieces_;
};

}  // namespace

ComponentInfo mean_iou_info() {
  ComponentInfo info = metric<MeanIoU>(
      "MeanIoU",
      "Semantic segmentation from the pixel confusion matrix, as mmeval 0.2.1 MeanIoU: aAcc "
      "(pixel accuracy), mIoU, mAcc, mDice, mPrecision, mRecall, mFscore (NaN-skipping means "
      "over the classes), kappa (Cohen's), and per class with classwise_results. Fractions in "
      "[0, 1].",
      {param("num_classes", ParamType::Int,
             "Number of classes K; every counted pixel's prediction and ground truth lie in "
             "[0, K)."),
       param("ignore_index", ParamType::Int,
             "Ground-truth value whose pixels are left out (their prediction may be anything).")
           .def(255),
       param("nan_to_num", ParamType::Float,
             "Replaces the NaN of a class without pixels (0/0) by this number before the means; "
             "unset: such classes are left out of the means (numpy.nanmean).")
           .optional()
           .nullable(),
       param("beta", ParamType::Float, "Weight of recall in the F-score (F-beta).").def(1),
       param("classwise_results", ParamType::Bool,
             "Also return classwise_results: {IoU, Acc, Dice, Precision, Recall, Fscore}, arrays "
             "of K values.")
           .def(false),
       param("threads", ParamType::Int,
             "Threads counting a batch: its maps cut into pieces of 2^18 pixels, contiguous "
             "blocks of pieces counted into each thread's own histograms, then added up exactly "
             "(the same counts for any number of threads).")
           .def(1),
       param("reduce_zero_label", ParamType::Bool,
             "MMSegmentation's reduce_zero_label: ground truth 0 is ignored (becomes 255) and "
             "class l is l - 1 (for datasets such as ADE20K whose 0 means 'other'); "
             "predictions are not changed. Needs ignore_index 255.")
           .def(false)},
      {InputSpec{kPred,
                 "Predicted label maps: [N, H, W] or ragged [H, W] per sample, any integer dtype.",
                 true},
       InputSpec{kGt,
                 "Ground-truth label maps, the same shapes as pred_sem_seg, any integer dtype.",
                 true}});
  info.results = {
      {"kappa", Better::Higher, Plot::None, "Cohen's kappa of the pixel confusion matrix"},
      {"classwise_results", Better::Higher, Plot::None,
       "per class: IoU, Acc, Dice, Precision, Recall, Fscore (index = class id)"},
      {"*", Better::Higher, Plot::None, "fraction in [0, 1]"}};
  return info;
}
TALLY_COMPONENT(mean_iou_info)

}  // namespace tally::segmentation
