// Decoding one PNG file with libspng into a tally::Tensor, as a label map or as an image.
#pragma once

#include <filesystem>
#include <string>

#include "tally/tensor.hpp"

namespace tally_png {

/// A single-channel label map [H, W]: U8 for grayscale up to 8 bits and palette PNGs (the
/// palette index, not its colour), U16 for 16-bit grayscale. Grayscale of 1, 2 or 4 bits is
/// scaled to 8 bits as PIL, OpenCV and libpng read it (2-bit 1 -> 85); palette indices are never
/// scaled. InputError "<what>: <path>: <reason>" for an unreadable, corrupt or multi-channel file.
tally::Tensor decode_mask(const std::filesystem::path& path, const std::string& what);

/// An image [H, W, C] with the channels as stored: C = 1 (grayscale), 2 (grayscale + alpha),
/// 3 (RGB; palette without transparency), 4 (RGBA; palette with a tRNS chunk); U8 for up to 8
/// bits a channel (low-bit grayscale scaled to 8 bits), U16 for 16 bits.
tally::Tensor decode_image(const std::filesystem::path& path, const std::string& what);

}  // namespace tally_png
