// The coco_json reader's values of one entry (an image, a category, an annotation or a result):
// ids, numbers, boxes and keypoints read from simdjson DOM elements, each checked and named in
// the message of an InputError ("... [3] (image_id 17): key 'bbox': expected ...").
// Internal to plugins/readers/coco_json.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tally/sdk/error.hpp"
#include "tally_support/json_text.hpp"
#include "tally_support/mask.hpp"

namespace tally_coco_json {

namespace dom = simdjson::dom;
namespace mask = tally::support::mask;

[[noreturn]] inline void fail(const std::string& what) {
  throw tally::InputError("coco_json reader: " + what);
}

// simdjson's DOM API: stage 1 and 2 run in the library's runtime-dispatched (AVX2 / SSE4.2)
// kernels; the header-only On Demand API would be compiled for the baseline CPU here.
inline std::int64_t get_id(dom::element v) {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64()) throw simdjson::simdjson_error(simdjson::NUMBER_OUT_OF_RANGE);
  const double d = v.get_double();
  if (d >= -9.2e18 && d <= 9.2e18 && d == static_cast<double>(static_cast<std::int64_t>(d)))
    return static_cast<std::int64_t>(d);
  throw simdjson::simdjson_error(simdjson::INCORRECT_TYPE);
}

using tally::support::found;

/// What a key of an annotation, image or result holds, for messages.
inline const char* expected_for(std::string_view key) {
  if (key == "image_id" || key == "category_id" || key == "id") return "an integer id";
  if (key == "score" || key == "area") return "a number";
  if (key == "bbox") return "[x, y, w, h] (4 numbers)";
  if (key == "segmentation") return "a list of polygons or an RLE {size, counts}";
  if (key == "iscrowd") return "0, 1 or a bool";
  if (key == "height" || key == "width" || key == "num_keypoints") return "an integer";
  if (key == "keypoints") return "[x1, y1, v1, x2, y2, v2, ...] (3 numbers a keypoint)";
  return "another value";
}

/// Runs f() and turns a simdjson type error inside it into one line naming `where`, the key
/// being read and what it holds.
template <class W, class F>
void naming_the_key(const W& where, const std::string_view& key, const dom::element& v, F&& f) {
  try {
    f();
  } catch (const simdjson::simdjson_error& e) {
    fail(where() + ": key '" + std::string(key) + "': expected " + expected_for(key) + ", found " +
         found(v) + (e.error() == simdjson::NUMBER_OUT_OF_RANGE ? " (out of range)" : ""));
  }
}

/// A box or polygon coordinate: finite and within mask::kMaxCoordinate.
template <class W>
double get_coordinate(dom::element e, const W& where, std::string_view key) {
  double x = 0;
  if (e.get_double().get(x))
    fail(where() + ": key '" + std::string(key) + "': expected numbers, found " + found(e));
  if (!mask::coordinate_ok(x))
    fail(where() + ": key '" + std::string(key) + "': coordinate " + simdjson::minify(e) +
         " is out of range (finite, at most 1e8 in magnitude)");
  return x;
}

/// The xywh box [4] of a JSON array: InputError naming `where` when it does not hold 4 numbers
/// in range; false for an empty array.
template <class W>
bool get_box(dom::element v, double* out, const W& where) {
  dom::array a;
  if (v.get_array().get(a) || (a.size() != 4 && a.size() != 0))
    fail(where() + ": key 'bbox': expected [x, y, w, h] (4 numbers), found " + found(v));
  std::size_t n = 0;
  for (dom::element e : a) out[n++] = get_coordinate(e, where, "bbox");
  return n == 4;
}

/// The keypoints [x1, y1, v1, ...] of a JSON array, appended to `out`: a non-empty list of
/// numbers, 3 a keypoint, each finite and at most 1e8 in magnitude (mask::coordinate_ok). Returns
/// how many were appended.
template <class W>
std::size_t get_keypoints(dom::element v, std::vector<double>& out, const W& where) {
  dom::array a;
  if (v.get_array().get(a))
    fail(where() + ": key 'keypoints': expected " + expected_for("keypoints") + ", found " +
         found(v));
  std::size_t i = 0;
  for (dom::element e : a) {
    double x = 0;
    if (e.get_double().get(x))
      fail(where() + ": key 'keypoints': expected numbers, found " + found(e) + " at [" +
           std::to_string(i) + "]");
    if (!mask::coordinate_ok(x))
      fail(where() + ": key 'keypoints': " + simdjson::minify(e) + " at [" + std::to_string(i) +
           "] is out of range (finite, at most 1e8 in magnitude)");
    out.push_back(x);
    ++i;
  }
  // Counted here: simdjson's array::size() saturates at 2^24 - 1.
  if (i == 0 || i % 3 != 0)
    fail(where() + ": key 'keypoints': expected " + expected_for("keypoints") + ", found " +
         std::to_string(i) + " values");
  return i;
}

/// A category id as the metrics hold it (int32): InputError naming `where` outside [0, 2^31).
template <class Where>
std::int32_t check_cat(std::int64_t cat, const Where& where) {
  if (cat < 0 || cat > INT32_MAX)
    fail(where() + ": category_id " + std::to_string(cat) + " is outside [0, 2^31)");
  return static_cast<std::int32_t>(cat);
}

}  // namespace tally_coco_json
