// The `coco_json` reader: COCO ground truth (`annotations:`, instances_*.json, person_keypoints_*
// .json) and a COCO results file (`results:`, a JSON array of {image_id, category_id, bbox |
// segmentation | keypoints, score}), parsed with simdjson, served one image per sample in ascending
// image-id order (pycocotools' order); each rank reads its contiguous block of images.
//
// What it hands the metrics follows pycocotools 2.0.11 (COCO.loadRes, COCO.annToRLE):
//   - loadRes picks its branch from the results' first entry: a (non-empty) bbox, else a
//     segmentation, else keypoints. A detection's area is w*h of its bbox in the first, its
//     mask's area in the second (without a bbox the box is the mask's tight box, toBbox); in the
//     third its box is the keypoints' extent [x0, y0, x1 - x0, y1 - y0] (x0 = min of x = s[0::3],
//     every keypoint counted, v = 0 too; a bbox in the entry is replaced), so w*h is loadRes'
//     area (x1 - x0) * (y1 - y0) bit for bit;
//   - keypoints (when read: `keypoints: auto`, the first result has them): every result's
//     [x1, y1, v1, x2, ...] as pred_keypoints [n, 3K] and every annotation's as gt_keypoints
//     [g, 3K] with gt_num_keypoints [g] (`num_keypoints`, default the count of v > 0). K is fixed
//     by the first entry holding keypoints (results first, then annotations): every list holds
//     3K numbers. An annotation without `keypoints` (another category) gets 3K zeros and
//     num_keypoints 0, whatever its num_keypoints says, so keypoint evaluation ignores it
//     (pycocotools would fail on it);
//   - masks (when read): polygons rasterised with rleFrPoly and merged, uncompressed RLE taken as
//     is, compressed RLE strings decoded (tally_support/mask.hpp, the port of maskApi.c); a
//     bbox-only result gets the box's polygon as its mask, as loadRes gives it;
//   - ground truth keeps its `area`, `iscrowd` (default 0) and `id`; annotations and results of
//     categories absent from `categories` are left out (pycocotools evaluates params.catIds only);
//   - LVIS annotation files (lvis 0.5.3): each image's `neg_category_ids` and
//     `not_exhaustive_category_ids` become the per-image fields of the same names (when any
//     image has them; an image without them gets empty lists), and the categories' `frequency`
//     ("r", "c", "f") becomes gt_frequency per ground truth (0, 1, 2; -1 for a category without
//     one), what LVISDetection reads;
//   - a result whose image is not in the annotations is an error (pycocotools asserts);
//   - result polygons are rasterised at the image's size when the results carry a bbox (loadRes
//     keeps them, annToRLE rasterises them); without a bbox they are an error, as loadRes
//     cannot take their area.
// Bounds (tally_support/mask.hpp): box, polygon and keypoint coordinates (and keypoints' v or
// score) finite and at most 1e8 in magnitude; num_keypoints an integer >= 0; image sides and RLE
// sizes below 2^31, and h * w below 2^32 when masks are read; RLE counts below 2^32 and covering
// the image exactly. A value outside them, of the wrong type, or a key that is missing is an
// InputError naming the file, the entry (`annotations[i] (id N)`, `images[i]`, `[i] (image_id N)`
// of the results) and the key.
// The results file is parsed in blocks of whole array elements (`block_bytes`, simdjson's DOM
// parser, whose kernels are picked at run time for the CPU), so memory stays near the size of the
// parsed arrays, not of the file; with `threads: 2` the next block is parsed while the current one
// is read. Each image's fields are views into those arrays. Image ids listed twice in the
// annotations are an error.
#include <simdjson.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tally/batch.hpp"
#include "tally/error.hpp"
#include "tally/params.hpp"
#include "tally/plugin.hpp"
#include "tally/reader.hpp"
#include "tally_support/json_text.hpp"
#include "tally_support/mask.hpp"
#include "tally_support/sharded_reader.hpp"

namespace {

namespace dom = simdjson::dom;
namespace mask = tally::support::mask;

[[noreturn]] void fail(const std::string& what) {
  throw tally::InputError("coco_json reader: " + what);
}

// simdjson's DOM API: stage 1 and 2 run in the library's runtime-dispatched (AVX2 / SSE4.2)
// kernels; the header-only On Demand API would be compiled for the baseline CPU here.
std::int64_t get_id(dom::element v) {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64()) throw simdjson::simdjson_error(simdjson::NUMBER_OUT_OF_RANGE);
  const double d = v.get_double();
  if (d >= -9.2e18 && d <= 9.2e18 && d == static_cast<double>(static_cast<std::int64_t>(d)))
    return static_cast<std::int64_t>(d);
  throw simdjson::simdjson_error(simdjson::INCORRECT_TYPE);
}

using tally::support::found;

/// What a key of an annotation, image or result holds, for messages.
const char* expected_for(std::string_view key) {
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

/// Per-instance arrays: boxes, labels, scores/areas, optional masks (flat counts + lengths).
struct Instances {
  std::vector<std::int64_t> image;  // image id (raw), then image index after grouping
  std::vector<std::int32_t> label;
  std::vector<double> box;       // 4 per instance
  std::vector<double> value;     // results: score; ground truth: area
  std::vector<double> area;      // results with masks: loadRes' area
  std::vector<std::int64_t> id;  // ground truth ids
  std::vector<std::uint8_t> crowd;
  std::vector<std::uint32_t> counts;
  std::vector<std::int32_t> lengths;
  // Results' masks as parsed, decoded batch by batch (CocoJsonReader::decode_masks): the
  // compressed RLE strings, each result's source (mask_src: the string's length in bytes, -1 the
  // box's polygon, -2 - slot its polygons in dt_polys_; in `lengths` until group()), and what to
  // take from the mask once decoded (geom: 1 the area, 2 the box).
  std::string rle_str;
  std::vector<std::int32_t> mask_src;
  std::vector<std::uint8_t> geom;
  std::vector<std::uint32_t> mask_hw;  // 2 per instance
  std::vector<double> kp;              // keypoints: 3K per instance (ground truth: see kp_at)
  std::vector<std::int64_t> num_kp;    // ground truth: num_keypoints
  std::vector<std::int64_t> kp_at;     // ground truth as parsed: its offset in kp, -1 for none
  std::vector<std::int8_t> freq;       // ground truth (LVIS): its category's frequency
  std::size_t size() const { return label.size(); }
};

struct ImageInfo {
  std::int64_t id;
  std::int64_t height, width;
  // LVIS: the image's neg_category_ids and not_exhaustive_category_ids, [at, at + n) of the
  // flat lists Data::neg and Data::nel.
  std::uint32_t neg_at = 0, neg_n = 0, nel_at = 0, nel_n = 0;
};

/// Reads a whole file into a simdjson padded string.
/// A FIFO, a device or a folder named as a JSON file is refused before it is opened: opening a
/// FIFO would wait for a writer, reading /dev/zero would never end.
void require_regular_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    fail(what + " '" + path + "': cannot open (" + std::strerror(errno) + ")");
  if (!S_ISREG(st.st_mode))
    fail(what + " '" + path + "': not a regular file (a JSON file was expected)");
}

simdjson::padded_string load_file(const std::string& path, const std::string& what) {
  require_regular_file(path, what);
  auto r = simdjson::padded_string::load(path);
  if (r.error())
    fail(what + " '" + path + "': cannot read (" + simdjson::error_message(r.error()) + ")");
  return std::move(r).value();
}

/// The top-level JSON array of a file in chunks of whole elements, each presented as a JSON array
/// of its own ("[e1, e2, ...]", written in place over the separators around it) with
/// SIMDJSON_PADDING readable bytes after it. A chunk ends at the last "}" ws* "," ws* "{" of a
/// block; a false boundary inside a string or a nested object leaves a chunk that does not parse,
/// and the caller then parses the file whole.
class ChunkSource {
 public:
  ChunkSource(const std::string& path, std::size_t block)
      : file_((require_regular_file(path, "results"), std::fopen(path.c_str(), "rb")),
              &std::fclose),
        block_(block) {
    if (!file_) fail("results '" + path + "': cannot open");
    buf_.resize(block_ + simdjson::SIMDJSON_PADDING);
  }

  /// The next chunk; false at the end or when the file does not split (bad_ says which).
  bool next(const char*& data, std::size_t& len) {
    if (done_) return false;
    if (cut_ != npos) {  // undo the previous chunk's brackets, drop it
      buf_[start_] = saved_start_;
      buf_[cut_] = saved_cut_;
      std::memmove(buf_.data(), buf_.data() + cut_, have_ - cut_);
      have_ -= cut_;
      cut_ = npos;
    }
    while (true) {
      if (!eof_ && have_ < block_) {
        const std::size_t want = block_ - have_;
        const std::size_t got = std::fread(buf_.data() + have_, 1, want, file_.get());
        have_ += got;
        if (got < want) eof_ = true;
      }
      start_ = 0;
      if (!started_) {
        while (start_ < have_ && std::isspace(static_cast<unsigned char>(buf_[start_]))) ++start_;
        if (start_ >= have_ || buf_[start_] != '[') return bad();
        started_ = true;
      }
      std::size_t cut = 0;
      if (eof_) {
        std::size_t e = have_;
        while (e > start_ && std::isspace(static_cast<unsigned char>(buf_[e - 1]))) --e;
        if (e <= start_ || buf_[e - 1] != ']') return bad();
        cut = e - 1;
        done_ = true;
      } else {
        for (std::size_t p = have_; p-- > start_ + 1;) {
          if (buf_[p] != '{') continue;
          std::size_t q = p;
          while (q > start_ && std::isspace(static_cast<unsigned char>(buf_[q - 1]))) --q;
          if (q <= start_ || buf_[q - 1] != ',') continue;
          const std::size_t c = q - 1;
          std::size_t r = c;
          while (r > start_ && std::isspace(static_cast<unsigned char>(buf_[r - 1]))) --r;
          if (r <= start_ || buf_[r - 1] != '}') continue;
          cut = c;
          break;
        }
        if (cut == 0) {  // one element longer than the block: grow it
          block_ *= 2;
          buf_.resize(block_ + simdjson::SIMDJSON_PADDING);
          continue;
        }
      }
      cut_ = cut;
      saved_start_ = buf_[start_];
      saved_cut_ = buf_[cut_];
      buf_[start_] = '[';
      buf_[cut_] = ']';
      data = buf_.data() + start_;
      len = cut_ + 1 - start_;
      return true;
    }
  }

  bool bad_split() const { return bad_; }

 private:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  bool bad() {
    bad_ = true;
    done_ = true;
    return false;
  }

  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
  std::size_t block_;
  std::vector<char> buf_;
  std::size_t have_ = 0, start_ = 0, cut_ = npos;
  char saved_start_ = 0, saved_cut_ = 0;
  bool eof_ = false, started_ = false, done_ = false, bad_ = false;
};

/// Calls f(object, index) for each element of the top-level JSON array in `path`, parsing chunks
/// of whole elements (ChunkSource). With threads > 1 a second thread parses the next chunk while
/// f walks the current one; f always runs on the calling thread, in file order. Returns false when
/// the file does not split cleanly (f may have run for some elements: the caller starts over and
/// parses the file whole).
template <class Source, class F>
bool for_each_chunked_element(Source& source, int threads, F&& f, std::size_t& count) {
  count = 0;
  const auto walk = [&](const dom::element& doc) {
    dom::array arr;
    if (doc.get_array().get(arr) != simdjson::SUCCESS) return false;
    for (dom::element e : arr) {
      dom::object o;
      if (e.get_object().get(o) != simdjson::SUCCESS) return false;
      f(o, count++);
    }
    return true;
  };
  const char* data = nullptr;
  std::size_t len = 0;
  if (threads <= 1) {
    dom::parser parser;
    while (source.next(data, len)) {
      dom::element doc;
      if (parser.parse(data, len, false).get(doc) != simdjson::SUCCESS) return false;
      if (!walk(doc)) return false;
    }
    return !source.bad_split();
  }
  // Two slots: a chunk's own padded copy, its parser and document.
  struct Slot {
    std::vector<char> bytes;
    std::size_t len = 0;
    dom::parser parser;
    dom::element doc;
    bool ok = false;
  };
  Slot slots[2];
  const auto fill = [&](Slot& s) {
    if (!source.next(data, len)) return false;
    s.bytes.resize(len + simdjson::SIMDJSON_PADDING);
    std::memcpy(s.bytes.data(), data, len);
    s.len = len;
    return true;
  };
  const auto parse = [](Slot& s) {
    s.ok = s.parser.parse(s.bytes.data(), s.len, false).get(s.doc) == simdjson::SUCCESS;
  };
  bool have = fill(slots[0]);
  if (have) parse(slots[0]);
  for (std::size_t k = 0; have; ++k) {
    Slot& cur = slots[k % 2];
    Slot& nxt = slots[(k + 1) % 2];
    const bool more = fill(nxt);
    std::thread worker;
    if (more) worker = std::thread([&] { parse(nxt); });
    const bool ok = cur.ok && walk(cur.doc);
    if (worker.joinable()) worker.join();
    if (!ok) return false;
    have = more;
  }
  return !source.bad_split();
}

template <class F>
bool for_each_element_chunked(const std::string& path, std::size_t block, int threads, F&& f,
                              std::size_t& count) {
  ChunkSource source(path, block);
  return for_each_chunked_element(source, threads, std::forward<F>(f), count);
}

/// An annotations file ({"images": [...], "annotations": [...], ...}) read in blocks: next()
/// gives the elements of the top-level "annotations" array in chunks of whole elements, each
/// presented as a JSON array of its own ("[e1, e2, ...]", written over the separators around it,
/// SIMDJSON_PADDING readable bytes after it), as ChunkSource does; the other top-level members
/// are kept as JSON text, rest() ("{"images": [...], ...}" without "annotations"), once next()
/// has returned false. The file is scanned exactly (strings, escapes, nesting), so memory is a
/// block and the other members, not the file and its parsed document. Anything the scan does not
/// expect (not an object, a truncated file, an annotation that is not an object, "annotations"
/// twice) sets bad_split(): the caller then parses the file whole, which names the problem.
class AnnotationChunks {
 public:
  /// blank_segmentation: each element's "segmentation" value is overwritten with 0 and spaces
  /// before the chunk is parsed (when masks are not read, parsing the polygons' numbers would be
  /// most of the parse).
  AnnotationChunks(const std::string& path, std::size_t block, bool blank_segmentation = false)
      : file_((require_regular_file(path, "annotations"), std::fopen(path.c_str(), "rb")),
              &std::fclose),
        block_(block),
        blank_(blank_segmentation) {
    if (!file_) fail("annotations '" + path + "': cannot open");
    buf_.resize(2 * block_ + simdjson::SIMDJSON_PADDING);
  }

  /// The next chunk; false at the end of the file or when it is not what it should be.
  bool next(const char*& data, std::size_t& len) {
    if (close_ != npos) {  // undo the previous chunk's brackets; its closing separator opens
      buf_[at_[kSep]] = saved_open_;  // the next chunk
      buf_[close_] = saved_close_;
      at_[kSep] = close_;
      close_ = npos;
    }
    while (!done_) {
      const int r = in_array_ ? scan_array() : (scan_member() ? 0 : -1);
      if (r < 0) return bad();
      if (r > 0) {
        data = buf_.data() + at_[kSep];
        len = close_ + 1 - at_[kSep];
        return true;
      }
    }
    return false;
  }

  bool bad_split() const { return bad_; }
  /// The elements of the chunk next() gave last.
  std::size_t chunk_elements() const { return chunk_elements_; }
  /// The other members of the top-level object as a JSON object.
  const std::string& rest() const { return rest_; }

 private:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  // Positions into buf_ that a refill moves with the bytes: the first byte to keep, the current
  // chunk's opening separator, the end of its last element, a member's key and value.
  enum { kKeep, kSep, kLastEnd, kKey, kValue, kMarks };

  bool bad() {
    bad_ = true;
    done_ = true;
    return false;
  }

  /// Makes byte p available, moving the bytes from at_[kKeep] on to the front and reading more;
  /// false at the end of the file.
  bool have(std::size_t& p) {
    if (p < end_) return true;
    if (eof_) return false;
    const std::size_t keep = std::min(at_[kKeep], p);
    if (keep > 0) {
      std::memmove(buf_.data(), buf_.data() + keep, end_ - keep);
      end_ -= keep;
      p -= keep;
      for (std::size_t& q : at_)
        if (q != npos) q -= keep;
    }
    if (buf_.size() - simdjson::SIMDJSON_PADDING - end_ < block_)
      buf_.resize(end_ + block_ + simdjson::SIMDJSON_PADDING);
    const std::size_t want = buf_.size() - simdjson::SIMDJSON_PADDING - end_;
    const std::size_t got = std::fread(buf_.data() + end_, 1, want, file_.get());
    end_ += got;
    if (got < want) eof_ = true;
    return p < end_;
  }

  bool skip_ws(std::size_t& p) {
    while (have(p) && std::isspace(static_cast<unsigned char>(buf_[p]))) ++p;
    return have(p);
  }

  /// Moves p past one JSON value: a string, a scalar, or an object or array with all it holds.
  /// With `blank_segmentation` (an element: an object), its member "segmentation"'s value, an
  /// array or object, is overwritten with '0' and spaces as the scan passes it: the same length,
  /// so the chunk stays valid JSON with its positions (a key is recognised by the string just
  /// before, then only ':' and spaces up to the value).
  bool skip_value(std::size_t& p, bool blank_segmentation = false) {
    if (!have(p)) return false;
    const char c0 = buf_[p];
    if (c0 != '{' && c0 != '[' && c0 != '"') {  // a number, true, false or null
      if (c0 == ',' || c0 == '}' || c0 == ']' || c0 == ':') return false;
      while (have(p) && buf_[p] != ',' && buf_[p] != '}' && buf_[p] != ']' &&
             !std::isspace(static_cast<unsigned char>(buf_[p])))
        ++p;
      return true;
    }
    std::size_t depth = 0;
    bool in_str = false, esc = false;
    // Blanking: at_[kKey] the start of a member key's string, at_[kValue] the end of a
    // "segmentation" key (then of its value's start, with `blanking`).
    bool blanking = false;
    const bool blank = blank_segmentation && c0 == '{';
    while (have(p)) {
      char* b = buf_.data();
      for (const std::size_t e = end_; p < e; ++p) {
        if (!esc) p = next_special(b, p, e, in_str);
        if (p == e) break;
        const char c = b[p];
        if (in_str) {
          if (esc) {
            esc = false;
          } else if (c == '\\') {
            esc = true;
          } else if (c == '"') {
            in_str = false;
            if (depth == 0) {
              ++p;
              return true;
            }
            if (blank && depth == 1 && !blanking) {
              constexpr std::string_view kSeg = "\"segmentation\"";
              const bool seg = at_[kKey] != npos && p + 1 - at_[kKey] == kSeg.size() &&
                               std::memcmp(b + at_[kKey], kSeg.data(), kSeg.size()) == 0;
              at_[kValue] = seg ? p : npos;
            }
          }
        } else if (c == '"') {
          in_str = true;
          if (blank && depth == 1 && !blanking) {
            at_[kKey] = p;
            at_[kValue] = npos;  // a string after the key: not its container value
          }
        } else if (c == '{' || c == '[') {
          if (blank && depth == 1 && at_[kValue] != npos) {
            std::size_t colons = 0, q = at_[kValue] + 1;
            for (; q < p && (b[q] == ':' || std::isspace(static_cast<unsigned char>(b[q]))); ++q)
              colons += b[q] == ':';
            blanking = q == p && colons == 1;
            at_[kValue] = blanking ? p : npos;
          }
          ++depth;
        } else if (c == '}' || c == ']') {
          if (depth == 0) return false;
          if (--depth == 0) {
            ++p;
            if (blank) at_[kKey] = at_[kValue] = npos;
            return true;
          }
          if (blanking && depth == 1) {
            b[at_[kValue]] = '0';
            std::memset(b + at_[kValue] + 1, ' ', p - at_[kValue]);
            blanking = false;
            at_[kValue] = at_[kKey] = npos;
          }
        }
      }
    }
    if (blank) at_[kKey] = at_[kValue] = npos;
    return false;
  }

  /// The first byte from p on (e if none) that can change the scan's state: '"' or '\\' in a
  /// string, '"' and brackets outside. 16 bytes at a time where SSE2 is (every x86-64 CPU).
  static std::size_t next_special(const char* b, std::size_t p, std::size_t e, bool in_str) {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                  lbrace = _mm_set1_epi8('{'), rbrace = _mm_set1_epi8('}'),
                  lbrack = _mm_set1_epi8('['), rbrack = _mm_set1_epi8(']');
    for (; p + 16 <= e; p += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + p));
      __m128i m = _mm_cmpeq_epi8(v, quote);
      if (in_str) {
        m = _mm_or_si128(m, _mm_cmpeq_epi8(v, bslash));
      } else {
        m = _mm_or_si128(m, _mm_or_si128(_mm_cmpeq_epi8(v, lbrace), _mm_cmpeq_epi8(v, rbrace)));
        m = _mm_or_si128(m, _mm_or_si128(_mm_cmpeq_epi8(v, lbrack), _mm_cmpeq_epi8(v, rbrack)));
      }
      const auto bits = static_cast<unsigned>(_mm_movemask_epi8(m));
      if (bits != 0) return p + static_cast<std::size_t>(std::countr_zero(bits));
    }
#endif
    for (; p < e; ++p) {
      const char c = b[p];
      if (c == '"' || (in_str ? c == '\\' : (c == '{' || c == '}' || c == '[' || c == ']')))
        return p;
    }
    return e;
  }

  /// The top-level object's start, one member, or its end: "annotations" opens the array, the
  /// other members are copied to rest_.
  bool scan_member() {
    std::size_t p = pos_;
    at_[kKeep] = p;
    if (!started_) {
      if (!skip_ws(p) || buf_[p] != '{') return false;
      ++p;
      started_ = true;
      rest_ = "{";
    }
    if (!skip_ws(p)) return false;
    if (buf_[p] == '}') {
      if (after_comma_) return false;
      ++p;
      if (skip_ws(p)) return false;  // something after the object
      rest_ += '}';
      done_ = true;
      return true;
    }
    if (!first_member_) {
      if (buf_[p] != ',') return false;
      ++p;
      after_comma_ = true;
      if (!skip_ws(p)) return false;
    }
    if (buf_[p] != '"') return false;
    at_[kKeep] = at_[kKey] = p;
    if (!skip_value(p)) return false;
    const std::string key(buf_.data() + at_[kKey], p - at_[kKey]);
    if (!skip_ws(p) || buf_[p] != ':') return false;
    ++p;
    if (!skip_ws(p)) return false;
    first_member_ = after_comma_ = false;
    if (key == "\"annotations\"") {
      if (seen_annotations_ || buf_[p] != '[') return false;
      seen_annotations_ = in_array_ = true;
      at_[kKeep] = at_[kSep] = p;  // the '[' is the first chunk's opening bracket
      at_[kLastEnd] = npos;
      pos_ = p + 1;
      return true;
    }
    at_[kValue] = p;
    if (!skip_value(p)) return false;
    if (rest_.size() > 1) rest_ += ',';
    rest_ += key;
    rest_ += ':';
    rest_.append(buf_.data() + at_[kValue], p - at_[kValue]);
    pos_ = p;
    return true;
  }

  /// Scans the annotations array on from pos_: 1 when a chunk of whole elements is ready, 0 when
  /// the array has ended with no element pending, -1 when the file is not what it should be.
  int scan_array() {
    std::size_t p = pos_;
    at_[kKeep] = at_[kSep];
    while (true) {
      if (!skip_ws(p)) return -1;
      if (buf_[p] == ']') {  // the end of the array: the elements pending are the last chunk
        if (after_comma_) return -1;
        in_array_ = false;
        return at_[kLastEnd] == npos ? (pos_ = p + 1, 0) : emit(p);
      }
      if (at_[kLastEnd] != npos) {  // after an element: a separator
        if (buf_[p] != ',') return -1;
        if (at_[kLastEnd] - at_[kSep] >= block_) return emit(p);
        ++p;
        if (!skip_ws(p)) return -1;
      }
      after_comma_ = false;
      if (buf_[p] != '{') return -1;
      if (!skip_value(p, blank_)) return -1;
      at_[kLastEnd] = p;
      ++pending_;
    }
  }

  /// Brackets the pending elements: '[' over their opening separator, ']' over `close` (the
  /// separator or the array's ']' after them).
  int emit(std::size_t close) {
    saved_open_ = buf_[at_[kSep]];
    saved_close_ = buf_[close];
    buf_[at_[kSep]] = '[';
    buf_[close] = ']';
    close_ = close;
    chunk_elements_ = pending_;
    pending_ = 0;
    pos_ = close + 1;
    after_comma_ = in_array_;  // a ',' was the separator: an element must follow
    at_[kLastEnd] = npos;
    return 1;
  }

  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
  std::size_t block_;
  bool blank_ = false;
  std::vector<char> buf_;
  std::size_t end_ = 0, pos_ = 0, close_ = npos;
  std::size_t at_[kMarks] = {0, npos, npos, npos, npos};
  char saved_open_ = 0, saved_close_ = 0;
  std::size_t pending_ = 0, chunk_elements_ = 0;
  std::string rest_;
  bool eof_ = false, started_ = false, first_member_ = true, after_comma_ = false;
  bool in_array_ = false, seen_annotations_ = false, done_ = false, bad_ = false;
};

// Its batches are views of the arrays read at construction, which nothing writes afterwards
// (StableBatchReader: the engine may read the next batch while the current one is added).
class CocoJsonReader final : public tally::support::ShardedReader, public tally::StableBatchReader {
 public:
  CocoJsonReader(const tally::Params& params, const tally::ShardInfo& shard) {
    read_batch_size(params);
    const std::string ann_path = params.get_string("annotations");
    const std::string res_path = params.get_string("results");
    res_path_ = res_path;
    const std::string masks = params.get_string("masks");
    const std::string keypoints = params.get_string("keypoints");
    const std::int64_t block = params.get_int("block_bytes");
    if (block < 64) params.fail("block_bytes", "must be at least 64");
    // A block is one buffer of that many bytes: past 4 GiB it would only fail to allocate.
    if (block > (std::int64_t{1} << 32))
      params.fail("block_bytes", "must be at most 4294967296 (4 GiB: a block is one buffer), got " +
                                     std::to_string(block));
    const auto threads = static_cast<int>(params.get_int("threads"));
    if (threads < 1) params.fail("threads", "must be >= 1");
    tally::support::check_shard("coco_json", shard);
    data_ = std::make_shared<Data>();
    try {
      read_results(res_path, masks, keypoints, static_cast<std::size_t>(block), threads);
    } catch (const simdjson::simdjson_error& e) {
      fail("results '" + res_path +
           "': not valid JSON, or a value of an unexpected type (simdjson: " + e.what() + ")");
    }
    try {
      read_annotations(ann_path, static_cast<std::size_t>(block), threads);
    } catch (const simdjson::simdjson_error& e) {
      fail("annotations '" + ann_path +
           "': not valid JSON, or a value of an unexpected type (simdjson: " + e.what() + ")");
    }
    group(shard, res_path, threads);
  }

  std::vector<std::string> fields() const override {
    std::vector<std::string> f = {"img_id",           "height",      "width",      "gt_bboxes_xywh",
                                  "gt_labels",        "gt_ids",      "gt_areas",   "gt_iscrowd",
                                  "pred_bboxes_xywh", "pred_scores", "pred_labels"};
    if (with_masks_)
      for (const char* m :
           {"pred_areas", "pred_rle_counts", "pred_rle_lengths", "gt_rle_counts", "gt_rle_lengths"})
        f.emplace_back(m);
    if (with_keypoints_)
      for (const char* k : {"gt_keypoints", "gt_num_keypoints", "pred_keypoints"})
        f.emplace_back(k);
    if (lvis_lists_)
      for (const char* k : {"neg_category_ids", "not_exhaustive_category_ids"}) f.emplace_back(k);
    if (lvis_freq_) f.emplace_back("gt_frequency");
    return f;
  }

 protected:
  tally::Batch read_batch(std::int64_t begin, std::int64_t end) override {
    const auto shard_begin = static_cast<std::size_t>(shard_range().begin);
    const auto n = static_cast<std::size_t>(end - begin);
    std::vector<std::int64_t> ids(n), hs(n), ws(n);
    tally::Batch::Ragged gbox, glabel, gid, garea, gcrowd, pbox, pscore, plabel, parea, pcounts,
        plengths, gcounts, glengths, gkp, gnumkp, pkp, negs, nels, gfreq;
    const std::shared_ptr<const void> keep = data_;
    const Data& d = *data_;
    // The batch's result masks, decoded into a buffer the batch's views keep alive.
    std::shared_ptr<std::vector<std::uint32_t>> pbuf;
    std::vector<std::size_t> pbuf_at;  // per image of the batch, + end
    if (with_masks_) {
      // A buffer no earlier batch holds any more, else a new one (a batch and the one read
      // ahead hold two): its pages stay mapped from batch to batch.
      for (const auto& b : mask_buffers_)
        if (b.use_count() == 1) pbuf = b;
      if (!pbuf) {
        pbuf = std::make_shared<std::vector<std::uint32_t>>();
        if (mask_buffers_.size() < 4) mask_buffers_.push_back(pbuf);
      }
      decode_masks(static_cast<std::size_t>(begin), static_cast<std::size_t>(end), *pbuf, pbuf_at);
    }
    for (std::size_t k = 0; k < n; ++k) {
      const auto i = static_cast<std::size_t>(begin) + k;
      ids[k] = images_[i].id;
      hs[k] = images_[i].height;
      ws[k] = images_[i].width;
      const std::size_t g0 = d.gt_begin[i], g1 = d.gt_begin[i + 1];
      const std::size_t p0 = d.dt_first[i - shard_begin], p1 = p0 + d.dt_count[i - shard_begin];
      const auto ng = static_cast<std::int64_t>(g1 - g0), np = static_cast<std::int64_t>(p1 - p0);
      using tally::DType;
      using tally::Tensor;
      const auto view = [&](const auto* p, DType t, std::vector<std::int64_t> shape) {
        return Tensor::view(p, t, std::move(shape), tally::Device::cpu(), keep);
      };
      gbox.push_back(view(d.gt.box.data() + g0 * 4, DType::F64, {ng, 4}));
      glabel.push_back(view(d.gt.label.data() + g0, DType::I32, {ng}));
      gid.push_back(view(d.gt.id.data() + g0, DType::I64, {ng}));
      garea.push_back(view(d.gt.value.data() + g0, DType::F64, {ng}));
      gcrowd.push_back(view(d.gt.crowd.data() + g0, DType::U8, {ng}));
      pbox.push_back(view(d.dt.box.data() + p0 * 4, DType::F64, {np, 4}));
      pscore.push_back(view(d.dt.value.data() + p0, DType::F64, {np}));
      plabel.push_back(view(d.dt.label.data() + p0, DType::I32, {np}));
      if (with_masks_) {
        parea.push_back(view(d.dt.area.data() + p0, DType::F64, {np}));
        plengths.push_back(view(d.dt.lengths.data() + p0, DType::I32, {np}));
        glengths.push_back(view(d.gt.lengths.data() + g0, DType::I32, {ng}));
        const std::size_t pc0 = pbuf_at[k], pc1 = pbuf_at[k + 1];
        const std::size_t gc0 = d.gt_counts_begin[g0], gc1 = d.gt_counts_begin[g1];
        pcounts.push_back(Tensor::view(pbuf->data() + pc0, DType::U32,
                                       {static_cast<std::int64_t>(pc1 - pc0)}, tally::Device::cpu(),
                                       pbuf));
        gcounts.push_back(
            view(d.gt.counts.data() + gc0, DType::U32, {static_cast<std::int64_t>(gc1 - gc0)}));
      }
      if (with_keypoints_) {
        const auto len = static_cast<std::int64_t>(kp_len_);
        gkp.push_back(view(d.gt.kp.data() + g0 * kp_len_, DType::F64, {ng, len}));
        gnumkp.push_back(view(d.gt.num_kp.data() + g0, DType::I64, {ng}));
        pkp.push_back(view(d.dt.kp.data() + p0 * kp_len_, DType::F64, {np, len}));
      }
      if (lvis_lists_) {
        const ImageInfo& im = images_[i];
        negs.push_back(view(d.neg.data() + im.neg_at, DType::I32, {std::int64_t{im.neg_n}}));
        nels.push_back(view(d.nel.data() + im.nel_at, DType::I32, {std::int64_t{im.nel_n}}));
      }
      if (lvis_freq_) gfreq.push_back(view(d.gt.freq.data() + g0, DType::I8, {ng}));
    }
    tally::Batch b;
    b.set("img_id", tally::Tensor::from_vector(ids));
    b.set("height", tally::Tensor::from_vector(hs));
    b.set("width", tally::Tensor::from_vector(ws));
    b.set_ragged("gt_bboxes_xywh", std::move(gbox));
    b.set_ragged("gt_labels", std::move(glabel));
    b.set_ragged("gt_ids", std::move(gid));
    b.set_ragged("gt_areas", std::move(garea));
    b.set_ragged("gt_iscrowd", std::move(gcrowd));
    b.set_ragged("pred_bboxes_xywh", std::move(pbox));
    b.set_ragged("pred_scores", std::move(pscore));
    b.set_ragged("pred_labels", std::move(plabel));
    if (with_masks_) {
      b.set_ragged("pred_areas", std::move(parea));
      b.set_ragged("pred_rle_counts", std::move(pcounts));
      b.set_ragged("pred_rle_lengths", std::move(plengths));
      b.set_ragged("gt_rle_counts", std::move(gcounts));
      b.set_ragged("gt_rle_lengths", std::move(glengths));
    }
    if (with_keypoints_) {
      b.set_ragged("gt_keypoints", std::move(gkp));
      b.set_ragged("gt_num_keypoints", std::move(gnumkp));
      b.set_ragged("pred_keypoints", std::move(pkp));
    }
    if (lvis_lists_) {
      b.set_ragged("neg_category_ids", std::move(negs));
      b.set_ragged("not_exhaustive_category_ids", std::move(nels));
    }
    if (lvis_freq_) b.set_ragged("gt_frequency", std::move(gfreq));
    return b;
  }

 private:
  struct Data {
    Instances gt, dt;
    std::vector<std::size_t> gt_begin;            // per image, + end
    std::vector<std::size_t> dt_first, dt_count;  // per image of the shard
    std::vector<std::size_t> gt_counts_begin;     // per instance, + end
    std::vector<std::size_t> dt_str_begin;        // per result: its RLE string in rle_str, + end
    std::vector<std::int32_t> neg, nel;           // LVIS: the images' category lists (ImageInfo)
  };

  void read_results(const std::string& path, const std::string& masks, const std::string& keypoints,
                    std::size_t block, int threads) {
    Instances& dt = data_->dt;
    // loadRes' branch, from the first entry: bbox, else segmentation, else keypoints (kp_mode).
    bool first = true, bbox_mode = false, kp_mode = false;
    std::vector<double> kp;  // one result's keypoints
    // Result segmentations carry their own size, so they are decoded here (h, w unknown for
    // polygons: those are rasterised in group() once the image sizes are known).
    const auto on_element = [&](dom::object o, std::size_t idx) {
      std::int64_t image = 0, cat = 0;
      double score = std::nan(""), box[4] = {0, 0, 0, 0};
      bool has_image = false, has_cat = false, has_score = false, has_box = false, has_seg = false,
           seg_key = false, has_kp = false;
      RleRef rle;
      std::vector<std::vector<double>> polys;
      // Built only for a message.
      const auto where = [&] {
        std::string w = "results '" + path + "': [" + std::to_string(idx) + "]";
        dom::element id;
        std::int64_t v = 0;
        if (!o.at_key("image_id").get(id) && !id.get_int64().get(v))
          w += " (image_id " + std::to_string(v) + ")";
        return w;
      };
      for (const auto f : o) {
        const std::string_view key = f.key;
        if (key == "segmentation") seg_key = true;  // loadRes' branch, whether read or not
        if (key == "image_id") {
          naming_the_key(where, key, f.value, [&] { image = get_id(f.value); });
          has_image = true;
        } else if (key == "category_id") {
          naming_the_key(where, key, f.value, [&] { cat = get_id(f.value); });
          has_cat = true;
        } else if (key == "keypoints" && (first || with_keypoints_ || kp_mode)) {
          kp.clear();
          get_keypoints(f.value, kp, where);
          has_kp = true;
        } else if (key == "score") {
          naming_the_key(where, key, f.value, [&] { score = f.value.get_double(); });
          has_score = true;
        } else if (key == "bbox") {
          has_box = get_box(f.value, box, where);
        } else if (key == "segmentation" &&
                   (masks == "true" || (masks == "auto" && (first || with_masks_)))) {
          if (f.value.is_array())
            polys = get_polygons(f.value, where);  // rasterised in group(): needs h, w
          else
            rle = get_segmentation_ref(f.value, where);  // decoded in group()
          has_seg = true;
        }
      }
      if (!has_image) fail(where() + ": no 'image_id'");
      if (!has_cat) fail(where() + ": no 'category_id'");
      if (!has_score) fail(where() + ": no 'score'");
      if (std::isnan(score)) fail(where() + ": key 'score' is NaN");
      if (first) {
        bbox_mode = has_box;  // loadRes decides on the first entry
        kp_mode = !has_box && !seg_key && has_kp;
        first = false;
        if (masks == "auto") with_masks_ = has_seg;
        if (keypoints == "auto") with_keypoints_ = has_kp;
      }
      if (bbox_mode && !has_box) fail(where() + ": no 'bbox' (the first entry has one)");
      if (!bbox_mode && !kp_mode && !has_seg && !has_box)
        fail(where() + ": neither 'bbox' nor 'segmentation'");
      if (with_masks_ && !has_seg && !has_box) fail(where() + ": no 'segmentation'");
      if ((kp_mode || with_keypoints_) && !has_kp)
        fail(where() + ": no 'keypoints' (" +
             (kp_mode ? "the first entry has them, and neither 'bbox' nor 'segmentation'"
              : keypoints == "true" ? "keypoints: true"
                                    : "the first entry has them") +
             ")");
      if (has_kp && with_keypoints_) {
        if (kp_len_ == 0) {
          kp_len_ = kp.size();
          kp_len_from_ = where();
        } else if (kp.size() != kp_len_) {
          fail(where() + ": key 'keypoints': " + std::to_string(kp.size()) + " values (" +
               std::to_string(kp.size() / 3) + " keypoints), " + kp_len_from_ + " holds " +
               std::to_string(kp_len_) + " (" + std::to_string(kp_len_ / 3) + " keypoints)");
        }
        dt.kp.insert(dt.kp.end(), kp.begin(), kp.end());
      }
      if (kp_mode) {
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
        box[0] = x0;
        box[1] = y0;
        box[2] = x1 - x0;
        box[3] = y1 - y0;
      }
      if (!polys.empty() && !bbox_mode)
        fail(where() +
             ": key 'segmentation': polygons in a result need a 'bbox' in the results' entries "
             "(pycocotools' loadRes takes the area of a result without one from an RLE); give "
             "RLE {size, counts} or bboxes");
      dt.image.push_back(image);
      dt.label.push_back(check_cat(cat, where));
      dt.value.push_back(score);
      if (with_masks_) {
        // An RLE is kept as its compressed string (a list of counts is compressed) and decoded
        // once, in group(), straight into the image-ordered counts: decoded here, the counts
        // (4 bytes each against about 1 character) would be copied again as they grow. Its area
        // (loadRes: maskUtils.area) and, without a bbox, its box (toBbox) are taken there.
        std::uint8_t geom = 0;
        if (!polys.empty()) {
          // annToRLE: frPyObjects(polygons, h, w), merged; rasterised in group(). The length
          // -2 - slot names the polygons' slot.
          if (dt_polys_.size() >= static_cast<std::size_t>(INT32_MAX) - 2)
            fail(where() + ": too many polygon results");
          dt.lengths.push_back(-2 - static_cast<std::int32_t>(dt_polys_.size()));
          dt_polys_.push_back(std::move(polys));
        } else if (has_seg) {
          std::string listed;
          std::string_view str = rle.str;
          if (rle.is_list) {
            mask::Rle r;
            r.h = rle.h;
            r.w = rle.w;
            r.cnts = std::move(rle.list);
            listed = mask::rle_to_string(r);
            str = listed;
          }
          if (str.size() >= static_cast<std::size_t>(INT32_MAX))
            fail(where() + ": key 'segmentation.counts': too long");
          dt.lengths.push_back(static_cast<std::int32_t>(str.size()));
          dt.rle_str.append(str);
          geom = static_cast<std::uint8_t>((bbox_mode ? 0 : 1) | (has_box ? 0 : 2));
        } else {
          // loadRes: the box's polygon [x1, y1, x1, y2, x2, y2, x2, y1]; rasterised in group().
          dt.lengths.push_back(-1);
        }
        dt.mask_hw.push_back(rle.h);
        dt.mask_hw.push_back(rle.w);
        dt.area.push_back(bbox_mode ? box[2] * box[3] : 0.0);
        dt.geom.push_back(geom);
      }
      dt.box.insert(dt.box.end(), box, box + 4);
    };
    with_masks_ = masks == "true";
    with_keypoints_ = keypoints == "true";
    {
      // Room for the results up front (a box-only result takes 60 to 90 bytes of JSON): the
      // arrays grow once instead of copying themselves while they double.
      std::error_code ec;
      const auto bytes = std::filesystem::file_size(path, ec);
      const std::size_t guess = ec ? 0 : static_cast<std::size_t>(bytes / 64);
      dt.image.reserve(guess);
      dt.label.reserve(guess);
      dt.value.reserve(guess);
      dt.box.reserve(guess * 4);
    }
    std::size_t count = 0;
    if (!for_each_element_chunked(path, block, threads, on_element, count)) {
      dt = Instances{};
      dt_polys_.clear();
      first = true;
      kp_mode = false;
      with_masks_ = masks == "true";
      with_keypoints_ = keypoints == "true";
      kp_len_ = 0;
      kp_len_from_.clear();
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
  }

  template <class Where>
  std::int32_t check_cat(std::int64_t cat, const Where& where) const {
    if (cat < 0 || cat > INT32_MAX)
      fail(where() + ": category_id " + std::to_string(cat) + " is outside [0, 2^31)");
    return static_cast<std::int32_t>(cat);
  }

  /// A ground truth's segmentation as read: polygons (rasterised in group(), once the image's
  /// size is known) or an RLE.
  struct GtSeg {
    enum Kind { None, Polygons, Rle } kind = None;
    std::vector<std::vector<double>> polys;
    mask::Rle rle;
  };

  /// The annotations file: its "annotations" list in chunks (AnnotationChunks, a block of the
  /// file at a time; with threads > 1 the next chunk is parsed while the current one is read),
  /// then the rest (images, categories) as one small document. A file the chunks cannot follow
  /// is parsed whole, as before, which names what is wrong with it.
  void read_annotations(const std::string& path, std::size_t block, int threads) {
    const std::size_t kp_len = kp_len_;
    const std::string kp_from = kp_len_from_;
    gt_segs_.clear();
    {
      AnnotationChunks chunks(path, block, !with_masks_);
      std::size_t count = 0;
      // Chunks read side by side (each parsed and walked by its own thread into its own arrays,
      // appended in file order) once the keypoints' length is settled; else one at a time (the
      // next parsed while the current one is walked).
      const bool ok =
          threads > 1 && !(with_keypoints_ && kp_len_ == 0)
              ? annotations_side_by_side(chunks, threads, path)
              : for_each_chunked_element(
                    chunks, threads,
                    [&](dom::object o, std::size_t at) { add_annotation(o, at, path); }, count);
      dom::parser parser;
      dom::element doc;
      if (ok && parser.parse(chunks.rest()).get(doc) == simdjson::SUCCESS) {
        read_top(doc, path);
        return;
      }
    }
    data_->gt = Instances{};
    gt_segs_.clear();
    kp_len_ = kp_len;
    kp_len_from_ = kp_from;
    const simdjson::padded_string json = load_file(path, "annotations");
    dom::parser parser;
    read_top(parser.parse(json), path);
  }

  /// Chunks read side by side: this thread cuts them (AnnotationChunks) and hands each to a
  /// thread of its own that parses and walks it into its own arrays, up to `threads` at once;
  /// they are appended in file order as they finish, and the first error in file order is the one
  /// thrown. False when the file does not split.
  bool annotations_side_by_side(AnnotationChunks& chunks, int threads, const std::string& path) {
    struct Part {
      std::vector<char> bytes;
      std::size_t len = 0, first = 0;
      std::unique_ptr<dom::parser> parser;
      Instances gt;
      std::vector<GtSeg> segs;
      std::exception_ptr error;
      bool ok = true;
      std::thread worker;
    };
    std::vector<std::unique_ptr<dom::parser>> idle;  // parsers keep their memory chunk to chunk
    std::deque<std::unique_ptr<Part>> running;
    bool ok = true;
    std::exception_ptr error;
    const auto work = [&](Part& part) {
      try {
        dom::element doc;
        dom::array arr;
        part.ok =
            part.parser->parse(part.bytes.data(), part.len, false).get(doc) == simdjson::SUCCESS &&
            doc.get_array().get(arr) == simdjson::SUCCESS;
        std::size_t at = part.first;
        for (dom::element e : arr) {
          if (!part.ok) break;
          dom::object o;
          if (e.get_object().get(o) != simdjson::SUCCESS) {
            part.ok = false;
            break;
          }
          add_annotation(o, at++, path, part.gt, part.segs);
        }
      } catch (...) {
        part.error = std::current_exception();
      }
    };
    const auto finish_first = [&] {
      Part& part = *running.front();
      part.worker.join();
      if (ok && !error) {  // after the first failure, the later chunks are only waited for
        if (part.error) {
          error = part.error;
        } else if (!part.ok) {
          ok = false;
        } else {
          append(data_->gt, part.gt);
          for (auto& seg : part.segs) gt_segs_.push_back(std::move(seg));
        }
      }
      idle.push_back(std::move(part.parser));
      running.pop_front();
    };
    std::size_t count = 0;
    const char* data = nullptr;
    std::size_t len = 0;
    while (ok && !error) {
      if (running.size() >= static_cast<std::size_t>(threads)) finish_first();
      if (!ok || error || !chunks.next(data, len)) break;
      auto part = std::make_unique<Part>();
      part->bytes.resize(len + simdjson::SIMDJSON_PADDING);
      std::memcpy(part->bytes.data(), data, len);
      part->len = len;
      part->first = count;
      count += chunks.chunk_elements();
      if (idle.empty()) idle.push_back(std::make_unique<dom::parser>());
      part->parser = std::move(idle.back());
      idle.pop_back();
      Part& ref = *part;
      running.push_back(std::move(part));
      ref.worker = std::thread(work, std::ref(ref));
    }
    while (!running.empty()) finish_first();
    if (error) std::rethrow_exception(error);
    return ok && !chunks.bad_split();
  }

  /// Appends a chunk's ground truth (its keypoint offsets moved past the keypoints before it).
  static void append(Instances& to, const Instances& from) {
    const auto kp_base = static_cast<std::int64_t>(to.kp.size());
    const auto cat = [](auto& a, const auto& b) { a.insert(a.end(), b.begin(), b.end()); };
    cat(to.image, from.image);
    cat(to.label, from.label);
    cat(to.box, from.box);
    cat(to.value, from.value);
    cat(to.area, from.area);
    cat(to.id, from.id);
    cat(to.crowd, from.crowd);
    cat(to.kp, from.kp);
    cat(to.num_kp, from.num_kp);
    for (const std::int64_t at : from.kp_at) to.kp_at.push_back(at < 0 ? at : at + kp_base);
  }

  /// The annotations file's top-level object (parsed whole, or without its "annotations" list
  /// when that was read in chunks).
  void read_top(const dom::element& doc, const std::string& path) {
    bool have_images = false;
    dom::object top;
    if (doc.get_object().get(top))
      fail("annotations '" + path +
           "': expected an object {images, annotations, categories}, found " + found(doc));
    for (const auto field : top) {
      const std::string_view key = field.key;
      const auto list = [&](dom::element v) {
        dom::array a;
        if (v.get_array().get(a))
          fail("annotations '" + path + "': key '" + std::string(key) +
               "': expected a list, found " + found(v));
        return a;
      };
      // "annotations 'FILE': images[3] (id 17)": the entry and, when it has one, its id.
      const auto entry_where = [&](dom::element e, std::size_t at) {
        std::string w =
            "annotations '" + path + "': " + std::string(key) + "[" + std::to_string(at) + "]";
        dom::object o;
        dom::element id;
        std::int64_t v = 0;
        if (!e.get_object().get(o) && !o.at_key("id").get(id) && !id.get_int64().get(v))
          w += " (id " + std::to_string(v) + ")";
        return w;
      };
      const auto object = [&](dom::element e, std::size_t at) {
        dom::object o;
        if (e.get_object().get(o))
          fail(entry_where(e, at) + ": expected an object, found " + found(e));
        return o;
      };
      if (key == "images") {
        have_images = true;
        std::size_t at = 0;
        for (dom::element e : list(field.value)) {
          const auto where = [&, e, at] { return entry_where(e, at); };
          ImageInfo im{0, 0, 0};
          bool has_id = false;
          for (const auto f : object(e, at)) {
            const std::string_view k = f.key;
            if (k == "id") {
              naming_the_key(where, k, f.value, [&] { im.id = get_id(f.value); });
              has_id = true;
            } else if (k == "height" || k == "width") {
              std::int64_t v = 0;
              naming_the_key(where, k, f.value, [&] { v = f.value.get_int64(); });
              if (v < 0 || v >= mask::kMaxSide)
                fail(where() + ": key '" + std::string(k) + "': " + std::to_string(v) +
                     " is out of range (an image side is in [0, 2^31))");
              (k == "height" ? im.height : im.width) = v;
            } else if (k == "neg_category_ids" || k == "not_exhaustive_category_ids") {
              // LVIS (lvis 0.5.3's LVISEval._prepare reads both for every image).
              std::vector<std::int32_t>& flat = k == "neg_category_ids" ? data_->neg : data_->nel;
              const std::size_t at0 = flat.size();
              dom::array a;
              if (f.value.get_array().get(a))
                fail(where() + ": key '" + std::string(k) +
                     "': expected a list of category ids, found " + found(f.value));
              for (dom::element c : a) {
                std::int64_t v = 0;
                naming_the_key(where, k, c, [&] { v = get_id(c); });
                flat.push_back(check_cat(v, where));
              }
              if (flat.size() > UINT32_MAX)
                fail(where() + ": key '" + std::string(k) + "': too many category ids in all");
              const auto at32 = static_cast<std::uint32_t>(at0),
                         n32 = static_cast<std::uint32_t>(flat.size() - at0);
              if (k == "neg_category_ids") {
                im.neg_at = at32;
                im.neg_n = n32;
              } else {
                im.nel_at = at32;
                im.nel_n = n32;
              }
              lvis_lists_ = true;
            }
          }
          if (!has_id) fail(where() + ": no 'id'");
          images_.push_back(im);
          ++at;
        }
      } else if (key == "categories") {
        std::size_t at = 0;
        for (dom::element e : list(field.value)) {
          const auto where = [&, e, at] { return entry_where(e, at); };
          std::int64_t id = 0;
          bool has_id = false;
          int freq = -1;
          for (const auto f : object(e, at)) {
            if (f.key == "id") {
              naming_the_key(where, f.key, f.value, [&] { id = get_id(f.value); });
              has_id = true;
            } else if (f.key == "frequency") {
              // LVIS: "r" (rare), "c" (common), "f" (frequent).
              std::string_view v;
              if (f.value.get_string().get(v) || (v != "r" && v != "c" && v != "f"))
                fail(where() + ": key 'frequency': expected \"r\", \"c\" or \"f\", found " +
                     found(f.value));
              freq = v == "r" ? 0 : v == "c" ? 1 : 2;
            }
          }
          if (has_id) {
            cats_.push_back(id);
            if (freq >= 0) {
              cat_freq_.emplace(id, static_cast<std::int8_t>(freq));
              lvis_freq_ = true;
            }
          }
          ++at;
        }
      } else if (key == "annotations") {
        std::size_t at = 0;
        for (dom::element e : list(field.value)) {
          add_annotation(object(e, at), at, path);
          ++at;
        }
      }
    }
    if (!have_images) fail("annotations '" + path + "': no 'images' list");
  }

  /// One element of the annotations' "annotations" list (its index `at`): appended to the
  /// ground truth, every key checked.
  void add_annotation(dom::object obj, std::size_t at, const std::string& path) {
    add_annotation(obj, at, path, data_->gt, gt_segs_);
  }

  /// The same into `gt` and `segs` (a chunk's own, read on another thread: only when kp_len_ is
  /// settled, so nothing of the reader is written).
  void add_annotation(dom::object obj, std::size_t at, const std::string& path, Instances& gt,
                      std::vector<GtSeg>& segs) {
    // "annotations 'FILE': annotations[3] (id 17)": the entry and, when it has one, its id.
    const auto where = [&, obj, at] {
      std::string w = "annotations '" + path + "': annotations[" + std::to_string(at) + "]";
      dom::element id;
      std::int64_t v = 0;
      if (!obj.at_key("id").get(id) && !id.get_int64().get(v))
        w += " (id " + std::to_string(v) + ")";
      return w;
    };
    std::int64_t image = 0, cat = 0, id = 0, crowd = 0, num_kp = 0, kp_at = -1;
    double area = 0, box[4] = {0, 0, 0, 0};
    bool has_image = false, has_cat = false, has_area = false, has_box = false, has_id = false,
         has_num_kp = false;
    GtSeg seg;
    for (const auto f : obj) {
      const std::string_view k = f.key;
      if (k == "image_id") {
        naming_the_key(where, k, f.value, [&] { image = get_id(f.value); });
        has_image = true;
      } else if (k == "category_id") {
        naming_the_key(where, k, f.value, [&] { cat = get_id(f.value); });
        has_cat = true;
      } else if (k == "id") {
        naming_the_key(where, k, f.value, [&] { id = get_id(f.value); });
        has_id = true;
      } else if (k == "area") {
        naming_the_key(where, k, f.value, [&] { area = f.value.get_double(); });
        has_area = true;
      } else if (k == "iscrowd") {
        const dom::element v = f.value;
        naming_the_key(where, k, v, [&] {
          if (v.is_bool())
            crowd = bool(v.get_bool());
          else
            crowd = get_id(v);
        });
      } else if (k == "bbox") {
        has_box = get_box(f.value, box, where);
        if (!has_box) fail(where() + ": key 'bbox': expected [x, y, w, h] (4 numbers), found []");
      } else if (k == "segmentation" && with_masks_) {
        seg = read_gt_seg(f.value, where);
      } else if (k == "keypoints" && with_keypoints_) {
        const std::size_t at_kp = gt.kp.size();
        const std::size_t n = get_keypoints(f.value, gt.kp, where);
        if (kp_len_ == 0) {
          kp_len_ = n;
          kp_len_from_ = where();
        } else if (n != kp_len_) {
          fail(where() + ": key 'keypoints': " + std::to_string(n) + " values (" +
               std::to_string(n / 3) + " keypoints), " + kp_len_from_ + " holds " +
               std::to_string(kp_len_) + " (" + std::to_string(kp_len_ / 3) + " keypoints)");
        }
        kp_at = static_cast<std::int64_t>(at_kp);
      } else if (k == "num_keypoints" && with_keypoints_) {
        naming_the_key(where, k, f.value, [&] { num_kp = get_id(f.value); });
        if (num_kp < 0)
          fail(where() + ": key 'num_keypoints': " + std::to_string(num_kp) + " is negative");
        has_num_kp = true;
      }
    }
    if (!has_image) fail(where() + ": no 'image_id'");
    if (!has_cat) fail(where() + ": no 'category_id'");
    if (!has_id) fail(where() + ": no 'id'");
    if (!has_area) fail(where() + ": no 'area'");
    if (!has_box) fail(where() + ": no 'bbox'");
    if (with_masks_ && seg.kind == GtSeg::None) fail(where() + ": no 'segmentation'");
    if (std::isnan(area)) fail(where() + ": key 'area' is NaN");
    gt.image.push_back(image);
    gt.label.push_back(check_cat(cat, where));
    gt.id.push_back(id);
    gt.value.push_back(area);
    gt.crowd.push_back(crowd != 0);
    gt.box.insert(gt.box.end(), box, box + 4);
    if (with_masks_) segs.push_back(std::move(seg));
    if (with_keypoints_) {
      // COCO's num_keypoints, by default the labelled keypoints (v > 0); none without
      // keypoints (the annotation gets zeros in group(), ignored by keypoint evaluation).
      if (kp_at < 0) {
        num_kp = 0;
      } else if (!has_num_kp) {
        num_kp = 0;
        for (std::size_t q = 2; q < kp_len_; q += 3)
          num_kp += gt.kp[static_cast<std::size_t>(kp_at) + q] > 0;
      }
      gt.kp_at.push_back(kp_at);
      gt.num_kp.push_back(num_kp);
    }
  }

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

  template <class Where>
  static mask::Rle polys_to_rle(const std::vector<std::vector<double>>& polys, std::uint32_t h,
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

  void group(const tally::ShardInfo& shard, const std::string& res_path, int threads) {
    std::sort(images_.begin(), images_.end(),
              [](const ImageInfo& a, const ImageInfo& b) { return a.id < b.id; });
    for (std::size_t i = 1; i < images_.size(); ++i)
      if (images_[i].id == images_[i - 1].id)
        fail("annotations: image id " + std::to_string(images_[i].id) + " is listed twice");
    std::unordered_map<std::int64_t, std::size_t> index;
    index.reserve(images_.size() * 2);
    for (std::size_t i = 0; i < images_.size(); ++i) index.emplace(images_[i].id, i);
    std::sort(cats_.begin(), cats_.end());
    const auto known_cat = [&](std::int32_t c) {
      return std::binary_search(cats_.begin(), cats_.end(), static_cast<std::int64_t>(c));
    };
    set_samples(static_cast<std::int64_t>(images_.size()), shard);
    const auto lo = static_cast<std::size_t>(shard_range().begin),
               hi = static_cast<std::size_t>(shard_range().end);

    // Ground truth: every image (it is small); grouped by image, file order kept.
    Data& d = *data_;
    const auto group_gt = [&] {
      Instances& gt = d.gt;
      std::vector<std::size_t> keep;
      for (std::size_t j = 0; j < gt.size(); ++j) {
        const auto it = index.find(gt.image[j]);
        if (it == index.end())
          fail("annotations: annotation id " + std::to_string(gt.id[j]) + " refers to image " +
               std::to_string(gt.image[j]) + ", which is not in 'images'");
        gt.image[j] = static_cast<std::int64_t>(it->second);
        if (known_cat(gt.label[j])) keep.push_back(j);
      }
      std::stable_sort(keep.begin(), keep.end(),
                       [&](std::size_t a, std::size_t b) { return gt.image[a] < gt.image[b]; });
      Instances out;
      // Each array at its size at once: grown by doubling, the keypoints (51 doubles a person)
      // would hold the copy, the array it grows from and the parsed one at once.
      const std::size_t n = keep.size();
      out.label.reserve(n);
      out.id.reserve(n);
      out.value.reserve(n);
      out.crowd.reserve(n);
      out.box.reserve(n * 4);
      if (lvis_freq_) out.freq.reserve(n);
      if (with_keypoints_) {
        out.kp.reserve(n * kp_len_);
        out.num_kp.reserve(n);
      }
      d.gt_begin.assign(images_.size() + 1, 0);
      d.gt_counts_begin.assign(1, 0);
      for (const std::size_t j : keep) {
        const auto im = static_cast<std::size_t>(gt.image[j]);
        ++d.gt_begin[im + 1];
        out.label.push_back(gt.label[j]);
        out.id.push_back(gt.id[j]);
        out.value.push_back(gt.value[j]);
        out.crowd.push_back(gt.crowd[j]);
        if (lvis_freq_) {
          const auto f = cat_freq_.find(gt.label[j]);
          out.freq.push_back(f == cat_freq_.end() ? std::int8_t{-1} : f->second);
        }
        out.box.insert(out.box.end(), gt.box.begin() + static_cast<std::ptrdiff_t>(j * 4),
                       gt.box.begin() + static_cast<std::ptrdiff_t>(j * 4 + 4));
        if (with_keypoints_) {
          const auto at = gt.kp_at[j];
          if (at < 0)
            out.kp.insert(out.kp.end(), kp_len_, 0.0);
          else
            out.kp.insert(out.kp.end(), gt.kp.begin() + at,
                          gt.kp.begin() + at + static_cast<std::ptrdiff_t>(kp_len_));
          out.num_kp.push_back(gt.num_kp[j]);
        }
        if (with_masks_) {
          const GtSeg& s = gt_segs_[j];
          const auto where = [&] {
            return "annotations: annotation id " + std::to_string(gt.id[j]) + " (image id " +
                   std::to_string(images_[im].id) + ")";
          };
          check_image_size(images_[im], where);
          const auto h = static_cast<std::uint32_t>(images_[im].height),
                     w = static_cast<std::uint32_t>(images_[im].width);
          mask::Rle r = s.kind == GtSeg::Polygons ? polys_to_rle(s.polys, h, w, where) : s.rle;
          check_mask_size(r.h, r.w, r.cnts.data(), r.cnts.size(), images_[im], where);
          out.lengths.push_back(static_cast<std::int32_t>(r.cnts.size()));
          out.counts.insert(out.counts.end(), r.cnts.begin(), r.cnts.end());
          d.gt_counts_begin.push_back(out.counts.size());
        }
      }
      for (std::size_t i = 0; i < images_.size(); ++i) d.gt_begin[i + 1] += d.gt_begin[i];
      gt = std::move(out);
      gt_segs_.clear();
      gt_segs_.shrink_to_fit();
    };

    // Results: only this shard's images. When each image's kept results sit together in the
    // file (the usual layout) the fields are views of the parsed arrays; otherwise (or with
    // masks) they are regrouped by image, file order kept within an image.
    const auto group_results = [&] {
      Instances& dt = d.dt;
      const std::size_t n = dt.size(), shard_images = hi - lo;
      std::vector<std::int32_t> img(n);
      for (std::size_t j = 0; j < n; ++j) {
        const auto it = index.find(dt.image[j]);
        if (it == index.end())
          fail("results '" + res_path + "': entry " + std::to_string(j) + ": image_id " +
               std::to_string(dt.image[j]) + " is not in the annotations");
        const auto im = it->second;
        img[j] = (im >= lo && im < hi && known_cat(dt.label[j]))
                     ? static_cast<std::int32_t>(im - lo)
                     : -1;
      }
      dt.image.clear();
      dt.image.shrink_to_fit();
      d.dt_first.assign(shard_images, 0);
      d.dt_count.assign(shard_images, 0);
      bool runs_ok = !with_masks_;
      std::size_t last = 0;
      bool any = false;
      for (std::size_t j = 0; j < n && runs_ok; ++j) {
        if (img[j] < 0) continue;
        const auto i = static_cast<std::size_t>(img[j]);
        const bool continues = any && img[last] == img[j] && last + 1 == j;
        if (!continues) {
          if (d.dt_count[i] != 0) runs_ok = false;
          d.dt_first[i] = j;
        }
        ++d.dt_count[i];
        last = j;
        any = true;
      }
      if (!runs_ok) {
        std::vector<std::size_t> order;
        for (std::size_t j = 0; j < n; ++j)
          if (img[j] >= 0) order.push_back(j);
        std::stable_sort(order.begin(), order.end(),
                         [&](std::size_t a, std::size_t b) { return img[a] < img[b]; });
        std::vector<std::size_t> counts_at;
        if (with_masks_) {
          counts_at.resize(n + 1, 0);
          for (std::size_t j = 0; j < n; ++j)
            counts_at[j + 1] = counts_at[j] + static_cast<std::size_t>(std::max(dt.lengths[j], 0));
        }
        d.dt_count.assign(shard_images, 0);
        for (const std::size_t j : order) ++d.dt_count[static_cast<std::size_t>(img[j])];
        std::size_t at = 0;
        for (std::size_t i = 0; i < shard_images; ++i) {
          d.dt_first[i] = at;
          at += d.dt_count[i];
        }
        // Every result kept and already in image order (masks come here always): nothing to move.
        bool identity = order.size() == n;
        for (std::size_t k = 0; identity && k < order.size(); ++k) identity = order[k] == k;
        const auto permute = [&](auto& v, std::size_t width) {
          if (identity) return;
          std::remove_reference_t<decltype(v)> out(order.size() * width);
          for (std::size_t k = 0; k < order.size(); ++k)
            std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(order[k] * width), width,
                        out.begin() + static_cast<std::ptrdiff_t>(k * width));
          v.swap(out);
        };
        permute(dt.label, 1);
        permute(dt.value, 1);
        permute(dt.box, 4);
        if (with_keypoints_) permute(dt.kp, kp_len_);
        if (with_masks_) {
          permute(dt.area, 1);
          permute(dt.mask_hw, 2);
          permute(dt.geom, 1);
        }
        if (with_masks_ && !identity) {
          std::string str;
          std::vector<std::int32_t> lengths;
          std::size_t kept = 0;
          for (const std::size_t j : order) kept += counts_at[j + 1] - counts_at[j];
          str.reserve(kept);
          lengths.reserve(order.size());
          for (const std::size_t j : order) {
            str.append(dt.rle_str, counts_at[j], counts_at[j + 1] - counts_at[j]);
            lengths.push_back(dt.lengths[j]);
          }
          dt.rle_str.swap(str);
          dt.lengths.swap(lengths);
        }
      }
      if (with_masks_) {
        // The masks stay compressed until their batch is read (decode_masks): a batch's counts
        // are decoded, never every result's at once. Here: where each result's string starts
        // (the results are in image order now), and that their images can hold masks.
        d.dt_str_begin.assign(1, 0);
        d.dt_str_begin.reserve(dt.lengths.size() + 1);
        for (std::size_t i = 0; i < shard_images; ++i) {
          const ImageInfo& im = images_[lo + i];
          if (d.dt_count[i] > 0)
            check_image_size(im, [&] {
              return "results '" + res_path + "': a result of image " + std::to_string(im.id);
            });
          for (std::size_t k = d.dt_first[i]; k < d.dt_first[i] + d.dt_count[i]; ++k)
            d.dt_str_begin.push_back(d.dt_str_begin.back() +
                                     static_cast<std::size_t>(std::max(dt.lengths[k], 0)));
        }
        dt.mask_src.swap(dt.lengths);
        dt.lengths.assign(dt.mask_src.size(), 0);
        dt.counts.clear();
      }
    };
    // The two touch nothing in common (they only read the image index): side by side with two
    // threads or more. An error in the ground truth comes first, as it would one after the other.
    if (threads < 2) {
      group_gt();
      group_results();
      return;
    }
    std::exception_ptr gt_error;
    std::thread gt_thread([&] {
      try {
        group_gt();
      } catch (...) {
        gt_error = std::current_exception();
      }
    });
    std::exception_ptr res_error;
    try {
      group_results();
    } catch (...) {
      res_error = std::current_exception();
    }
    gt_thread.join();
    if (gt_error) std::rethrow_exception(gt_error);
    if (res_error) std::rethrow_exception(res_error);
  }

  /// Masks need an image whose h * w is below 2^32 (RLE counts are uint32, as in maskApi.c).
  /// Decodes the result masks of images [begin, end) (indices into images_) into `out`, in order;
  /// `at` gets each image's offset, + end. Polygons and boxes are rasterised at their image's
  /// size; a mask's area (loadRes' maskUtils.area) and, for a result without a bbox, its box
  /// (toBbox) are set here, and each result's count length. Runs on the read-ahead thread too: it
  /// writes only the entries of these images' results.
  void decode_masks(std::size_t begin, std::size_t end, std::vector<std::uint32_t>& out,
                    std::vector<std::size_t>& at) {
    Data& d = *data_;
    Instances& dt = d.dt;
    const auto shard_begin = static_cast<std::size_t>(shard_range().begin);
    std::size_t room = 0;  // one count per character without the continuation bit
    if (end > begin) {
      const std::size_t k0 = d.dt_first[begin - shard_begin];
      const std::size_t k1 = d.dt_first[end - 1 - shard_begin] + d.dt_count[end - 1 - shard_begin];
      for (std::size_t c = d.dt_str_begin[k0]; c < d.dt_str_begin[k1]; ++c)
        room += ((static_cast<unsigned char>(dt.rle_str[c]) - 48) & 0x20) == 0;
    }
    out.clear();
    out.reserve(room);
    at.assign(1, 0);
    mask::Rle r;  // its buffer reused
    for (std::size_t i = begin; i < end; ++i) {
      const ImageInfo& im = images_[i];
      const auto where = [&] {  // built only for an error message
        return "results '" + res_path_ + "': a result of image " + std::to_string(im.id);
      };
      const auto h = static_cast<std::uint32_t>(im.height),
                 w = static_cast<std::uint32_t>(im.width);
      const std::size_t k0 = d.dt_first[i - shard_begin];
      for (std::size_t k = k0; k < k0 + d.dt_count[i - shard_begin]; ++k) {
        const std::int32_t src = dt.mask_src[k];
        if (src <= -2) {
          // Polygons (the result has a bbox): annToRLE rasterises them at the image's size.
          r = polys_to_rle(dt_polys_[static_cast<std::size_t>(-2 - std::int64_t{src})], h, w,
                           where);
        } else if (src < 0) {
          // loadRes: the box's polygon [x1, y1, x1, y2, x2, y2, x2, y1].
          const double* b = &dt.box[k * 4];
          const double x1 = b[0], x2 = b[0] + b[2], y1 = b[1], y2 = b[1] + b[3];
          const double xy[8] = {x1, y1, x1, y2, x2, y2, x2, y1};
          r = mask::rle_from_poly(xy, 4, h, w);
        } else {
          const std::string_view str(dt.rle_str.data() + d.dt_str_begin[k],
                                     d.dt_str_begin[k + 1] - d.dt_str_begin[k]);
          const std::size_t first = out.size();  // decoded in place, at the end of `out`
          if (!mask::rle_from_string_append(str, out))
            fail(where() +
                 ": key 'segmentation.counts': malformed compressed RLE (a character outside "
                 "the encoding, or a count outside [0, 2^32))");
          const std::uint32_t* c = out.data() + first;
          const std::size_t n = out.size() - first;
          const std::uint32_t mh = dt.mask_hw[k * 2], mw = dt.mask_hw[k * 2 + 1];
          check_mask_size(mh, mw, c, n, im, where);
          if (dt.geom[k] & 1) dt.area[k] = static_cast<double>(mask::rle_area(c, n));
          if (dt.geom[k] & 2) mask::rle_to_bbox(mh, mw, c, n, &dt.box[k * 4]);
          dt.lengths[k] = static_cast<std::int32_t>(n);
          continue;
        }
        check_mask_size(r.h, r.w, r.cnts.data(), r.cnts.size(), im, where);
        dt.lengths[k] = static_cast<std::int32_t>(r.cnts.size());
        out.insert(out.end(), r.cnts.begin(), r.cnts.end());
      }
      at.push_back(out.size());
    }
  }

  /// `where()` gives the message's start (built only when there is an error).
  template <class Where>
  static void check_image_size(const ImageInfo& im, const Where& where) {
    if (!mask::size_ok(im.height, im.width))
      fail(where() + ": the image's size " + std::to_string(im.height) + "x" +
           std::to_string(im.width) + " is too large for a mask (h * w must be below 2^32)");
  }

  /// A mask of size h x w with counts cnts[0..n) must cover exactly the image.
  template <class Where>
  static void check_mask_size(std::uint32_t h, std::uint32_t w, const std::uint32_t* cnts,
                              std::size_t n, const ImageInfo& im, const Where& where) {
    if (static_cast<std::int64_t>(h) != im.height || static_cast<std::int64_t>(w) != im.width)
      fail(where() + ": mask size " + std::to_string(h) + "x" + std::to_string(w) +
           " differs from the image's " + std::to_string(im.height) + "x" +
           std::to_string(im.width));
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += cnts[i];
    if (sum != static_cast<std::uint64_t>(h) * w)
      fail(where() + ": the RLE covers " + std::to_string(sum) + " pixels, the image " +
           std::to_string(static_cast<std::uint64_t>(h) * w));
  }

  std::shared_ptr<Data> data_;
  std::vector<ImageInfo> images_;
  std::vector<std::int64_t> cats_;
  std::unordered_map<std::int64_t, std::int8_t> cat_freq_;  // LVIS categories' frequency
  bool lvis_lists_ = false;  // an image has neg_category_ids or not_exhaustive_category_ids
  bool lvis_freq_ = false;   // a category has a frequency
  std::vector<GtSeg> gt_segs_;
  std::vector<std::vector<std::vector<double>>> dt_polys_;  // polygon results, by slot
  std::string res_path_;                                    // for messages
  std::vector<std::shared_ptr<std::vector<std::uint32_t>>> mask_buffers_;  // batches' counts
  bool with_masks_ = false;
  bool with_keypoints_ = false;
  std::size_t kp_len_ = 0;   // 3K: the values of each keypoints list (0: none read)
  std::string kp_len_from_;  // the entry that fixed it, for messages
};

std::vector<tally::ParamSpec> coco_json_params() {
  return {
      tally::param("annotations", tally::ParamType::Path,
                   "COCO ground truth JSON (images, annotations, categories)"),
      tally::param("results", tally::ParamType::Path,
                   "COCO results JSON: an array of {image_id, category_id, bbox, segmentation "
                   "and/or keypoints, score}"),
      tally::param("masks", tally::ParamType::String,
                   "Read masks (needed by segm): auto = when the first result has a segmentation")
          .def("auto")
          .choices({"auto", "true", "false"}),
      tally::param("keypoints", tally::ParamType::String,
                   "Read keypoints (needed by keypoints): auto = when the first result has "
                   "'keypoints'; then every result needs them, all with the same 3K numbers, as "
                   "every annotation that has them (the others get zeros and num_keypoints 0)")
          .def("auto")
          .choices({"auto", "true", "false"}),
      tally::support::batch_size_param("images per batch", 512),
      tally::param("block_bytes", tally::ParamType::Int,
                   "The results file is parsed in blocks of about this many bytes (whole "
                   "elements; a longer element grows the block): memory against speed")
          .def(8 << 20),
      tally::param("threads", tally::ParamType::Int,
                   "2 or more: a second thread parses the next block of results while the current "
                   "one is read (the data are the same for any value)")
          .def(1),
  };
}

}  // namespace

TALLY_PLUGIN("coco_json", "0.1.0", [] {
  return std::vector<tally::ComponentInfo>{tally::reader<CocoJsonReader>(
      "coco_json",
      "COCO ground truth + COCO results JSON (simdjson), one image per sample in ascending image "
      "id order; areas, masks and boxes as pycocotools' loadRes / annToRLE give them (a "
      "keypoints-only result's box is its keypoints' extent). Fields: img_id, height, width, "
      "gt_bboxes_xywh, gt_labels, gt_ids, gt_areas, gt_iscrowd, pred_bboxes_xywh, pred_scores, "
      "pred_labels; with masks pred_areas, pred_rle_counts, pred_rle_lengths, gt_rle_counts, "
      "gt_rle_lengths; with keypoints gt_keypoints [g, 3K], gt_num_keypoints [g], pred_keypoints "
      "[n, 3K] (x, y, v or score per keypoint); from LVIS files neg_category_ids and "
      "not_exhaustive_category_ids per image and gt_frequency [g] (0 r, 1 c, 2 f). Each rank "
      "reads its contiguous block of images.",
      coco_json_params())};
})
