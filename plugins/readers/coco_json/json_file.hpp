// The coco_json reader's JSON files: a whole file as a simdjson padded string (load_file), and a
// file's top-level array in chunks of whole elements (ChunkSource), each parsed with simdjson's
// DOM parser and walked in file order (for_each_chunked_element), so memory stays near a chunk
// and its parsed document, not the file's. The results file is read this way; the annotations
// file's "annotations" list through AnnotationChunks (annotation_chunks.hpp).
// Internal to plugins/readers/coco_json.
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "json_values.hpp"

namespace tally_coco_json {

/// A FIFO, a device or a folder named as a JSON file is refused before it is opened: opening a
/// FIFO would wait for a writer, reading /dev/zero would never end.
void require_regular_file(const std::string& path, const std::string& what);

/// Reads a whole file into a simdjson padded string.
simdjson::padded_string load_file(const std::string& path, const std::string& what);

/// The top-level JSON array of a file in chunks of whole elements, each presented as a JSON array
/// of its own ("[e1, e2, ...]", written in place over the separators around it) with
/// SIMDJSON_PADDING readable bytes after it. A chunk ends at the last "}" ws* "," ws* "{" of a
/// block; a false boundary inside a string or a nested object leaves a chunk that does not parse,
/// and the caller then parses the file whole.
class ChunkSource {
 public:
  ChunkSource(const std::string& path, std::size_t block);

  /// The next chunk; false at the end or when the file does not split (bad_ says which).
  bool next(const char*& data, std::size_t& len);

  bool bad_split() const { return bad_; }

 private:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  bool bad() {
    bad_ = true;
    done_ = true;
    return false;
  }

  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
  std::size_t block_;
  std::vector<char> buf_;
  std::size_t have_ = 0, start_ = 0, cut_ = npos;
  char saved_start_ = 0, saved_cut_ = 0;
  bool eof_ = false, started_ = false, done_ = false, bad_ = false;
};

/// Calls f(object, index) for each element of the top-level JSON array in `path`, parsing chunks
/// of whole elements (ChunkSource). With threads > 1 a second thread parses the next chunk while
/// f walks the current one; f always runs on the calling thread, in file order. Returns false when
/// the file does not split cleanly (f may have run for some elements: the caller starts over and
/// parses the file whole).
template <class Source, class F>
bool for_each_chunked_element(Source& source, int threads, F&& f, std::size_t& count) {
  count = 0;
  const auto walk = [&](const dom::element& doc) {
    dom::array arr;
    if (doc.get_array().get(arr) != simdjson::SUCCESS) return false;
    for (dom::element e : arr) {
      dom::object o;
      if (e.get_object().get(o) != simdjson::SUCCESS) return false;
      f(o, count++);
    }
    return true;
  };
  const char* data = nullptr;
  std::size_t len = 0;
  if (threads <= 1) {
    dom::parser parser;
    while (source.next(data, len)) {
      dom::element doc;
      if (parser.parse(data, len, false).get(doc) != simdjson::SUCCESS) return false;
      if (!walk(doc)) return false;
    }
    return !source.bad_split();
  }
  // Two slots: a chunk's own padded copy, its parser and document.
  struct Slot {
    std::vector<char> bytes;
    std::size_t len = 0;
    dom::parser parser;
    dom::element doc;
    bool ok = false;
  };
  Slot slots[2];
  const auto fill = [&](Slot& s) {
    if (!source.next(data, len)) return false;
    s.bytes.resize(len + simdjson::SIMDJSON_PADDING);
    std::memcpy(s.bytes.data(), data, len);
    s.len = len;
    return true;
  };
  const auto parse = [](Slot& s) {
    s.ok = s.parser.parse(s.bytes.data(), s.len, false).get(s.doc) == simdjson::SUCCESS;
  };
  bool have = fill(slots[0]);
  if (have) parse(slots[0]);
  for (std::size_t k = 0; have; ++k) {
    Slot& cur = slots[k % 2];
    Slot& nxt = slots[(k + 1) % 2];
    const bool more = fill(nxt);
    std::thread worker;
    if (more) worker = std::thread([&] { parse(nxt); });
    const bool ok = cur.ok && walk(cur.doc);
    if (worker.joinable()) worker.join();
    if (!ok) return false;
    have = more;
  }
  return !source.bad_split();
}

template <class F>
bool for_each_element_chunked(const std::string& path, std::size_t block, int threads, F&& f,
                              std::size_t& count) {
  ChunkSource source(path, block);
  return for_each_chunked_element(source, threads, std::forward<F>(f), count);
}

}  // namespace tally_coco_json
