// The coco_json reader's annotations file in blocks: the top-level "annotations" list in chunks
// of whole elements, the other members (images, categories) kept as JSON text.
// Internal to plugins/readers/coco_json. The whole scan is defined in the class, as it was when
// it lived in coco_json_reader.cpp: skip_value and next_special are the hot path of reading a
// large annotations file.
#pragma once

#include <simdjson.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "json_file.hpp"

namespace tally_coco_json {

/// An annotations file ({"images": [...], "annotations": [...], ...}) read in blocks: next()
/// gives the elements of the top-level "annotations" array in chunks of whole elements, each
/// presented as a JSON array of its own ("[e1, e2, ...]", written over the separators around it,
/// SIMDJSON_PADDING readable bytes after it), as ChunkSource does; the other top-level members
/// are kept as JSON text, rest() ("{"images": [...], ...}" without "annotations"), once next()
/// has returned false. The file is scanned exactly (strings, escapes, nesting), so memory is a
/// block and the other members, not the file and its parsed document. Anything the scan does not
/// expect (not an object, a truncated file, an annotation that is not an object, "annotations"
/// twice) sets bad_split(): the caller then parses the file whole, which names the problem.
class AnnotationChunks {
 public:
  /// blank_segmentation: each element's "segmentation" value is overwritten with 0 and spaces
  /// before the chunk is parsed (when masks are not read, parsing the polygons' numbers would be
  /// most of the parse).
  AnnotationChunks(const std::string& path, std::size_t block, bool blank_segmentation = false)
      : file_((require_regular_file(path, "annotations"), std::fopen(path.c_str(), "rb")),
              &std::fclose),
        block_(block),
        blank_(blank_segmentation) {
    if (!file_) fail("annotations '" + path + "': cannot open");
    buf_.resize(2 * block_ + simdjson::SIMDJSON_PADDING);
  }

  /// The next chunk; false at the end of the file or when it is not what it should be.
  bool next(const char*& data, std::size_t& len) {
    if (close_ != npos) {  // undo the previous chunk's brackets; its closing separator opens
      buf_[at_[kSep]] = saved_open_;  // the next chunk
      buf_[close_] = saved_close_;
      at_[kSep] = close_;
      close_ = npos;
    }
    while (!done_) {
      const int r = in_array_ ? scan_array() : (scan_member() ? 0 : -1);
      if (r < 0) return bad();
      if (r > 0) {
        data = buf_.data() + at_[kSep];
        len = close_ + 1 - at_[kSep];
        return true;
      }
    }
    return false;
  }

  bool bad_split() const { return bad_; }
  /// The elements of the chunk next() gave last.
  std::size_t chunk_elements() const { return chunk_elements_; }
  /// The other members of the top-level object as a JSON object.
  const std::string& rest() const { return rest_; }

 private:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  // Positions into buf_ that a refill moves with the bytes: the first byte to keep, the current
  // chunk's opening separator, the end of its last element, a member's key and value.
  enum { kKeep, kSep, kLastEnd, kKey, kValue, kMarks };

  bool bad() {
    bad_ = true;
    done_ = true;
    return false;
  }

  /// Makes byte p available, moving the bytes from at_[kKeep] on to the front and reading more;
  /// false at the end of the file.
  bool have(std::size_t& p) {
    if (p < end_) return true;
    if (eof_) return false;
    const std::size_t keep = std::min(at_[kKeep], p);
    if (keep > 0) {
      std::memmove(buf_.data(), buf_.data() + keep, end_ - keep);
      end_ -= keep;
      p -= keep;
      for (std::size_t& q : at_)
        if (q != npos) q -= keep;
    }
    if (buf_.size() - simdjson::SIMDJSON_PADDING - end_ < block_)
      buf_.resize(end_ + block_ + simdjson::SIMDJSON_PADDING);
    const std::size_t want = buf_.size() - simdjson::SIMDJSON_PADDING - end_;
    const std::size_t got = std::fread(buf_.data() + end_, 1, want, file_.get());
    end_ += got;
    if (got < want) eof_ = true;
    return p < end_;
  }

  bool skip_ws(std::size_t& p) {
    while (have(p) && std::isspace(static_cast<unsigned char>(buf_[p]))) ++p;
    return have(p);
  }

  /// Moves p past one JSON value: a string, a scalar, or an object or array with all it holds.
  /// With `blank_segmentation` (an element: an object), its member "segmentation"'s value, an
  /// array or object, is overwritten with '0' and spaces as the scan passes it: the same length,
  /// so the chunk stays valid JSON with its positions (a key is recognised by the string just
  /// before, then only ':' and spaces up to the value).
  bool skip_value(std::size_t& p, bool blank_segmentation = false) {
    if (!have(p)) return false;
    const char c0 = buf_[p];
    if (c0 != '{' && c0 != '[' && c0 != '"') {  // a number, true, false or null
      if (c0 == ',' || c0 == '}' || c0 == ']' || c0 == ':') return false;
      while (have(p) && buf_[p] != ',' && buf_[p] != '}' && buf_[p] != ']' &&
             !std::isspace(static_cast<unsigned char>(buf_[p])))
        ++p;
      return true;
    }
    std::size_t depth = 0;
    bool in_str = false, esc = false;
    // Blanking: at_[kKey] the start of a member key's string, at_[kValue] the end of a
    // "segmentation" key (then of its value's start, with `blanking`).
    bool blanking = false;
    const bool blank = blank_segmentation && c0 == '{';
    while (have(p)) {
      char* b = buf_.data();
      for (const std::size_t e = end_; p < e; ++p) {
        if (!esc) p = next_special(b, p, e, in_str);
        if (p == e) break;
        const char c = b[p];
        if (in_str) {
          if (esc) {
            esc = false;
          } else if (c == '\\') {
            esc = true;
          } else if (c == '"') {
            in_str = false;
            if (depth == 0) {
              ++p;
              return true;
            }
            if (blank && depth == 1 && !blanking) {
              constexpr std::string_view kSeg = "\"segmentation\"";
              const bool seg = at_[kKey] != npos && p + 1 - at_[kKey] == kSeg.size() &&
                               std::memcmp(b + at_[kKey], kSeg.data(), kSeg.size()) == 0;
              at_[kValue] = seg ? p : npos;
            }
          }
        } else if (c == '"') {
          in_str = true;
          if (blank && depth == 1 && !blanking) {
            at_[kKey] = p;
            at_[kValue] = npos;  // a string after the key: not its container value
          }
        } else if (c == '{' || c == '[') {
          if (blank && depth == 1 && at_[kValue] != npos) {
            std::size_t colons = 0, q = at_[kValue] + 1;
            for (; q < p && (b[q] == ':' || std::isspace(static_cast<unsigned char>(b[q]))); ++q)
              colons += b[q] == ':';
            blanking = q == p && colons == 1;
            at_[kValue] = blanking ? p : npos;
          }
          ++depth;
        } else if (c == '}' || c == ']') {
          if (depth == 0) return false;
          if (--depth == 0) {
            ++p;
            if (blank) at_[kKey] = at_[kValue] = npos;
            return true;
          }
          if (blanking && depth == 1) {
            b[at_[kValue]] = '0';
            std::memset(b + at_[kValue] + 1, ' ', p - at_[kValue]);
            blanking = false;
            at_[kValue] = at_[kKey] = npos;
          }
        }
      }
    }
    if (blank) at_[kKey] = at_[kValue] = npos;
    return false;
  }

  /// The first byte from p on (e if none) that can change the scan's state: '"' or '\\' in a
  /// string, '"' and brackets outside. 16 bytes at a time where SSE2 is (every x86-64 CPU).
  static std::size_t next_special(const char* b, std::size_t p, std::size_t e, bool in_str) {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                  lbrace = _mm_set1_epi8('{'), rbrace = _mm_set1_epi8('}'),
                  lbrack = _mm_set1_epi8('['), rbrack = _mm_set1_epi8(']');
    for (; p + 16 <= e; p += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + p));
      __m128i m = _mm_cmpeq_epi8(v, quote);
      if (in_str) {
        m = _mm_or_si128(m, _mm_cmpeq_epi8(v, bslash));
      } else {
        m = _mm_or_si128(m, _mm_or_si128(_mm_cmpeq_epi8(v, lbrace), _mm_cmpeq_epi8(v, rbrace)));
        m = _mm_or_si128(m, _mm_or_si128(_mm_cmpeq_epi8(v, lbrack), _mm_cmpeq_epi8(v, rbrack)));
      }
      const auto bits = static_cast<unsigned>(_mm_movemask_epi8(m));
      if (bits != 0) return p + static_cast<std::size_t>(std::countr_zero(bits));
    }
#endif
    for (; p < e; ++p) {
      const char c = b[p];
      if (c == '"' || (in_str ? c == '\\' : (c == '{' || c == '}' || c == '[' || c == ']')))
        return p;
    }
    return e;
  }

  /// The top-level object's start, one member, or its end: "annotations" opens the array, the
  /// other members are copied to rest_.
  bool scan_member() {
    std::size_t p = pos_;
    at_[kKeep] = p;
    if (!started_) {
      if (!skip_ws(p) || buf_[p] != '{') return false;
      ++p;
      started_ = true;
      rest_ = "{";
    }
    if (!skip_ws(p)) return false;
    if (buf_[p] == '}') {
      if (after_comma_) return false;
      ++p;
      if (skip_ws(p)) return false;  // something after the object
      rest_ += '}';
      done_ = true;
      return true;
    }
    if (!first_member_) {
      if (buf_[p] != ',') return false;
      ++p;
      after_comma_ = true;
      if (!skip_ws(p)) return false;
    }
    if (buf_[p] != '"') return false;
    at_[kKeep] = at_[kKey] = p;
    if (!skip_value(p)) return false;
    const std::string key(buf_.data() + at_[kKey], p - at_[kKey]);
    if (!skip_ws(p) || buf_[p] != ':') return false;
    ++p;
    if (!skip_ws(p)) return false;
    first_member_ = after_comma_ = false;
    if (key == "\"annotations\"") {
      if (seen_annotations_ || buf_[p] != '[') return false;
      seen_annotations_ = in_array_ = true;
      at_[kKeep] = at_[kSep] = p;  // the '[' is the first chunk's opening bracket
      at_[kLastEnd] = npos;
      pos_ = p + 1;
      return true;
    }
    at_[kValue] = p;
    if (!skip_value(p)) return false;
    if (rest_.size() > 1) rest_ += ',';
    rest_ += key;
    rest_ += ':';
    rest_.append(buf_.data() + at_[kValue], p - at_[kValue]);
    pos_ = p;
    return true;
  }

  /// Scans the annotations array on from pos_: 1 when a chunk of whole elements is ready, 0 when
  /// the array has ended with no element pending, -1 when the file is not what it should be.
  int scan_array() {
    std::size_t p = pos_;
    at_[kKeep] = at_[kSep];
    while (true) {
      if (!skip_ws(p)) return -1;
      if (buf_[p] == ']') {  // the end of the array: the elements pending are the last chunk
        if (after_comma_) return -1;
        in_array_ = false;
        return at_[kLastEnd] == npos ? (pos_ = p + 1, 0) : emit(p);
      }
      if (at_[kLastEnd] != npos) {  // after an element: a separator
        if (buf_[p] != ',') return -1;
        if (at_[kLastEnd] - at_[kSep] >= block_) return emit(p);
        ++p;
        if (!skip_ws(p)) return -1;
      }
      after_comma_ = false;
      if (buf_[p] != '{') return -1;
      if (!skip_value(p, blank_)) return -1;
      at_[kLastEnd] = p;
      ++pending_;
    }
  }

  /// Brackets the pending elements: '[' over their opening separator, ']' over `close` (the
  /// separator or the array's ']' after them).
  int emit(std::size_t close) {
    saved_open_ = buf_[at_[kSep]];
    saved_close_ = buf_[close];
    buf_[at_[kSep]] = '[';
    buf_[close] = ']';
    close_ = close;
    chunk_elements_ = pending_;
    pending_ = 0;
    pos_ = close + 1;
    after_comma_ = in_array_;  // a ',' was the separator: an element must follow
    at_[kLastEnd] = npos;
    return 1;
  }

  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
  std::size_t block_;
  bool blank_ = false;
  std::vector<char> buf_;
  std::size_t end_ = 0, pos_ = 0, close_ = npos;
  std::size_t at_[kMarks] = {0, npos, npos, npos, npos};
  char saved_open_ = 0, saved_close_ = 0;
  std::size_t pending_ = 0, chunk_elements_ = 0;
  std::string rest_;
  bool eof_ = false, started_ = false, first_member_ = true, after_comma_ = false;
  bool in_array_ = false, seen_annotations_ = false, done_ = false, bad_ = false;
};

}  // namespace tally_coco_json
