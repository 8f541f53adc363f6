// The `jsonl` reader: one JSON object per line (JSON Lines), for text and keypoint data.
//
//   data:
//     type: jsonl
//     path: data/text.jsonl        # relative to the config file
//     batch_size: 4096
//     fields:                      # optional: tally field name -> JSON key
//       pred: hypothesis
//       refs: references
//       score: meta.score          # a dotted path reaches into nested objects
//
// Without `fields`, every key of the first line is a field (nested objects flattened to dotted
// names). A field's kind comes from its value on the first line and every line must agree:
//   - string: a text field, one string per sample;
//   - array of strings: a text field, a list of strings per sample (may be empty on later lines);
//   - true/false: a dense [N] bool tensor;
//   - number: a dense [N] tensor, int64 when every value of the field in the file is written as
//     an integer, else float64 (1.0 counts as a float);
//   - (nested) array of numbers: dense [N, d1, ...] when every line has the same shape, else
//     ragged (one tensor per sample); int64 or float64 by the same rule;
//   - (nested) array of true/false (per-box flags such as ignore flags): the same, bool.
// An empty array `[]` (an image with no boxes) has the kind of the field's first non-empty array
// in the file (numbers when every line is empty); its sample is a [0] tensor. Metrics that read
// one tensor per sample (detection) take dense and ragged fields alike (tally::PerSample), so
// the layout the data happen to give does not change what they compute.
// Numeric fields are scanned over the whole file when the reader opens (their dtype and shape
// depend on every line, and must not depend on the number of ranks); text and bool fields are
// parsed lazily, batch by batch. Line offsets are indexed at open (memchr over a memory-mapped
// file); each rank parses only its contiguous shard of the lines (tally::ShardRange).
//
// Lines end in \n or \r\n; a UTF-8 byte-order mark at the start is skipped; strings must be valid
// UTF-8. Blank lines (spaces, tabs) are allowed only at the end of the file; anywhere else they
// are an error naming the line, as is a line that is not a JSON object. Errors name the file, the
// line (and for bad JSON the column, in bytes), the field, and what was expected and found.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>
#include <nlohmann/json.hpp>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/reader.hpp"
#include "tally_support/sharded_reader.hpp"

namespace {

namespace dom = simdjson::dom;
using tally::DType;
using tally::InputError;

enum class Kind { Text, TextList, Bool, Number, Array };

const char* kind_text(Kind k) {
  switch (k) {
    case Kind::Text:
      return "a string";
    case Kind::TextList:
      return "a list of strings";
    case Kind::Bool:
      return "true or false";
    case Kind::Number:
      return "a number";
    case Kind::Array:
      return "an array of numbers";
  }
  return "?";
}

const char* found_text(dom::element e) {
  switch (e.type()) {
    case dom::element_type::ARRAY:
      return "an array";
    case dom::element_type::OBJECT:
      return "an object";
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
    case dom::element_type::DOUBLE:
      return "a number";
    case dom::element_type::STRING:
      return "a string";
    case dom::element_type::BOOL:
      return "a bool";
    case dom::element_type::NULL_VALUE:
      return "null";
  }
  return "?";
}

/// The array of an element known to be one (an empty array otherwise). A named local rather than
/// value_unsafe() on a temporary, which GCC's -Wmaybe-uninitialized misreads in simdjson's inlines.
dom::object as_object(dom::element e) {
  dom::object o;
  if (e.get_object().get(o)) return {};
  return o;
}

dom::element first_of(dom::array a) {
  for (const auto e : a) return e;
  return {};
}

dom::array as_array(dom::element e) {
  dom::array a;
  if (e.get_array().get(a)) return {};
  return a;
}

bool is_number(dom::element e) {
  const auto t = e.type();
  return t == dom::element_type::INT64 || t == dom::element_type::UINT64 ||
         t == dom::element_type::DOUBLE;
}

/// The read-only mapping of a whole file (nothing for an empty file).
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path) {
    // O_NONBLOCK: a FIFO must be refused (below), not waited on for a writer.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
      throw InputError(
          fmt::format("jsonl reader: cannot open {}: {}", path.string(), std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw InputError(fmt::format("jsonl reader: {} is not a regular file", path.string()));
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* addr = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (addr == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        throw InputError(
            fmt::format("jsonl reader: cannot map {}: {}", path.string(), std::strerror(err)));
      }
      data_ = static_cast<const char*>(addr);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

struct Field {
  std::string name;  // the tally field
  std::string key;   // the JSON key or dotted path
  Kind kind = Kind::Text;
  DType dtype = DType::I64;         // Number, Array
  bool ragged = false;              // Array
  std::vector<std::int64_t> shape;  // Array, dense: the per-sample shape
};

Field make_field(const std::string& name, const std::string& key) {
  Field f;
  f.name = name;
  f.key = key;
  return f;
}

/// A numeric value's shape and whether all its numbers are written as integers; the leaves of an
/// array are all numbers or all booleans.
struct NumericInfo {
  std::vector<std::int64_t> shape;
  bool all_int = true;
  bool any_number = false, any_bool = false;
};

bool is_leaf(dom::element e) { return is_number(e) || e.type() == dom::element_type::BOOL; }

class JsonlReader final : public tally::support::ShardedReader {
 public:
  JsonlReader(const tally::Params& params, const tally::ShardInfo& shard) {
    path_ = params.get_string("path");
    read_batch_size(params);
    tally::support::check_shard("jsonl", shard);
    file_ = std::make_shared<MappedFile>(path_);
    index_lines();

    std::vector<std::pair<std::string, std::string>> mapping;
    if (params.has("fields")) {
      mapping = params.get_string_map("fields");
      if (mapping.empty())
        params.fail("fields", "must name at least one field (tally field: JSON key)");
    }
    if (lines_.empty()) {
      if (mapping.empty())
        throw InputError(fmt::format(
            "jsonl reader: {} is empty: no first line to take the field names from (give "
            "'fields')",
            path_));
      // No line to take the kinds from: the fields exist but no batch is ever served.
      for (auto& [name, key] : mapping) fields_.push_back(make_field(name, key));
    } else {
      const dom::element first = parse_line(0);
      if (mapping.empty()) {
        flatten_keys(as_object(first), "", mapping);
        if (mapping.empty())
          throw InputError(fmt::format(
              "jsonl reader: {}: the first line has no keys to take the field names from (give "
              "'fields')",
              where(0)));
      }
      std::vector<std::size_t> empty_first;
      for (auto& [name, key] : mapping) {
        Field f = make_field(name, key);
        const dom::element v = lookup(first, f, 0);
        f.kind = kind_of_first(v, f);
        if (v.type() == dom::element_type::ARRAY && as_array(v).size() == 0)
          empty_first.push_back(fields_.size());
        fields_.push_back(std::move(f));
      }
      if (!empty_first.empty()) kind_of_empty_first(empty_first);
      scan_numeric_fields();
    }
    set_samples(static_cast<std::int64_t>(lines_.size()), shard);
  }

  std::vector<std::string> fields() const override { return tally::support::field_names(fields_); }

 protected:
  tally::Batch read_batch(std::int64_t begin, std::int64_t end) override {
    std::vector<Builder> builders(fields_.size());
    for (std::int64_t i = begin; i < end; ++i) {
      const dom::element line = parse_line(static_cast<std::size_t>(i));
      for (std::size_t k = 0; k < fields_.size(); ++k)
        append(builders[k], fields_[k], lookup(line, fields_[k], static_cast<std::size_t>(i)),
               static_cast<std::size_t>(i));
    }
    tally::Batch batch;
    for (std::size_t k = 0; k < fields_.size(); ++k)
      finish(batch, builders[k], fields_[k], end - begin);
    return batch;
  }

 private:
  struct Builder {
    std::vector<std::string> strings;
    std::vector<std::int64_t> offsets{0};
    std::vector<std::int64_t> ints;
    std::vector<double> doubles;
    std::vector<bool> bools;
    tally::Batch::Ragged ragged;
  };

  std::string where(std::size_t line) const { return fmt::format("{}:{}", path_, line + 1); }
  std::string where(std::size_t line, const Field& f) const {
    return fmt::format("jsonl reader: {}: field '{}'{}", where(line), f.name,
                       f.key == f.name ? "" : " (key '" + f.key + "')");
  }

  // Offsets of the lines, without their \n or \r\n. Blank lines are dropped at the end of the
  // file and an error anywhere else.
  void index_lines() {
    const char* data = file_->data();
    const std::size_t size = file_->size();
    std::size_t pos = 0;
    if (size >= 3 && std::memcmp(data, "\xEF\xBB\xBF", 3) == 0) pos = 3;
    std::optional<std::size_t> first_blank;
    while (pos < size) {
      const void* nl = std::memchr(data + pos, '\n', size - pos);
      const std::size_t end =
          nl != nullptr ? static_cast<std::size_t>(static_cast<const char*>(nl) - data) : size;
      std::size_t stop = end;
      if (stop > pos && data[stop - 1] == '\r') --stop;
      bool blank = true;
      for (std::size_t i = pos; i < stop && blank; ++i)
        blank = data[i] == ' ' || data[i] == '\t' || data[i] == '\r';
      if (blank) {
        if (!first_blank) first_blank = lines_.size() + blank_count_;
        ++blank_count_;
      } else {
        if (first_blank)
          throw InputError(fmt::format(
              "jsonl reader: {}: blank line (blank lines are allowed only at the end of the file)",
              where(*first_blank)));
        lines_.emplace_back(pos, stop);
      }
      pos = end + 1;
    }
  }

  // Parses line i (the parser's document lives until the next parse).
  dom::element parse_line(std::size_t i) {
    const auto [b, e] = lines_[i];
    const std::size_t len = e - b;
    if (buffer_.size() < len + simdjson::SIMDJSON_PADDING)
      buffer_.resize(len + simdjson::SIMDJSON_PADDING);
    std::memcpy(buffer_.data(), file_->data() + b, len);
    std::memset(buffer_.data() + len, 0, simdjson::SIMDJSON_PADDING);
    dom::element doc;
    const auto err =
        parser_.parse(reinterpret_cast<const std::uint8_t*>(buffer_.data()), len, false).get(doc);
    if (err) syntax_error(i, simdjson::error_message(err));
    if (doc.type() != dom::element_type::OBJECT)
      throw InputError(fmt::format("jsonl reader: {}: expected a JSON object, found {}", where(i),
                                   found_text(doc)));
    return doc;
  }

  // Words a parse failure with the column nlohmann-json places it at (simdjson reports none).
  [[noreturn]] void syntax_error(std::size_t i, const char* simdjson_message) const {
    const auto [b, e] = lines_[i];
    const std::string_view text(file_->data() + b, e - b);
    try {
      const auto parsed = nlohmann::json::parse(text);
      (void)parsed;
    } catch (const nlohmann::json::parse_error& pe) {
      std::string msg = pe.what();
      const auto at = msg.find(": ", msg.find("column"));
      if (at != std::string::npos) msg = msg.substr(at + 2);
      throw InputError(
          fmt::format("jsonl reader: {}:{}: invalid JSON: {}", where(i), pe.byte, msg));
    } catch (const std::exception&) {
    }
    throw InputError(fmt::format("jsonl reader: {}: invalid JSON: {}", where(i), simdjson_message));
  }

  // The value of field f in the line's object: the literal key first, else the dotted path.
  dom::element lookup(dom::element line, const Field& f, std::size_t i) const {
    dom::object obj = as_object(line);
    dom::element v;
    if (!obj.at_key(f.key).get(v)) return v;
    std::string_view rest = f.key;
    dom::element cur = line;
    while (true) {
      const auto dot = rest.find('.');
      const std::string_view part = rest.substr(0, dot);
      dom::object o;
      if (cur.get_object().get(o) || o.at_key(part).get(cur)) break;
      if (dot == std::string_view::npos) return cur;
      rest.remove_prefix(dot + 1);
    }
    throw InputError(where(i, f) + ": the key is missing");
  }

  static void flatten_keys(dom::object obj, const std::string& prefix,
                           std::vector<std::pair<std::string, std::string>>& out) {
    for (const auto field : obj) {
      const std::string name = prefix + std::string(field.key);
      dom::object inner;
      if (!field.value.get_object().get(inner) && inner.size() > 0)
        flatten_keys(inner, name + ".", out);
      else
        out.emplace_back(name, name);
    }
  }

  Kind kind_of_first(dom::element v, const Field& f) const {
    switch (v.type()) {
      case dom::element_type::STRING:
        return Kind::Text;
      case dom::element_type::BOOL:
        return Kind::Bool;
      case dom::element_type::INT64:
      case dom::element_type::UINT64:
      case dom::element_type::DOUBLE:
        return Kind::Number;
      case dom::element_type::ARRAY: {
        dom::array a = as_array(v);
        if (a.size() == 0) return Kind::Array;  // resolved by kind_of_empty_first()
        const dom::element e0 = first_of(a);
        if (e0.type() == dom::element_type::STRING) return Kind::TextList;
        if (is_leaf(e0) || e0.type() == dom::element_type::ARRAY) return Kind::Array;
        throw InputError(where(0, f) + ": expected an array of strings, numbers or bools, found " +
                         "an array of " + found_text(e0) + " values");
      }
      default:
        break;
    }
    throw InputError(where(0, f) +
                     ": expected a string, a list of strings, a number, a bool or an array of "
                     "numbers, found " +
                     found_text(v));
  }

  // Fields whose first line holds `[]` (an image with no boxes, no references) take their kind
  // from the first line with a non-empty array: strings make a text list, numbers a numeric
  // array. A field empty on every line is numeric (an empty [N, 0] field: no boxes anywhere).
  void kind_of_empty_first(const std::vector<std::size_t>& pending) {
    std::vector<bool> done(fields_.size(), false);
    std::size_t left = pending.size();
    for (std::size_t i = 1; i < lines_.size() && left > 0; ++i) {
      const dom::element line = parse_line(i);
      for (const std::size_t k : pending) {
        if (done[k]) continue;
        Field& f = fields_[k];
        const dom::element v = lookup(line, f, i);
        if (v.type() != dom::element_type::ARRAY)
          throw InputError(where(i, f) + ": expected an array (as on line 1), found " +
                           found_text(v));
        const dom::array a = as_array(v);
        if (a.size() == 0) continue;
        const dom::element e0 = first_of(a);
        if (e0.type() == dom::element_type::STRING)
          f.kind = Kind::TextList;
        else if (is_leaf(e0) || e0.type() == dom::element_type::ARRAY)
          f.kind = Kind::Array;
        else
          throw InputError(where(i, f) +
                           ": expected an array of strings, numbers or bools, found an array of " +
                           found_text(e0) + " values");
        done[k] = true;
        --left;
      }
    }
  }

  [[noreturn]] void mismatch(std::size_t i, const Field& f, const std::string& found) const {
    throw InputError(where(i, f) + ": expected " + kind_text(f.kind) + " (as on line 1), found " +
                     found);
  }

  // The shape of a numeric (nested) array and whether its numbers are integers; an error for a
  // value that is not a rectangular array of numbers.
  NumericInfo numeric_info(dom::element v, const Field& f, std::size_t i) const {
    NumericInfo info;
    dom::element cur = v;
    while (cur.type() == dom::element_type::ARRAY) {
      dom::array a = as_array(cur);
      info.shape.push_back(static_cast<std::int64_t>(a.size()));
      if (a.size() == 0) break;
      cur = first_of(a);
    }
    check_numeric(v, 0, info, f, i);
    return info;
  }

  void check_numeric(dom::element v, std::size_t depth, NumericInfo& info, const Field& f,
                     std::size_t i) const {
    if (depth == info.shape.size()) {
      if (!is_leaf(v))
        mismatch(i, f, std::string(found_text(v)) + " inside the array (expected numbers)");
      if (v.type() == dom::element_type::BOOL) {
        info.any_bool = true;
      } else {
        info.any_number = true;
        if (v.type() != dom::element_type::INT64) info.all_int = false;
      }
      if (info.any_bool && info.any_number) mismatch(i, f, "an array mixing bools and numbers");
      return;
    }
    if (v.type() != dom::element_type::ARRAY ||
        static_cast<std::int64_t>(as_array(v).size()) != info.shape[depth])
      mismatch(i, f, "a ragged nested array (its sub-arrays differ in length or depth)");
    for (const auto e : as_array(v)) check_numeric(e, depth + 1, info, f, i);
  }

  // Dtype and shape of the numeric fields, from every line of the file.
  void scan_numeric_fields() {
    std::vector<std::size_t> numeric;
    for (std::size_t k = 0; k < fields_.size(); ++k)
      if (fields_[k].kind == Kind::Number || fields_[k].kind == Kind::Array) numeric.push_back(k);
    if (numeric.empty()) return;
    std::vector<bool> all_int(fields_.size(), true);
    // Per array field: the line whose leaves first told numbers or bools (every line must agree).
    std::vector<std::optional<std::pair<std::size_t, bool>>> leaves(fields_.size());
    for (std::size_t i = 0; i < lines_.size(); ++i) {
      const dom::element line = parse_line(i);
      for (const std::size_t k : numeric) {
        Field& f = fields_[k];
        const dom::element v = lookup(line, f, i);
        if (f.kind == Kind::Number) {
          if (!is_number(v)) mismatch(i, f, found_text(v));
          if (v.type() != dom::element_type::INT64) all_int[k] = false;
          continue;
        }
        if (v.type() != dom::element_type::ARRAY) mismatch(i, f, found_text(v));
        NumericInfo info = numeric_info(v, f, i);
        if (!info.all_int) all_int[k] = false;
        if (info.any_bool || info.any_number) {
          if (!leaves[k])
            leaves[k] = std::pair{i, info.any_bool};
          else if (leaves[k]->second != info.any_bool)
            mismatch(i, f,
                     std::string(info.any_bool ? "an array of bools" : "an array of numbers") +
                         " where line " + std::to_string(leaves[k]->first + 1) + " has " +
                         (info.any_bool ? "numbers" : "bools"));
        }
        if (i == 0)
          f.shape = std::move(info.shape);
        else if (info.shape != f.shape)
          f.ragged = true;
      }
    }
    for (const std::size_t k : numeric) {
      fields_[k].dtype = leaves[k] && leaves[k]->second ? DType::Bool
                         : all_int[k]                   ? DType::I64
                                                        : DType::F64;
      if (fields_[k].ragged) fields_[k].shape.clear();
    }
  }

  // The numbers of a (nested) array in C order; the scan at open checked the kinds, so a failure
  // here means the file changed under the reader.
  template <class T>
  void collect(dom::element v, std::vector<T>& out, const Field& f, std::size_t i) const {
    if (v.type() == dom::element_type::ARRAY) {
      for (const auto e : as_array(v)) collect(e, out, f, i);
      return;
    }
    T x{};
    if (v.get<T>().get(x)) mismatch(i, f, found_text(v));
    out.push_back(x);
  }

  void append(Builder& b, const Field& f, dom::element v, std::size_t i) const {
    switch (f.kind) {
      case Kind::Text: {
        std::string_view s;
        if (v.get_string().get(s)) mismatch(i, f, found_text(v));
        b.strings.emplace_back(s);
        b.offsets.push_back(static_cast<std::int64_t>(b.strings.size()));
        return;
      }
      case Kind::TextList: {
        dom::array a;
        if (v.get_array().get(a)) mismatch(i, f, found_text(v));
        for (const auto e : a) {
          std::string_view s;
          if (e.get_string().get(s))
            mismatch(i, f, std::string("an array holding ") + found_text(e));
          b.strings.emplace_back(s);
        }
        b.offsets.push_back(static_cast<std::int64_t>(b.strings.size()));
        return;
      }
      case Kind::Bool: {
        bool x = false;
        if (v.get_bool().get(x)) mismatch(i, f, found_text(v));
        b.bools.push_back(x);
        return;
      }
      case Kind::Number:
      case Kind::Array: {
        // Checked by the scan at open.
        if (f.ragged) {
          const NumericInfo info = numeric_info(v, f, i);
          if (f.dtype == DType::Bool) {
            std::vector<bool> xs;
            collect(v, xs, f, i);
            b.ragged.push_back(tally::Tensor::from_vector(xs, info.shape));
          } else if (f.dtype == DType::I64) {
            std::vector<std::int64_t> xs;
            collect(v, xs, f, i);
            b.ragged.push_back(tally::Tensor::from_vector(xs, info.shape));
          } else {
            std::vector<double> xs;
            collect(v, xs, f, i);
            b.ragged.push_back(tally::Tensor::from_vector(xs, info.shape));
          }
        } else if (f.dtype == DType::Bool) {
          collect(v, b.bools, f, i);
        } else if (f.dtype == DType::I64) {
          if (f.kind == Kind::Number && v.type() != dom::element_type::INT64)
            mismatch(i, f, found_text(v));
          collect(v, b.ints, f, i);
        } else {
          collect(v, b.doubles, f, i);
        }
        return;
      }
    }
  }

  static void finish(tally::Batch& batch, Builder& b, const Field& f, std::int64_t rows) {
    switch (f.kind) {
      case Kind::Text:
      case Kind::TextList:
        batch.set_text(f.name, tally::Text::from_flat(std::move(b.strings), std::move(b.offsets)));
        return;
      case Kind::Bool:
        batch.set(f.name, tally::Tensor::from_vector(b.bools));
        return;
      case Kind::Number:
      case Kind::Array: {
        if (f.ragged) {
          batch.set_ragged(f.name, std::move(b.ragged));
          return;
        }
        std::vector<std::int64_t> shape{rows};
        shape.insert(shape.end(), f.shape.begin(), f.shape.end());
        if (f.dtype == DType::Bool)
          batch.set(f.name, tally::Tensor::from_vector(b.bools, shape));
        else if (f.dtype == DType::I64)
          batch.set(f.name, tally::Tensor::from_vector(b.ints, shape));
        else
          batch.set(f.name, tally::Tensor::from_vector(b.doubles, shape));
        return;
      }
    }
  }

  std::string path_;
  std::shared_ptr<MappedFile> file_;
  std::vector<std::pair<std::size_t, std::size_t>> lines_;  // [begin, end) of each non-blank line
  std::size_t blank_count_ = 0;
  std::vector<Field> fields_;
  dom::parser parser_;
  std::vector<char> buffer_;
};

std::vector<tally::ParamSpec> jsonl_params() {
  return {
      tally::param("path", tally::ParamType::Path,
                   "The .jsonl file: one JSON object per line (relative to the config file)."),
      tally::param("fields", tally::ParamType::StringMap,
                   "tally field name -> JSON key; a dotted path (meta.score) reaches into nested "
                   "objects. Omitted: every key of the first line (nested objects flattened to "
                   "dotted names). Kinds from the first line: string -> text; array of strings "
                   "-> text list; bool -> bool [N]; number -> int64/float64 [N]; nested numeric "
                   "(or bool) arrays -> [N, ...] (ragged when the shapes differ between lines).")
          .optional(),
      tally::support::batch_size_param("samples (lines) per batch", 4096),
  };
}

}  // namespace

TALLY_PLUGIN("jsonl", "0.1.0", [] {
  return std::vector<tally::ComponentInfo>{tally::reader<JsonlReader>(
      "jsonl",
      "JSON Lines: one JSON object per line; strings and lists of strings become text fields, "
      "numbers and numeric arrays tensors. Line offsets indexed at open, lines parsed "
      "(simdjson) per batch; each rank reads its contiguous block of the lines.",
      jsonl_params())};
})
