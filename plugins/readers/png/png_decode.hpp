// Decoding one PNG file with libspng into a tally::Tensor, as a label map or as an image.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "tally/sdk/tensor.hpp"

namespace tally_png {

/// What a PNG's header declares: its signature and IHDR chunk, read (the first 33 bytes) and
/// checked by libspng (CRC, side limits, pixels that the file's size can hold) without reading
/// or decoding the pixels, so that a reader can bound its memory before it decodes.
struct Header {
  std::int64_t width = 0, height = 0;
  /// The channels decode_image gives: 1 to 4 as stored; a palette counts 4 (RGBA with tRNS).
  int channels = 0;
  int bit_depth = 0;
  bool palette = false;  // palette indices (decode_image expands them to 8-bit RGB or RGBA)
  std::string describe;  // "RGB, 8-bit"
};
/// InputError "<what>: <path>: <reason>" for a file that is not a regular file or whose header
/// is not a valid PNG's.
Header read_header(const std::filesystem::path& path, const std::string& what);

/// A single-channel label map [H, W]: U8 for grayscale up to 8 bits and palette PNGs (the
/// palette index, not its colour), U16 for 16-bit grayscale. Grayscale of 1, 2 or 4 bits is
/// scaled to 8 bits as PIL, OpenCV and libpng read it (2-bit 1 -> 85); palette indices are never
/// scaled. InputError "<what>: <path>: <reason>" for an unreadable, corrupt or multi-channel file.
tally::Tensor decode_mask(const std::filesystem::path& path, const std::string& what);

/// An image [H, W, C] with the channels as stored: C = 1 (grayscale), 2 (grayscale + alpha),
/// 3 (RGB; palette without transparency), 4 (RGBA; palette with a tRNS chunk); U8 for up to 8
/// bits a channel (low-bit grayscale scaled to 8 bits), U16 for 16 bits.
/// `max_pixels` > 0: InputError, before anything is allocated, when the header declares more
/// than that many pixels (width x height), as a reader's budget allows (coco_panoptic).
tally::Tensor decode_image(const std::filesystem::path& path, const std::string& what,
                           std::uint64_t max_pixels = 0);

}  // namespace tally_png
