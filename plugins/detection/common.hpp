// Shared input handling of the detection metrics: the per-image fields (one tensor per image),
// their checks, box formats and masks. A per-image field may be ragged (one tensor per image) or
// dense [N, ...] (image i is row i: a reader makes it so when every image has the same number of
// boxes); both read the same (tally::PerSample). Boxes, scores and areas may be float or integer
// (integers are read as float64, exactly, as numpy does); an empty 1-D tensor (`[]`) is an image
// with no boxes.
//
// Fields, per image (sample):
//   img_id                    dense int [N]       image id (COCO's image_id)
//   height, width             dense int [N]       image size; needed for masks given as RLE counts
//   pred_bboxes               ragged float [n, 4] boxes x1, y1, x2, y2 (mmeval's convention), or
//   pred_bboxes_xywh          ragged float [n, 4] boxes x, y, w, h (COCO's convention)
//   pred_scores               ragged float [n]
//   pred_labels               ragged int [n]      category ids
//   pred_areas                ragged float [n]    optional; default w*h (boxes), mask area (segm)
//   pred_masks                ragged bool/uint8 [n, H, W]  binary masks, or
//   pred_rle_counts, pred_rle_lengths  ragged uint32 [sum m], int [n]: uncompressed RLE counts
//                             (column-major, as COCO) of the n masks, concatenated
//   gt_bboxes / gt_bboxes_xywh, gt_labels, gt_masks / gt_rle_counts + gt_rle_lengths: the same
//   gt_ids                    ragged int [g]      optional (default 1..g); an id of 0 behaves as in
//                             pycocotools (a match to it counts as no match)
//   gt_areas                  ragged float [g]    optional; default the mask area when GT masks
//                             are given, else w*h
//   gt_iscrowd                ragged int/bool [g] optional (default 0); crowd = ignored
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/parallel.hpp"
#include "tally_support/mask.hpp"

namespace tally::detection {

namespace mask = tally::support::mask;  // COCO RLE masks (plugins/support)

/// The per-image field `name` (ragged, or dense [N, ...] whose row i is image i: a reader makes a
/// field dense when every image has the same number of boxes), or nothing when the batch does not
/// have it.
inline std::optional<PerSample> per_image(const Batch& b, std::string_view name,
                                          const InputChecker& check) {
  return PerSample::if_present(b, name, check);
}

/// The per-image field `name`, which the metric requires: an InputError naming it when the batch
/// does not have it.
inline PerSample required_per_image(const Batch& b, std::string_view name,
                                    const InputChecker& check) {
  auto r = per_image(b, name, check);
  if (!r) check.fail(name, "is missing from the batch");
  return std::move(*r);
}

/// The ignored boxes' fields gt_bboxes_ignore and gt_labels_ignore: both or neither (an
/// InputError names the one missing).
inline std::pair<std::optional<PerSample>, std::optional<PerSample>> ignored_boxes(
    const Batch& b, const InputChecker& check) {
  auto ib = per_image(b, "gt_bboxes_ignore", check);
  auto il = per_image(b, "gt_labels_ignore", check);
  if (ib.has_value() != il.has_value())
    check.fail(ib ? "gt_labels_ignore" : "gt_bboxes_ignore",
               "is missing: ignored boxes need gt_bboxes_ignore and gt_labels_ignore");
  return {std::move(ib), std::move(il)};
}

/// A dense per-image integer field as int64 (nullptr-free: InputError when missing).
inline std::vector<std::int64_t> dense_ints(const Batch& b, std::string_view name,
                                            const InputChecker& check) {
  const Tensor& t = check.tensor(b, name);
  if (!is_integral(t.dtype())) check.fail(name, "must hold integers, got " + t.describe());
  check.dims(t, name, 1, "[N]");
  std::vector<std::int64_t> out(static_cast<std::size_t>(t.numel()));
  visit_integral(t, [&](const auto* p) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::int64_t>(p[i]);
  });
  return out;
}

inline std::string sample_str(std::int64_t s) { return "sample " + std::to_string(s); }

/// Whether an image's tensor holds values at float64 precision (float64, or integers: integer
/// boxes, as VOC annotation files hold them, are read as float64, exactly, as numpy does).
inline bool is_wide(const Tensor& t) { return t.dtype() != DType::F32; }

/// The largest integer magnitude a float64 holds exactly (2^53).
inline constexpr std::int64_t kExactIntLimit = std::int64_t{1} << 53;

/// One image's tensor of a per-image field, checked: float or integer (converted to float64
/// exactly), `cols` columns (0: 1-D), `n` rows (-1: any), no NaN. An empty 1-D tensor (`[]`, an
/// image with no boxes) is zero rows of `cols` columns. Appends its values as double.
inline std::int64_t read_floats(const Tensor& t, std::string_view field, std::int64_t sample,
                                std::int64_t cols, std::int64_t n, const InputChecker& check,
                                std::vector<double>& out) {
  if (t.is_cuda()) check.fail(field, sample_str(sample) + ": is a CUDA tensor");
  if (!is_floating(t.dtype()) && !is_integral(t.dtype()))
    check.fail(field, sample_str(sample) + ": must hold numbers, got " + t.describe());
  const bool empty_list = t.dim() == 1 && t.numel() == 0;
  const std::int64_t rows = empty_list ? 0 : t.dim() >= 1 ? t.size(0) : 0;
  const bool shape_ok =
      empty_list || (cols == 0 ? t.dim() == 1 : (t.dim() == 2 && t.size(1) == cols));
  if (!shape_ok)
    check.fail(field, sample_str(sample) + ": must be " +
                          (cols == 0 ? std::string("[n]") : "[n, " + std::to_string(cols) + "]") +
                          ", got " + t.describe());
  if (n >= 0 && rows != n)
    check.fail(field, sample_str(sample) + ": has " + std::to_string(rows) + " rows, expected " +
                          std::to_string(n));
  const std::size_t at = out.size();
  out.resize(at + static_cast<std::size_t>(t.numel()));
  if (is_integral(t.dtype())) {
    visit_integral(t, [&](const auto* p) {
      for (std::int64_t i = 0; i < t.numel(); ++i) {
        const auto v = static_cast<std::int64_t>(p[i]);
        if (v > kExactIntLimit || v < -kExactIntLimit)
          check.fail(field, sample_str(sample) + ": value " + std::to_string(i) + " (" +
                                std::to_string(v) +
                                ") is beyond 2^53 in magnitude: not exact as a float64");
        out[at + static_cast<std::size_t>(i)] = static_cast<double>(v);
      }
    });
    return rows;
  }
  visit_floating(t, [&](const auto* p) {
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      if (std::isnan(p[i]))
        check.fail(field, sample_str(sample) + ": value " + std::to_string(i) + " is NaN");
      out[at + static_cast<std::size_t>(i)] = static_cast<double>(p[i]);
    }
  });
  return rows;
}

inline std::int64_t read_ints(const Tensor& t, std::string_view field, std::int64_t sample,
                              std::int64_t n, const InputChecker& check,
                              std::vector<std::int64_t>& out) {
  if (t.is_cuda()) check.fail(field, sample_str(sample) + ": is a CUDA tensor");
  const bool empty_list = t.dim() == 1 && t.numel() == 0;  // `[]`: no labels, whatever its dtype
  if (!empty_list && !is_integral(t.dtype()) && t.dtype() != DType::Bool)
    check.fail(field, sample_str(sample) + ": must hold integers, got " + t.describe());
  if (t.dim() != 1) check.fail(field, sample_str(sample) + ": must be [n], got " + t.describe());
  if (n >= 0 && t.size(0) != n)
    check.fail(field, sample_str(sample) + ": has " + std::to_string(t.size(0)) +
                          " values, expected " + std::to_string(n));
  if (empty_list) return 0;
  const std::size_t at = out.size();
  out.resize(at + static_cast<std::size_t>(t.numel()));
  if (t.dtype() == DType::Bool) {
    const bool* p = t.data_as<bool>();
    for (std::int64_t i = 0; i < t.numel(); ++i) out[at + static_cast<std::size_t>(i)] = p[i];
  } else {
    visit_integral(t, [&](const auto* p) {
      for (std::int64_t i = 0; i < t.numel(); ++i)
        out[at + static_cast<std::size_t>(i)] = static_cast<std::int64_t>(p[i]);
    });
  }
  return t.size(0);
}

/// xyxy -> xywh as mmeval's xyxy2xywh does ([x1, y1, x2 - x1, y2 - y1] in double).
inline void xyxy_to_xywh(std::vector<double>& b) {
  for (std::size_t i = 0; i + 3 < b.size(); i += 4) {
    b[i + 2] -= b[i];
    b[i + 3] -= b[i + 1];
  }
}

/// The boxes of one side ("pred" or "gt") of image i, xywh, in `out`; returns false when the
/// batch has neither box field.
inline bool read_boxes(const Batch& b, const std::string& side, std::int64_t i, std::int64_t sample,
                       std::int64_t n, const InputChecker& check, std::vector<double>& out) {
  const std::string xyxy = side + "_bboxes", xywh = side + "_bboxes_xywh";
  if (const auto r = per_image(b, xywh, check)) {
    read_floats((*r)[i], xywh, sample, 4, n, check, out);
    return true;
  }
  if (const auto r = per_image(b, xyxy, check)) {
    read_floats((*r)[i], xyxy, sample, 4, n, check, out);
    xyxy_to_xywh(out);
    return true;
  }
  return false;
}

/// The masks of one side of image i as RLEs; returns false when the batch has no mask field.
inline bool read_masks(const Batch& b, const std::string& side, std::int64_t i, std::int64_t sample,
                       std::int64_t n, std::int64_t height, std::int64_t width,
                       const InputChecker& check, std::vector<mask::Rle>& out) {
  const std::string masks = side + "_masks", counts = side + "_rle_counts",
                    lengths = side + "_rle_lengths";
  if (const auto r = per_image(b, masks, check)) {
    const Tensor t = (*r)[i];
    if (t.is_cuda()) check.fail(masks, sample_str(sample) + ": is a CUDA tensor");
    if (n == 0 && t.dim() == 1 && t.numel() == 0) return true;  // `[]`: no masks
    if ((t.dtype() != DType::Bool && t.dtype() != DType::U8) || t.dim() != 3)
      check.fail(masks,
                 sample_str(sample) + ": must be bool or uint8 [n, H, W], got " + t.describe());
    if (t.size(0) != n)
      check.fail(masks, sample_str(sample) + ": has " + std::to_string(t.size(0)) +
                            " masks, expected " + std::to_string(n));
    const auto h = static_cast<std::uint32_t>(t.size(1)), w = static_cast<std::uint32_t>(t.size(2));
    const auto* p = static_cast<const std::uint8_t*>(t.data());
    for (std::int64_t j = 0; j < n; ++j)
      out.push_back(mask::rle_encode_row_major(p + static_cast<std::size_t>(j) * h * w, h, w));
    return true;
  }
  const auto rc = per_image(b, counts, check);
  const auto rl = per_image(b, lengths, check);
  if (!rc && !rl) return false;
  if (!rc || !rl)
    check.fail(rc ? lengths : counts,
               "is missing: masks as RLE need both '" + counts + "' and '" + lengths + "'");
  if (height < 0 || width < 0)
    check.fail("height", "is needed (with 'width') for masks given as RLE counts");
  if (height >= mask::kMaxSide || width >= mask::kMaxSide)
    check.fail(height >= mask::kMaxSide ? "height" : "width",
               sample_str(sample) + ": image size " + std::to_string(height) + "x" +
                   std::to_string(width) + " is out of range (each side must be below 2^31)");
  std::vector<std::int64_t> lens;
  read_ints((*rl)[i], lengths, sample, n, check, lens);
  const Tensor c = (*rc)[i];
  if (c.is_cuda() || c.dtype() != DType::U32 || c.dim() != 1)
    check.fail(counts,
               sample_str(sample) + ": must be uint32 [sum of lengths], got " + c.describe());
  std::int64_t total = 0;
  for (const auto l : lens) {
    if (l < 0 || l > c.size(0))
      check.fail(lengths, sample_str(sample) + ": length " + std::to_string(l) +
                              " is outside [0, " + std::to_string(c.size(0)) +
                              "] (the number of counts)");
    total += l;
  }
  if (total != c.size(0))
    check.fail(counts, sample_str(sample) + ": has " + std::to_string(c.size(0)) +
                           " counts, the lengths add up to " + std::to_string(total));
  const auto* p = c.data_as<std::uint32_t>();
  const std::uint64_t pixels =
      static_cast<std::uint64_t>(height) * static_cast<std::uint64_t>(width);
  std::size_t at = 0;
  for (std::size_t j = 0; j < lens.size(); ++j) {
    mask::Rle rle{static_cast<std::uint32_t>(height), static_cast<std::uint32_t>(width), {}};
    rle.cnts.assign(p + at, p + at + lens[j]);
    std::uint64_t sum = 0;
    for (const auto v : rle.cnts) sum += v;
    if (sum != pixels)
      check.fail(counts, sample_str(sample) + ": mask " + std::to_string(j) + " covers " +
                             std::to_string(sum) + " pixels, the image has " +
                             std::to_string(height) + "x" + std::to_string(width));
    at += static_cast<std::size_t>(lens[j]);
    out.push_back(std::move(rle));
  }
  return true;
}

}  // namespace tally::detection

namespace tally::detection {

/// mmeval's calculate_overlaps (mode 'iou') for one pair of xyxy boxes, in float32 as mmeval
/// computes it (both box arrays cast to float32, eps 1e-6 on the union); `extra` is 1 with
/// use_legacy_coordinate, else 0.
inline float mmeval_iou(const float* a, const float* b, float extra) {
  const float area_a = (a[2] - a[0] + extra) * (a[3] - a[1] + extra);
  const float area_b = (b[2] - b[0] + extra) * (b[3] - b[1] + extra);
  const float x_start = std::max(a[0], b[0]), y_start = std::max(a[1], b[1]);
  const float x_end = std::min(a[2], b[2]), y_end = std::min(a[3], b[3]);
  const float w = std::max(x_end - x_start + extra, 0.0f);
  const float h = std::max(y_end - y_start + extra, 0.0f);
  const float overlap = w * h;
  float u = area_a + area_b - overlap;
  u = std::max(u, static_cast<float>(1e-6));
  return overlap / u;
}

/// Reads one image's xyxy boxes [n, 4] of a ragged field as float32 (mmeval casts to float32 for
/// IoU) and as the area dtype: `wide` says whether the tensor is float64.
inline std::int64_t read_boxes_f32(const Tensor& t, std::string_view field, std::int64_t sample,
                                   std::int64_t n, const InputChecker& check,
                                   std::vector<float>& f32, std::vector<double>& f64, bool& wide) {
  const std::size_t at = f64.size();
  const std::int64_t rows = read_floats(t, field, sample, 4, n, check, f64);
  wide = is_wide(t);
  for (std::size_t i = at; i < f64.size(); ++i) f32.push_back(static_cast<float>(f64[i]));
  return rows;
}

}  // namespace tally::detection
