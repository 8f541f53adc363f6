// The `coco_panoptic` reader: COCO panoptic ground truth and predictions (panopticapi's format, as
// detectron2 and MMDetection write their predictions), one image per sample in ascending image-id
// order; each rank reads its contiguous block of images and decodes only their PNGs, one batch at
// a time.
//
//   data:
//     type: coco_panoptic
//     annotations: panoptic_val2017.json       # images, annotations, categories (isthing)
//     annotation_dir: panoptic_val2017/        # default: the JSON's path without its extension
//     predictions: panoptic_pred.json          # {annotations: [{image_id, file_name,
//     segments_info}]} prediction_dir: panoptic_pred/           # default: likewise
//
// Each annotation names a PNG (file_name) whose pixels hold segment ids, id = R + 256 G + 256^2 B
// (panopticapi's rgb2id; 8-bit RGB or RGBA, the alpha ignored), 0 = void (unlabelled), and lists
// the segments (segments_info: id, category_id, iscrowd). Fields of each sample:
//   img_id          int64                the image id
//   gt_panoptic     int32 [H, W, 2]      per pixel (category_id, segment id); void (-1, 0)
//   pred_panoptic   int32 [H, W, 2]      the same for the prediction
//   gt_crowd        int32 [K, 2]         (category_id, segment id) of the iscrowd segments
//   thing_ids       int64 [T]            the categories with isthing 1 (ascending)
//   stuff_ids       int64 [S]            the categories with isthing 0 (ascending)
// PanopticQuality reads them as torchmetrics' preds and target (void_category -1).
//
// Checked, as panopticapi's pq_compute checks them (each an InputError naming the file, the image
// and what was expected): a PNG that is missing, unreadable or not 8-bit RGB(A); a prediction of
// another size than its ground truth, or a ground truth of another size than `images` gives; a
// pixel id that segments_info does not list; a listed segment absent from the PNG; segment ids
// repeated or outside [1, 2^24); a ground-truth category not in `categories`; an image with no
// prediction, a prediction of an image not in the ground truth, image ids listed twice; malformed
// JSON or a key of the wrong type. Predicted categories are not checked: PanopticQuality decides
// (allow_unknown_preds_category).
//
// Bounded, before anything is decoded: a file_name must be a relative name inside its folder (no
// leading '/', no '..' part; the file, links resolved, inside the folder); the PNG headers of a
// batch are read first (tally_png::read_header) and the batch's pixels checked against
// max_batch_pixels (default 2^26, about 1 GiB of maps: 16 bytes a pixel), an InputError naming
// the image and its size otherwise.
#include <simdjson.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "png_decode.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/reader.hpp"
#include "tally_support/json_text.hpp"
#include "tally_support/sharded_reader.hpp"

namespace {

namespace dom = simdjson::dom;
namespace fs = std::filesystem;

constexpr std::int64_t kMaxSegmentId = std::int64_t{1} << 24;  // three 8-bit channels
constexpr std::int64_t kMaxCategory = std::int64_t{1} << 31;   // int32 maps
/// max_batch_pixels: its default (2^26 pixels: about 1 GiB of int32 maps for the ground truth and
/// the prediction, 16 bytes a pixel) and its upper bound.
constexpr std::int64_t kDefaultBatchPixels = std::int64_t{1} << 26;
constexpr std::int64_t kMaxBatchPixels = std::int64_t{1} << 34;

/// Empty when `name` is a plain relative name that stays in its folder (no leading '/', no '..'
/// part, no NUL), else what is wrong with it.
std::string file_name_problem(std::string_view name) {
  if (name.find('\0') != std::string_view::npos) return "holds a NUL character";
  if (name.front() == '/') return "is an absolute path";
  for (std::size_t at = 0; at <= name.size();) {
    const std::size_t end = std::min(name.find('/', at), name.size());
    if (name.substr(at, end - at) == "..") return "has a '..' part";
    at = end + 1;
  }
  return "";
}

[[noreturn]] void fail(const std::string& what) {
  throw tally::InputError("coco_panoptic reader: " + what);
}

using tally::support::found;

/// An integer (a whole number written as a double is accepted, as Python's json writes ints).
bool as_int(dom::element v, std::int64_t& out) {
  if (v.is_int64()) {
    out = v.get_int64().value_unsafe();
    return true;
  }
  double d = 0;
  if (v.is_double() && !v.get_double().get(d) && d >= -9.2e18 && d <= 9.2e18 &&
      d == static_cast<double>(static_cast<std::int64_t>(d))) {
    out = static_cast<std::int64_t>(d);
    return true;
  }
  return false;
}

struct Segment {
  std::int64_t id = 0;
  std::int64_t category = 0;
  bool crowd = false;
};

struct Annotation {
  std::int64_t image_id = 0;
  std::string file_name;
  std::vector<Segment> segments;
};

/// One JSON file, parsed whole (a FIFO or a device is refused before it is opened).
class JsonFile {
 public:
  JsonFile(std::string path, const char* what) : path_(std::move(path)), what_(what) {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0)
      fail(fmt::format("{} '{}': cannot open ({})", what_, path_, std::strerror(errno)));
    if (!S_ISREG(st.st_mode))
      fail(fmt::format("{} '{}': not a regular file (a JSON file was expected)", what_, path_));
    auto loaded = simdjson::padded_string::load(path_);
    if (loaded.error())
      fail(fmt::format("{} '{}': cannot read ({})", what_, path_,
                       simdjson::error_message(loaded.error())));
    json_ = std::move(loaded).value();
    if (const auto error = parser_.parse(json_).get(root_))
      fail(fmt::format("{} '{}': not valid JSON ({})", what_, path_,
                       simdjson::error_message(error)));
  }

  const std::string& path() const { return path_; }
  dom::element root() const { return root_; }
  [[noreturn]] void fail_at(const std::string& where, const std::string& what) const {
    fail(fmt::format("{} '{}': {}: {}", what_, path_, where, what));
  }

  /// The top-level object's list `key`; nullopt when absent (an error when `required`).
  std::optional<dom::array> list(std::string_view key, bool required, const char* expected) const {
    dom::object top;
    if (root_.get_object().get(top))
      fail(fmt::format("{} '{}': expected an object {}, found {}", what_, path_, expected,
                       found(root_)));
    dom::element v;
    if (top.at_key(key).get(v)) {
      if (required)
        fail(fmt::format("{} '{}': no '{}' list (expected an object {})", what_, path_, key,
                         expected));
      return std::nullopt;
    }
    dom::array a;
    if (v.get_array().get(a))
      fail(
          fmt::format("{} '{}': key '{}': expected a list, found {}", what_, path_, key, found(v)));
    return a;
  }

 private:
  std::string path_;
  const char* what_;
  simdjson::padded_string json_;
  dom::parser parser_;
  dom::element root_;
};

/// The integer under `key` of `o` (required), checked against [lo, hi).
std::int64_t int_key(const JsonFile& f, const std::string& where, dom::object o,
                     std::string_view key, std::int64_t lo, std::int64_t hi, const char* what) {
  dom::element v;
  if (o.at_key(key).get(v)) f.fail_at(where, fmt::format("no '{}'", key));
  std::int64_t x = 0;
  if (!as_int(v, x))
    f.fail_at(where, fmt::format("key '{}': expected {}, found {}", key, what, found(v)));
  if (x < lo || x >= hi)
    f.fail_at(where, fmt::format("key '{}': {} is outside [{}, {}) ({})", key, x, lo, hi, what));
  return x;
}

/// A 0/1/bool flag under `key` (false when absent).
bool flag_key(const JsonFile& f, const std::string& where, dom::object o, std::string_view key,
              bool required) {
  dom::element v;
  if (o.at_key(key).get(v)) {
    if (required) f.fail_at(where, fmt::format("no '{}' (0 or 1)", key));
    return false;
  }
  bool b = false;
  if (!v.get_bool().get(b)) return b;
  std::int64_t x = 0;
  if (as_int(v, x) && (x == 0 || x == 1)) return x == 1;
  f.fail_at(where, fmt::format("key '{}': expected 0, 1 or a bool, found {}", key, found(v)));
}

dom::object object_at(const JsonFile& f, const std::string& where, dom::element e) {
  dom::object o;
  if (e.get_object().get(o)) f.fail_at(where, "expected an object, found " + found(e));
  return o;
}

/// The annotations list of a panoptic JSON (ground truth: with iscrowd).
std::vector<Annotation> read_annotations(const JsonFile& f, bool gt) {
  std::vector<Annotation> out;
  std::size_t at = 0;
  const dom::array list = *f.list("annotations", true, "{annotations: [...], ...}");
  for (dom::element e : list) {
    std::string where = fmt::format("annotations[{}]", at++);
    const dom::object o = object_at(f, where, e);
    Annotation a;
    a.image_id = int_key(f, where, o, "image_id", INT64_MIN, INT64_MAX, "an integer image id");
    where += fmt::format(" (image_id {})", a.image_id);
    dom::element v;
    std::string_view name;
    if (o.at_key("file_name").get(v)) f.fail_at(where, "no 'file_name' (the PNG's name)");
    if (v.get_string().get(name) || name.empty())
      f.fail_at(where, "key 'file_name': expected the PNG's name, found " + found(v));
    if (const std::string problem = file_name_problem(name); !problem.empty())
      f.fail_at(where, fmt::format("key 'file_name': {} {}: expected a name relative to the PNG "
                                   "folder that stays inside it",
                                   found(v), problem));
    a.file_name = std::string(name);
    dom::array segs;
    if (o.at_key("segments_info").get(v)) f.fail_at(where, "no 'segments_info'");
    if (v.get_array().get(segs))
      f.fail_at(where, "key 'segments_info': expected a list, found " + found(v));
    std::size_t k = 0;
    for (dom::element s : segs) {
      const std::string sw = fmt::format("{}: segments_info[{}]", where, k++);
      const dom::object so = object_at(f, sw, s);
      Segment seg;
      seg.id = int_key(f, sw, so, "id", 1, kMaxSegmentId,
                       "a segment id of the PNG: R + 256 G + 256^2 B, 0 is void");
      seg.category = int_key(f, sw, so, "category_id", 0, kMaxCategory, "a category id");
      if (gt) seg.crowd = flag_key(f, sw, so, "iscrowd", false);
      a.segments.push_back(seg);
    }
    std::vector<std::int64_t> ids;
    for (const auto& s : a.segments) ids.push_back(s.id);
    std::sort(ids.begin(), ids.end());
    const auto dup = std::adjacent_find(ids.begin(), ids.end());
    if (dup != ids.end())
      f.fail_at(where, fmt::format("segment id {} is listed twice in segments_info", *dup));
    out.push_back(std::move(a));
  }
  return out;
}

class CocoPanopticReader final : public tally::support::ShardedReader {
 public:
  CocoPanopticReader(const tally::Params& params, const tally::ShardInfo& shard) {
    read_batch_size(params);
    tally::support::check_shard("coco_panoptic", shard);
    const std::string gt_path = params.get_string("annotations");
    const std::string pred_path = params.get_string("predictions");
    gt_dir_ = params.has("annotation_dir") ? fs::path(params.get_string("annotation_dir"))
                                           : fs::path(gt_path).replace_extension();
    pred_dir_ = params.has("prediction_dir") ? fs::path(params.get_string("prediction_dir"))
                                             : fs::path(pred_path).replace_extension();
    for (const auto& [dir, key] :
         {std::pair{&gt_dir_, "annotation_dir"}, std::pair{&pred_dir_, "prediction_dir"}}) {
      std::error_code ec;
      if (!fs::is_directory(*dir, ec))
        fail(fmt::format("{} {} is not a folder{}{}", key, dir->string(),
                         fs::exists(*dir, ec) ? "" : " (it does not exist)",
                         params.has(key) ? "" : " (the default: the JSON's path without .json)"));
    }
    // The folders resolved (links and all): every PNG must resolve to a file inside its folder.
    for (fs::path* dir : {&gt_dir_, &pred_dir_}) {
      std::error_code ec;
      fs::path real = fs::canonical(*dir, ec);
      if (ec) fail(fmt::format("cannot resolve the folder {}: {}", dir->string(), ec.message()));
      *dir = std::move(real);
    }
    const std::int64_t budget = params.get_int("max_batch_pixels");
    if (budget < 1 || budget > kMaxBatchPixels)
      params.fail("max_batch_pixels",
                  fmt::format("must be in [1, {}], got {}", kMaxBatchPixels, budget));
    max_batch_pixels_ = static_cast<std::uint64_t>(budget);
    gt_json_ = gt_path;
    pred_json_ = pred_path;
    read_ground_truth(gt_path);
    read_predictions(pred_path);
    set_samples(static_cast<std::int64_t>(images_.size()), shard);
  }

  std::vector<std::string> fields() const override {
    return {"img_id", "gt_panoptic", "pred_panoptic", "gt_crowd", "thing_ids", "stuff_ids"};
  }

 protected:
  tally::Batch read_batch(std::int64_t begin, std::int64_t end) override {
    using tally::DType;
    using tally::Tensor;
    // Every PNG of the batch resolved and its header read first: the batch's pixels are checked
    // against max_batch_pixels before one is decoded.
    const std::vector<Planned> plan = plan_batch(begin, end);
    std::vector<std::int64_t> ids;
    tally::Batch::Ragged gt_maps, pred_maps, crowds, things, stuffs;
    for (std::int64_t i = begin; i < end; ++i) {
      const Image& im = images_[static_cast<std::size_t>(i)];
      const Planned& pl = plan[static_cast<std::size_t>(i - begin)];
      ids.push_back(im.gt.image_id);
      Tensor g = panoptic_map(im.gt, pl.gt_file, gt_json_, "ground truth", i, pl.height, pl.width,
                              "the size its header declared");
      Tensor p =
          panoptic_map(im.pred, pl.pred_file, pred_json_, "prediction", i, pl.height, pl.width,
                       fmt::format("the size of its ground truth {}", pl.gt_file.string()));
      std::vector<std::int32_t> crowd;
      for (const Segment& s : im.gt.segments)
        if (s.crowd) {
          crowd.push_back(static_cast<std::int32_t>(s.category));
          crowd.push_back(static_cast<std::int32_t>(s.id));
        }
      const auto k = static_cast<std::int64_t>(crowd.size() / 2);
      gt_maps.push_back(std::move(g));
      pred_maps.push_back(std::move(p));
      crowds.push_back(Tensor::from_vector(crowd, {k, 2}));
      things.push_back(Tensor::view(categories_->things.data(), DType::I64,
                                    {static_cast<std::int64_t>(categories_->things.size())},
                                    tally::Device::cpu(), categories_));
      stuffs.push_back(Tensor::view(categories_->stuffs.data(), DType::I64,
                                    {static_cast<std::int64_t>(categories_->stuffs.size())},
                                    tally::Device::cpu(), categories_));
    }
    tally::Batch b;
    b.set("img_id", Tensor::from_vector(ids));
    b.set_ragged("gt_panoptic", std::move(gt_maps));
    b.set_ragged("pred_panoptic", std::move(pred_maps));
    b.set_ragged("gt_crowd", std::move(crowds));
    b.set_ragged("thing_ids", std::move(things));
    b.set_ragged("stuff_ids", std::move(stuffs));
    return b;
  }

 private:
  struct Image {
    Annotation gt, pred;
    std::int64_t height = -1, width = -1;  // from 'images', when it lists the image
  };
  struct CategoryIds {
    std::vector<std::int64_t> things, stuffs;
  };

  void read_ground_truth(const std::string& path) {
    const JsonFile f(path, "annotations");
    const char* expected = "{images, annotations, categories}";
    // Categories: id and isthing, as panopticapi's pq_average reads them.
    auto cats = std::make_shared<CategoryIds>();
    std::size_t at = 0;
    const dom::array categories = *f.list("categories", true, expected);
    for (dom::element e : categories) {
      const std::string where = fmt::format("categories[{}]", at++);
      const dom::object o = object_at(f, where, e);
      const std::int64_t id = int_key(f, where, o, "id", 0, kMaxCategory, "a category id");
      (flag_key(f, where + fmt::format(" (id {})", id), o, "isthing", true) ? cats->things
                                                                            : cats->stuffs)
          .push_back(id);
    }
    std::vector<std::int64_t> all = cats->things;
    all.insert(all.end(), cats->stuffs.begin(), cats->stuffs.end());
    std::sort(all.begin(), all.end());
    if (const auto dup = std::adjacent_find(all.begin(), all.end()); dup != all.end())
      f.fail_at("categories", fmt::format("category id {} is listed twice", *dup));
    if (all.empty()) f.fail_at("categories", "the list is empty");
    std::sort(cats->things.begin(), cats->things.end());
    std::sort(cats->stuffs.begin(), cats->stuffs.end());
    categories_ = cats;

    // Sizes from 'images', when it is there.
    std::unordered_map<std::int64_t, std::pair<std::int64_t, std::int64_t>> sizes;
    if (auto images = f.list("images", false, expected)) {
      at = 0;
      for (dom::element e : *images) {
        const std::string where = fmt::format("images[{}]", at++);
        const dom::object o = object_at(f, where, e);
        const std::int64_t id = int_key(f, where, o, "id", INT64_MIN, INT64_MAX, "an image id");
        if (o.at_key("height").error() || o.at_key("width").error()) continue;
        const std::string w = where + fmt::format(" (id {})", id);
        sizes[id] = {int_key(f, w, o, "height", 0, INT64_MAX, "a size in pixels"),
                     int_key(f, w, o, "width", 0, INT64_MAX, "a size in pixels")};
      }
    }

    for (Annotation& a : read_annotations(f, true)) {
      for (const Segment& s : a.segments)
        if (!std::binary_search(all.begin(), all.end(), s.category))
          f.fail_at(fmt::format("the annotation of image {}", a.image_id),
                    fmt::format("segment {} has category_id {}, which is not in 'categories'", s.id,
                                s.category));
      Image im;
      if (const auto it = sizes.find(a.image_id); it != sizes.end()) {
        im.height = it->second.first;
        im.width = it->second.second;
      }
      im.gt = std::move(a);
      images_.push_back(std::move(im));
    }
    std::sort(images_.begin(), images_.end(),
              [](const Image& a, const Image& b) { return a.gt.image_id < b.gt.image_id; });
    for (std::size_t i = 1; i < images_.size(); ++i)
      if (images_[i].gt.image_id == images_[i - 1].gt.image_id)
        f.fail_at("annotations",
                  fmt::format("image_id {} has two annotations", images_[i].gt.image_id));
  }

  void read_predictions(const std::string& path) {
    const JsonFile f(path, "predictions");
    std::vector<Annotation> preds = read_annotations(f, false);
    std::sort(preds.begin(), preds.end(),
              [](const Annotation& a, const Annotation& b) { return a.image_id < b.image_id; });
    std::size_t k = 0;
    for (std::size_t i = 0; i < preds.size(); ++i) {
      const std::int64_t id = preds[i].image_id;
      if (i > 0 && preds[i - 1].image_id == id)
        f.fail_at("annotations", fmt::format("image_id {} has two predictions", id));
      if (k < images_.size() && images_[k].gt.image_id < id)
        f.fail_at("annotations", fmt::format("no prediction for image_id {} (the ground truth has "
                                             "it; panopticapi requires one per image)",
                                             images_[k].gt.image_id));
      if (k == images_.size() || images_[k].gt.image_id != id)
        f.fail_at(
            "annotations",
            fmt::format("image_id {} is not in the ground truth's annotations {}", id, gt_json_));
      images_[k++].pred = std::move(preds[i]);
    }
    if (k < images_.size())
      f.fail_at("annotations", fmt::format("no prediction for image_id {} (the ground truth has "
                                           "it; panopticapi requires one per image)",
                                           images_[k].gt.image_id));
  }

  /// One image of a batch: its two PNGs, resolved inside their folders, and its size.
  struct Planned {
    fs::path gt_file, pred_file;
    std::int64_t height = 0, width = 0;
  };

  static std::string describe(const char* side, std::int64_t sample, const Annotation& a) {
    return fmt::format("coco_panoptic reader: {} of sample {} (image_id {})", side, sample,
                       a.image_id);
  }

  /// The annotation's PNG in `dir` (resolved: a link out of the folder is refused), which must
  /// exist.
  static fs::path resolve_png(const Annotation& a, const fs::path& dir, const std::string& json,
                              const std::string& what) {
    const fs::path file = dir / a.file_name;
    std::error_code ec;
    const fs::path real = fs::canonical(file, ec);
    if (ec)
      throw tally::InputError(fmt::format(
          "{}: {}: {} (the file_name of image_id {} in {})", what, file.string(),
          ec == std::errc::no_such_file_or_directory ? std::string("no such file") : ec.message(),
          a.image_id, json));
    const fs::path rel = real.lexically_relative(dir);
    if (rel.empty() || *rel.begin() == "..")
      throw tally::InputError(fmt::format(
          "{}: {} resolves to {}, outside its folder {} (the file_name of image_id {} in {}): a "
          "PNG must be inside the folder",
          what, file.string(), real.string(), dir.string(), a.image_id, json));
    return real;
  }

  /// The header of a panoptic PNG, which must decode to 8-bit RGB or RGBA (a palette does).
  static tally_png::Header rgb_header(const fs::path& file, const std::string& what) {
    tally_png::Header h = tally_png::read_header(file, what);
    if (!h.palette && (h.bit_depth != 8 || (h.channels != 3 && h.channels != 4)))
      throw tally::InputError(fmt::format(
          "{}: {}: is {}; a panoptic PNG is 8-bit RGB (or RGBA), segment id = R + 256 G + "
          "256^2 B",
          what, file.string(), h.describe));
    return h;
  }

  /// The PNGs of images [begin, end) resolved and their headers read: each ground truth of the
  /// size 'images' gives it, each prediction of its ground truth's size, and the batch's pixels
  /// within max_batch_pixels, all before a pixel is decoded.
  std::vector<Planned> plan_batch(std::int64_t begin, std::int64_t end) const {
    std::vector<Planned> plan;
    std::uint64_t pixels = 0;
    for (std::int64_t i = begin; i < end; ++i) {
      const Image& im = images_[static_cast<std::size_t>(i)];
      Planned pl;
      const std::string gt_what = describe("ground truth", i, im.gt);
      pl.gt_file = resolve_png(im.gt, gt_dir_, gt_json_, gt_what);
      const tally_png::Header g = rgb_header(pl.gt_file, gt_what);
      if (im.height >= 0 && (g.height != im.height || g.width != im.width))
        throw tally::InputError(fmt::format(
            "{}: {}: is {}x{} pixels (width x height), expected {}x{}, the size that 'images' of "
            "{} gives image_id {}",
            gt_what, pl.gt_file.string(), g.width, g.height, im.width, im.height, gt_json_,
            im.gt.image_id));
      const std::uint64_t image_pixels =
          static_cast<std::uint64_t>(g.width) * static_cast<std::uint64_t>(g.height);
      pixels += image_pixels;
      if (pixels > max_batch_pixels_)
        throw tally::InputError(fmt::format(
            "{}: {}: is {}x{} pixels ({}); {} more than max_batch_pixels {} (each pixel takes "
            "16 bytes: the ground-truth and prediction maps): give a smaller batch_size or a "
            "larger max_batch_pixels",
            gt_what, pl.gt_file.string(), g.width, g.height, image_pixels,
            image_pixels == pixels
                ? std::string("alone")
                : fmt::format("with the batch's images before it, {} pixels,", pixels),
            max_batch_pixels_));
      const std::string pred_what = describe("prediction", i, im.pred);
      pl.pred_file = resolve_png(im.pred, pred_dir_, pred_json_, pred_what);
      const tally_png::Header p = rgb_header(pl.pred_file, pred_what);
      if (p.height != g.height || p.width != g.width)
        throw tally::InputError(
            fmt::format("{}: {}: is {}x{} pixels (width x height), expected {}x{}, the size of its "
                        "ground truth {}",
                        pred_what, pl.pred_file.string(), p.width, p.height, g.width, g.height,
                        pl.gt_file.string()));
      pl.height = g.height;
      pl.width = g.width;
      plan.push_back(std::move(pl));
    }
    return plan;
  }

  /// The [H, W, 2] int32 (category_id, segment id) map of one annotation's PNG `file`, which
  /// must be `height` x `width` pixels (`size_is` says whose size that is).
  tally::Tensor panoptic_map(const Annotation& a, const fs::path& file, const std::string& json,
                             const char* side, std::int64_t sample, std::int64_t height,
                             std::int64_t width, const std::string& size_is) const {
    const std::string what = describe(side, sample, a);
    const tally::Tensor rgb = tally_png::decode_image(
        file, what, static_cast<std::uint64_t>(height) * static_cast<std::uint64_t>(width));
    if (rgb.dtype() != tally::DType::U8 || (rgb.size(2) != 3 && rgb.size(2) != 4))
      throw tally::InputError(fmt::format(
          "{}: {}: is {} channel(s) of {}; a panoptic PNG is 8-bit RGB (or RGBA), segment id = "
          "R + 256 G + 256^2 B",
          what, file.string(), rgb.size(2), tally::dtype_name(rgb.dtype())));
    const std::int64_t h = rgb.size(0), w = rgb.size(1), c = rgb.size(2);
    if (h != height || w != width)
      throw tally::InputError(
          fmt::format("{}: {}: is {}x{} pixels (width x height), expected {}x{}, "
                      "{}",
                      what, file.string(), w, h, width, height, size_is));
    std::unordered_map<std::int64_t, std::size_t> index;
    for (std::size_t k = 0; k < a.segments.size(); ++k) index.emplace(a.segments[k].id, k);
    std::vector<char> seen(a.segments.size(), 0);
    tally::Tensor out = tally::Tensor::zeros(tally::DType::I32, {h, w, 2});
    auto* o = out.mutable_data_as<std::int32_t>();
    const auto* px = rgb.data_as<std::uint8_t>();
    std::int64_t last_id = -1;
    std::int32_t last_cat = -1, last_seg = 0;
    for (std::int64_t j = 0; j < h * w; ++j) {
      const std::uint8_t* p = px + j * c;
      const std::int64_t id = p[0] + 256 * p[1] + 65536 * p[2];
      if (id != last_id) {
        last_id = id;
        if (id == 0) {
          last_cat = -1;
          last_seg = 0;
        } else {
          const auto it = index.find(id);
          if (it == index.end())
            throw tally::InputError(fmt::format(
                "{}: {}: pixel (row {}, column {}) has segment id {} (RGB {}, {}, {}), which the "
                "segments_info of image_id {} in {} does not list",
                what, file.string(), j / w, j % w, id, p[0], p[1], p[2], a.image_id, json));
          seen[it->second] = 1;
          last_cat = static_cast<std::int32_t>(a.segments[it->second].category);
          last_seg = static_cast<std::int32_t>(id);
        }
      }
      o[2 * j] = last_cat;
      o[2 * j + 1] = last_seg;
    }
    for (std::size_t k = 0; k < a.segments.size(); ++k)
      if (!seen[k])
        throw tally::InputError(fmt::format(
            "{}: segment id {} (category_id {}) is in the segments_info of image_id {} in {} but "
            "no pixel of {} has it",
            what, a.segments[k].id, a.segments[k].category, a.image_id, json, file.string()));
    return out;
  }

  fs::path gt_dir_, pred_dir_;
  std::uint64_t max_batch_pixels_ = 0;
  std::string gt_json_, pred_json_;
  std::vector<Image> images_;
  std::shared_ptr<const CategoryIds> categories_;
};

std::vector<tally::ParamSpec> coco_panoptic_params() {
  return {
      tally::param("annotations", tally::ParamType::Path,
                   "COCO panoptic ground truth JSON: images (id, height, width), annotations "
                   "(image_id, file_name, segments_info: id, category_id, iscrowd) and categories "
                   "(id, isthing)"),
      tally::param("annotation_dir", tally::ParamType::Path,
                   "Folder of the ground truth's PNGs (default: the annotations path without its "
                   "extension, as panopticapi's pq_compute)")
          .optional(),
      tally::param("predictions", tally::ParamType::Path,
                   "Panoptic predictions JSON in the same format: {annotations: [{image_id, "
                   "file_name, segments_info: [{id, category_id}]}]}, one per image"),
      tally::param("prediction_dir", tally::ParamType::Path,
                   "Folder of the predictions' PNGs (default: the predictions path without its "
                   "extension)")
          .optional(),
      tally::support::batch_size_param("images per batch (decoded together, then released)", 16),
      tally::param("max_batch_pixels", tally::ParamType::Int,
                   "The most pixels (width x height) the ground-truth images of one batch may "
                   "have together, checked from the PNG headers before anything is decoded: each "
                   "pixel takes 16 bytes in memory (the ground-truth and prediction maps, int32 "
                   "[H, W, 2] each), so the default of 2^26 pixels is about 1 GiB of maps a batch "
                   "(PanopticQuality's work comes on top: a 4000x4000 pair raised tally's peak "
                   "memory by about 32 bytes a pixel in all). A larger "
                   "image, or a batch past it, is an error naming the image (give a "
                   "smaller batch_size or a larger max_batch_pixels, at most 2^34).")
          .def(kDefaultBatchPixels),
  };
}

}  // namespace

TALLY_PLUGIN("coco_panoptic", "0.1.0", [] {
  return std::vector<tally::ComponentInfo>{tally::reader<CocoPanopticReader>(
      "coco_panoptic",
      "COCO panoptic ground truth and predictions (PNG segment-id maps + segments JSON, "
      "panopticapi's format), one image per sample in ascending image id order: gt_panoptic and "
      "pred_panoptic [H, W, 2] int32 (category_id, segment id; void -1, 0), gt_crowd, thing_ids, "
      "stuff_ids, img_id. Each rank reads its contiguous block of images; PNGs decoded with "
      "libspng one batch at a time.",
      coco_panoptic_params())};
})
