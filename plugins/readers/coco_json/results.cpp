// The coco_json reader's results file: a JSON array of {image_id, category_id, bbox |
// segmentation | keypoints, score}, read as pycocotools' COCO.loadRes reads it (its branch picked
// from the first entry), in chunks of whole elements (json_file.hpp), else whole.
// The steps of one result are functions of this file only, each with one caller, forced inline:
// a result is parsed by one function, as when the steps were one lambda, not by four calls
// (GCC 12 at -O2 leaves three of them out of line otherwise).
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "coco_json_reader.hpp"
#include "json_file.hpp"

namespace tally_coco_json {
namespace {

/// One pass over the results: the reader's state it writes (references) and loadRes' branch.
struct ResultsPass {
  const std::string& path;
  const std::string& masks;
  const std::string& keypoints;
  Instances& dt;
  std::vector<std::vector<std::vector<double>>>& dt_polys;
  bool& with_masks;
  bool& with_keypoints;
  std::size_t& kp_len;
  std::string& kp_len_from;
  // loadRes' branch, from the first entry: bbox, else segmentation, else keypoints (kp_mode).
  bool first = true, bbox_mode = false, kp_mode = false;
  std::vector<double> kp;  // one result's keypoints
};

/// One result as parsed.
struct Result {
  std::int64_t image = 0, cat = 0;
  double score = std::nan(""), box[4] = {0, 0, 0, 0};
  bool has_image = false, has_cat = false, has_score = false, has_box = false, has_seg = false,
       seg_key = false, has_kp = false;
  RleRef rle;
  std::vector<std::vector<double>> polys;
};

/// "results 'FILE': [3] (image_id 17)": the entry and, when it has one, its image id. Built only
/// for a message.
struct ResultWhere {
  const std::string& path;
  dom::object o;
  std::size_t idx;
  std::string operator()() const {
    std::string w = "results '" + path + "': [" + std::to_string(idx) + "]";
    dom::element id;
    std::int64_t v = 0;
    if (!o.at_key("image_id").get(id) && !id.get_int64().get(v))
      w += " (image_id " + std::to_string(v) + ")";
    return w;
  }
};

/// The keys of one result. Result segmentations carry their own size, so they are decoded in
/// group() (h, w unknown for polygons: those are rasterised once the image sizes are known).
[[gnu::always_inline]] inline void parse_result_keys(dom::object o, const ResultWhere& where,
                                                     ResultsPass& pass, Result& r) {
  const std::string& masks = pass.masks;
  for (const auto f : o) {
    const std::string_view key = f.key;
    if (key == "segmentation") r.seg_key = true;  // loadRes' branch, whether read or not
    if (key == "image_id") {
      naming_the_key(where, key, f.value, [&] { r.image = get_id(f.value); });
      r.has_image = true;
    } else if (key == "category_id") {
      naming_the_key(where, key, f.value, [&] { r.cat = get_id(f.value); });
      r.has_cat = true;
    } else if (key == "keypoints" && (pass.first || pass.with_keypoints || pass.kp_mode)) {
      pass.kp.clear();
      get_keypoints(f.value, pass.kp, where);
      r.has_kp = true;
    } else if (key == "score") {
      naming_the_key(where, key, f.value, [&] { r.score = f.value.get_double(); });
      r.has_score = true;
    } else if (key == "bbox") {
      r.has_box = get_box(f.value, r.box, where);
    } else if (key == "segmentation" &&
               (masks == "true" || (masks == "auto" && (pass.first || pass.with_masks)))) {
      if (f.value.is_array())
        r.polys = get_polygons(f.value, where);  // rasterised in group(): needs h, w
      else
        r.rle = get_segmentation_ref(f.value, where);  // decoded in group()
      r.has_seg = true;
    }
  }
}

/// The keys a result needs, loadRes' branch taken from the first one, and what the branch needs.
[[gnu::always_inline]] inline void check_result(const ResultWhere& where, ResultsPass& pass,
                                                const Result& r) {
  if (!r.has_image) fail(where() + ": no 'image_id'");
  if (!r.has_cat) fail(where() + ": no 'category_id'");
  if (!r.has_score) fail(where() + ": no 'score'");
  if (std::isnan(r.score)) fail(where() + ": key 'score' is NaN");
  if (pass.first) {
    pass.bbox_mode = r.has_box;  // loadRes decides on the first entry
    pass.kp_mode = !r.has_box && !r.seg_key && r.has_kp;
    pass.first = false;
    if (pass.masks == "auto") pass.with_masks = r.has_seg;
    if (pass.keypoints == "auto") pass.with_keypoints = r.has_kp;
  }
  if (pass.bbox_mode && !r.has_box) fail(where() + ": no 'bbox' (the first entry has one)");
  if (!pass.bbox_mode && !pass.kp_mode && !r.has_seg && !r.has_box)
    fail(where() + ": neither 'bbox' nor 'segmentation'");
  if (pass.with_masks && !r.has_seg && !r.has_box) fail(where() + ": no 'segmentation'");
  if ((pass.kp_mode || pass.with_keypoints) && !r.has_kp)
    fail(where() + ": no 'keypoints' (" +
         (pass.kp_mode ? "the first entry has them, and neither 'bbox' nor 'segmentation'"
          : pass.keypoints == "true" ? "keypoints: true"
                                     : "the first entry has them") +
         ")");
}

/// A result's keypoints (all with the same 3K numbers) and, in loadRes' keypoints branch, its
/// box from them.
[[gnu::always_inline]] inline void add_result_keypoints(const ResultWhere& where, ResultsPass& pass,
                                                        Result& r) {
  const std::vector<double>& kp = pass.kp;
  if (r.has_kp && pass.with_keypoints) {
    if (pass.kp_len == 0) {
      pass.kp_len = kp.size();
      pass.kp_len_from = where();
    } else if (kp.size() != pass.kp_len) {
      fail(where() + ": key 'keypoints': " + std::to_string(kp.size()) + " values (" +
           std::to_string(kp.size() / 3) + " keypoints), " + pass.kp_len_from + " holds " +
           std::to_string(pass.kp_len) + " (" + std::to_string(pass.kp_len / 3) + " keypoints)");
    }
    pass.dt.kp.insert(pass.dt.kp.end(), kp.begin(), kp.end());
  }
  if (pass.kp_mode) {
    // loadRes: x = s[0::3], y = s[1::3]; bbox = [x0, y0, x1 - x0, y1 - y0] of their min and
    // max (np.min, np.max), every keypoint counted (v = 0 too), a bbox of the entry replaced;
    // its area (x1 - x0) * (y1 - y0) is w * h of that box.
    double x0 = kp[0], x1 = kp[0], y0 = kp[1], y1 = kp[1];
    for (std::size_t k = 3; k < kp.size(); k += 3) {
      x0 = std::min(x0, kp[k]);
      x1 = std::max(x1, kp[k]);
      y0 = std::min(y0, kp[k + 1]);
      y1 = std::max(y1, kp[k + 1]);
    }
    r.box[0] = x0;
    r.box[1] = y0;
    r.box[2] = x1 - x0;
    r.box[3] = y1 - y0;
  }
}

/// A result's mask as read: an RLE is kept as its compressed string (a list of counts is
/// compressed) and decoded once, in group(), straight into the image-ordered counts: decoded
/// here, the counts (4 bytes each against about 1 character) would be copied again as they grow.
/// Its area (loadRes: maskUtils.area) and, without a bbox, its box (toBbox) are taken there.
[[gnu::always_inline]] inline void add_result_mask(const ResultWhere& where, ResultsPass& pass,
                                                   Result& r) {
  Instances& dt = pass.dt;
  std::uint8_t geom = 0;
  if (!r.polys.empty()) {
    // annToRLE: frPyObjects(polygons, h, w), merged; rasterised in group(). The length
    // -2 - slot names the polygons' slot.
    if (pass.dt_polys.size() >= static_cast<std::size_t>(INT32_MAX) - 2)
      fail(where() + ": too many polygon results");
    dt.lengths.push_back(-2 - static_cast<std::int32_t>(pass.dt_polys.size()));
    pass.dt_polys.push_back(std::move(r.polys));
  } else if (r.has_seg) {
    std::string listed;
    std::string_view str = r.rle.str;
    if (r.rle.is_list) {
      mask::Rle m;
      m.h = r.rle.h;
      m.w = r.rle.w;
      m.cnts = std::move(r.rle.list);
      listed = mask::rle_to_string(m);
      str = listed;
    }
    if (str.size() >= static_cast<std::size_t>(INT32_MAX))
      fail(where() + ": key 'segmentation.counts': too long");
    dt.lengths.push_back(static_cast<std::int32_t>(str.size()));
    dt.rle_str.append(str);
    geom = static_cast<std::uint8_t>((pass.bbox_mode ? 0 : 1) | (r.has_box ? 0 : 2));
  } else {
    // loadRes: the box's polygon [x1, y1, x1, y2, x2, y2, x2, y1]; rasterised in group().
    dt.lengths.push_back(-1);
  }
  dt.mask_hw.push_back(r.rle.h);
  dt.mask_hw.push_back(r.rle.w);
  dt.area.push_back(pass.bbox_mode ? r.box[2] * r.box[3] : 0.0);
  dt.geom.push_back(geom);
}

/// One element of the results (its index `idx`): checked and appended to pass.dt.
void add_result(dom::object o, std::size_t idx, ResultsPass& pass) {
  const ResultWhere where{pass.path, o, idx};
  Result r;
  parse_result_keys(o, where, pass, r);
  check_result(where, pass, r);
  add_result_keypoints(where, pass, r);
  if (!r.polys.empty() && !pass.bbox_mode)
    fail(where() +
         ": key 'segmentation': polygons in a result need a 'bbox' in the results' entries "
         "(pycocotools' loadRes takes the area of a result without one from an RLE); give "
         "RLE {size, counts} or bboxes");
  Instances& dt = pass.dt;
  dt.image.push_back(r.image);
  dt.label.push_back(check_cat(r.cat, where));
  dt.value.push_back(r.score);
  if (pass.with_masks) add_result_mask(where, pass, r);
  dt.box.insert(dt.box.end(), r.box, r.box + 4);
}

/// Room for the results up front (a box-only result takes 60 to 90 bytes of JSON): the arrays
/// grow once instead of copying themselves while they double.
void reserve_results(const std::string& path, Instances& dt) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  const std::size_t guess = ec ? 0 : static_cast<std::size_t>(bytes / 64);
  dt.image.reserve(guess);
  dt.label.reserve(guess);
  dt.value.reserve(guess);
  dt.box.reserve(guess * 4);
}

/// The results file parsed whole (when it does not split in chunks), each element through
/// `on_element`.
template <class F>
void for_each_result_whole(const std::string& path, F&& on_element) {
  const simdjson::padded_string json = load_file(path, "results");
  dom::parser parser;
  const dom::element doc = parser.parse(json);
  dom::array arr;
  if (doc.get_array().get(arr) != simdjson::SUCCESS)
    fail("results '" + path + "': must be a JSON array of objects");
  std::size_t idx = 0;
  for (dom::element e : arr) {
    dom::object o;
    if (e.get_object().get(o))
      fail("results '" + path + "': [" + std::to_string(idx) +
           "]: expected an object {image_id, category_id, bbox and/or segmentation, score}, "
           "found " +
           found(e));
    on_element(o, idx++);
  }
}

}  // namespace

void CocoJsonReader::read_results(const std::string& path, const std::string& masks,
                                  const std::string& keypoints, std::size_t block, int threads) {
  Instances& dt = data_->dt;
  ResultsPass pass{path,
                   masks,
                   keypoints,
                   dt,
                   dt_polys_,
                   with_masks_,
                   with_keypoints_,
                   kp_len_,
                   kp_len_from_,
                   /*first=*/true,
                   /*bbox_mode=*/false,
                   /*kp_mode=*/false,
                   /*kp=*/{}};
  const auto on_element = [&](dom::object o, std::size_t idx) { add_result(o, idx, pass); };
  with_masks_ = masks == "true";
  with_keypoints_ = keypoints == "true";
  reserve_results(path, dt);
  std::size_t count = 0;
  if (!for_each_element_chunked(path, block, threads, on_element, count)) {
    dt = Instances{};
    dt_polys_.clear();
    pass.first = true;
    pass.kp_mode = false;
    with_masks_ = masks == "true";
    with_keypoints_ = keypoints == "true";
    kp_len_ = 0;
    kp_len_from_.clear();
    for_each_result_whole(path, on_element);
  }
}

}  // namespace tally_coco_json
