// MultiLabelMetric (alias MultiLabelPrecisionRecallF1score): precision, recall, F1 and support
// of multi-label classification, per class or averaged.
//
// Formula. A sample's predicted set: the classes whose score is >= thr (thr in the scores'
// precision), or its top-k scores (on equal scores the lower class id first; numpy's
// argpartition, which mmeval uses, leaves that order unspecified), or the given pred_labels.
// Per class c over all samples: TP_c, FP_c, FN_c;
//   precision_c = TP_c / (TP_c + FP_c),  recall_c = TP_c / (TP_c + FN_c)   (0 when 0 / 0)
//   f1_c = 2 TP_c / (2 TP_c + FP_c + FN_c) = 2 P R / (P + R)               (0 when P + R = 0)
//   macro: the mean over all C classes; micro: the same formulas on the summed counts;
//   none: per class. support: the number of positive labels, summed over the classes (macro,
//   micro) or per class (none), as mmeval.
//
// Reference: mmeval.metrics.MultiLabelMetric(num_classes, thr | topk, items, average) (key
// names, thr/topk semantics, support), and for the values
// sklearn.metrics.precision_recall_fscore_support(Y, P, average='macro' | 'micro' | None,
// labels=range(C), zero_division=0) on the indicator matrices. Results are fractions (mmeval:
// percent, rounded to 4 decimals).
//
// Keys, as mmeval builds them: item + suffix + average suffix, with the items in the order
// precision, recall, f1-score, support; suffix "" for thr 0.5 (the default), "_thr-{thr:.2f}"
// for another threshold (also for thr 0, where mmeval's code would write "_topNone"),
// "_top{k}" for topk; average suffix "" (macro), "_micro", "_classwise" (none).
// Unlike mmeval, giving both thr and topk is a config error (mmeval warns and uses thr).
//
// Example (mmeval's docstring): scores [[0.7, 0.1, 0.1, 0.1], [0.1, 0.3, 0.4, 0.2],
// [0.3, 0.4, 0.2, 0.1], [0.0, 0.0, 0.1, 0.9]], labels [[0], [1], [2], [3]], topk 2, micro
//   -> {precision_top2_micro: 0.375, recall_top2_micro: 0.75, f1-score_top2_micro: 0.5}
//
// State: int64 counts TP, FP, FN per class and the sample count, all summed across ranks (exact
// on any number of ranks); never per-sample lists. The number of classes must agree between the
// ranks that saw data. With num_classes the counts are summed in place (MPI_Reduce); without it
// the number of classes comes from the data, and they are gathered and added in rank order.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "common.hpp"
#include "label_rows.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"

namespace tally::classification {
namespace {

struct MultiLabelState {
  PackedVector<std::int64_t> tp, fp, fn;  // [C]
  std::int64_t num_classes = 0;           // 0 until known
  std::int64_t n = 0;
  TALLY_STATE(sum(tp), sum(fp), sum(fn), agree(num_classes, 0), sum(n))
};

enum class MultiLabelAverage { Macro, Micro, None };
constexpr const char* kMultiLabelItems[] = {"precision", "recall", "f1-score", "support"};

class MultiLabelMetric final : public TypedMetric<MultiLabelState> {
 public:
  explicit MultiLabelMetric(const Params& p)
      : check_(p.owner_or("MultiLabelMetric")), dense_(label_format_of(p)) {
    const std::string avg = p.has("average") ? p.get_string("average") : "none";
    average_ = avg == "macro"   ? MultiLabelAverage::Macro
               : avg == "micro" ? MultiLabelAverage::Micro
                                : MultiLabelAverage::None;
    if (avg != "macro" && avg != "micro" && avg != "none")
      p.fail("average", "must be one of macro, micro, none; got '" + avg + "'");
    if (p.has("num_classes")) {
      num_classes_ = p.get_size("num_classes");
    }
    if (p.has("thr") && p.has("topk"))
      p.fail("topk", "cannot be given together with thr (mmeval would use thr): give one");
    if (p.has("topk")) {
      topk_ = p.get_size("topk");
      suffix_ = "_top" + std::to_string(topk_);
    } else {
      thr_ = p.has("thr") ? p.get_number("thr") : 0.5;
      explicit_thr_ = p.has("thr");
      if (thr_ != 0.5) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "_thr-%.2f", thr_);
        suffix_ = buf;
      }
    }
    const auto items = p.get_string_list("items");
    if (items.empty())
      p.fail("items", "must name at least one of precision, recall, f1-score, support");
    for (const auto& item : items) {
      const auto at = std::find_if(std::begin(kMultiLabelItems), std::end(kMultiLabelItems),
                                   [&](const char* k) { return item == k; });
      if (at == std::end(kMultiLabelItems))
        p.fail("items", "must be among precision, recall, f1-score, support; got '" + item + "'");
      want_[at - std::begin(kMultiLabelItems)] = true;
    }
  }

 protected:
  // Without num_classes the number of classes comes from the data: the state is gathered.
  bool reducible() const override { return num_classes_ > 0; }

  MultiLabelState initial_state() const override {
    MultiLabelState s;
    if (num_classes_ > 0) size_state(s, num_classes_);
    return s;
  }

  void update(MultiLabelState& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const bool scores = has_scores(batch, check_);
    // The number of classes: num_classes, else the columns of a dense [N, C] input.
    std::int64_t c = num_classes_;
    for (const char* f : {scores ? kScores : kPredLabels, kGtLabels}) {
      const std::int64_t implied =
          LabelRows::implied_classes(batch, f, f == kScores ? DenseLabels::Indicator : dense_);
      if (implied < 0) continue;
      if (c > 0 && implied != c)
        check_.fail(f, "has " + std::to_string(implied) + " columns, expected " +
                           std::to_string(c) + (num_classes_ > 0 ? " (num_classes)" : ""));
      c = implied;
    }
    if (c <= 0)
      check_.fail_config(
          std::string("parameter 'num_classes' is required when neither the predictions nor "
                      "'gt_labels' is a [N, C] matrix"));
    if (state.num_classes == 0)
      size_state(state, c);
    else if (state.num_classes != c)
      check_.fail("has " + std::to_string(c) + " classes in this batch, " +
                  std::to_string(state.num_classes) + " in earlier ones");

    const LabelRows gt = LabelRows::read(batch, kGtLabels, c, check_, state.n, dense_);
    const auto cols = static_cast<std::size_t>(c);
    std::vector<std::uint8_t> pred_row(cols), gt_row(cols);
    std::int64_t n = 0;
    if (scores) {
      const Tensor& s = check_.scores(batch, kScores, state.n);
      n = s.size(0);
      if (gt.rows() != n)
        check_.fail(kScores, "has " + std::to_string(n) + " rows, '" + kGtLabels + "' has " +
                                 std::to_string(gt.rows()));
      if (topk_ > c)
        check_.fail(kScores, "has " + std::to_string(c) + " classes, fewer than topk " +
                                 std::to_string(topk_));
      std::vector<std::int64_t> order(cols);
      visit_floating(s, [&](const auto* x) {
        using T = std::remove_cv_t<std::remove_pointer_t<decltype(x)>>;
        const T thr = numpy::weak_scalar<T>(thr_);
        for (std::int64_t i = 0; i < n; ++i) {
          const T* row = x + i * c;
          if (topk_ > 0) {
            std::iota(order.begin(), order.end(), 0);
            std::partial_sort(order.begin(), order.begin() + topk_, order.end(),
                              [&](std::int64_t a, std::int64_t b) {
                                return row[a] > row[b] || (row[a] == row[b] && a < b);
                              });
            std::fill(pred_row.begin(), pred_row.end(), 0);
            for (std::int64_t k = 0; k < topk_; ++k)
              pred_row[static_cast<std::size_t>(order[k])] = 1;
          } else {
            for (std::size_t k = 0; k < cols; ++k) pred_row[k] = row[k] >= thr ? 1 : 0;
          }
          gt.fill(i, gt_row.data());
          count(state, pred_row, gt_row);
        }
      });
    } else {
      if (topk_ > 0 || explicit_thr_)
        check_.fail(kPredLabels,
                    "holds labels, not scores: thr and topk need '" + std::string(kScores) + "'");
      const LabelRows pred = LabelRows::read(batch, kPredLabels, c, check_, state.n, dense_);
      n = pred.rows();
      if (gt.rows() != n)
        check_.fail(kPredLabels, "has " + std::to_string(n) + " rows, '" + kGtLabels + "' has " +
                                     std::to_string(gt.rows()));
      for (std::int64_t i = 0; i < n; ++i) {
        pred.fill(i, pred_row.data());
        gt.fill(i, gt_row.data());
        count(state, pred_row, gt_row);
      }
    }
    state.n += n;
  }

  Value compute(const MultiLabelState& total) const override {
    const auto classes = static_cast<std::size_t>(total.num_classes);
    if (total.num_classes < 0 || total.tp.size() != classes || total.fp.size() != classes ||
        total.fn.size() != classes)
      check_.fail_runtime(std::string("the state is inconsistent"));
    if (num_classes_ > 0 && total.num_classes != num_classes_)  // another configuration's state
      check_.fail_runtime(std::string("the state has ") + std::to_string(total.num_classes) +
                          " classes, num_classes is " + std::to_string(num_classes_));
    if (total.n == 0) check_.fail("no samples");

    const auto c = static_cast<std::size_t>(total.num_classes);
    std::vector<double> prf[3];
    std::vector<std::int64_t> support(c);
    std::int64_t tp = 0, pred = 0, pos = 0;
    for (std::size_t k = 0; k < c; ++k) {
      support[k] = total.tp[k] + total.fn[k];
      tp += total.tp[k];
      pred += total.tp[k] + total.fp[k];
      pos += support[k];
      prf[0].push_back(safe_ratio(total.tp[k], total.tp[k] + total.fp[k]));
      prf[1].push_back(safe_ratio(total.tp[k], support[k]));
      prf[2].push_back(safe_ratio(2 * total.tp[k], 2 * total.tp[k] + total.fp[k] + total.fn[k]));
    }
    const double micro[3] = {safe_ratio(tp, pred), safe_ratio(tp, pos),
                             safe_ratio(2 * tp, pred + pos)};
    const std::string avg_suffix = average_ == MultiLabelAverage::Micro  ? "_micro"
                                   : average_ == MultiLabelAverage::None ? "_classwise"
                                                                         : "";
    Value out = Value::map();
    for (std::size_t item = 0; item < 4; ++item) {
      if (!want_[item]) continue;
      const std::string key = kMultiLabelItems[item] + suffix_ + avg_suffix;
      if (item == 3) {
        if (average_ == MultiLabelAverage::None)
          out.set(key, Value(support));
        else
          out.set(key, Value(static_cast<long long>(pos)));
      } else if (average_ == MultiLabelAverage::None) {
        out.set(key, Value(prf[item]));
      } else if (average_ == MultiLabelAverage::Micro) {
        out.set(key, micro[item]);
      } else {
        double sum = 0.0;
        for (double v : prf[item]) sum += v;
        out.set(key, sum / static_cast<double>(c));
      }
    }
    return out;
  }

 private:
  static void count(MultiLabelState& s, const std::vector<std::uint8_t>& p,
                    const std::vector<std::uint8_t>& y) {
    for (std::size_t k = 0; k < p.size(); ++k) {
      s.tp[k] += p[k] & y[k];
      s.fp[k] += p[k] & (y[k] ^ 1);
      s.fn[k] += (p[k] ^ 1) & y[k];
    }
  }

  static void size_state(MultiLabelState& s, std::int64_t c) {
    s.num_classes = c;
    s.tp.assign(static_cast<std::size_t>(c), 0);
    s.fp.assign(static_cast<std::size_t>(c), 0);
    s.fn.assign(static_cast<std::size_t>(c), 0);
  }

  InputChecker check_;
  DenseLabels dense_;
  MultiLabelAverage average_ = MultiLabelAverage::Macro;
  std::int64_t num_classes_ = 0;
  std::int64_t topk_ = 0;  // 0: use thr
  double thr_ = 0.5;
  bool explicit_thr_ = false;
  std::string suffix_;
  bool want_[4] = {false, false, false, false};
};

}  // namespace

ComponentInfo multi_label_metric_info() {
  return with_results(
      metric<MultiLabelMetric>(
          "MultiLabelMetric",
          "Precision, recall, F1-score and support of multi-label classification, per class or "
          "macro/micro averaged, as scikit-learn's precision_recall_fscore_support on indicator "
          "matrices (zero_division=0). mmeval's MultiLabelMetric: thr or topk, its key names, "
          "fractions instead of percent.",
          {param(
               "thr", ParamType::Float,
               "A class is predicted when its score is >= thr (compared in the scores' precision). "
               "Defaults to 0.5 when topk is not given; keys get _thr-{thr:.2f} unless thr is 0.5.")
               .optional()
               .nullable(),
           param("topk", ParamType::Int,
                 "Predict the k highest-scoring classes of each sample (equal scores: the lower "
                 "class "
                 "id first); keys get _top{k}. Not together with thr.")
               .optional()
               .nullable(),
           param(
               "average", ParamType::String,
               "macro: mean over all classes; micro: from the counts summed over classes; none (or "
               "null): per-class arrays, keys suffixed _classwise.")
               .def("macro")
               .nullable()
               .choices({"macro", "micro", "none"}),
           param("items", ParamType::StringList,
                 "The values to report, among precision, recall, f1-score, support (always in that "
                 "order). support is the number of positive labels.")
               .def(Value::Array{Value("precision"), Value("recall"), Value("f1-score")})
               .choices({"precision", "recall", "f1-score", "support"}),
           param("num_classes", ParamType::Int,
                 "Number of classes C. Required when neither the predictions nor gt_labels is a "
                 "[N, C] matrix; must match their columns when given.")
               .optional(),
           label_format_param()},
          {InputSpec{kScores, "Scores [N, C], float32 or float64 (thr or topk picks the classes).",
                     false},
           InputSpec{
               kPredLabels,
               "Predicted classes instead of scores: a 0/1 indicator [N, C] (integer or bool), "
               "class ids [N], or per-sample lists of class ids (ragged).",
               false},
           InputSpec{kGtLabels,
                     "True classes: a 0/1 indicator [N, C] (integer or bool), class ids [N], or "
                     "per-sample lists of class ids (ragged).",
                     true}},
          {"MultiLabelPrecisionRecallF1score"}),
      prf_results("positive labels of each class", "positive labels, summed over the classes"));
}
TALLY_COMPONENT(multi_label_metric_info)

}  // namespace tally::classification
