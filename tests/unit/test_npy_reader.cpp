// The npy reader plugin, loaded through the registry, on .npy files written here: every dtype,
// format versions 1.0/2.0/3.0, sharding over several world sizes, batch boundaries, zero-copy
// views, and every kind of bad file with the message it must give; members of .npz archives
// (stored and deflated, from tests/data/classification_extra/npz) and broken archives.
#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "support/npy.hpp"
#include "support/process.hpp"
#include "support/special_files.hpp"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "config.hpp"
#include "registry.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/reader.hpp"

namespace fs = std::filesystem;
using tally::DType;
using tally::ShardInfo;
using tally::Value;
using tally::test::write_text;

namespace {

// ---- writing .npy files -----------------------------------------------------------------------

// A whole .npy file: preamble for `major`.0, the header dict padded with spaces and a newline so
// the data starts at a multiple of `align` (NumPy: 64), then the data.
std::string npy_file(const std::string& dict, const std::string& data, int major = 1,
                     std::size_t align = 64) {
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::size_t preamble = 8 + length_bytes;
  std::string header = dict;
  const std::size_t unpadded = preamble + header.size() + 1;
  header.append((align - unpadded % align) % align, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (std::size_t i = 0; i < length_bytes; ++i)
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string dict_for(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

template <class T>
std::string raw_bytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  for (std::size_t i = 0; i < values.size(); ++i) {
    const T v = values[i];
    std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
  }
  return out;
}

template <class T>
void write_array(const fs::path& p, const std::vector<T>& values,
                 const std::vector<std::int64_t>& shape, int major = 1) {
  write_text(p, npy_file(dict_for(tally::test::npy_descr<T>(), shape_text(shape)),
                         raw_bytes(values), major));
}

template <class T>
std::vector<T> iota_values(std::size_t n) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>)
      v[i] = i % 3 == 0;
    else if constexpr (std::is_floating_point_v<T>)
      v[i] = static_cast<T>(i) * T(0.5) - T(3);
    else if constexpr (std::is_signed_v<T>)
      v[i] = static_cast<T>(static_cast<int>(i % 100) - 50);
    else
      v[i] = static_cast<T>(i % 200);
  }
  return v;
}

// ---- the reader, through the registry ----------------------------------------------------------

class NpyReaderTest : public ::testing::Test {
 protected:
  fs::path path(const std::string& name) const { return dir_ / name; }

  static std::shared_ptr<tally::Reader> make_reader(
      const std::vector<std::pair<std::string, fs::path>>& fields, std::int64_t batch_size = 4096,
      ShardInfo shard = {}) {
    return tally::test::make_fields_reader("npy", fields, batch_size, shard);
  }

  // The message of the InputError that opening (or reading) these fields gives, "" if none.
  static std::string input_error(const std::vector<std::pair<std::string, fs::path>>& fields) {
    return tally::test::read_error([&] { return make_reader(fields); });
  }

  tally::test::TempDir dir_;
};

// Every sample of `field` from every batch, as raw bytes, and the batch sizes.
struct Drained {
  std::string bytes;
  std::vector<std::int64_t> batch_sizes;
};
Drained drain(tally::Reader& reader, const std::string& field) {
  Drained out;
  while (auto batch = reader.next()) {
    const tally::Tensor& t = batch->tensor(field);
    out.bytes.append(static_cast<const char*>(t.data()), t.nbytes());
    out.batch_sizes.push_back(batch->size());
  }
  return out;
}

template <class T>
void expect_round_trip(const fs::path& file, DType dtype) {
  SCOPED_TRACE(tally::test::npy_descr<T>());
  const auto values = iota_values<T>(30);
  write_array(file, values, {10, 3});
  auto reader = tally::test::make_reader(
      "npy", {{"fields", Value(Value::Map{{"x", file.string()}})}, {"batch_size", 4}});
  EXPECT_EQ(reader->total_samples(), 10);
  std::vector<T> got;
  while (auto batch = reader->next()) {
    const tally::Tensor& t = batch->tensor("x");
    EXPECT_EQ(t.dtype(), dtype);
    ASSERT_EQ(t.dim(), 2);
    EXPECT_EQ(t.size(1), 3);
    const T* p = t.data_as<T>();
    got.insert(got.end(), p, p + t.numel());
  }
  EXPECT_EQ(got, values);
}

TEST_F(NpyReaderTest, EveryDTypeRoundTrips) {
  expect_round_trip<bool>(path("b1.npy"), DType::Bool);
  expect_round_trip<std::uint8_t>(path("u1.npy"), DType::U8);
  expect_round_trip<std::int32_t>(path("i4.npy"), DType::I32);
  expect_round_trip<std::int64_t>(path("i8.npy"), DType::I64);
  expect_round_trip<float>(path("f4.npy"), DType::F32);
  expect_round_trip<double>(path("f8.npy"), DType::F64);
  // tally's other dtypes come for free.
  expect_round_trip<std::int8_t>(path("i1.npy"), DType::I8);
  expect_round_trip<std::int16_t>(path("i2.npy"), DType::I16);
  expect_round_trip<std::uint16_t>(path("u2.npy"), DType::U16);
  expect_round_trip<std::uint32_t>(path("u4.npy"), DType::U32);
}

TEST_F(NpyReaderTest, FormatVersions1And2And3) {
  const auto values = iota_values<float>(12);
  for (int major : {1, 2, 3}) {
    const fs::path p = path("v" + std::to_string(major) + ".npy");
    write_array(p, values, {4, 3}, major);
    auto reader = make_reader({{"x", p}});
    EXPECT_EQ(drain(*reader, "x").bytes, raw_bytes(values)) << "version " << major;
  }
}

TEST_F(NpyReaderTest, HeaderVariantsNumPyAccepts) {
  const auto values = iota_values<std::int32_t>(6);
  const std::string data = raw_bytes(values);
  // Double quotes, key order, no trailing comma, Python 2 long integers, no spaces, '=' order.
  for (const std::string& dict :
       {std::string("{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (6,)}"),
        std::string("{'shape': (6,), 'fortran_order': False, 'descr': '<i4'}"),
        std::string("{'descr':'<i4','fortran_order':False,'shape':(6L,),}"),
        std::string("{'descr': '=i4', 'fortran_order': False, 'shape': (6,), }")}) {
    write_text(path("v.npy"), npy_file(dict, data));
    auto reader = make_reader({{"x", path("v.npy")}});
    EXPECT_EQ(drain(*reader, "x").bytes, data) << dict;
  }
}

TEST_F(NpyReaderTest, MultiDimensionalSamples) {
  const auto values = iota_values<double>(5 * 2 * 3);
  write_array(path("m.npy"), values, {5, 2, 3});
  auto reader = make_reader({{"x", path("m.npy")}}, 2);
  auto first = reader->next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->tensor("x").shape(), (std::vector<std::int64_t>{2, 2, 3}));
  EXPECT_EQ(first->tensor("x").data_as<double>()[6], values[6]);
}

TEST_F(NpyReaderTest, SeveralFieldsInOneBatch) {
  const auto scores = iota_values<float>(7 * 4);
  const auto labels = iota_values<std::int64_t>(7);
  write_array(path("scores.npy"), scores, {7, 4});
  write_array(path("labels.npy"), labels, {7});
  auto reader =
      make_reader({{"pred_scores", path("scores.npy")}, {"gt_labels", path("labels.npy")}}, 3);
  EXPECT_EQ(reader->fields(), (std::vector<std::string>{"pred_scores", "gt_labels"}));
  auto batch = reader->next();
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->size(), 3);
  EXPECT_EQ(batch->tensor("gt_labels").data_as<std::int64_t>()[2], labels[2]);
  EXPECT_EQ(batch->tensor("pred_scores").data_as<float>()[11], scores[11]);
}

TEST_F(NpyReaderTest, BatchBoundaries) {
  const auto values = iota_values<std::int32_t>(10);
  write_array(path("x.npy"), values, {10});
  const struct {
    std::int64_t batch_size;
    std::vector<std::int64_t> sizes;
  } cases[] = {
      {4, {4, 4, 2}}, {1, std::vector<std::int64_t>(10, 1)}, {5, {5, 5}}, {10, {10}}, {4096, {10}}};
  for (const auto& c : cases) {
    auto reader = make_reader({{"x", path("x.npy")}}, c.batch_size);
    const Drained d = drain(*reader, "x");
    EXPECT_EQ(d.batch_sizes, c.sizes) << "batch_size " << c.batch_size;
    EXPECT_EQ(d.bytes, raw_bytes(values)) << "batch_size " << c.batch_size;
    EXPECT_FALSE(reader->next()) << "a finished reader stays finished";
  }
}

TEST_F(NpyReaderTest, EmptyArrayGivesNoBatches) {
  write_text(path("e.npy"), npy_file(dict_for("<f4", "(0, 3)"), ""));
  auto reader = make_reader({{"x", path("e.npy")}});
  EXPECT_EQ(reader->total_samples(), 0);
  EXPECT_EQ(reader->shard_samples(), 0);
  EXPECT_FALSE(reader->next());
}

TEST_F(NpyReaderTest, ShardsCoverTheDataOnceInOrder) {
  for (std::int64_t n : {0, 5, 23, 100}) {
    const auto values = iota_values<std::int64_t>(static_cast<std::size_t>(n) * 2);
    write_array(path("x.npy"), values, {n, 2});
    for (int world : {1, 2, 3, 4, 7}) {
      std::string all;
      std::int64_t covered = 0;
      for (int rank = 0; rank < world; ++rank) {
        auto reader = make_reader({{"x", path("x.npy")}}, 3, ShardInfo{rank, world});
        const auto range = tally::ShardRange::of(n, ShardInfo{rank, world});
        EXPECT_EQ(reader->total_samples(), n);
        EXPECT_EQ(reader->shard_samples(), range.size());
        const Drained d = drain(*reader, "x");
        for (auto s : d.batch_sizes) {
          EXPECT_GE(s, 1);
          EXPECT_LE(s, 3);
        }
        EXPECT_EQ(d.bytes.size(),
                  static_cast<std::size_t>(range.size()) * 2 * sizeof(std::int64_t));
        all += d.bytes;
        covered += range.size();
      }
      EXPECT_EQ(covered, n);
      EXPECT_EQ(all, raw_bytes(values)) << n << " samples over " << world << " ranks";
    }
  }
}

TEST_F(NpyReaderTest, BatchesAreZeroCopyViewsThatOutliveTheReader) {
  const auto values = iota_values<float>(100 * 4);
  write_array(path("x.npy"), values, {100, 4});
  std::optional<tally::Batch> first;
  std::optional<tally::Batch> second;
  {
    auto reader = make_reader({{"x", path("x.npy")}}, 10);
    // It says so (through the registry's wrapper): the engine keeps views of its batches.
    EXPECT_NE(dynamic_cast<tally::StableBatchReader*>(reader.get()), nullptr);
    first = reader->next();
    second = reader->next();
  }
  ASSERT_TRUE(first && second);
  const auto* a = static_cast<const char*>(first->tensor("x").data());
  const auto* b = static_cast<const char*>(second->tensor("x").data());
  // Consecutive batches are consecutive rows of one mapping, not copies.
  EXPECT_EQ(b - a, 10 * 4 * static_cast<std::ptrdiff_t>(sizeof(float)));
  // The mapping lives as long as a view of it does.
  EXPECT_EQ(second->tensor("x").data_as<float>()[5], values[45]);
}

TEST_F(NpyReaderTest, UnalignedDataIsCopied) {
  // A hand-made file whose data starts at an offset that is not a multiple of 8.
  const auto values = iota_values<double>(6);
  const std::string file = npy_file(dict_for("<f8", "(6,)"), raw_bytes(values), 1, 4);
  ASSERT_NE((file.size() - 6 * sizeof(double)) % 8, 0u) << "the test file must be unaligned";
  write_text(path("u.npy"), file);
  auto reader = make_reader({{"x", path("u.npy")}});
  auto batch = reader->next();
  ASSERT_TRUE(batch);
  const tally::Tensor& t = batch->tensor("x");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data()) % alignof(double), 0u);
  EXPECT_EQ(std::vector<double>(t.data_as<double>(), t.data_as<double>() + 6), values);
}

// ---- bad input
// -----------------------------------------------------------------------------------

void expect_message(const std::string& message, const std::vector<std::string>& fragments) {
  EXPECT_FALSE(message.empty()) << "expected an InputError";
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  for (const auto& f : fragments)
    EXPECT_NE(message.find(f), std::string::npos) << "'" << f << "' not in: " << message;
}

TEST_F(NpyReaderTest, MissingFile) {
  expect_message(input_error({{"scores", path("nope.npy")}}),
                 {"npy reader", "field 'scores'", path("nope.npy").string(), "file not found"});
}

TEST_F(NpyReaderTest, NotAnNpyFile) {
  write_text(path("bad.npy"), "PK\x03\x04 this is a zip file");
  expect_message(
      input_error({{"x", path("bad.npy")}}),
      {path("bad.npy").string(), "not an npy file", "\\x93NUMPY", "found 'PK\\x03\\x04"});
  write_text(path("empty.npy"), "");
  expect_message(input_error({{"x", path("empty.npy")}}),
                 {"empty.npy", "not an npy file", "empty"});
  fs::create_directory(path("dir.npy"));
  expect_message(input_error({{"x", path("dir.npy")}}), {"dir.npy", "not a regular file"});
}

// An .npz archive (or a plain .npy) that is a FIFO, a socket, a link to /dev/zero or a folder is
// refused by its kind, naming the file, without blocking (libzip would have said
// "Operation not supported").
TEST_F(NpyReaderTest, NonRegularArchivesAreRefusedByTheirKind) {
  for (const auto& [kind, words] : tally::test::special_kinds()) {
    if (kind == "dangling_link" || kind == "link_loop") continue;  // "archive not found" below
    SCOPED_TRACE(kind);
    const fs::path archive = path(kind + ".npz");
    ASSERT_TRUE(tally::test::make_special(kind, archive));
    expect_message(input_error({{"x", fs::path(archive.string() + ":x")}}),
                   {"npy reader", "field 'x'", archive.string() + " is not a regular file " + words,
                    "an .npz archive was expected"});
    const fs::path npy = path(kind + ".npy");
    ASSERT_TRUE(tally::test::make_special(kind, npy));
    expect_message(input_error({{"x", npy}}),
                   {npy.string(), "not a regular file " + words, "expected an .npy file"});
  }
}

TEST_F(NpyReaderTest, UnsupportedVersion) {
  std::string bytes = npy_file(dict_for("<f4", "(1,)"), std::string(4, '\0'));
  bytes[6] = 4;
  write_text(path("v4.npy"), bytes);
  expect_message(input_error({{"x", path("v4.npy")}}),
                 {"v4.npy", "unsupported npy format version 4.0", "expected 1.0, 2.0 or 3.0"});
  bytes[6] = 1;
  bytes[7] = 1;
  write_text(path("v11.npy"), bytes);
  expect_message(input_error({{"x", path("v11.npy")}}), {"version 1.1"});
}

TEST_F(NpyReaderTest, TruncatedPreambleAndHeader) {
  write_text(path("short.npy"), std::string("\x93NUMPY\x01\x00\x10", 9));
  expect_message(input_error({{"x", path("short.npy")}}),
                 {"short.npy", "truncated npy preamble", "9 bytes"});
  const std::string full = npy_file(dict_for("<f4", "(1,)"), std::string(4, '\0'));
  const std::size_t header_len = full.size() - 4 - 10;
  write_text(path("cut.npy"), full.substr(0, 30));
  expect_message(
      input_error({{"x", path("cut.npy")}}),
      {"cut.npy", "truncated header", "header of " + std::to_string(header_len) + " bytes",
       "the file has 30 bytes in all"});
}

TEST_F(NpyReaderTest, MalformedHeaderDict) {
  const std::string data(8, '\0');
  const struct {
    std::string dict;
    std::string fragment;
  } cases[] = {
      {"['descr', '<f4']", "expected '{'"},
      {"{'descr': '<f4', 'fortran_order': False}", "missing key 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
       "unexpected key 'extra'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", "unexpected text after"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}", "expected ':' after key 'descr'"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}",
       "expected ',' or '}' at offset 17"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}",
       "'fortran_order' must be True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': 2}", "'shape' must be a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", "non-negative integers"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (2,)}",
       "duplicate key 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
       "integer out of range"},
  };
  for (const auto& c : cases) {
    write_text(path("h.npy"), npy_file(c.dict, data));
    expect_message(input_error({{"x", path("h.npy")}}),
                   {"h.npy", "malformed header dict", c.fragment});
  }
}

TEST_F(NpyReaderTest, FortranOrder) {
  write_text(path("f.npy"), npy_file(dict_for("<f4", "(2, 3)", true), std::string(24, '\0')));
  expect_message(input_error({{"x", path("f.npy")}}),
                 {"f.npy", "Fortran", "fortran_order: True", "C order"});
}

TEST_F(NpyReaderTest, BigEndianAndUnsupportedDTypes) {
  write_text(path("be.npy"), npy_file(dict_for(">i4", "(2,)"), std::string(8, '\0')));
  expect_message(input_error({{"x", path("be.npy")}}),
                 {"be.npy", "big-endian dtype '>i4'", "expected little-endian '<i4'"});
  for (const std::string descr : {"<c16", "<f2", "<u8", "|S5", "<M8[ns]", "|O"}) {
    write_text(path("dt.npy"), npy_file(dict_for(descr, "(2,)"), std::string(64, '\0')));
    expect_message(input_error({{"x", path("dt.npy")}}),
                   {"dt.npy", "unsupported dtype '" + descr + "'", "expected one of", "<f8"});
  }
  write_text(
      path("rec.npy"),
      npy_file("{'descr': [('a', '<i4'), ('b', '<f8')], 'fortran_order': False, 'shape': (2,), }",
               std::string(24, '\0')));
  expect_message(input_error({{"x", path("rec.npy")}}), {"rec.npy", "structured arrays"});
}

TEST_F(NpyReaderTest, TruncatedData) {
  // (10, 3) float32 needs 120 data bytes after the header; give it 100.
  const std::string dict = dict_for("<f4", "(10, 3)");
  const std::size_t header = npy_file(dict, "").size();
  write_text(path("t.npy"), npy_file(dict, std::string(100, '\0')));
  expect_message(input_error({{"x", path("t.npy")}}),
                 {"t.npy", "truncated data", "(10, 3)", "'<f4'", "needs 120 bytes",
                  "header of " + std::to_string(header) + " bytes",
                  "(" + std::to_string(header + 120) + " bytes in all)",
                  "the file has " + std::to_string(header + 100) + " bytes"});
}

TEST_F(NpyReaderTest, ZeroDimensionalArray) {
  write_text(path("z.npy"), npy_file(dict_for("<f8", "()"), std::string(8, '\0')));
  expect_message(input_error({{"x", path("z.npy")}}),
                 {"z.npy", "0-d array", "at least one dimension"});
}

TEST_F(NpyReaderTest, FieldsOfDifferentLengths) {
  write_array(path("a.npy"), iota_values<float>(10), {10});
  write_array(path("b.npy"), iota_values<std::int64_t>(9), {9});
  expect_message(
      input_error({{"scores", path("a.npy")}, {"labels", path("b.npy")}}),
      {"'scores'", "a.npy", "'labels'", "b.npy", "different lengths", "10 and 9 samples"});
}

TEST_F(NpyReaderTest, BoolBytesOtherThanZeroOrOne) {
  write_text(path("b.npy"), npy_file(dict_for("|b1", "(4,)"), std::string("\x01\x00\x02\x01", 4)));
  expect_message(input_error({{"mask", path("b.npy")}}),
                 {"field 'mask'", "b.npy", "bool element 2 holds byte 2", "expected 0 or 1"});
}

TEST_F(NpyReaderTest, BadParameters) {
  write_array(path("x.npy"), iota_values<float>(4), {4});
  EXPECT_THROW(make_reader({{"x", path("x.npy")}}, 0), tally::ConfigError);
  EXPECT_THROW(make_reader({}), tally::ConfigError);
  EXPECT_THROW(make_reader({{"x", path("x.npy")}}, 4, ShardInfo{3, 3}), tally::ConfigError);
}

// ---- .npz archives ------------------------------------------------------------------------------
// tests/data/classification_extra/npz/{stored,deflated}.npz hold the same arrays (np.savez and
// np.savez_compressed, written by tests/reference/classification_extra.py): scores = the f32
// file below, labels = the i64 file, mask = labels % 2 == 0, f64 = the f64 file.

fs::path npz_data(const std::string& name) {
  return fs::path(TALLY_SOURCE_DIR) / "tests/data/classification_extra" / name;
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The data bytes of a NumPy-written .npy file (header: 128 bytes or fewer, 64-aligned).
std::string npy_data_bytes(const fs::path& p) {
  const std::string b = file_bytes(p);
  const std::size_t header_len = static_cast<unsigned char>(b[8]) |
                                 (static_cast<std::size_t>(static_cast<unsigned char>(b[9])) << 8);
  return b.substr(10 + header_len);
}

TEST_F(NpyReaderTest, NpzStoredAndDeflatedMembersOnAnyShard) {
  const std::string scores = npy_data_bytes(npz_data("mc_scores_f32.npy"));
  const std::string labels = npy_data_bytes(npz_data("mc_labels_i64.npy"));
  const std::string f64 = npy_data_bytes(npz_data("mc_scores_f64.npy"));
  for (const char* archive : {"npz/stored.npz", "npz/deflated.npz"}) {
    SCOPED_TRACE(archive);
    const std::string a = npz_data(archive).string();
    for (int world : {1, 2, 3, 4}) {
      std::string got_scores, got_labels, got_f64;
      std::int64_t mask_true = 0, total = 0;
      for (int rank = 0; rank < world; ++rank) {
        // member with and without ".npy", and the archive alone (member = the field's name)
        auto reader = make_reader({{"scores", fs::path(a + ":scores")},
                                   {"labels", fs::path(a)},
                                   {"m", fs::path(a + ":mask.npy")},
                                   {"f64", fs::path(a + ":f64")}},
                                  7, ShardInfo{rank, world});
        EXPECT_EQ(reader->total_samples(), 97);
        total += reader->shard_samples();
        while (auto batch = reader->next()) {
          const tally::Tensor& s = batch->tensor("scores");
          EXPECT_EQ(s.dtype(), DType::F32);
          ASSERT_EQ(s.dim(), 2);
          EXPECT_EQ(s.size(1), 5);
          got_scores.append(static_cast<const char*>(s.data()), s.nbytes());
          const tally::Tensor& y = batch->tensor("labels");
          EXPECT_EQ(y.dtype(), DType::I64);
          got_labels.append(static_cast<const char*>(y.data()), y.nbytes());
          const tally::Tensor& d = batch->tensor("f64");
          got_f64.append(static_cast<const char*>(d.data()), d.nbytes());
          const tally::Tensor& m = batch->tensor("m");
          EXPECT_EQ(m.dtype(), DType::Bool);
          for (std::int64_t i = 0; i < m.numel(); ++i) {
            EXPECT_EQ(m.data_as<bool>()[i], y.data_as<std::int64_t>()[i] % 2 == 0);
            mask_true += m.data_as<bool>()[i] ? 1 : 0;
          }
        }
      }
      EXPECT_EQ(total, 97);
      EXPECT_EQ(got_scores, scores) << world << " ranks";
      EXPECT_EQ(got_labels, labels) << world << " ranks";
      EXPECT_EQ(got_f64, f64) << world << " ranks";
      EXPECT_GT(mask_true, 0);
    }
  }
}

TEST_F(NpyReaderTest, NpzMissingMemberListsTheMembers) {
  const std::string a = npz_data("npz/stored.npz").string();
  expect_message(input_error({{"x", fs::path(a + ":nope")}}),
                 {"field 'x'", "stored.npz:nope", "the archive has no member 'nope'",
                  "(members: scores, labels, mask, f64)"});
  // The archive alone: the member named like the field.
  expect_message(input_error({{"pred_scores", fs::path(a)}}),
                 {"no member 'pred_scores'", "members: scores, labels, mask, f64"});
}

TEST_F(NpyReaderTest, NpzMissingOrNotAnArchive) {
  expect_message(input_error({{"x", path("none.npz:scores")}}), {"field 'x'", "archive not found"});
  write_text(path("junk.npz"), std::string(300, 'j'));
  expect_message(input_error({{"x", path("junk.npz:scores")}}),
                 {"field 'x'", "junk.npz", "not an .npz archive", "not a zip archive"});
}

TEST_F(NpyReaderTest, NpzCorruptArchive) {
  // Cut off the end: the central directory is gone.
  const std::string bytes = file_bytes(npz_data("npz/stored.npz"));
  write_text(path("cut.npz"), bytes.substr(0, bytes.size() - 40));
  const std::string e = input_error({{"x", path("cut.npz:scores")}});
  EXPECT_NE(e.find("field 'x'"), std::string::npos) << e;
  EXPECT_TRUE(e.find("not an .npz archive") != std::string::npos ||
              e.find("corrupt .npz archive") != std::string::npos)
      << e;
}

TEST_F(NpyReaderTest, NpzCorruptMemberData) {
  // A flipped data byte in a stored member (the CRC check fails) and in a deflated one (inflate
  // or the CRC check fails).
  for (const char* archive : {"npz/stored.npz", "npz/deflated.npz"}) {
    std::string bytes = file_bytes(npz_data(archive));
    const bool stored = std::string(archive).find("stored") != std::string::npos;
    const std::size_t at = bytes.find("'descr': '<f4'");  // plain text in a stored member only
    ASSERT_EQ(at != std::string::npos, stored);
    const std::size_t flip = stored ? at + 200  // inside the float data of 'scores'
                                    : bytes.size() / 6;
    bytes[flip] = static_cast<char>(bytes[flip] ^ 0x5a);
    write_text(path("bad.npz"), bytes);
    const std::string e = input_error({{"x", path("bad.npz:scores")}, {"y", path("bad.npz:f64")}});
    EXPECT_NE(e.find("corrupt"), std::string::npos) << archive << ": " << e;
  }
}

TEST_F(NpyReaderTest, NpzBadMemberHeader) {
  std::string bytes = file_bytes(npz_data("npz/stored.npz"));
  const std::size_t at = bytes.find("'descr': '<f4'");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 14, "'descr': '<c8'");
  write_text(path("hdr.npz"), bytes);
  expect_message(input_error({{"x", path("hdr.npz:scores")}}),
                 {"field 'x'", "hdr.npz:scores", "unsupported dtype '<c8'"});
}

}  // namespace

// Shortened by another process within its last page while it is read: no SIGBUS (the page is
// still mapped; the lost bytes read as zeros), so the reader asks the file's size before every
// batch and at the end, and fails (exit 1) instead of handing out zeros.
TEST_F(NpyReaderTest, AFileShortenedWithinItsLastPageWhileReadIsARuntimeError) {
  for (const std::int64_t cut : {1, 8, 40}) {
    SCOPED_TRACE(cut);
    std::vector<std::int64_t> values(100);
    for (std::int64_t i = 0; i < 100; ++i) values[static_cast<std::size_t>(i)] = i + 1;
    const auto p = dir_.path / "x.npy";
    tally::test::write_npy(p, values);
    auto reader = make_reader({{"x", p}}, 10);
    ASSERT_TRUE(reader->next().has_value());
    fs::resize_file(p, fs::file_size(p) - static_cast<std::uintmax_t>(cut));
    try {
      while (reader->next()) {
      }
      ADD_FAILURE() << "no error";
    } catch (const tally::RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("the file was truncated while it was read"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
    }
  }
}
