// ROCAUC: area under the ROC curve for binary, multi-class (one-vs-rest or one-vs-one) and
// multi-label scores, as scikit-learn's roc_auc_score. (mmeval has no ROC AUC metric.)
//
// Formula. For a binary problem (scores s, positives y): samples sorted by decreasing score, one
// point per distinct score (tied samples enter together) with cumulative counts tp_i, fp_i; the
// ROC curve runs through (0, 0) and (fp_i / N, tp_i / P); its area by trapezoids is
//   AUC = sum_i (fp_i - fp_{i-1}) (tp_i + tp_{i-1}) / (2 P N)
// computed exactly in integers, then one division. NaN when P or N is 0 (scikit-learn: NaN and
// an UndefinedMetricWarning).
//   binary (scores [N]):         AUC of class 1's scores.
//   one-vs-rest, multi-label:    AUC_c of column c against the rest, then
//     macro:    the mean over all C classes (NaN if one is NaN, as scikit-learn);
//     weighted: sum_c AUC_c P_c / sum_c P_c, classes with no positives weigh 0 (0 if no class
//               has positives, as scikit-learn);
//     micro:    one binary AUC over all N x C (score, indicator) pairs;
//     none:     AUC_classwise, the C values.
//   one-vs-one (Hand & Till 2001), over the pairs (a, b) of classes present in the labels:
//     A(a, b) = (AUC of s[:, a] for a vs b on the samples of a or b + AUC of s[:, b] for b vs a) /
//     2 macro: the mean of A over the pairs; weighted: weighted by the samples of a or b.
//
// Reference: sklearn.metrics.roc_auc_score(y, s, multi_class=..., average=...,
// labels=range(C)) for multi-class, roc_auc_score(Y, s, average=...) for a multi-label indicator
// Y, roc_auc_score(y, s) for binary. Differences: scikit-learn requires multi-class rows to sum to
// 1 (tally does not check; the AUC is rank-based), and multi_class defaults to ovr here (there:
// 'raise').
//
// Example: binary scores [0.1, 0.4, 0.35, 0.8], labels [0, 0, 1, 1] -> {AUC: 0.75}
//
// State: every sample's scores and labels, packed, concatenated in rank order at a sync, and
// the sample count, summed (see ranking.hpp); sorted at compute time.
// The result depends only on the set of (score, label) pairs: the same bit for bit on any number
// of ranks.
#include <limits>
#include <string>
#include <vector>

#include "common.hpp"
#include "ranking.hpp"

namespace tally::classification {
namespace {

enum class RocAucAverage { Macro, Weighted, Micro, None };

class RocAuc final : public TypedMetric<RankingState> {
 public:
  explicit RocAuc(const Params& p) : check_(p.owner_or("ROCAUC")), dense_(label_format_of(p)) {
    const std::string avg = p.has("average") ? p.get_string("average") : "none";
    if (avg == "macro")
      average_ = RocAucAverage::Macro;
    else if (avg == "weighted")
      average_ = RocAucAverage::Weighted;
    else if (avg == "micro")
      average_ = RocAucAverage::Micro;
    else if (avg == "none")
      average_ = RocAucAverage::None;
    else
      p.fail("average", "must be one of macro, weighted, micro, none; got '" + avg + "'");
    const std::string mc = p.get_string("multi_class");
    if (mc != "ovr" && mc != "ovo") p.fail("multi_class", "must be ovr or ovo, got '" + mc + "'");
    ovo_ = mc == "ovo";
    if (ovo_ && (average_ == RocAucAverage::Micro || average_ == RocAucAverage::None))
      p.fail("average",
             "must be macro or weighted with multi_class ovo (as scikit-learn), got '" + avg + "'");
  }

 protected:
  void update(RankingState& state, const Batch& batch) override {
    ranking_update(state, batch, check_, dense_);
  }

  Value compute(const RankingState& all) const override {
    const RankingData d = ranking_data(all, check_);
    Value out = Value::map();
    CurveBuilder curve;
    if (d.kind == RankKind::Binary) {
      out.set("AUC", roc_auc(one_vs_rest_curve(d, 0, curve)));
      return out;
    }
    if (d.kind == RankKind::ClassIds && ovo_) {
      out.set("AUC", one_vs_one(d));
      return out;
    }
    if (average_ == RocAucAverage::Micro) {
      curve.reserve(static_cast<std::size_t>(d.n * d.cols));
      d.for_each_row([&](const RankingRow& r) {
        for (std::int64_t c = 0; c < d.cols; ++c) curve.add(r.score(c), r.positive(c));
      });
      out.set("AUC", roc_auc(curve.finish()));
      return out;
    }
    std::vector<double> auc;
    std::vector<std::int64_t> weight;
    for (std::int64_t c = 0; c < d.cols; ++c) {
      auc.push_back(roc_auc(one_vs_rest_curve(d, c, curve)));
      weight.push_back(positives(d, c));
    }
    if (average_ == RocAucAverage::None) {
      out.set("AUC_classwise", Value(auc));
    } else if (average_ == RocAucAverage::Macro) {
      out.set("AUC", mean_of(auc));
    } else {
      long double num = 0, den = 0;
      for (std::size_t c = 0; c < auc.size(); ++c) {
        if (weight[c] == 0) continue;  // scikit-learn forces 0-weight scores to 0
        num += static_cast<long double>(auc[c]) * static_cast<long double>(weight[c]);
        den += static_cast<long double>(weight[c]);
      }
      out.set("AUC", den == 0 ? 0.0 : static_cast<double>(num / den));
    }
    return out;
  }

 private:
  double one_vs_one(const RankingData& d) const {
    std::vector<std::int64_t> count(static_cast<std::size_t>(d.cols), 0);
    d.for_each_row([&](const RankingRow& r) { ++count[static_cast<std::size_t>(r.label())]; });
    std::vector<double> pair_auc;
    std::vector<std::int64_t> pair_n;
    CurveBuilder curve;
    for (std::int64_t a = 0; a < d.cols; ++a) {
      if (count[static_cast<std::size_t>(a)] == 0) continue;
      for (std::int64_t b = a + 1; b < d.cols; ++b) {
        if (count[static_cast<std::size_t>(b)] == 0) continue;
        double sum = 0;
        for (const std::int64_t pos : {a, b}) {
          d.for_each_row([&](const RankingRow& r) {
            const std::int32_t y = r.label();
            if (y == a || y == b) curve.add(r.score(pos), y == pos);
          });
          sum += roc_auc(curve.finish());
        }
        pair_auc.push_back(sum / 2);
        pair_n.push_back(count[static_cast<std::size_t>(a)] + count[static_cast<std::size_t>(b)]);
      }
    }
    if (pair_auc.empty()) return std::numeric_limits<double>::quiet_NaN();
    if (average_ == RocAucAverage::Macro) return mean_of(pair_auc);
    long double num = 0, den = 0;
    for (std::size_t k = 0; k < pair_auc.size(); ++k) {
      num += static_cast<long double>(pair_auc[k]) * static_cast<long double>(pair_n[k]);
      den += static_cast<long double>(pair_n[k]);
    }
    return static_cast<double>(num / den);
  }

  InputChecker check_;
  DenseLabels dense_;
  RocAucAverage average_ = RocAucAverage::Macro;
  bool ovo_ = false;
};

}  // namespace

ComponentInfo roc_auc_info() {
  return with_results(
      metric<RocAuc>(
          "ROCAUC",
          "Area under the ROC curve as scikit-learn's roc_auc_score (tied scores form one point): "
          "binary (scores [N]), multi-class one-vs-rest or one-vs-one (class ids [N]), multi-label "
          "(indicator [N, C] or lists of class ids). Keys: AUC, or AUC_classwise with average "
          "none. "
          "Undefined values (a class with no positives or no negatives) are NaN (null in JSON), as "
          "scikit-learn's.",
          {param(
               "average", ParamType::String,
               "macro: mean over the classes (or one-vs-one pairs); weighted: weighted by the "
               "positives of each class (ovo: the samples of each pair); micro: one curve over all "
               "(score, indicator) pairs (ovr and multi-label only); none (or null): "
               "AUC_classwise (ovr and multi-label only). Ignored for binary scores [N].")
               .def("macro")
               .nullable()
               .choices({"macro", "weighted", "micro", "none"}),
           param(
               "multi_class", ParamType::String,
               "For class ids [N] with scores [N, C]: ovr (one-vs-rest) or ovo (one-vs-one, Hand & "
               "Till, over the classes present in the labels). scikit-learn's default is 'raise'. "
               "Ignored for binary and multi-label inputs.")
               .def("ovr")
               .choices({"ovr", "ovo"}),
           label_format_param()},
          ranking_inputs()),
      {{"AUC_classwise", Better::Higher, Plot::Bars, "ROC AUC per class"},
       {"AUC", Better::Higher, Plot::None, "area under the ROC curve"}});
}
TALLY_COMPONENT(roc_auc_info)

}  // namespace tally::classification
