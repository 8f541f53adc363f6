// The coco_json reader's ground truth: the annotations file's "annotations" list, in chunks
// (AnnotationChunks) read one at a time or side by side, else with the file parsed whole; each
// annotation checked and appended (add_annotation).
#include <cmath>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "annotation_chunks.hpp"
#include "coco_json_reader.hpp"
#include "json_file.hpp"

namespace tally_coco_json {

/// The annotations file: its "annotations" list in chunks (AnnotationChunks, a block of the
/// file at a time; with threads > 1 the next chunk is parsed while the current one is read),
/// then the rest (images, categories) as one small document. A file the chunks cannot follow
/// is parsed whole, as before, which names what is wrong with it.
void CocoJsonReader::read_annotations(const std::string& path, std::size_t block, int threads) {
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
bool CocoJsonReader::annotations_side_by_side(AnnotationChunks& chunks, int threads,
                                              const std::string& path) {
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
void CocoJsonReader::append(Instances& to, const Instances& from) {
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

/// One element of the annotations' "annotations" list (its index `at`): appended to the
/// ground truth, every key checked.
void CocoJsonReader::add_annotation(dom::object obj, std::size_t at, const std::string& path) {
  add_annotation(obj, at, path, data_->gt, gt_segs_);
}

/// The same into `gt` and `segs` (a chunk's own, read on another thread: only when kp_len_ is
/// settled, so nothing of the reader is written).
void CocoJsonReader::add_annotation(dom::object obj, std::size_t at, const std::string& path,
                                    Instances& gt, std::vector<GtSeg>& segs) {
  // "annotations 'FILE': annotations[3] (id 17)": the entry and, when it has one, its id.
  const auto where = [&, obj, at] {
    std::string w = "annotations '" + path + "': annotations[" + std::to_string(at) + "]";
    dom::element id;
    std::int64_t v = 0;
    if (!obj.at_key("id").get(id) && !id.get_int64().get(v)) w += " (id " + std::to_string(v) + ")";
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

}  // namespace tally_coco_json
