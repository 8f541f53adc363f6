// The coco_json reader's annotations file, its top-level object: "images" (ids, sizes and LVIS'
// neg_category_ids / not_exhaustive_category_ids), "categories" (ids and LVIS' frequency), and
// "annotations" when the file is parsed whole (annotations.cpp reads them).
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "coco_json_reader.hpp"

namespace tally_coco_json {

/// One top-level list of the annotations file ("images", "categories", "annotations"): its
/// checks, and the messages naming its entries.
class CocoJsonReader::TopList {
 public:
  TopList(const std::string& path, std::string_view key) : path_(path), key_(key) {}

  dom::array list(dom::element v) const {
    dom::array a;
    if (v.get_array().get(a))
      fail("annotations '" + path_ + "': key '" + std::string(key_) + "': expected a list, found " +
           found(v));
    return a;
  }

  /// "annotations 'FILE': images[3] (id 17)": the entry and, when it has one, its id.
  std::string entry_where(dom::element e, std::size_t at) const {
    std::string w =
        "annotations '" + path_ + "': " + std::string(key_) + "[" + std::to_string(at) + "]";
    dom::object o;
    dom::element id;
    std::int64_t v = 0;
    if (!e.get_object().get(o) && !o.at_key("id").get(id) && !id.get_int64().get(v))
      w += " (id " + std::to_string(v) + ")";
    return w;
  }

  dom::object object(dom::element e, std::size_t at) const {
    dom::object o;
    if (e.get_object().get(o)) fail(entry_where(e, at) + ": expected an object, found " + found(e));
    return o;
  }

 private:
  const std::string& path_;
  std::string_view key_;
};

namespace {

/// An image's LVIS category list (neg_category_ids or not_exhaustive_category_ids, lvis 0.5.3's
/// LVISEval._prepare reads both for every image), appended to `flat`: its [at, at + n) there.
template <class W>
std::pair<std::uint32_t, std::uint32_t> read_image_cat_list(dom::element value, std::string_view k,
                                                            std::vector<std::int32_t>& flat,
                                                            const W& where) {
  const std::size_t at0 = flat.size();
  dom::array a;
  if (value.get_array().get(a))
    fail(where() + ": key '" + std::string(k) + "': expected a list of category ids, found " +
         found(value));
  for (dom::element c : a) {
    std::int64_t v = 0;
    naming_the_key(where, k, c, [&] { v = get_id(c); });
    flat.push_back(check_cat(v, where));
  }
  if (flat.size() > UINT32_MAX)
    fail(where() + ": key '" + std::string(k) + "': too many category ids in all");
  return {static_cast<std::uint32_t>(at0), static_cast<std::uint32_t>(flat.size() - at0)};
}

}  // namespace

/// The annotations file's top-level object (parsed whole, or without its "annotations" list
/// when that was read in chunks).
void CocoJsonReader::read_top(const dom::element& doc, const std::string& path) {
  bool have_images = false;
  dom::object top;
  if (doc.get_object().get(top))
    fail("annotations '" + path +
         "': expected an object {images, annotations, categories}, found " + found(doc));
  for (const auto field : top) {
    const std::string_view key = field.key;
    const TopList list(path, key);
    if (key == "images") {
      have_images = true;
      read_images(list, field.value);
    } else if (key == "categories") {
      read_categories(list, field.value);
    } else if (key == "annotations") {
      std::size_t at = 0;
      for (dom::element e : list.list(field.value)) {
        add_annotation(list.object(e, at), at, path);
        ++at;
      }
    }
  }
  if (!have_images) fail("annotations '" + path + "': no 'images' list");
}

void CocoJsonReader::read_images(const TopList& list, dom::element value) {
  std::size_t at = 0;
  for (dom::element e : list.list(value)) {
    images_.push_back(read_image(list, e, at));
    ++at;
  }
}

/// One entry of "images": its id, height, width and LVIS' category lists.
ImageInfo CocoJsonReader::read_image(const TopList& list, dom::element e, std::size_t at) {
  const auto where = [&, e, at] { return list.entry_where(e, at); };
  ImageInfo im{0, 0, 0};
  bool has_id = false;
  for (const auto f : list.object(e, at)) {
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
    } else if (k == "neg_category_ids") {
      std::tie(im.neg_at, im.neg_n) = read_image_cat_list(f.value, k, data_->neg, where);
      lvis_lists_ = true;
    } else if (k == "not_exhaustive_category_ids") {
      std::tie(im.nel_at, im.nel_n) = read_image_cat_list(f.value, k, data_->nel, where);
      lvis_lists_ = true;
    }
  }
  if (!has_id) fail(where() + ": no 'id'");
  return im;
}

/// The entries of "categories": their ids and LVIS' frequency ("r" rare, "c" common, "f"
/// frequent). An entry without an id is left out.
void CocoJsonReader::read_categories(const TopList& list, dom::element value) {
  std::size_t at = 0;
  for (dom::element e : list.list(value)) {
    const auto where = [&, e, at] { return list.entry_where(e, at); };
    std::int64_t id = 0;
    bool has_id = false;
    int freq = -1;
    for (const auto f : list.object(e, at)) {
      if (f.key == "id") {
        naming_the_key(where, f.key, f.value, [&] { id = get_id(f.value); });
        has_id = true;
      } else if (f.key == "frequency") {
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
}

}  // namespace tally_coco_json
