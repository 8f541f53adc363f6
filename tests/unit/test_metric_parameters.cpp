// One validation for every threshold, range and fraction parameter of every metric
// (Params::get_number, get_fraction, get_number_list, check_number, check_range in
// tally/sdk/params.hpp): a table over each metric that takes one, each (metric, parameter, bad
// value) giving the ConfigError "<owner>: parameter '<name>' ... must be a number in <bounds>, got
// <v>" word for word, and the same metric built with a good value (the row is not vacuous). The
// helpers themselves are tested on a Params built here.
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/params.hpp"

namespace tally::test {
namespace {

const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

struct Row {
  std::string metric;
  Value::Map base;  // the other parameters the metric needs
  std::string param;
  Value bad;
  std::string message;  // after "metric '<metric>': parameter '<param>' "
  Value good;
};

Value::Map with(Value::Map base, const std::string& key, const Value& v) {
  for (auto& [k, x] : base)
    if (k == key) {
      x = v;
      return base;
    }
  base.emplace_back(key, v);
  return base;
}

Value list(std::vector<Value> v) { return Value(Value::Array(std::move(v))); }
Value range(double lo, double hi) { return list({Value(lo), Value(hi)}); }

/// The rows: every metric parameter that is a threshold, an IoU, a fraction or a range, with
/// bad values of each class (above, below, NaN, infinite, inverted, empty).
std::vector<Row> rows() {
  const Value::Map one_class{{"num_classes", Value(1)}};
  const Value::Map binary{{"task", Value("binary")}};
  const std::string unit = "must be a number in [0, 1], got ";
  const std::string el0 = "element 0 must be a number in [0, 1], got ";
  const std::string el1 = "element 1 must be a number in [0, 1], got ";
  std::vector<Row> out;
  // IoU threshold lists of the detection metrics, the issue's [2.0, -1.0] first.
  for (const char* m : {"DOTAMeanAP", "VOCMeanAP", "OIDMeanAP", "COCODetection", "LVISDetection",
                        "ProposalRecall"}) {
    const bool classes = std::string(m).find("MeanAP") != std::string::npos;
    const Value::Map base = classes ? one_class : Value::Map{};
    const auto add = [&](const Value& bad, const std::string& msg) {
      Value::Map b = base;
      // OIDMeanAP: one IoF threshold per IoU threshold.
      if (std::string(m) == "OIDMeanAP" && bad.is_array())
        b = with(b, "iof_thrs",
                 list(std::vector<Value>(bad.as_array().empty() ? 1 : bad.as_array().size(),
                                         Value(0.5))));
      out.push_back({m, b, "iou_thrs", bad, msg, list({Value(0.5), Value(0.75)})});
      if (std::string(m) == "OIDMeanAP")
        out.back().base = with(out.back().base, "iof_thrs", list({Value(0.5), Value(0.5)}));
    };
    add(list({Value(2.0), Value(-1.0)}), el0 + "2");
    add(list({Value(0.5), Value(-1.0)}), el1 + "-1");
    add(list({Value(0.5), Value(kNan)}), el1 + "nan");
    add(list({Value(kInf)}), el0 + "inf");
    add(Value(1.5), el0 + "1.5");
    add(list({}), "must hold at least 1 number, got 0");
  }
  // OIDMeanAP's IoF thresholds.
  for (const auto& [bad, msg] : {std::pair{Value(3.0), el0 + "3"}, {Value(-0.1), el0 + "-0.1"}})
    out.push_back({"OIDMeanAP", one_class, "iof_thrs", bad, msg, Value(0.5)});
  // Scale ranges (VOC, DOTA, OID): inverted, negative, NaN; null ends are allowed.
  for (const char* m : {"DOTAMeanAP", "VOCMeanAP", "OIDMeanAP"}) {
    const auto add = [&](Value bad, const std::string& msg) {
      out.push_back(
          {m, one_class, "scale_ranges", list({bad}), msg, list({list({Value(32), Value()})})});
    };
    add(range(64, 32), "element 0 must be a range [lo, hi] with lo < hi, got [64, 32]");
    add(range(32, 32), "element 0 must be a range [lo, hi] with lo < hi, got [32, 32]");
    add(range(-1, 32), "element 0 min must be a number in [0, inf], got -1");
    add(list({Value(), Value(kNan)}), "element 0 max must be a number in [0, inf], got nan");
  }
  // COCO's other IoUs, F-beta, TIDE thresholds, OKS sigmas and area ranges.
  for (const char* m : {"COCODetection", "LVISDetection"}) {
    out.push_back(
        {m, {{"curves", Value(true)}}, "curve_iou", Value(1.5), unit + "1.5", Value(0.5)});
    out.push_back({m,
                   {{"calibration_bins", Value(10)}},
                   "calibration_iou",
                   Value(-0.5),
                   unit + "-0.5",
                   Value(0.5)});
    out.push_back(
        {m, {{"confusion", Value(true)}}, "confusion_iou", Value(kNan), unit + "nan", Value(0.5)});
    out.push_back({m,
                   {},
                   "area_ranges",
                   Value(Value::Map{{"all", range(100, 10)}}),
                   "'all' must be a range [lo, hi] with lo <= hi, got [100, 10]",
                   Value(Value::Map{{"all", range(0, 1e10)}})});
    out.push_back({m,
                   {},
                   "area_ranges",
                   Value(Value::Map{{"all", range(-5, 10)}}),
                   "'all' lo must be a number in [0, inf], got -5",
                   Value(Value::Map{{"all", range(0, kInf)}})});
  }
  out.push_back({"COCODetection",
                 {},
                 "f_beta",
                 Value(0.0),
                 "must be a number in (0, inf), got 0",
                 Value(2.0)});
  out.push_back({"COCODetection",
                 {{"tide", Value(true)}},
                 "tide_pos_thresh",
                 Value(0.0),
                 "must be a number in (0, 1], got 0",
                 Value(0.5)});
  out.push_back({"COCODetection",
                 {{"tide", Value(true)}, {"tide_pos_thresh", Value(0.5)}},
                 "tide_bg_thresh",
                 Value(0.7),
                 "must be a number in [0, 0.5], got 0.7",
                 Value(0.1)});
  out.push_back({"COCODetection",
                 {{"metric", Value("keypoints")}},
                 "kpt_oks_sigmas",
                 list({Value(0.1), Value(-0.2)}),
                 "element 1 must be a number in (0, inf), got -0.2",
                 list({Value(0.1), Value(0.2)})});
  // Text detection: the 5 and -3.
  out.push_back({"HmeanIoU", {}, "match_iou_thr", Value(5), unit + "5", Value(0.7)});
  out.push_back({"HmeanIoU", {}, "ignore_precision_thr", Value(-3), unit + "-3", Value(0.3)});
  out.push_back({"HmeanIoU", {}, "match_iou_thr", Value(kNan), unit + "nan", Value(0.0)});
  // Classification: thresholds, curve thresholds, the fixed-point bounds, max_fpr, fpr_range.
  for (const char* m : {"Specificity", "StatScores", "FBetaScore"})
    out.push_back({m, binary, "threshold", Value(1.5), unit + "1.5", Value(0.3)});
  for (const char* m : {"PrecisionRecallCurve", "ROC", "AveragePrecision"})
    out.push_back({m, binary, "thresholds", list({Value(0.2), Value(1.2)}), el1 + "1.2",
                   list({Value(0.2), Value(0.8)})});
  for (const auto& [m, p] : {std::pair{"RecallAtFixedPrecision", "min_precision"},
                             {"PrecisionAtFixedRecall", "min_recall"},
                             {"SensitivityAtSpecificity", "min_specificity"},
                             {"SpecificityAtSensitivity", "min_sensitivity"}})
    out.push_back({m, binary, p, Value(-0.25), unit + "-0.25", Value(0.5)});
  out.push_back(
      {"AUROC", binary, "max_fpr", Value(0.0), "must be a number in (0, 1], got 0", Value(0.5)});
  out.push_back({"RetrievalAUROC",
                 {},
                 "max_fpr",
                 Value(1.5),
                 "must be a number in (0, 1], got 1.5",
                 Value(0.5)});
  out.push_back({"LogAUC", binary, "fpr_range", range(0.5, 0.1),
                 "must be a range [lo, hi] with lo < hi, got [0.5, 0.1]", range(0.001, 0.1)});
  out.push_back({"LogAUC", binary, "fpr_range", range(0.1, 2), el1 + "2", range(0.1, 1)});
  out.push_back({"LogAUC", binary, "fpr_range", list({Value(0.1)}),
                 "must hold at least 2 numbers, got 1", range(0.0, 1)});
  out.push_back({"MultiLabelMetric",
                 {{"num_classes", Value(3)}},
                 "thr",
                 Value(kInf),
                 "must be a number in (-inf, inf), got inf",
                 Value(0.7)});
  out.push_back({"Accuracy",
                 {},
                 "thrs",
                 list({Value(kInf)}),
                 "element 0 must be a number in (-inf, inf), got inf",
                 list({Value(), Value(0.5)})});
  out.push_back({"SingleLabelMetric",
                 {{"num_classes", Value(3)}},
                 "thrs",
                 list({Value(0.5), Value(kNan)}),
                 "element 1 must be a number in (-inf, inf), got nan",
                 list({Value(0.5), Value()})});
  // Image: MS-SSIM's data range, one number or [min, max].
  const std::string ssim = "MultiScaleStructuralSimilarityIndexMeasure";
  out.push_back({ssim,
                 {},
                 "data_range",
                 range(1, 0),
                 "must be a range [lo, hi] with lo < hi, got [1, 0]",
                 range(0, 255)});
  out.push_back(
      {ssim, {}, "data_range", Value(0.0), "must be a number in (0, inf), got 0", Value(255.0)});
  out.push_back({ssim,
                 {},
                 "data_range",
                 list({Value(0), Value(1), Value(2)}),
                 "must hold at most 2 numbers, got 3",
                 range(-1, 1)});
  out.push_back({ssim,
                 {},
                 "data_range",
                 range(-1e308, 1e308),
                 "max - min must be a number in (0, inf), got inf",
                 range(-1e300, 1e300)});
  // Keypoints: distance thresholds and the normaliser; restoration: the connectivity step.
  for (const char* m : {"PCKAccuracy", "JhmdbPCKAccuracy", "MpiiPCKAccuracy"})
    out.push_back(
        {m, {}, "thr", Value(-0.1), "must be a number in [0, inf), got -0.1", Value(0.2)});
  out.push_back({"KeypointAUC",
                 {},
                 "norm_factor",
                 Value(kNan),
                 "must be a number in (-inf, inf), got nan",
                 Value(-20.0)});
  out.push_back({"ConnectivityError",
                 {},
                 "step",
                 Value(2.0),
                 "must be a number in [0.0001, 1], got 2",
                 Value(0.1)});
  return out;
}

TEST(MetricParameters, EveryThresholdRangeAndFractionHasOneCheck) {
  const auto table = rows();
  ASSERT_GE(table.size(), 80u);
  std::set<std::string> metrics;
  for (const Row& r : table) metrics.insert(r.metric);
  RecordProperty("rows", static_cast<int>(table.size()));
  RecordProperty("metrics", static_cast<int>(metrics.size()));
  for (const Row& r : table) {
    SCOPED_TRACE(r.metric + " " + r.param + " = " + r.bad.to_json());
    EXPECT_EQ(config_error(r.metric, with(r.base, r.param, r.bad)),
              "metric '" + r.metric + "': parameter '" + r.param + "' " + r.message);
    EXPECT_EQ(config_error(r.metric, with(r.base, r.param, r.good)), "") << r.good.to_json();
  }
}

// The helpers on their own: bounds open and closed, NaN and infinities, order, sizes, ranges.
TEST(MetricParameters, SharedHelpersGiveUniformMessages) {
  const Params p("metric 'm'", {{"a", Value(0.5)},
                                {"b", Value(1)},
                                {"n", Value(kNan)},
                                {"l", list({Value(0.1), Value(0.1), Value(0.3)})},
                                {"s", Value("x")}});
  const auto msg = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(p.get_fraction("a"), 0.5);
  EXPECT_EQ(p.get_fraction("b"), 1.0);  // an integer is widened; 1 is in [0, 1]
  EXPECT_EQ(msg([&] { p.get_number("b", kPositiveFraction); }), "");
  EXPECT_EQ(msg([&] {
              p.get_number("a", NumberBounds{0.5, 1, true, false});
            }),
            "metric 'm': parameter 'a' must be a number in (0.5, 1], got 0.5");
  EXPECT_EQ(msg([&] { p.get_number("n"); }),
            "metric 'm': parameter 'n' must be a number in (-inf, inf), got nan");
  EXPECT_EQ(msg([&] { p.get_number("n", kNonNegativeOrInf); }),
            "metric 'm': parameter 'n' must be a number in [0, inf], got nan");
  EXPECT_EQ(msg([&] { p.get_fraction("s"); }),
            "metric 'm': parameter 's' expects a number, found \"x\"");
  EXPECT_EQ(p.get_number_list("l", kUnitInterval, ListOrder::NonDecreasing).size(), 3u);
  EXPECT_EQ(msg([&] { p.get_fraction_list("l", ListOrder::Increasing); }),
            "metric 'm': parameter 'l' must be strictly increasing: element 1 (0.1) follows 0.1");
  EXPECT_EQ(msg([&] { p.get_number_list("l", kUnitInterval, ListOrder::Any, 1, 2); }),
            "metric 'm': parameter 'l' must hold at most 2 numbers, got 3");
  EXPECT_EQ(msg([&] { p.get_number_list("a", kPositive, ListOrder::Any, 2); }),
            "metric 'm': parameter 'a' must hold at least 2 numbers, got 1");
  EXPECT_EQ(msg([&] { p.check_number("x", kInf, kNonNegative, "element 3"); }),
            "metric 'm': parameter 'x' element 3 must be a number in [0, inf), got inf");
  EXPECT_EQ(msg([&] { p.check_number("x", kInf, kNonNegativeOrInf); }), "");
  EXPECT_EQ(msg([&] { p.check_range("r", 2, 1, kFinite, "'small'"); }),
            "metric 'm': parameter 'r' 'small' must be a range [lo, hi] with lo < hi, got [2, 1]");
  EXPECT_EQ(msg([&] { p.check_range("r", 1, 1, kFinite, {}, true); }), "");
  EXPECT_EQ(msg([&] { p.check_range("r", -1, 1, kUnitInterval); }),
            "metric 'm': parameter 'r' lo must be a number in [0, 1], got -1");
  EXPECT_EQ(bounds_text(kPositiveFraction), "(0, 1]");
}

}  // namespace
}  // namespace tally::test
