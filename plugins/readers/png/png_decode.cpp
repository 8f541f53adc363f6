// PNG decoding with libspng. The file is read whole (PNGs are small next to their pixels), parsed
// by libspng with CRC checks on, and decoded straight into the tensor's memory: SPNG_FMT_PNG (the
// stored format, host-endian) where tally keeps the stored layout, and libspng's RGB8/RGBA8
// conversions only to expand a palette for `images`.
#include "png_decode.hpp"

#include <fcntl.h>
#include <spng.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tally/sdk/error.hpp"
#include "tally_support/folder_fields.hpp"

namespace tally_png {
namespace {

namespace fs = std::filesystem;
using tally::DType;
using tally::InputError;
using tally::Tensor;

// Far beyond any real mask or image, and small enough that H * W * 8 bytes cannot overflow.
constexpr std::uint32_t kMaxSide = 1u << 20;
constexpr std::size_t kMaxChunkBytes = std::size_t{64} << 20;

[[noreturn]] void fail(const std::string& what, const fs::path& path, const std::string& reason) {
  throw InputError(fmt::format("{}: {}: {}", what, path.string(), reason));
}

/// The file opened read-only without blocking, refused unless it is a regular file (a FIFO would
/// wait for a writer, /dev/zero never end); closed when it goes.
class PngFile {
 public:
  PngFile(const fs::path& path, const std::string& what)
      : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)) {
    if (fd_ < 0) fail(what, path, fmt::format("cannot open: {}", std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      const std::string kind = tally::support::not_regular_kind(path);
      ::close(fd_);
      fail(what, path, fmt::format("not a regular file ({}); a PNG file was expected", kind));
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  PngFile(const PngFile&) = delete;
  PngFile& operator=(const PngFile&) = delete;
  ~PngFile() { ::close(fd_); }

  std::uint64_t size() const { return size_; }

  /// Up to `max` bytes from the start.
  std::string read(std::uint64_t max, const fs::path& path, const std::string& what) const {
    std::string bytes;
    char buf[1 << 16];
    while (bytes.size() < max) {
      const auto want =
          static_cast<std::size_t>(std::min<std::uint64_t>(sizeof buf, max - bytes.size()));
      const ssize_t n = ::read(fd_, buf, want);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(what, path, fmt::format("cannot read: {}", std::strerror(errno)));
      if (n == 0) break;
      bytes.append(buf, static_cast<std::size_t>(n));
    }
    return bytes;
  }

 private:
  int fd_;
  std::uint64_t size_ = 0;
};

std::string read_file(const fs::path& path, const std::string& what) {
  const PngFile f(path, what);
  return f.read(~std::uint64_t{0}, path, what);
}

const char* color_type_name(std::uint8_t t) {
  switch (t) {
    case SPNG_COLOR_TYPE_GRAYSCALE:
      return "grayscale";
    case SPNG_COLOR_TYPE_TRUECOLOR:
      return "RGB";
    case SPNG_COLOR_TYPE_INDEXED:
      return "palette";
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA:
      return "grayscale + alpha";
    case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA:
      return "RGBA";
  }
  return "unknown";
}

std::string describe_ihdr(const spng_ihdr& h) {
  return fmt::format("{}, {}-bit", color_type_name(h.color_type), h.bit_depth);
}

/// The channels the file stores a pixel in (a palette index is one).
std::uint64_t stored_channels(std::uint8_t color_type) {
  switch (color_type) {
    case SPNG_COLOR_TYPE_TRUECOLOR:
      return 3;
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA:
      return 2;
    case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA:
      return 4;
    default:
      return 1;
  }
}

// The pixels a header declares must fit in the file: deflate compresses at most 1032:1, so a
// file of N bytes holds at most about 1032 N bytes of pixels. A header that declares more is a
// corrupt or truncated file, refused before the decoded image is allocated (a 40-byte file must
// not make tally allocate gigabytes).
void check_pixels_fit(const spng_ihdr& h, std::uint64_t file_bytes, const std::string& what,
                      const fs::path& path) {
  const std::uint64_t pixel_bytes = std::uint64_t{h.height} * h.width *
                                    stored_channels(h.color_type) * h.bit_depth /
                                    8;  // H, W <= 2^20: no overflow
  const std::uint64_t can_hold = file_bytes * 1032 + (std::uint64_t{1} << 16);
  if (pixel_bytes > can_hold)
    fail(what, path,
         fmt::format("its header declares {}x{} {} pixels ({} bytes), more than a file of {} "
                     "bytes can hold: the file is truncated or corrupt",
                     h.width, h.height, describe_ihdr(h), pixel_bytes, file_bytes));
}

/// A libspng decoder over the bytes of one file, its header parsed.
class Decoder {
 public:
  Decoder(const fs::path& path, const std::string& what)
      : path_(path),
        what_(what),
        bytes_(read_file(path, what)),
        ctx_(spng_ctx_new(0), &spng_ctx_free) {
    if (!ctx_) fail(what_, path_, "libspng could not allocate a decoder");
    check(spng_set_image_limits(ctx_.get(), kMaxSide, kMaxSide), "set limits");
    check(spng_set_chunk_limits(ctx_.get(), kMaxChunkBytes, kMaxChunkBytes), "set limits");
    check(spng_set_png_buffer(ctx_.get(), bytes_.data(), bytes_.size()), "not a PNG file");
    check(spng_get_ihdr(ctx_.get(), &ihdr_), "not a valid PNG file");
    check_pixels_fit(ihdr_, bytes_.size(), what_, path_);
  }

  const spng_ihdr& ihdr() const { return ihdr_; }
  std::int64_t height() const { return ihdr_.height; }
  std::int64_t width() const { return ihdr_.width; }
  std::string describe() const { return describe_ihdr(ihdr_); }
  bool has_trns() {
    spng_trns trns;
    return spng_get_trns(ctx_.get(), &trns) == 0;
  }

  /// The size libspng decodes the image to in format `format`.
  std::size_t decoded_size(int format) {
    std::size_t size = 0;
    check(spng_decoded_image_size(ctx_.get(), format, &size), "cannot decode");
    return size;
  }

  /// Decodes the whole image in format `format` into `size` bytes at `out`.
  void decode(void* out, std::size_t size, int format, int flags = 0) {
    check(spng_decode_image(ctx_.get(), out, size, format, flags), "cannot decode");
  }

  /// Decodes into `out`, whose size must be the decoded size.
  void decode(Tensor& out, int format, int flags = 0) {
    const std::size_t size = decoded_size(format);
    if (size != out.nbytes())
      fail(what_, path_,
           fmt::format("libspng decodes {} bytes, expected {} ({})", size, out.nbytes(),
                       out.describe()));
    decode(out.mutable_data(), size, format, flags);
  }

  [[noreturn]] void fail_here(const std::string& reason) const { fail(what_, path_, reason); }

 private:
  void check(int rc, const char* doing) const {
    if (rc != 0) fail(what_, path_, fmt::format("{} (libspng: {})", doing, spng_strerror(rc)));
  }

  fs::path path_;
  std::string what_;
  std::string bytes_;
  std::unique_ptr<spng_ctx, void (*)(spng_ctx*)> ctx_;
  spng_ihdr ihdr_{};
};

/// Unpacks rows of `bits`-bit samples (1, 2 or 4; the first sample in the high bits, each row
/// starting on a byte) in place into one byte a sample; `scale` multiplies each value (255 / max
/// for grayscale, 1 for palette indices). `data` holds height * width bytes; the packed rows sit
/// at its start.
void unpack_low_bits(std::uint8_t* data, std::int64_t height, std::int64_t width, int bits,
                     int scale) {
  const std::int64_t packed_row = (width * bits + 7) / 8;
  const int mask = (1 << bits) - 1;
  // Backwards, rows and samples: an unpacked row never overwrites packed bytes not yet read.
  for (std::int64_t y = height - 1; y >= 0; --y) {
    const std::uint8_t* in = data + y * packed_row;
    std::uint8_t* out = data + y * width;
    for (std::int64_t x = width - 1; x >= 0; --x) {
      const std::int64_t bit = x * bits;
      const int shift = 8 - bits - static_cast<int>(bit % 8);
      out[x] = static_cast<std::uint8_t>(((in[bit / 8] >> shift) & mask) * scale);
    }
  }
}

}  // namespace

Header read_header(const fs::path& path, const std::string& what) {
  const PngFile f(path, what);
  // The signature (8 bytes) and the IHDR chunk (length, type, 13 bytes, CRC): 33 bytes.
  std::string bytes = f.read(33, path, what);
  std::unique_ptr<spng_ctx, void (*)(spng_ctx*)> ctx(spng_ctx_new(0), &spng_ctx_free);
  if (!ctx) fail(what, path, "libspng could not allocate a decoder");
  const auto check = [&](int rc, const char* doing) {
    if (rc != 0) fail(what, path, fmt::format("{} (libspng: {})", doing, spng_strerror(rc)));
  };
  check(spng_set_image_limits(ctx.get(), kMaxSide, kMaxSide), "set limits");
  check(spng_set_png_buffer(ctx.get(), bytes.data(), bytes.size()), "not a PNG file");
  spng_ihdr ihdr{};
  check(spng_get_ihdr(ctx.get(), &ihdr), "not a valid PNG file");
  check_pixels_fit(ihdr, f.size(), what, path);
  Header h;
  h.width = ihdr.width;
  h.height = ihdr.height;
  h.bit_depth = ihdr.bit_depth;
  h.palette = ihdr.color_type == SPNG_COLOR_TYPE_INDEXED;
  h.channels = static_cast<int>(
      ihdr.color_type == SPNG_COLOR_TYPE_INDEXED ? 4 : stored_channels(ihdr.color_type));
  h.describe = describe_ihdr(ihdr);
  return h;
}

Tensor decode_mask(const fs::path& path, const std::string& what) {
  Decoder d(path, what);
  const auto& h = d.ihdr();
  if (h.color_type != SPNG_COLOR_TYPE_GRAYSCALE && h.color_type != SPNG_COLOR_TYPE_INDEXED)
    d.fail_here(fmt::format(
        "is {}; a label map must have one channel: 8- or 16-bit grayscale, or a palette PNG "
        "whose indices are the class ids (convert colour-coded masks to class ids first)",
        d.describe()));
  const bool wide = h.bit_depth == 16;
  Tensor t = Tensor::zeros(wide ? DType::U16 : DType::U8, {d.height(), d.width()});
  if (h.bit_depth >= 8) {
    d.decode(t, SPNG_FMT_PNG);
    return t;
  }
  // 1, 2 or 4 bits: libspng hands over packed rows, never more bytes than the unpacked map.
  const std::size_t packed = d.decoded_size(SPNG_FMT_PNG);
  if (packed > t.nbytes()) d.fail_here("libspng decodes more bytes than the image has pixels");
  auto* data = t.mutable_data_as<std::uint8_t>();
  d.decode(data, packed, SPNG_FMT_PNG);
  const int scale = h.color_type == SPNG_COLOR_TYPE_INDEXED ? 1 : 255 / ((1 << h.bit_depth) - 1);
  unpack_low_bits(data, d.height(), d.width(), h.bit_depth, scale);
  return t;
}

Tensor decode_image(const fs::path& path, const std::string& what, std::uint64_t max_pixels) {
  Decoder d(path, what);
  const auto& h = d.ihdr();
  if (max_pixels > 0 && std::uint64_t{h.width} * h.height > max_pixels)
    d.fail_here(
        fmt::format("is {}x{} pixels, more than the {} allowed (the file changed since its "
                    "header was read?)",
                    h.width, h.height, max_pixels));
  const bool wide = h.bit_depth == 16;
  const DType dtype = wide ? DType::U16 : DType::U8;
  switch (h.color_type) {
    case SPNG_COLOR_TYPE_INDEXED: {
      // The palette's colours, with its transparency when it has some.
      const bool alpha = d.has_trns();
      Tensor t = Tensor::zeros(DType::U8, {d.height(), d.width(), alpha ? 4 : 3});
      d.decode(t, alpha ? SPNG_FMT_RGBA8 : SPNG_FMT_RGB8, alpha ? SPNG_DECODE_TRNS : 0);
      return t;
    }
    case SPNG_COLOR_TYPE_GRAYSCALE: {
      Tensor t = Tensor::zeros(dtype, {d.height(), d.width(), 1});
      if (h.bit_depth >= 8) {
        d.decode(t, SPNG_FMT_PNG);
      } else {
        const std::size_t packed = d.decoded_size(SPNG_FMT_PNG);
        if (packed > t.nbytes())
          d.fail_here("libspng decodes more bytes than the image has pixels");
        auto* data = t.mutable_data_as<std::uint8_t>();
        d.decode(data, packed, SPNG_FMT_PNG);
        unpack_low_bits(data, d.height(), d.width(), h.bit_depth, 255 / ((1 << h.bit_depth) - 1));
      }
      return t;
    }
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA:
    case SPNG_COLOR_TYPE_TRUECOLOR:
    case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA: {
      const std::int64_t c = h.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA ? 2
                             : h.color_type == SPNG_COLOR_TYPE_TRUECOLOR     ? 3
                                                                             : 4;
      Tensor t = Tensor::zeros(dtype, {d.height(), d.width(), c});
      d.decode(t, SPNG_FMT_PNG);
      return t;
    }
    default:
      break;
  }
  d.fail_here("has an unknown colour type " + std::to_string(h.color_type));
}

}  // namespace tally_png
