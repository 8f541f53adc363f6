// The coco_json reader's grouping: the images sorted by id, the ground truth and this shard's
// results grouped by image (categories absent from "categories" left out), ground-truth masks
// rasterised or taken as they are, and the results' masks decoded batch by batch (decode_masks).
#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "coco_json_reader.hpp"

namespace tally_coco_json {

/// Sorts the images and categories by id; the images' index (image id -> position). Image ids
/// listed twice are an error.
ImageIndex CocoJsonReader::index_images() {
  std::sort(images_.begin(), images_.end(),
            [](const ImageInfo& a, const ImageInfo& b) { return a.id < b.id; });
  for (std::size_t i = 1; i < images_.size(); ++i)
    if (images_[i].id == images_[i - 1].id)
      fail("annotations: image id " + std::to_string(images_[i].id) + " is listed twice");
  ImageIndex index;
  index.reserve(images_.size() * 2);
  for (std::size_t i = 0; i < images_.size(); ++i) index.emplace(images_[i].id, i);
  std::sort(cats_.begin(), cats_.end());
  return index;
}

/// Whether category c is in "categories" (cats_ sorted).
bool CocoJsonReader::known_cat(std::int32_t c) const {
  return std::binary_search(cats_.begin(), cats_.end(), static_cast<std::int64_t>(c));
}

void CocoJsonReader::group(const tally::ShardInfo& shard, const std::string& res_path,
                           int threads) {
  const ImageIndex index = index_images();
  set_samples(static_cast<std::int64_t>(images_.size()), shard);
  const auto lo = static_cast<std::size_t>(shard_range().begin),
             hi = static_cast<std::size_t>(shard_range().end);
  // The two touch nothing in common (they only read the image index): side by side with two
  // threads or more. An error in the ground truth comes first, as it would one after the other.
  if (threads < 2) {
    group_gt(index);
    group_results(index, res_path, lo, hi);
    return;
  }
  std::exception_ptr gt_error;
  std::thread gt_thread([&] {
    try {
      group_gt(index);
    } catch (...) {
      gt_error = std::current_exception();
    }
  });
  std::exception_ptr res_error;
  try {
    group_results(index, res_path, lo, hi);
  } catch (...) {
    res_error = std::current_exception();
  }
  gt_thread.join();
  if (gt_error) std::rethrow_exception(gt_error);
  if (res_error) std::rethrow_exception(res_error);
}

// ---- ground truth: every image (it is small); grouped by image, file order kept.

/// The ground truth of known categories, its image ids turned into image indices: their
/// positions, ordered by image (file order kept within an image).
std::vector<std::size_t> CocoJsonReader::known_gt(const ImageIndex& index) {
  Instances& gt = data_->gt;
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
  return keep;
}

/// Each array at its size at once: grown by doubling, the keypoints (51 doubles a person) would
/// hold the copy, the array it grows from and the parsed one at once.
void CocoJsonReader::reserve_gt(Instances& out, std::size_t n) const {
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
}

/// Ground truth j's mask (of image im), rasterised from its polygons or taken as its RLE, and
/// checked against the image, appended to out.
void CocoJsonReader::add_gt_mask(std::size_t j, std::size_t im, Instances& out) {
  Data& d = *data_;
  const Instances& gt = d.gt;
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

void CocoJsonReader::group_gt(const ImageIndex& index) {
  Data& d = *data_;
  Instances& gt = d.gt;
  const std::vector<std::size_t> keep = known_gt(index);
  Instances out;
  reserve_gt(out, keep.size());
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
    if (with_masks_) add_gt_mask(j, im, out);
  }
  for (std::size_t i = 0; i < images_.size(); ++i) d.gt_begin[i + 1] += d.gt_begin[i];
  gt = std::move(out);
  gt_segs_.clear();
  gt_segs_.shrink_to_fit();
}

// ---- results: only this shard's images. When each image's kept results sit together in the
// file (the usual layout) the fields are views of the parsed arrays; otherwise (or with masks)
// they are regrouped by image, file order kept within an image.

/// Each result's image within the shard [lo, hi), -1 for one of another shard or of an unknown
/// category. A result whose image is not in the annotations is an error (pycocotools asserts).
std::vector<std::int32_t> CocoJsonReader::result_images(const ImageIndex& index,
                                                        const std::string& res_path, std::size_t lo,
                                                        std::size_t hi) {
  Instances& dt = data_->dt;
  const std::size_t n = dt.size();
  std::vector<std::int32_t> img(n);
  for (std::size_t j = 0; j < n; ++j) {
    const auto it = index.find(dt.image[j]);
    if (it == index.end())
      fail("results '" + res_path + "': entry " + std::to_string(j) + ": image_id " +
           std::to_string(dt.image[j]) + " is not in the annotations");
    const auto im = it->second;
    img[j] =
        (im >= lo && im < hi && known_cat(dt.label[j])) ? static_cast<std::int32_t>(im - lo) : -1;
  }
  dt.image.clear();
  dt.image.shrink_to_fit();
  return img;
}

/// Sets each image's run of results (dt_first, dt_count); false when an image's results do not
/// sit in one run (or with masks: those are always regrouped).
bool CocoJsonReader::results_in_runs(const std::vector<std::int32_t>& img,
                                     std::size_t shard_images) {
  Data& d = *data_;
  const std::size_t n = img.size();
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
  return runs_ok;
}

/// The kept results moved into image order (file order kept within an image).
void CocoJsonReader::regroup_results(const std::vector<std::int32_t>& img,
                                     std::size_t shard_images) {
  Data& d = *data_;
  Instances& dt = d.dt;
  const std::size_t n = img.size();
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

/// The masks stay compressed until their batch is read (decode_masks): a batch's counts are
/// decoded, never every result's at once. Here: where each result's string starts (the results
/// are in image order now), and that their images can hold masks.
void CocoJsonReader::index_result_masks(const std::string& res_path, std::size_t lo,
                                        std::size_t shard_images) {
  Data& d = *data_;
  Instances& dt = d.dt;
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

void CocoJsonReader::group_results(const ImageIndex& index, const std::string& res_path,
                                   std::size_t lo, std::size_t hi) {
  const std::size_t shard_images = hi - lo;
  const std::vector<std::int32_t> img = result_images(index, res_path, lo, hi);
  if (!results_in_runs(img, shard_images)) regroup_results(img, shard_images);
  if (with_masks_) index_result_masks(res_path, lo, shard_images);
}

/// Decodes the result masks of images [begin, end) (indices into images_) into `out`, in order;
/// `at` gets each image's offset, + end. Polygons and boxes are rasterised at their image's
/// size; a mask's area (loadRes' maskUtils.area) and, for a result without a bbox, its box
/// (toBbox) are set here, and each result's count length. Runs on the read-ahead thread too: it
/// writes only the entries of these images' results.
void CocoJsonReader::decode_masks(std::size_t begin, std::size_t end,
                                  std::vector<std::uint32_t>& out, std::vector<std::size_t>& at) {
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
    const auto h = static_cast<std::uint32_t>(im.height), w = static_cast<std::uint32_t>(im.width);
    const std::size_t k0 = d.dt_first[i - shard_begin];
    for (std::size_t k = k0; k < k0 + d.dt_count[i - shard_begin]; ++k) {
      const std::int32_t src = dt.mask_src[k];
      if (src <= -2) {
        // Polygons (the result has a bbox): annToRLE rasterises them at the image's size.
        r = polys_to_rle(dt_polys_[static_cast<std::size_t>(-2 - std::int64_t{src})], h, w, where);
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

}  // namespace tally_coco_json
