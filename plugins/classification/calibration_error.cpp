// CalibrationError: the expected (l1), root-mean-square (l2) or maximum (max) calibration error
// of a binary or multiclass task over equal-width confidence bins (torchmetrics'
// CalibrationError).
//
// Formula. Each kept sample has a confidence and an accuracy: binary, the probability of class
// 1 and the target (0/1); multiclass, the top softmax probability and whether its class is the
// target. Bins: boundaries b_0..b_n = torch.linspace(0, 1, n_bins + 1); a confidence x falls in
// bin #{k : b_k <= x} - 1 (torch.bucketize(right=True) - 1), so n_bins + 1 bins, the last one
// holding confidences of exactly 1. Per bin: count n_b, mean accuracy a_b, mean confidence c_b
// (0 in an empty bin), proportion p_b = n_b / sum n:
//   l1   sum_b |a_b - c_b| p_b
//   l2   sqrt(sum_b (a_b - c_b)^2 p_b) (0 when the sum is 0)
//   max  max_b |a_b - c_b|
// Preds outside [0, 1] in a batch (among the samples kept) are logits: a sigmoid (binary) or
// softmax (multiclass) first, as torchmetrics does for each update().
//
// Reference: torchmetrics 1.9.0 torchmetrics.functional.calibration_error(preds, target,
// task=..., n_bins=..., norm=..., num_classes=..., ignore_index=...) computed in float64.
// torchmetrics itself casts multiclass confidences to float32 (and bins float32 binary preds in
// float32); tally widens every score to float64 first, so those differ by float32 rounding.
//
// Key: calibration_error.
//
// Example: task binary, n_bins 2, preds [0.25, 0.75, 0.75, 0.25], target [0, 1, 0, 1]
//   -> {calibration_error: 0.25}
//
// State: per bin the count and the number of accurate samples (int64, summed) and the exact
// sum of the confidences (an ExactSum accumulator a bin, merged exactly): the same bits on any
// number of ranks; its size depends on n_bins only ((n_bins + 1) x 69 int64).
#include <algorithm>

#include "common.hpp"
#include "tally/sdk/exact_sum.hpp"
#include "tm_core.hpp"

namespace tally::classification {
namespace {

using namespace tm;

constexpr std::int64_t kMaxBins = std::int64_t{1} << 16;

TaskOptions calibration_options() {
  TaskOptions o;
  o.tasks = {"binary", "multiclass"};
  o.threshold = false;
  return o;
}

struct CalibrationState {
  PackedVector<std::int64_t> count;     // [n_bins + 1]
  PackedVector<std::int64_t> accurate;  // [n_bins + 1]
  ExactSums confidence;                 // n_bins + 1 accumulators (empty until a sample)
  std::int64_t n = 0;
  TALLY_STATE(sum(count), sum(accurate), merge(confidence), sum(n))
};

/// torch.linspace(0, 1, steps) in float64, as ATen computes it: the first half from 0 up, the
/// second half from 1 down.
std::vector<double> linspace01(std::int64_t steps) {
  std::vector<double> b(static_cast<std::size_t>(steps));
  const double step = 1.0 / static_cast<double>(steps - 1);
  const std::int64_t halfway = steps / 2;
  for (std::int64_t i = 0; i < steps; ++i)
    b[static_cast<std::size_t>(i)] = i < halfway ? 0.0 + step * static_cast<double>(i)
                                                 : 1.0 - step * static_cast<double>(steps - i - 1);
  return b;
}

class CalibrationError final : public TypedMetric<CalibrationState> {
 public:
  explicit CalibrationError(const Params& p)
      : check_(p.owner_or("CalibrationError")),
        tp_(read_task(p, calibration_options())),
        bins_(p.get_size("n_bins", 1, kMaxBins)),
        norm_(p.get_string("norm")),
        bounds_(linspace01(bins_ + 1)) {}

 protected:
  CalibrationState initial_state() const override {
    CalibrationState s;
    s.count.assign(static_cast<std::size_t>(bins_ + 1), 0);
    s.accurate.assign(static_cast<std::size_t>(bins_ + 1), 0);
    return s;
  }

  void update(CalibrationState& s, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const Tensor& p = check_.tensor(batch, kPreds);
    const Tensor& t = target_tensor(check_, batch);
    if (!is_floating(p.dtype()))
      check_.fail(kPreds, "must hold float probabilities or logits, got " + p.describe());
    std::int64_t cols = 1;
    if (tp_.task == Task::Multiclass) {
      if (p.dim() != 2 || p.size(1) != tp_.classes)
        check_.fail(kPreds, fmt::format("must be [N, {}] (num_classes columns), got {}",
                                        tp_.classes, p.describe()));
      if (t.dim() != 1) check_.fail(kTarget, "must be 1-D [N] class ids, got " + t.describe());
      check_.same_rows(p, kPreds, t, kTarget);
      cols = tp_.classes;
    } else if (p.shape() != t.shape() || p.dim() < 1) {
      check_.fail(kTarget, fmt::format("has shape {}, 'preds' has {}: they must be equal",
                                       t.describe(), p.describe()));
    }
    check_.check_no_nan(p, kPreds, s.n);
    const auto y = read_target(check_, tp_, t, 1, s.n);
    std::vector<double> x(static_cast<std::size_t>(p.numel()));
    visit_floating(p, [&](const auto* v) {
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(v[i]);
    });
    // Whether the kept samples' scores are logits (torchmetrics drops the ignored ones first).
    bool logits = false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (kept(tp_, y[i / static_cast<std::size_t>(cols)])) logits |= !(x[i] >= 0.0 && x[i] <= 1.0);
    if (!s.confidence.empty() &&
        (s.confidence.size() != s.count.size() * ExactSum::kWords || !s.confidence.normalized()))
      check_.fail_runtime(std::string("the restored state is corrupt"));
    // Each kept sample's bin and confidence first; then only the bins this batch touches have
    // their exact accumulators loaded, added to and normalized (a zero accumulator is the
    // normalized 0 of the others).
    std::vector<std::pair<std::size_t, double>> binned;
    binned.reserve(y.size());
    std::vector<double> prob(static_cast<std::size_t>(cols));
    for (std::size_t i = 0; i < y.size(); ++i) {
      if (!kept(tp_, y[i])) continue;
      double conf = 0.0;
      bool right = false;
      if (tp_.task == Task::Binary) {
        conf = logits ? 1.0 / (1.0 + std::exp(-x[i])) : x[i];
        right = y[i] == 1;
      } else {
        const double* row = x.data() + i * static_cast<std::size_t>(cols);
        if (logits) {
          const double top = *std::max_element(row, row + cols);
          double sum = 0.0;
          for (std::int64_t k = 0; k < cols; ++k)
            sum += prob[static_cast<std::size_t>(k)] = std::exp(row[k] - top);
          for (double& q : prob) q /= sum;
        } else {
          std::copy(row, row + cols, prob.begin());
        }
        const auto best = std::max_element(prob.begin(), prob.end());  // the first maximum
        conf = *best;
        right = best - prob.begin() == y[i];
      }
      const auto bin = static_cast<std::size_t>(
          std::upper_bound(bounds_.begin(), bounds_.end(), conf) - bounds_.begin() - 1);
      ++s.count[bin];
      s.accurate[bin] += right ? 1 : 0;
      binned.emplace_back(bin, conf);
    }
    s.n += t.dim() > 0 ? t.size(0) : 0;
    if (binned.empty()) return;
    if (s.confidence.empty()) s.confidence.assign(s.count.size() * ExactSum::kWords, 0);
    std::sort(binned.begin(), binned.end());
    for (std::size_t i = 0; i < binned.size();) {
      const std::size_t bin = binned[i].first;
      std::int64_t* words = s.confidence.data() + bin * ExactSum::kWords;
      ExactSum acc;
      acc.merge(words);
      for (; i < binned.size() && binned[i].first == bin; ++i) acc.add(binned[i].second);
      acc.normalize();
      std::copy(acc.words().begin(), acc.words().end(), words);
    }
  }

  Value compute(const CalibrationState& s) const override {
    const auto nb = static_cast<std::size_t>(bins_ + 1);
    if (s.count.size() != nb || s.accurate.size() != nb || s.confidence.mismatched() ||
        (!s.confidence.empty() &&
         (s.confidence.size() != nb * ExactSum::kWords || !s.confidence.normalized())))
      check_.fail_runtime(std::string("the state is corrupt"));
    if (s.n == 0) check_.fail("no samples");
    double total = 0.0;
    for (const auto c : s.count) total += static_cast<double>(c);
    double l1 = 0.0, l2 = 0.0, mx = 0.0;
    for (std::size_t b = 0; b < nb; ++b) {
      const auto n = static_cast<double>(s.count[b]);
      double conf = 0.0, accuracy = 0.0;
      if (s.count[b] > 0) {
        ExactSum e;
        e.merge(s.confidence.data() + b * ExactSum::kWords);
        conf = e.value() / n;
        accuracy = static_cast<double>(s.accurate[b]) / n;
      }
      const double prop = n / total;
      const double gap = std::abs(accuracy - conf);
      l1 += gap * prop;
      l2 += (accuracy - conf) * (accuracy - conf) * prop;
      mx = std::max(mx, gap);
    }
    Value out = Value::map();
    if (norm_ == "l1")
      out.set("calibration_error", l1);
    else if (norm_ == "l2")
      out.set("calibration_error", l2 > 0.0 ? std::sqrt(l2) : 0.0);
    else
      out.set("calibration_error", mx);
    return out;
  }

 private:
  InputChecker check_;
  TaskParams tp_;
  std::int64_t bins_;
  std::string norm_;
  std::vector<double> bounds_;
};

}  // namespace

ComponentInfo calibration_error_info() {
  auto params = task_params(calibration_options());
  params.insert(params.begin() + 1, param("n_bins", ParamType::Int,
                                          "Number of equal-width confidence bins (1 to 65536).")
                                        .def(15));
  params.insert(params.begin() + 2,
                param("norm", ParamType::String,
                      "l1 (expected calibration error), l2 (root mean square) or max (maximum "
                      "calibration error).")
                    .def("l1")
                    .choices({"l1", "l2", "max"}));
  return with_results(
      metric<CalibrationError>(
          "CalibrationError",
          "Calibration error of a binary or multiclass task over equal-width confidence bins (ECE, "
          "RMSCE or MCE); key calibration_error. Reference: torchmetrics 1.9.0 "
          "torchmetrics.functional.calibration_error(preds, target, task, n_bins, norm, "
          "num_classes=num_classes, ignore_index=ignore_index).",
          std::move(params), task_inputs({.labels = false})),
      {{"calibration_error", Better::Lower, Plot::None,
        "gap between confidence and accuracy over the bins"}});
}
TALLY_COMPONENT(calibration_error_info)

}  // namespace tally::classification
