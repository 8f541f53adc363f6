// The COCO evaluation core, after pycocotools 2.0.11's COCOeval: its default parameters and the
// records every rank keeps and merges. Its stages, one file each (coco_stages.hpp):
// coco_evaluate.cpp and coco_matching.cpp per image, coco_accumulate.cpp and coco_summarize.cpp
// on rank 0, coco_analysis.cpp for hotcoco's analyses. See coco_eval.hpp and coco_detection.cpp.
#include "coco_eval.hpp"

#include <string>

#include "tally/sdk/error.hpp"

namespace tally::detection::coco {

std::vector<double> default_iou_thrs() {
  // np.linspace(.5, 0.95, int(np.round((0.95 - .5) / .05)) + 1): y = i * step + start, the last
  // value set to stop.
  const int num = 10;
  const double start = .5, stop = 0.95;
  const double step = (stop - start) / (num - 1);
  std::vector<double> t(num);
  for (int i = 0; i < num; ++i) t[i] = static_cast<double>(i) * step + start;
  t[num - 1] = stop;
  return t;
}

std::vector<AreaRange> default_area_ranges(Kind kind) {
  // [0 ** 2, 1e5 ** 2], [0 ** 2, 32 ** 2], [32 ** 2, 96 ** 2], [96 ** 2, 1e5 ** 2]: exact doubles.
  if (kind == Kind::Keypoints)
    return {{0.0, 1e10, "all"}, {1024.0, 9216.0, "m"}, {9216.0, 1e10, "l"}};
  return {{0.0, 1e10, "all"}, {0.0, 1024.0, "s"}, {1024.0, 9216.0, "m"}, {9216.0, 1e10, "l"}};
}

std::vector<std::int64_t> default_max_dets(Kind kind) {
  if (kind == Kind::Keypoints) return {20};
  return {1, 10, 100};
}

std::vector<double> coco_kpt_sigmas() {
  // np.array([...]) / 10.0, element by element.
  const double s[] = {.26, .25, .25,  .35,  .35, .79, .79, .72, .72,
                      .62, .62, 1.07, 1.07, .87, .87, .89, .89};
  std::vector<double> out;
  for (const double v : s) out.push_back(v / 10.0);
  return out;
}

void Records::append(const Records& o) {
  img_groups.insert(img_groups.end(), o.img_groups.begin(), o.img_groups.end());
  group_cat.insert(group_cat.end(), o.group_cat.begin(), o.group_cat.end());
  group_ndets.insert(group_ndets.end(), o.group_ndets.begin(), o.group_ndets.end());
  group_gts.insert(group_gts.end(), o.group_gts.begin(), o.group_gts.end());
  score.insert(score.end(), o.score.begin(), o.score.end());
  bits.insert(bits.end(), o.bits.begin(), o.bits.end());
  group_freq.insert(group_freq.end(), o.group_freq.begin(), o.group_freq.end());
  img_conf.insert(img_conf.end(), o.img_conf.begin(), o.img_conf.end());
  conf_pairs.insert(conf_pairs.end(), o.conf_pairs.begin(), o.conf_pairs.end());
  img_tide.insert(img_tide.end(), o.img_tide.begin(), o.img_tide.end());
  tide_cls.insert(tide_cls.end(), o.tide_cls.begin(), o.tide_cls.end());
  tide_code.insert(tide_code.end(), o.tide_code.begin(), o.tide_code.end());
  tide_fix.insert(tide_fix.end(), o.tide_fix.begin(), o.tide_fix.end());
  tide_score.insert(tide_score.end(), o.tide_score.begin(), o.tide_score.end());
}

void KindRecords::merge(const KindRecords& later) {
  if (later.size() != size())
    throw RuntimeError("COCO records: a rank holds " + std::to_string(later.size()) +
                       " kinds, an earlier one " + std::to_string(size()));
  for (std::size_t j = 0; j < size(); ++j) (*this)[j].append(later[j]);
}

}  // namespace tally::detection::coco
