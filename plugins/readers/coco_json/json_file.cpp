// The coco_json reader's JSON files: whole (load_file) or in chunks of the top-level array's
// elements (ChunkSource). See json_file.hpp.
#include "json_file.hpp"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstring>

namespace tally_coco_json {

void require_regular_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    fail(what + " '" + path + "': cannot open (" + std::strerror(errno) + ")");
  if (!S_ISREG(st.st_mode))
    fail(what + " '" + path + "': not a regular file (a JSON file was expected)");
}

simdjson::padded_string load_file(const std::string& path, const std::string& what) {
  require_regular_file(path, what);
  auto r = simdjson::padded_string::load(path);
  if (r.error())
    fail(what + " '" + path + "': cannot read (" + simdjson::error_message(r.error()) + ")");
  return std::move(r).value();
}

ChunkSource::ChunkSource(const std::string& path, std::size_t block)
    : file_((require_regular_file(path, "results"), std::fopen(path.c_str(), "rb")), &std::fclose),
      block_(block) {
  if (!file_) fail("results '" + path + "': cannot open");
  buf_.resize(block_ + simdjson::SIMDJSON_PADDING);
}

/// The next chunk; false at the end or when the file does not split (bad_ says which).
bool ChunkSource::next(const char*& data, std::size_t& len) {
  if (done_) return false;
  if (cut_ != npos) {  // undo the previous chunk's brackets, drop it
    buf_[start_] = saved_start_;
    buf_[cut_] = saved_cut_;
    std::memmove(buf_.data(), buf_.data() + cut_, have_ - cut_);
    have_ -= cut_;
    cut_ = npos;
  }
  while (true) {
    if (!eof_ && have_ < block_) {
      const std::size_t want = block_ - have_;
      const std::size_t got = std::fread(buf_.data() + have_, 1, want, file_.get());
      have_ += got;
      if (got < want) eof_ = true;
    }
    start_ = 0;
    if (!started_) {
      while (start_ < have_ && std::isspace(static_cast<unsigned char>(buf_[start_]))) ++start_;
      if (start_ >= have_ || buf_[start_] != '[') return bad();
      started_ = true;
    }
    std::size_t cut = 0;
    if (eof_) {
      std::size_t e = have_;
      while (e > start_ && std::isspace(static_cast<unsigned char>(buf_[e - 1]))) --e;
      if (e <= start_ || buf_[e - 1] != ']') return bad();
      cut = e - 1;
      done_ = true;
    } else {
      for (std::size_t p = have_; p-- > start_ + 1;) {
        if (buf_[p] != '{') continue;
        std::size_t q = p;
        while (q > start_ && std::isspace(static_cast<unsigned char>(buf_[q - 1]))) --q;
        if (q <= start_ || buf_[q - 1] != ',') continue;
        const std::size_t c = q - 1;
        std::size_t r = c;
        while (r > start_ && std::isspace(static_cast<unsigned char>(buf_[r - 1]))) --r;
        if (r <= start_ || buf_[r - 1] != '}') continue;
        cut = c;
        break;
      }
      if (cut == 0) {  // one element longer than the block: grow it
        block_ *= 2;
        buf_.resize(block_ + simdjson::SIMDJSON_PADDING);
        continue;
      }
    }
    cut_ = cut;
    saved_start_ = buf_[start_];
    saved_cut_ = buf_[cut_];
    buf_[start_] = '[';
    buf_[cut_] = ']';
    data = buf_.data() + start_;
    len = cut_ + 1 - start_;
    return true;
  }
}

}  // namespace tally_coco_json
