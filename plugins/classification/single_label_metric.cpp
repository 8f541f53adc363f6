// SingleLabelMetric (alias SingleLabelPrecisionRecallF1score): precision, recall, F1 and support
// for single-label multi-class classification, per class or averaged.
//
// Formula. The prediction of a sample is p = argmax(s) (the first index among equal scores, as
// numpy.argmax) or the given pred_label; with a threshold thr, a sample whose max score is
// <= thr predicts no class. Per class c, over all samples:
//   TP_c = #{p == c and y == c},  predicted_c = #{p == c},  support_c = #{y == c}
//   precision_c = TP_c / predicted_c       (0 when predicted_c == 0)
//   recall_c    = TP_c / support_c         (0 when support_c == 0)
//   f1_c        = 2 TP_c / (predicted_c + support_c) = 2 P R / (P + R)   (0 when both are 0)
//   macro: the unweighted mean over all C classes (absent and never-predicted classes count);
//   micro: the same formulas on TP, predicted and support summed over the classes;
//   none:  the per-class values.
//   support: N (macro, micro) or support_c (none), as mmeval reports it.
//
// Reference: mmeval.metrics.SingleLabelMetric (key names, thresholds, support) and, for the
// values, sklearn.metrics.precision_recall_fscore_support(y, p, labels=range(C),
// average='macro' | 'micro' | None, zero_division=0), where a sample below the threshold has
// p = -1 (a label outside `labels`: it counts as a false negative of its true class only).
// Results are fractions in [0, 1]; mmeval reports percent.
//
// Keys, exactly as mmeval's SingleLabelMetric builds them: for each threshold (in order), the
// items in the order precision, recall, f1-score, support (those asked for), named
//   item + thr_suffix + average_suffix
// where thr_suffix is "" with one threshold, else "_no-thr" or "_thr-{thr:.2f}"; and
// average_suffix is "" for macro, "_micro" for micro and "_classwise" for none:
//   macro: precision, recall, f1-score, support                   (numbers; support an integer)
//   micro: precision_micro, recall_micro, f1-score_micro, support_micro
//   none:  precision_classwise, ..., support_classwise            (arrays of C values)
//   thrs [null, 0.5], macro: precision_no-thr, ..., precision_thr-0.50, ...
//
// Example: pred_scores [[0.7, 0.1, 0.1, 0.1], [0.1, 0.3, 0.4, 0.2], [0.3, 0.4, 0.2, 0.1],
// [0.0, 0.0, 0.1, 0.9]], gt_labels [0, 1, 2, 3], average micro
//   -> {precision_micro: 0.5, recall_micro: 0.5, f1-score_micro: 0.5}
//
// State: int64 counters, support [C] and TP and predicted [thrs x C], and the sample count, all
// summed across ranks (exact on any number of ranks); never per-sample lists. The number of
// classes C must agree between the ranks that saw data. With num_classes the counters are summed
// in place (MPI_Reduce); without it C comes from the data, and they are gathered and added in
// rank order.
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common.hpp"
#include "row_kernels.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"
#ifdef TALLY_CLASSIFICATION_CUDA
#include "cuda/gpu_metrics.hpp"
#endif

namespace tally::classification {
namespace {

struct SingleLabelState {
  PackedVector<std::int64_t> support;    // [C]
  PackedVector<std::int64_t> tp;         // [thrs x C]
  PackedVector<std::int64_t> predicted;  // [thrs x C]
  std::int64_t num_classes = 0;          // 0 until known (scores without num_classes)
  std::int64_t n = 0;
  TALLY_STATE(sum(support), sum(tp), sum(predicted), agree(num_classes, 0), sum(n))
};

enum class SingleLabelAverage { Macro, Micro, None };

constexpr const char* kSingleLabelItems[] = {"precision", "recall", "f1-score", "support"};

class SingleLabelMetric final : public TypedMetric<SingleLabelState> {
 public:
  explicit SingleLabelMetric(const Params& p)
      : thrs_(read_thrs(p)), threads_(read_threads(p)), check_(p.owner_or("SingleLabelMetric")) {
    const std::string avg = p.has("average") ? p.get_string("average") : "none";
    if (avg == "macro")
      average_ = SingleLabelAverage::Macro;
    else if (avg == "micro")
      average_ = SingleLabelAverage::Micro;
    else if (avg == "none")
      average_ = SingleLabelAverage::None;
    else
      p.fail("average", "must be one of macro, micro, none; got '" + avg + "'");

    if (p.has("num_classes")) {
      num_classes_ = p.get_size("num_classes");
    }

    const auto items = p.get_string_list("items");
    if (items.empty())
      p.fail("items", "must name at least one of precision, recall, f1-score, support");
    for (const auto& item : items) {
      bool known = false;
      for (std::size_t i = 0; i < 4; ++i) {
        if (item == kSingleLabelItems[i]) {
          want_[i] = true;
          known = true;
        }
      }
      if (!known)
        p.fail("items", "must be among precision, recall, f1-score, support; got '" + item + "'");
    }
  }

 protected:
  // Without num_classes the number of classes comes from the data: the state is gathered.
  bool reducible() const override { return num_classes_ > 0; }

  SingleLabelState initial_state() const override {
    SingleLabelState s;
    if (num_classes_ > 0) size_state(s, num_classes_);
    return s;
  }

  void update(SingleLabelState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
#ifdef TALLY_CLASSIFICATION_CUDA
    if (gpu::on_cuda(batch))
      return gpu::single_label_update(
          check_, thrs_, num_classes_, batch, state.n, [&](std::int64_t c) {
            fix_classes(state, c);
            return gpu::SingleLabelCounters{state.support.data(), state.tp.data(),
                                            state.predicted.data()};
          });
#endif
    if (has_scores(batch, check_))
      update_scores(state, batch);
    else
      update_labels(state, batch);
  }

  Value compute(const SingleLabelState& total) const override {
    const auto classes = static_cast<std::size_t>(total.num_classes);
    if (total.num_classes < 0 || total.support.size() != classes ||
        total.tp.size() != classes * thrs_.size() ||
        total.predicted.size() != classes * thrs_.size())
      check_.fail_runtime(std::string("the state is inconsistent"));
    if (num_classes_ > 0 && total.num_classes != num_classes_)  // another configuration's state
      check_.fail_runtime(std::string("the state has ") + std::to_string(total.num_classes) +
                          " classes, num_classes is " + std::to_string(num_classes_));
    if (total.n == 0) check_.fail("no samples");

    const auto c = static_cast<std::size_t>(total.num_classes);
    Value out = Value::map();
    for (std::size_t j = 0; j < thrs_.size(); ++j) {
      const std::string suffix = (thrs_.size() > 1 ? thr_suffix(thrs_[j]) : std::string()) +
                                 (average_ == SingleLabelAverage::Micro  ? "_micro"
                                  : average_ == SingleLabelAverage::None ? "_classwise"
                                                                         : "");
      const std::int64_t* tp = total.tp.data() + j * c;
      const std::int64_t* pred = total.predicted.data() + j * c;
      const std::int64_t* sup = total.support.data();
      std::vector<double> prf[3];
      if (average_ == SingleLabelAverage::Micro) {
        std::int64_t tp_sum = 0, pred_sum = 0, sup_sum = 0;
        for (std::size_t k = 0; k < c; ++k) {
          tp_sum += tp[k];
          pred_sum += pred[k];
          sup_sum += sup[k];
        }
        prf[0] = {safe_ratio(tp_sum, pred_sum)};
        prf[1] = {safe_ratio(tp_sum, sup_sum)};
        prf[2] = {safe_ratio(2 * tp_sum, pred_sum + sup_sum)};
      } else {
        for (std::size_t k = 0; k < c; ++k) {
          prf[0].push_back(safe_ratio(tp[k], pred[k]));
          prf[1].push_back(safe_ratio(tp[k], sup[k]));
          prf[2].push_back(safe_ratio(2 * tp[k], pred[k] + sup[k]));
        }
      }
      for (std::size_t item = 0; item < 4; ++item) {
        if (!want_[item]) continue;
        const std::string key = kSingleLabelItems[item] + suffix;
        if (item == 3) {
          if (average_ == SingleLabelAverage::None)
            out.set(key, Value(std::vector<std::int64_t>(sup, sup + c)));
          else
            out.set(key, Value(static_cast<long long>(total.n)));
        } else if (average_ == SingleLabelAverage::None) {
          out.set(key, Value(prf[item]));
        } else if (average_ == SingleLabelAverage::Micro) {
          out.set(key, prf[item][0]);
        } else {
          double sum = 0.0;
          for (double v : prf[item]) sum += v;
          out.set(key, sum / static_cast<double>(c));
        }
      }
    }
    return out;
  }

 private:
  void size_state(SingleLabelState& s, std::int64_t c) const {
    s.num_classes = c;
    s.support.assign(static_cast<std::size_t>(c), 0);
    s.tp.assign(static_cast<std::size_t>(c) * thrs_.size(), 0);
    s.predicted.assign(static_cast<std::size_t>(c) * thrs_.size(), 0);
  }

  /// Sizes the state for `c` classes on the first batch; InputError when `c` disagrees with
  /// num_classes or with earlier batches.
  void fix_classes(SingleLabelState& state, std::int64_t c) const {
    if (num_classes_ > 0 && c != num_classes_)
      check_.fail(kScores, "has " + std::to_string(c) + " columns, but num_classes is " +
                               std::to_string(num_classes_));
    if (state.num_classes == 0)
      size_state(state, c);
    else if (state.num_classes != c)
      check_.fail(kScores, "has " + std::to_string(c) + " columns, earlier batches had " +
                               std::to_string(state.num_classes));
  }

  void update_scores(SingleLabelState& state, const Batch& batch) const {
    const Tensor& scores = check_.score_matrix(batch, kScores);  // NaN: checked by the kernel
    const std::int64_t cols = score_classes(scores, check_);
    const std::int64_t n = scores.size(0);
    // Every prediction first, in the pass that checks for NaN (before the labels, as
    // InputChecker::scores() would): a NaN anywhere in the batch leaves the state untouched.
    std::vector<std::int64_t> pred(static_cast<std::size_t>(n));
    visit_floating(scores, [&](const auto* s) {
      if (!row_argmax_threaded(s, n, cols, pred.data(), threads_))
        fail_nan_scores(check_, scores, state.n);
    });
    const Tensor& labels = check_.labels(batch, kGtLabels, cols, state.n);
    check_.same_rows(scores, kScores, labels, kGtLabels);
    const std::size_t nthr = thrs_.size();
    const auto c = static_cast<std::size_t>(cols);
    fix_classes(state, cols);
    visit_floating(scores, [&](const auto* s) {
      using T = std::remove_cv_t<std::remove_pointer_t<decltype(s)>>;
      const ThresholdSet<T> thr(thrs_);
      visit_integral(labels, [&](const auto* y) {
        for (std::int64_t i = 0; i < n; ++i) {
          const T* row = s + i * cols;
          const auto p = static_cast<std::size_t>(pred[static_cast<std::size_t>(i)]);
          const auto yi = static_cast<std::size_t>(y[i]);
          ++state.support[yi];
          const auto correct = static_cast<std::int64_t>(p == yi);
          for (std::size_t j = 0; j < nthr; ++j) {
            const auto pass = static_cast<std::int64_t>(thr.pass(j, row[p]));
            state.predicted[j * c + p] += pass;
            state.tp[j * c + p] += pass & correct;
          }
        }
      });
    });
    state.n += n;
  }

  void update_labels(SingleLabelState& state, const Batch& batch) const {
    if (num_classes_ <= 0)
      check_.fail_config(
          std::string("parameter 'num_classes' is required when the predictions are labels "
                      "(field '") +
          kPredLabels + "')");
    for (const auto& t : thrs_)
      if (t)
        check_.fail(kPredLabels, "holds labels, not scores: thresholds (thrs) need '" +
                                     std::string(kScores) + "'");
    const Tensor& pred = check_.labels(batch, kPredLabels, num_classes_, state.n);
    const Tensor& gt = check_.labels(batch, kGtLabels, num_classes_, state.n);
    check_.same_rows(pred, kPredLabels, gt, kGtLabels);
    const std::int64_t n = pred.size(0);
    // read_thrs() refuses a repeated null, so thrs is exactly [null] here: one block.
    visit_integral(pred, [&](const auto* p) {
      visit_integral(gt, [&](const auto* y) {
        for (std::int64_t i = 0; i < n; ++i) {
          const auto pi = static_cast<std::size_t>(p[i]);
          const auto yi = static_cast<std::size_t>(y[i]);
          ++state.support[yi];
          ++state.predicted[pi];
          state.tp[pi] += static_cast<std::int64_t>(pi == yi);
        }
      });
    });
    state.n += n;
  }

  std::vector<std::optional<double>> thrs_;
  SingleLabelAverage average_ = SingleLabelAverage::Macro;
  std::int64_t num_classes_ = 0;  // 0: not given
  bool want_[4] = {false, false, false, false};
  int threads_ = 1;
  InputChecker check_;
};

}  // namespace

ComponentInfo single_label_metric_info() {
  return with_results(
      metric<SingleLabelMetric>(
          "SingleLabelMetric",
          "Precision, recall, F1-score and support of single-label classification (prediction = "
          "argmax of the scores, or the given labels), per class or macro/micro averaged as "
          "scikit-learn's precision_recall_fscore_support(labels=range(C), zero_division=0). "
          "mmeval's SingleLabelMetric and its key names.",
          {param("average", ParamType::String,
                 "macro: mean over all classes; micro: from the counts summed over classes; none "
                 "(or null, as mmeval's None): per-class arrays, keys suffixed _classwise.")
               .def("macro")
               .nullable()
               .choices({"macro", "micro", "none"}),
           param("num_classes", ParamType::Int,
                 "Number of classes C. Required with pred_labels; with pred_scores it defaults to "
                 "the number of columns and must equal it when given.")
               .optional(),
           param("thrs", ParamType::FloatList,
                 "Score thresholds: a sample whose max score is <= thr predicts no class; null "
                 "means no threshold. Defaults to [null] (mmeval: 0.0, wrong for raw logits). "
                 "Several thresholds suffix the keys with _no-thr / _thr-{thr:.2f}.")
               .def(Value::Array{Value()})
               .nullable(),
           param("items", ParamType::StringList,
                 "The values to report, among precision, recall, f1-score, support (always "
                 "reported in that order).")
               .def(Value::Array{Value("precision"), Value("recall"), Value("f1-score")})
               .choices({"precision", "recall", "f1-score", "support"}),
           threads_param()},
          {InputSpec{kScores,
                     "Class scores [N, C], float32 or float64; the prediction is the argmax.",
                     false},
           InputSpec{kPredLabels,
                     "Predicted class ids [N], any integer dtype, in [0, num_classes); used when "
                     "pred_scores is absent.",
                     false},
           InputSpec{kGtLabels, "True class ids [N], any integer dtype, in [0, C).", true}},
          {"SingleLabelPrecisionRecallF1score"}),
      prf_results("samples of each true class", "samples evaluated"));
}
TALLY_COMPONENT(single_label_metric_info)

}  // namespace tally::classification
