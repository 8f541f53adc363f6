#include "sound_container.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "tally/sdk/error.hpp"

namespace tally_wav {

const char* const kAcceptedContainers = "WAV (RIFF), RF64, W64, AIFF/AIFC, CAF, FLAC and AU";

namespace {

/// The chunks looked at before the data chunk; a real file has a handful (fmt, fact, LIST, ...).
constexpr int kMaxChunks = 4096;

/// Reads at offsets of the open file, never past its size.
class Bytes {
 public:
  Bytes(int fd, std::uint64_t size, const std::string& file, const std::string& what)
      : fd_(fd), size_(size), file_(file), what_(what) {}

  std::uint64_t size() const { return size_; }

  /// `n` bytes at `at`; false when the file ends before them.
  bool read(std::uint64_t at, void* out, std::size_t n) const {
    if (at > size_ || n > size_ - at) return false;
    auto* p = static_cast<unsigned char*>(out);
    while (n > 0) {
      const ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(at));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) fail(fmt::format("cannot read its header ({})", std::strerror(errno)));
      if (got == 0) return false;
      p += got;
      at += static_cast<std::uint64_t>(got);
      n -= static_cast<std::size_t>(got);
    }
    return true;
  }

  [[noreturn]] void fail(const std::string& problem) const {
    throw tally::InputError(fmt::format("{}: {} {}", what_, file_, problem));
  }
  /// "is truncated: <detail>, the file holds <N> bytes".
  [[noreturn]] void truncated(const std::string& detail) const {
    fail(fmt::format("is truncated: {}", detail));
  }

 private:
  int fd_;
  std::uint64_t size_;
  const std::string& file_;
  const std::string& what_;
};

std::uint64_t le(const unsigned char* b, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | b[i];
  return v;
}
std::uint64_t be(const unsigned char* b, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = v << 8 | b[i];
  return v;
}

bool is(const unsigned char* b, std::string_view tag) {
  return std::memcmp(b, tag.data(), tag.size()) == 0;
}

/// The end of a chunk body of `body` bytes starting at `start` must be within the file.
void check_body(const Bytes& f, const char* chunk, std::uint64_t start, std::uint64_t body) {
  if (body > f.size() || start > f.size() - body)
    f.truncated(fmt::format("its {} chunk declares {} bytes, the file holds {} after it", chunk,
                            body, start > f.size() ? 0 : f.size() - start));
}

/// RIFF/RIFX (32-bit chunk sizes, little- or big-endian) and RF64/BW64 (the data size in ds64).
void check_riff(const Bytes& f, bool big_endian, bool rf64) {
  const auto u = [&](const unsigned char* b, int n) { return big_endian ? be(b, n) : le(b, n); };
  std::uint64_t at = 12, ds64_data = 0;
  bool has_ds64 = false;
  for (int k = 0; k < kMaxChunks; ++k) {
    unsigned char chunk[8];
    if (!f.read(at, chunk, 8)) f.fail("has no data chunk before its end (not a WAV file?)");
    const std::uint64_t body = u(chunk + 4, 4);
    if (rf64 && is(chunk, "ds64")) {
      unsigned char sizes[16];
      if (body < 16 || !f.read(at + 8, sizes, 16)) f.truncated("its ds64 chunk is cut short");
      ds64_data = le(sizes + 8, 8);
      has_ds64 = true;
    } else if (is(chunk, "data")) {
      if (rf64 && body == 0xffffffffu) {
        if (!has_ds64) f.fail("is an RF64 file without a ds64 chunk (the data chunk's size)");
        return check_body(f, "data (ds64)", at + 8, ds64_data);
      }
      // 0xffffffff in a RIFF file: a stream of unknown length (libsndfile takes the rest).
      if (body == 0xffffffffu) return;
      return check_body(f, "data", at + 8, body);
    }
    at += 8 + body + (body % 2);
  }
  f.fail(fmt::format("has more than {} chunks before its data chunk", kMaxChunks));
}

/// Sony Wave64: 16-byte GUIDs, 64-bit little-endian sizes that count the 24-byte chunk header,
/// chunks aligned to 8 bytes.
void check_w64(const Bytes& f) {
  static const unsigned char kData[16] = {'d',  'a',  't',  'a',  0xf3, 0xac, 0xd3, 0x11,
                                          0x8c, 0xd1, 0x00, 0xc0, 0x4f, 0x8e, 0xdb, 0x8a};
  std::uint64_t at = 40;
  for (int k = 0; k < kMaxChunks; ++k) {
    unsigned char chunk[24];
    if (!f.read(at, chunk, 24)) f.fail("has no data chunk before its end (not a W64 file?)");
    const std::uint64_t size = le(chunk + 16, 8);
    if (size < 24)
      f.fail(fmt::format("has a chunk of {} bytes at byte {} (at least 24)", size, at));
    if (std::memcmp(chunk, kData, 16) == 0) return check_body(f, "data", at + 24, size - 24);
    if (size > f.size()) break;  // the next read fails: no data chunk
    at += (size + 7) / 8 * 8;
  }
  f.fail(fmt::format("has more than {} chunks before its data chunk", kMaxChunks));
}

/// AIFF/AIFC: big-endian chunks; COMM declares the frames, SSND holds them (after its 8-byte
/// offset and block size).
void check_aiff(const Bytes& f, const SF_INFO& info) {
  std::uint64_t at = 12, comm_frames = 0, ssnd_bytes = 0;
  bool has_comm = false, has_ssnd = false;
  for (int k = 0; k < kMaxChunks && !(has_comm && has_ssnd); ++k) {
    unsigned char chunk[8];
    if (!f.read(at, chunk, 8)) break;
    const std::uint64_t body = be(chunk + 4, 4);
    if (is(chunk, "COMM")) {
      unsigned char comm[6];
      if (body < 6 || !f.read(at + 8, comm, 6)) f.truncated("its COMM chunk is cut short");
      comm_frames = be(comm + 2, 4);
      has_comm = true;
    } else if (is(chunk, "SSND")) {
      check_body(f, "SSND", at + 8, body);
      ssnd_bytes = body;
      has_ssnd = true;
    }
    at += 8 + body + (body % 2);
  }
  if (!has_comm || !has_ssnd) f.fail("has no COMM or no SSND chunk (not an AIFF file?)");
  if (comm_frames > 0 && static_cast<std::uint64_t>(info.frames) < comm_frames)
    f.truncated(
        fmt::format("its COMM chunk declares {} frames, its SSND chunk of {} bytes holds "
                    "{}",
                    comm_frames, ssnd_bytes, info.frames));
}

/// Core Audio Format: big-endian chunks of 64-bit signed sizes; data of size -1 runs to the end
/// of the file; pakt holds the count of valid frames of a packetized format.
void check_caf(const Bytes& f, const SF_INFO& info) {
  std::uint64_t at = 8;
  for (int k = 0; k < kMaxChunks; ++k) {
    unsigned char chunk[12];
    if (!f.read(at, chunk, 12)) return;  // the end: data was the last chunk, or none
    const std::uint64_t size = be(chunk + 4, 8);
    if (is(chunk, "data")) {
      if (size == ~std::uint64_t{0}) return;  // -1: to the end of the file
      check_body(f, "data", at + 12, size);
    } else if (is(chunk, "pakt")) {
      unsigned char counts[16];
      if (size < 16 || !f.read(at + 12, counts, 16)) f.truncated("its pakt chunk is cut short");
      const std::uint64_t valid = be(counts + 8, 8);
      if (valid > 0 && static_cast<std::uint64_t>(info.frames) < valid)
        f.truncated(
            fmt::format("its pakt chunk declares {} frames, {} are present", valid, info.frames));
    }
    if (size > f.size()) return;  // past the end: libsndfile has read what it could
    at += 12 + size;
  }
  f.fail(fmt::format("has more than {} chunks", kMaxChunks));
}

/// Sun/NeXT AU: a big-endian header of data offset and data size (0xffffffff: unknown).
void check_au(const Bytes& f) {
  unsigned char head[12];
  if (!f.read(0, head, 12)) f.truncated("its header is cut short");
  const bool big = is(head, ".snd");
  const auto u = [&](const unsigned char* b) { return big ? be(b, 4) : le(b, 4); };
  const std::uint64_t offset = u(head + 4), size = u(head + 8);
  if (size != 0xffffffffu) check_body(f, "data", offset, size);
}

/// FLAC: STREAMINFO's total samples (36 bits; 0: unknown) against the frames libsndfile found.
void check_flac(const Bytes& f, const SF_INFO& info) {
  unsigned char head[4 + 4 + 34];
  if (!f.read(0, head, sizeof head) || !is(head, "fLaC") || (head[4] & 0x7f) != 0)
    f.fail("has no STREAMINFO block (not a FLAC file?)");
  const std::uint64_t total = (std::uint64_t{head[8 + 13]} & 0x0f) << 32 | be(head + 8 + 14, 4);
  if (total > 0 && static_cast<std::uint64_t>(info.frames) != total)
    f.truncated(
        fmt::format("its STREAMINFO declares {} frames, {} are present", total, info.frames));
}

const char* major_name(int major) {
  SF_FORMAT_INFO fi{};
  fi.format = major;
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &fi, sizeof fi) == 0 && fi.name != nullptr)
    return fi.name;
  return "unknown";
}

}  // namespace

void check_declared_data(int fd, std::uint64_t file_size, const SF_INFO& info,
                         const std::string& file, const std::string& what) {
  const Bytes f(fd, file_size, file, what);
  unsigned char head[12] = {};
  f.read(0, head, 12);  // a shorter file matches no container below
  const int major = info.format & SF_FORMAT_TYPEMASK;
  switch (major) {
    case SF_FORMAT_WAV:
    case SF_FORMAT_WAVEX:
      if ((is(head, "RIFF") || is(head, "RIFX")) && is(head + 8, "WAVE"))
        return check_riff(f, is(head, "RIFX"), false);
      break;
    case SF_FORMAT_RF64:
      if ((is(head, "RF64") || is(head, "BW64")) && is(head + 8, "WAVE"))
        return check_riff(f, false, true);
      break;
    case SF_FORMAT_W64:
      if (is(head, "riff")) return check_w64(f);
      break;
    case SF_FORMAT_AIFF:
      if (is(head, "FORM") && (is(head + 8, "AIFF") || is(head + 8, "AIFC")))
        return check_aiff(f, info);
      break;
    case SF_FORMAT_CAF:
      if (is(head, "caff")) return check_caf(f, info);
      break;
    case SF_FORMAT_AU:
      if (is(head, ".snd") || is(head, "dns.")) return check_au(f);
      break;
    case SF_FORMAT_FLAC:
      return check_flac(f, info);
    default:
      f.fail(
          fmt::format("is a {} file; the wav reader reads {} files (containers that declare "
                      "their length, checked against the file)",
                      major_name(major), kAcceptedContainers));
  }
  f.fail(fmt::format("is read by libsndfile as {}, but its header is not one", major_name(major)));
}

}  // namespace tally_wav
