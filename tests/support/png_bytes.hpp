// A minimal PNG encoder for tests: chunks with their CRCs, stored (uncompressed) deflate
// blocks, and the Png of given samples; and a file that is only a header declaring a size.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tally::test {

inline std::uint32_t crc32(const std::string& bytes) {
  static const auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t n = 0; n < 256; ++n) {
      std::uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

inline void put32(std::string& out, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out += static_cast<char>((v >> s) & 0xFF);
}

inline std::string chunk(const std::string& type, const std::string& data) {
  std::string out;
  put32(out, static_cast<std::uint32_t>(data.size()));
  const std::string body = type + data;
  out += body;
  put32(out, crc32(body));
  return out;
}

/// zlib stream of stored (uncompressed) deflate blocks.
inline std::string zlib_stored(const std::string& raw) {
  std::string out = "\x78\x01";
  std::size_t at = 0;
  do {
    const std::size_t n = std::min<std::size_t>(65535, raw.size() - at);
    const bool last = at + n == raw.size();
    out += static_cast<char>(last ? 1 : 0);
    out += static_cast<char>(n & 0xFF);
    out += static_cast<char>(n >> 8);
    out += static_cast<char>(~n & 0xFF);
    out += static_cast<char>((~n >> 8) & 0xFF);
    out += raw.substr(at, n);
    at += n;
  } while (at < raw.size());
  std::uint32_t a = 1, b = 0;
  for (unsigned char c : raw) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  put32(out, (b << 16) | a);
  return out;
}

/// The PNG signature and an IHDR chunk: `width` x `height`, `color_type`, `bit_depth`, deflate,
/// no filter method, no interlacing.
inline std::string png_signature_and_ihdr(std::uint32_t width, std::uint32_t height, int color_type,
                                          int bit_depth) {
  std::string ihdr;
  put32(ihdr, width);
  put32(ihdr, height);
  ihdr += static_cast<char>(bit_depth);
  ihdr += static_cast<char>(color_type);
  ihdr += std::string(3, '\0');
  return "\x89PNG\r\n\x1a\n" + chunk("IHDR", ihdr);
}

struct Png {
  std::uint32_t width = 0, height = 0;
  int bit_depth = 8;
  int color_type = 0;                  // 0 gray, 2 RGB, 3 palette, 4 gray+alpha, 6 RGBA
  std::vector<std::uint16_t> samples;  // row-major, channels interleaved
  std::string palette;                 // PLTE bytes (palette images)
  std::string trns;                    // tRNS bytes, if any

  int channels() const {
    return color_type == 2 ? 3 : color_type == 4 ? 2 : color_type == 6 ? 4 : 1;
  }

  std::string encode() const {
    std::string raw;
    const int c = channels();
    for (std::uint32_t y = 0; y < height; ++y) {
      raw += '\0';  // filter: none
      if (bit_depth < 8) {
        int acc = 0, used = 0;
        for (std::uint32_t x = 0; x < width; ++x) {
          acc = (acc << bit_depth) | samples[y * width + x];
          used += bit_depth;
          if (used == 8) raw += static_cast<char>(acc), acc = 0, used = 0;
        }
        if (used > 0) raw += static_cast<char>(acc << (8 - used));
      } else {
        for (std::uint32_t i = 0; i < width * static_cast<std::uint32_t>(c); ++i) {
          const std::uint16_t v = samples[y * width * c + i];
          if (bit_depth == 16) raw += static_cast<char>(v >> 8);
          raw += static_cast<char>(v & 0xFF);
        }
      }
    }
    std::string out = png_signature_and_ihdr(width, height, color_type, bit_depth);
    if (!palette.empty()) out += chunk("PLTE", palette);
    if (!trns.empty()) out += chunk("tRNS", trns);
    out += chunk("IDAT", zlib_stored(raw));
    out += chunk("IEND", "");
    return out;
  }
};

/// A PNG whose IHDR declares `width` x `height` of `color_type` and `bit_depth`, followed by an
/// IDAT of `idat_bytes` zeros (not a valid stream: only the header is meant to be read) and
/// IEND. A small file declaring a huge image: the size a reader must refuse before decoding.
inline std::string png_declaring(std::uint32_t width, std::uint32_t height, int color_type,
                                 int bit_depth, std::size_t idat_bytes) {
  return png_signature_and_ihdr(width, height, color_type, bit_depth) +
         chunk("IDAT", std::string(idat_bytes, '\0')) + chunk("IEND", "");
}

}  // namespace tally::test
