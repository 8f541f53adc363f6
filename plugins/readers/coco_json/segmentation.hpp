// The coco_json reader's segmentations: polygon lists and RLE {size, counts} read from the JSON
// (COCO's two encodings), rasterised or decoded with tally_support/mask.hpp (the port of
// pycocotools' maskApi.c), and the checks that a mask fits its image.
// Internal to plugins/readers/coco_json.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "instances.hpp"
#include "json_values.hpp"
#include "tally_support/mask.hpp"

namespace tally_coco_json {

/// The polygons of a segmentation list ([[x1, y1, ...], ...]), coordinates checked.
template <class W>
std::vector<std::vector<double>> get_polygons(dom::element v, const W& where) {
  std::vector<std::vector<double>> polys;
  for (dom::element p : v.get_array()) {
    dom::array a;
    if (p.get_array().get(a))
      fail(where() +
           ": key 'segmentation': expected a list of polygons [x1, y1, x2, y2, ...], "
           "found " +
           found(p) + " in the list");
    std::vector<double> xy;
    xy.reserve(a.size());
    for (dom::element c : a) xy.push_back(get_coordinate(c, where, "segmentation"));
    polys.push_back(std::move(xy));
  }
  if (polys.empty()) fail(where() + ": key 'segmentation': an empty list of polygons");
  return polys;
}

/// A COCO RLE as found in the JSON: its size, and its counts as a compressed string (a view into
/// the parsed document) or as a list.
struct RleRef {
  std::uint32_t h = 0, w = 0;
  std::string_view str;
  std::vector<std::uint32_t> list;
  bool is_list = false;
};

/// Reads an RLE {size, counts} without decoding a compressed string (mask_from_ref decodes it).
template <class W>
RleRef get_segmentation_ref(dom::element v, const W& where) {
  dom::object o;
  if (v.get_object().get(o))
    fail(where() +
         ": key 'segmentation': expected a list of polygons or an RLE {size, counts}, "
         "found " +
         found(v));
  RleRef r;
  bool have_size = false, have_counts = false;
  for (const auto f : o) {
    const std::string_view key = f.key;
    if (key == "size") {
      dom::array a;
      std::int64_t hw[2] = {-1, -1};
      bool ok = !f.value.get_array().get(a) && a.size() == 2;
      std::size_t n = 0;
      if (ok)
        for (dom::element e : a) ok = ok && !e.get_int64().get(hw[n++]);
      if (!ok || !mask::size_ok(hw[0], hw[1]))
        fail(where() +
             ": key 'segmentation.size': expected [h, w] (each side below 2^31, h * w "
             "below 2^32), found " +
             found(f.value));
      r.h = static_cast<std::uint32_t>(hw[0]);
      r.w = static_cast<std::uint32_t>(hw[1]);
      have_size = true;
    } else if (key == "counts") {
      const dom::element c = f.value;
      dom::array a;
      if (!c.get_array().get(a)) {
        r.is_list = true;
        r.list.reserve(a.size());
        for (dom::element e : a) {
          std::uint64_t x = 0;
          if (e.get_uint64().get(x) || x > UINT32_MAX)
            fail(where() + ": key 'segmentation.counts': expected counts in [0, 2^32), found " +
                 found(e));
          r.list.push_back(static_cast<std::uint32_t>(x));
        }
      } else if (c.get_string().get(r.str)) {
        fail(where() +
             ": key 'segmentation.counts': expected a list of counts or a compressed RLE string, "
             "found " +
             found(c));
      }
      have_counts = true;
    }
  }
  if (!have_size || !have_counts)
    fail(where() + ": key 'segmentation': an RLE needs 'size' and 'counts'");
  return r;
}

/// A compressed RLE string of an h x w mask decoded into r (its buffer reused).
template <class W>
void decode_rle(std::string_view str, std::uint32_t h, std::uint32_t w, mask::Rle& r,
                const W& where) {
  if (!mask::rle_from_string(str, h, w, r))
    fail(where() +
         ": key 'segmentation.counts': malformed compressed RLE (a character outside "
         "the encoding, or a count outside [0, 2^32))");
}

/// A COCO RLE segmentation ({size, counts} with counts a list or a compressed string), decoded.
/// Size and counts are checked here (sides below 2^31, h * w below 2^32, counts below 2^32); that
/// they cover the image is checked once the image is known.
template <class W>
mask::Rle get_segmentation(dom::element v, const W& where) {
  RleRef ref = get_segmentation_ref(v, where);
  mask::Rle r;
  if (ref.is_list) {
    r.h = ref.h;
    r.w = ref.w;
    r.cnts = std::move(ref.list);
  } else {
    decode_rle(ref.str, ref.h, ref.w, r, where);
  }
  return r;
}

/// A ground truth's segmentation as read: polygons (rasterised in group(), once the image's
/// size is known) or an RLE.
struct GtSeg {
  enum Kind { None, Polygons, Rle } kind = None;
  std::vector<std::vector<double>> polys;
  mask::Rle rle;
};

/// A ground truth's segmentation: a list of polygons (or boxes), else an RLE {size, counts}.
template <class W>
GtSeg read_gt_seg(dom::element v, const W& where) {
  GtSeg s;
  if (v.is_array()) {
    s.kind = GtSeg::Polygons;
    s.polys = get_polygons(v, where);
  } else {
    s.kind = GtSeg::Rle;
    s.rle = get_segmentation(v, where);
  }
  return s;
}

/// Polygons (or 4-number boxes) rasterised at h x w and merged, as annToRLE: frPyObjects.
template <class Where>
mask::Rle polys_to_rle(const std::vector<std::vector<double>>& polys, std::uint32_t h,
                       std::uint32_t w, const Where& where) {
  std::vector<mask::Rle> rles;
  if (polys[0].size() == 4) {
    for (const auto& b : polys) {
      if (b.size() != 4) fail(where() + ": segmentation mixes boxes and polygons");
      rles.push_back(mask::rle_from_bbox(b.data(), h, w));
    }
  } else if (polys[0].size() > 4) {
    for (const auto& p : polys) rles.push_back(mask::rle_from_poly(p.data(), p.size() / 2, h, w));
  } else {
    fail(where() + ": a polygon needs more than 4 coordinates");
  }
  return mask::rle_merge(rles, false);
}

/// Masks need an image whose h * w is below 2^32 (RLE counts are uint32, as in maskApi.c).
/// `where()` gives the message's start (built only when there is an error).
template <class Where>
void check_image_size(const ImageInfo& im, const Where& where) {
  if (!mask::size_ok(im.height, im.width))
    fail(where() + ": the image's size " + std::to_string(im.height) + "x" +
         std::to_string(im.width) + " is too large for a mask (h * w must be below 2^32)");
}

/// A mask of size h x w with counts cnts[0..n) must cover exactly the image.
template <class Where>
void check_mask_size(std::uint32_t h, std::uint32_t w, const std::uint32_t* cnts, std::size_t n,
                     const ImageInfo& im, const Where& where) {
  if (static_cast<std::int64_t>(h) != im.height || static_cast<std::int64_t>(w) != im.width)
    fail(where() + ": mask size " + std::to_string(h) + "x" + std::to_string(w) +
         " differs from the image's " + std::to_string(im.height) + "x" + std::to_string(im.width));
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += cnts[i];
  if (sum != static_cast<std::uint64_t>(h) * w)
    fail(where() + ": the RLE covers " + std::to_string(sum) + " pixels, the image " +
         std::to_string(static_cast<std::uint64_t>(h) * w));
}

}  // namespace tally_coco_json
