// PanopticQuality: panoptic, segmentation and recognition quality (PQ, SQ, RQ) of panoptic maps,
// as torchmetrics 1.9's torchmetrics.detection.PanopticQuality computes them.
//
// Formula (Kirillov et al. 2019; torchmetrics). Per image, every point's (category_id,
// instance_id) names a segment (a stuff's instance id is ignored, categories outside things and
// stuffs are void); a predicted and a ground-truth segment of one category match when
//   IoU = |p & g| / (|p| - |p & void_g| + |g| - |void_p & g| - |p & g|) > 0.5
// (float32, as torchmetrics). Per class c over all images: TP_c matches, IoU_c the sum of their
// IoUs, FN_c unmatched ground-truth segments and FP_c unmatched predicted ones, except those more
// than half void in the other map. Then
//   SQ_c = IoU_c / TP_c (0 without a match),  RQ_c = TP_c / (TP_c + FP_c / 2 + FN_c / 2),
//   PQ_c = SQ_c * RQ_c,  and pq, sq, rq the means over the classes with TP + FP/2 + FN/2 > 0.
// The panoptic_common.cpp header has the counting step by step.
//
// Reference: torchmetrics 1.9.0's PanopticQuality (compute()), reproduced operation for operation:
// the IoUs are float32, so are RQ (an int32 tensor over a float32 one) and its mean (torch.mean
// of float32 in ATen's summation order: torch_reduce.hpp); SQ and PQ are float64. The IoU sums are
// exact here (torchmetrics' float64 sums of float32 IoUs > 0.5 are exact too, below 2^29 matches
// per class), so the values equal torchmetrics' bit for bit on tests/reference/panoptic.py's data.
// Keys:
//   pq                                       compute() with the defaults (torchmetrics' scalar)
//   sq, rq                                   with return_sq_and_rq (its [pq, sq, rq])
//   pq_things, pq_stuff (sq_*, rq_* with return_sq_and_rq)
//                                            panopticapi's Things / Stuff rows: the same mean over
//                                            the thing (stuff) classes only; NaN without any
//   classes, pq_per_class (sq_per_class, rq_per_class)
//                                            with return_per_class: the category ids (things
//                                            ascending, then stuffs ascending: torchmetrics'
//                                            order) and the values of each (its [1, C] or [C, 3])
// A mean over no class is NaN (written as null), as torch.mean of an empty tensor.
//
// Inputs and choices: pred_panoptic and gt_panoptic are torchmetrics' preds and target, one
// [*spatial, 2] map per image (the coco_panoptic reader gives [H, W, 2] int32 of (category_id,
// PNG segment id), void as (-1, 0)). void_category (default -1) is void in both maps, so that void
// predictions need no allow_unknown_preds_category; torchmetrics has no void input (a result
// equals torchmetrics' with allow_unknown_preds_category=True on the same maps, and with False
// where no other unknown category is predicted). Crowds: torchmetrics has none, so by default
// (crowd 'segment') a COCO iscrowd segment is an ordinary ground-truth segment, as it is when its
// map is handed to torchmetrics; crowd 'void' makes its points void, which is equal to torchmetrics
// on maps with those points relabelled void (tests/reference/panoptic.py, cases *crowd_void) and
// close to panopticapi's pq_compute (crowds never matched nor false negatives, a prediction mostly
// over crowd or void not a false positive; panopticapi counts only the crowd of the prediction's
// own category there, and leaves crowd points in a match's union).
//
// Example (torchmetrics' docstring): things {0, 1}, stuffs {6, 7}, one 5x4 image ->
// pq 0.5463 (sq 0.6111, rq 0.6667 with return_sq_and_rq).
//
// State: per class TP, FP, FN and the IoU sum as 3 limbs of exact integers (panoptic_common.hpp),
// all int64 counts summed across ranks (reduced to rank 0, checked): the same bits on any number
// of ranks, batch sizes and image orders. With things and stuffs from the data, the categories
// travel too (every rank must read the same) and the counts are gathered and added in rank order.
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "panoptic_common.hpp"

namespace tally::panoptic {
namespace {

class PanopticQuality final : public PanopticBase {
 public:
  explicit PanopticQuality(const Params& p)
      : PanopticBase(p, false, "PanopticQuality"),
        sq_rq_(p.get_bool("return_sq_and_rq")),
        per_class_(p.get_bool("return_per_class")) {}

 protected:
  Value compute(const PanopticState& all) const override {
    const auto [cats, q] = qualities(all);
    const std::int64_t c = cats.size(), t = cats.num_things();
    Value out = Value::map();
    out.set("pq", q.mean_pq(0, c));
    if (sq_rq_) {
      out.set("sq", q.mean_sq(0, c));
      out.set("rq", q.mean_rq(0, c));
    }
    for (const auto& [group, begin, end] :
         {std::tuple{"things", std::int64_t{0}, t}, std::tuple{"stuff", t, c}}) {
      out.set(std::string("pq_") + group, q.mean_pq(begin, end));
      if (sq_rq_) {
        out.set(std::string("sq_") + group, q.mean_sq(begin, end));
        out.set(std::string("rq_") + group, q.mean_rq(begin, end));
      }
    }
    if (per_class_) {
      std::vector<std::int64_t> ids = cats.things;
      ids.insert(ids.end(), cats.stuffs.begin(), cats.stuffs.end());
      out.set("classes", Value(ids));
      out.set("pq_per_class", Value(q.pq));
      if (sq_rq_) {
        out.set("sq_per_class", Value(q.sq));
        out.set("rq_per_class", Value(std::vector<double>(q.rq.begin(), q.rq.end())));
      }
    }
    return out;
  }

 private:
  bool sq_rq_;
  bool per_class_;
};

}  // namespace

ComponentInfo panoptic_quality_info() {
  std::vector<ParamSpec> params = common_params();
  params.push_back(param("return_sq_and_rq", ParamType::Bool,
                         "Also return sq and rq (and sq_things, rq_things, sq_stuff, rq_stuff).")
                       .def(false));
  params.push_back(param("return_per_class", ParamType::Bool,
                         "Also return classes (the category ids: things ascending, then stuffs "
                         "ascending) and pq_per_class (and sq_per_class, rq_per_class).")
                       .def(false));
  ComponentInfo info = metric<PanopticQuality>(
      "PanopticQuality",
      "Panoptic quality of panoptic maps, as torchmetrics 1.9 PanopticQuality: pq (and sq, rq), "
      "the same over thing and stuff classes (panopticapi's Things / Stuff), and per class. "
      "Segments match at IoU > 0.5 (void points left out of the union); fractions in [0, 1]. "
      "Crowd segments are ordinary segments unless crowd is 'void'.",
      std::move(params), common_inputs());
  info.results = {{"classes", Better::Neither, Plot::None, "category ids of the per-class arrays"},
                  {"*_per_class", Better::Higher, Plot::Bars, "per class, in the order of classes"},
                  {"*", Better::Higher, Plot::None, "fraction in [0, 1]"}};
  return info;
}
TALLY_COMPONENT(panoptic_quality_info)

}  // namespace tally::panoptic
