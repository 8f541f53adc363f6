// The png_masks and images readers (plugins/readers/png), loaded through the registry, on PNG
// files written here by a minimal encoder (stored deflate blocks, so no zlib is needed): 8- and
// 16-bit grayscale, palette (8, 4, 2 and 1 bit), low-bit grayscale, RGB, RGBA, grayscale + alpha,
// name matching across folders, sorting, sharding over 1 to 4 ranks, lazy decoding, and corrupt,
// truncated and wrong-kind files with the messages they must give. (Real, zlib-compressed PNGs
// written by Pillow are read in test_segmentation_metrics: the example's label maps.)
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config.hpp"
#include "metric_harness.hpp"
#include "registry.hpp"
#include "support/png_bytes.hpp"
#include "support/process.hpp"
#include "support/special_files.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/reader.hpp"

namespace fs = std::filesystem;
using tally::DType;
using tally::ShardInfo;
using tally::Value;

namespace {

using tally::test::Png;

std::vector<std::uint16_t> pattern(std::size_t n, int modulo, int offset = 0) {
  std::vector<std::uint16_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint16_t>((i * 7 + offset) % modulo);
  return v;
}

Png gray(std::uint32_t w, std::uint32_t h, int depth, int offset = 0) {
  const int modulo = depth == 16 ? 60000 : 1 << depth;
  return {w, h, depth, 0, pattern(std::size_t{w} * h, modulo, offset), {}, {}};
}

Png palette(std::uint32_t w, std::uint32_t h, int depth, int colours) {
  std::string plte;
  for (int i = 0; i < colours; ++i)
    plte += {static_cast<char>(i * 10), static_cast<char>(i * 20), static_cast<char>(255 - i)};
  return {w, h, depth, 3, pattern(std::size_t{w} * h, colours), plte, {}};
}

Png colour(std::uint32_t w, std::uint32_t h, int type, int depth = 8) {
  Png p{w, h, depth, type, {}, {}, {}};
  p.samples = pattern(std::size_t{w} * h * p.channels(), depth == 16 ? 65536 : 256, 3);
  return p;
}

// ---- the readers, through the registry
// -----------------------------------------------------------

class PngReaderTest : public ::testing::Test {
 protected:
  fs::path folder(const std::string& name) const {
    fs::create_directories(dir_ / name);
    return dir_ / name;
  }
  static void write(const fs::path& p, const std::string& bytes) {
    tally::test::write_text(p, bytes);
  }

  static std::shared_ptr<tally::Reader> make_reader(
      const std::string& type, const std::vector<std::pair<std::string, fs::path>>& fields,
      std::int64_t batch_size = 16, ShardInfo shard = {}) {
    return tally::test::make_fields_reader(type, fields, batch_size, shard);
  }

  /// The one sample of a folder holding one file `name` with `bytes`, through reader `type`.
  tally::Tensor read_one(const std::string& type, const std::string& bytes) {
    const fs::path d = folder("one_" + std::to_string(counter_++));
    write(d / "x.png", bytes);
    auto reader = make_reader(type, {{"f", d}});
    auto batch = reader->next();
    EXPECT_TRUE(batch.has_value());
    EXPECT_FALSE(reader->next().has_value());
    return batch->ragged("f").at(0);
  }

  /// The InputError message of reading every batch, "" if none.
  static std::string input_error(const std::string& type,
                                 const std::vector<std::pair<std::string, fs::path>>& fields) {
    return tally::test::read_error([&] { return make_reader(type, fields); });
  }

  tally::test::TempDir dir_;
  int counter_ = 0;
};

template <class T>
std::vector<std::uint16_t> values_of(const tally::Tensor& t) {
  const T* p = t.data_as<T>();
  return std::vector<std::uint16_t>(p, p + t.numel());
}

TEST_F(PngReaderTest, MasksOf8And16BitGrayscale) {
  const Png g8 = gray(7, 5, 8);
  const tally::Tensor t8 = read_one("png_masks", g8.encode());
  EXPECT_EQ(t8.dtype(), DType::U8);
  EXPECT_EQ(t8.shape(), (std::vector<std::int64_t>{5, 7}));
  EXPECT_EQ(values_of<std::uint8_t>(t8), g8.samples);

  const Png g16 = gray(3, 4, 16);
  const tally::Tensor t16 = read_one("png_masks", g16.encode());
  EXPECT_EQ(t16.dtype(), DType::U16);
  EXPECT_EQ(t16.shape(), (std::vector<std::int64_t>{4, 3}));
  EXPECT_EQ(values_of<std::uint16_t>(t16), g16.samples);  // host order, values above 255 kept
}

TEST_F(PngReaderTest, PaletteMasksAreTheIndicesAtEveryBitDepth) {
  for (const auto& [depth, colours] :
       std::vector<std::pair<int, int>>{{8, 200}, {4, 16}, {2, 4}, {1, 2}}) {
    SCOPED_TRACE("palette depth " + std::to_string(depth));
    const Png p = palette(13, 3, depth, colours);  // odd width: rows end mid-byte
    const tally::Tensor t = read_one("png_masks", p.encode());
    EXPECT_EQ(t.dtype(), DType::U8);
    EXPECT_EQ(t.shape(), (std::vector<std::int64_t>{3, 13}));
    EXPECT_EQ(values_of<std::uint8_t>(t), p.samples);
  }
}

TEST_F(PngReaderTest, LowBitGrayscaleIsScaledTo8BitsAsPilAndOpenCvReadIt) {
  for (int depth : {1, 2, 4}) {
    SCOPED_TRACE("gray depth " + std::to_string(depth));
    const Png p = gray(11, 2, depth);
    const tally::Tensor t = read_one("png_masks", p.encode());
    std::vector<std::uint16_t> want = p.samples;
    for (auto& v : want) v = static_cast<std::uint16_t>(v * (255 / ((1 << depth) - 1)));
    EXPECT_EQ(values_of<std::uint8_t>(t), want);
  }
}

TEST_F(PngReaderTest, ColourMasksAreErrorsThatSayWhatIsExpected) {
  for (const auto& [type, name] : std::vector<std::pair<int, std::string>>{
           {2, "RGB, 8-bit"}, {6, "RGBA, 8-bit"}, {4, "grayscale + alpha, 8-bit"}}) {
    const fs::path d = folder("c" + std::to_string(type));
    write(d / "m.png", colour(2, 2, type).encode());
    EXPECT_EQ(
        input_error("png_masks", {{"gt", d}}),
        "png_masks reader: field 'gt' sample 0: " + (d / "m.png").string() + ": is " + name +
            "; a label map must have one channel: 8- or 16-bit grayscale, or a palette PNG "
            "whose indices are the class ids (convert colour-coded masks to class ids first)");
  }
}

TEST_F(PngReaderTest, ImagesKeepTheirChannels) {
  struct Case {
    Png png;
    std::int64_t channels;
    DType dtype;
  };
  for (const Case& c :
       {Case{colour(5, 3, 2), 3, DType::U8}, Case{colour(5, 3, 6), 4, DType::U8},
        Case{colour(4, 2, 2, 16), 3, DType::U16}, Case{colour(4, 2, 6, 16), 4, DType::U16},
        Case{colour(3, 3, 4), 2, DType::U8}, Case{gray(6, 2, 8), 1, DType::U8},
        Case{gray(6, 2, 16), 1, DType::U16}}) {
    SCOPED_TRACE("colour type " + std::to_string(c.png.color_type) + ", " +
                 std::to_string(c.png.bit_depth) + "-bit");
    const tally::Tensor t = read_one("images", c.png.encode());
    EXPECT_EQ(t.dtype(), c.dtype);
    EXPECT_EQ(t.shape(), (std::vector<std::int64_t>{c.png.height, c.png.width, c.channels}));
    EXPECT_EQ(c.dtype == DType::U8 ? values_of<std::uint8_t>(t) : values_of<std::uint16_t>(t),
              c.png.samples);
  }
}

TEST_F(PngReaderTest, PaletteImagesBecomeRgbOrRgbaWithTransparency) {
  Png p = palette(4, 2, 8, 5);
  tally::Tensor t = read_one("images", p.encode());
  ASSERT_EQ(t.shape(), (std::vector<std::int64_t>{2, 4, 3}));
  const auto* rgb = t.data_as<std::uint8_t>();
  for (std::size_t i = 0; i < p.samples.size(); ++i) {
    const int idx = p.samples[i];
    EXPECT_EQ(rgb[3 * i], idx * 10);
    EXPECT_EQ(rgb[3 * i + 1], idx * 20);
    EXPECT_EQ(rgb[3 * i + 2], 255 - idx);
  }
  p.trns = std::string("\x00\x80", 2);  // index 0 transparent, 1 half, others opaque
  t = read_one("images", p.encode());
  ASSERT_EQ(t.shape(), (std::vector<std::int64_t>{2, 4, 4}));
  const auto* rgba = t.data_as<std::uint8_t>();
  for (std::size_t i = 0; i < p.samples.size(); ++i) {
    const int idx = p.samples[i];
    EXPECT_EQ(rgba[4 * i + 3], idx == 0 ? 0 : idx == 1 ? 0x80 : 255);
  }
}

TEST_F(PngReaderTest, SamplesAreMatchedByNameInSortedOrderAcrossFolders) {
  const fs::path pred = folder("pred"), gt = folder("gt");
  const std::vector<std::string> names = {"b.png", "a.png", "c10.png", "c2.png"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    write(pred / names[i], gray(2, 1, 8, static_cast<int>(i)).encode());
    write(gt / names[i], gray(3, 1, 8, static_cast<int>(10 + i)).encode());
  }
  write(pred / "notes.txt", "not an image");  // not a .png: not looked at
  fs::create_directories(gt / "sub");         // nor is a folder of another name
  auto reader = make_reader("png_masks", {{"pred_sem_seg", pred}, {"gt_sem_seg", gt}}, 3);
  EXPECT_EQ(reader->total_samples(), 4);
  EXPECT_EQ(reader->fields(), (std::vector<std::string>{"pred_sem_seg", "gt_sem_seg"}));
  std::vector<std::uint16_t> firsts;
  std::vector<std::int64_t> sizes;
  while (auto b = reader->next()) {
    sizes.push_back(b->size());
    EXPECT_TRUE(b->is_ragged("pred_sem_seg"));
    for (std::int64_t i = 0; i < b->size(); ++i) {
      const auto& p = b->ragged("pred_sem_seg")[static_cast<std::size_t>(i)];
      const auto& g = b->ragged("gt_sem_seg")[static_cast<std::size_t>(i)];
      EXPECT_EQ(p.shape(), (std::vector<std::int64_t>{1, 2}));
      EXPECT_EQ(g.shape(), (std::vector<std::int64_t>{1, 3}));
      firsts.push_back(p.data_as<std::uint8_t>()[0]);
      EXPECT_EQ(g.data_as<std::uint8_t>()[0], (p.data_as<std::uint8_t>()[0] + 10) % 256);
    }
  }
  // Byte order: a.png (offset 1), b.png (0), c10.png (2), c2.png (3).
  EXPECT_EQ(firsts, (std::vector<std::uint16_t>{1, 0, 2, 3}));
  EXPECT_EQ(sizes, (std::vector<std::int64_t>{3, 1}));
}

TEST_F(PngReaderTest, ShardsAreContiguousBlocksOnAnyNumberOfRanks) {
  const fs::path d = folder("masks");
  const int n = 10;
  for (int i = 0; i < n; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "%02d.png", i);
    write(d / name, gray(1, 1, 8, i).encode());  // value = i
  }
  for (int world = 1; world <= 4; ++world) {
    std::vector<std::uint16_t> all;
    for (int rank = 0; rank < world; ++rank) {
      auto reader = make_reader("png_masks", {{"m", d}}, 2, {rank, world});
      const auto range = tally::ShardRange::of(n, {rank, world});
      EXPECT_EQ(reader->total_samples(), n);
      EXPECT_EQ(reader->shard_samples(), range.size());
      std::vector<std::uint16_t> mine;
      while (auto b = reader->next())
        for (const auto& t : b->ragged("m")) mine.push_back(t.data_as<std::uint8_t>()[0]);
      ASSERT_EQ(static_cast<std::int64_t>(mine.size()), range.size());
      for (std::size_t i = 0; i < mine.size(); ++i)
        EXPECT_EQ(mine[i], range.begin + static_cast<std::int64_t>(i))
            << world << " ranks, rank " << rank;
      all.insert(all.end(), mine.begin(), mine.end());
    }
    EXPECT_EQ(all, (std::vector<std::uint16_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  }
  // More ranks than files: some ranks read nothing.
  auto empty = make_reader("png_masks", {{"m", d}}, 2, {0, 11});
  EXPECT_EQ(empty->shard_samples(), 0);
  EXPECT_FALSE(empty->next().has_value());
}

TEST_F(PngReaderTest, FilesAreDecodedOnlyWhenTheirBatchIsRead) {
  const fs::path d = folder("lazy");
  write(d / "a.png", gray(2, 2, 8).encode());
  write(d / "b.png", "garbage");
  auto reader = make_reader("png_masks", {{"m", d}}, 1);
  EXPECT_TRUE(reader->next().has_value());  // a.png only
  EXPECT_THROW(reader->next(), tally::InputError);
  // A rank whose shard holds only the good file never opens the bad one.
  auto first_half = make_reader("png_masks", {{"m", d}}, 4, {0, 2});
  EXPECT_TRUE(first_half->next().has_value());
  EXPECT_FALSE(first_half->next().has_value());
}

TEST_F(PngReaderTest, MismatchedNamesNameTheFileAndBothFolders) {
  const fs::path pred = folder("pred"), gt = folder("gt");
  for (const char* n : {"a.png", "b.png", "c.png"}) write(pred / n, gray(1, 1, 8).encode());
  for (const char* n : {"a.png", "c.png"}) write(gt / n, gray(1, 1, 8).encode());
  EXPECT_EQ(input_error("png_masks", {{"pred", pred}, {"gt", gt}}),
            "png_masks reader: 'b.png' is in " + pred.string() + " (field 'pred') but not in " +
                gt.string() +
                " (field 'gt'); the folders must hold the same file names (3 and 2 .png files)");
  write(gt / "d.png", gray(1, 1, 8).encode());
  EXPECT_EQ(input_error("images", {{"pred", pred}, {"gt", gt}}),
            "images reader: 'b.png' is in " + pred.string() + " (field 'pred') but not in " +
                gt.string() +
                " (field 'gt'), and 1 more name(s) differ; the folders must hold the same file "
                "names (3 and 3 .png files)");
  write(gt / "b.png", gray(1, 1, 8).encode());
  EXPECT_EQ(input_error("png_masks", {{"pred", pred}, {"gt", gt}}),
            "png_masks reader: 'd.png' is in " + gt.string() + " (field 'gt') but not in " +
                pred.string() +
                " (field 'pred'); the folders must hold the same file names (3 and 4 .png files)");
}

TEST_F(PngReaderTest, MissingAndEmptyFoldersAreErrors) {
  EXPECT_EQ(input_error("png_masks", {{"gt", dir_ / "nope"}}),
            "png_masks reader: field 'gt': " + (dir_ / "nope").string() +
                " is not a folder (it does not exist)");
  const fs::path empty = folder("empty");
  EXPECT_EQ(input_error("images", {{"img", empty}}),
            "images reader: field 'img': no .png files in " + empty.string());
}

TEST_F(PngReaderTest, CorruptAndTruncatedFilesNameTheFileAndLibspngsMessage) {
  const std::string good = gray(8, 8, 8).encode();
  const auto error_for = [&](const std::string& name, const std::string& bytes) {
    const fs::path d = folder("bad_" + name);
    write(d / (name + ".png"), bytes);
    const std::string e = input_error("png_masks", {{"gt", d}});
    EXPECT_EQ(
        e.rfind("png_masks reader: field 'gt' sample 0: " + (d / (name + ".png")).string() + ": ",
                0),
        0u)
        << e;
    EXPECT_NE(e.find("(libspng: "), std::string::npos) << e;
    return e;
  };
  error_for("not_png", "hello, world");
  error_for("empty", "");
  error_for("truncated_header", good.substr(0, 20));
  error_for("truncated_data", good.substr(0, good.size() - 30));
  std::string bad_crc = good;
  bad_crc[30] ^= 0x01;  // inside IHDR: its CRC no longer matches
  error_for("bad_crc", bad_crc);
  std::string bad_idat = good;
  bad_idat[good.size() - 20] ^= 0x55;  // inside the IDAT data
  error_for("bad_idat", bad_idat);
  // The message is libspng's own words, e.g. for a bad signature.
  EXPECT_NE(error_for("sig", "\x89PNX\r\n\x1a\n" + good.substr(8)).find("signature"),
            std::string::npos);
}

// A FIFO, a socket, a link to /dev/zero, a dangling link or a folder named .png in either
// field's folder is an error naming it, for both readers: never skipped (the sample count and
// the matching would change without a word), never opened (a FIFO would block the test).
TEST_F(PngReaderTest, NonRegularEntriesAreErrorsNamingThem) {
  for (const std::string type : {"png_masks", "images"}) {
    for (const auto& [kind, words] : tally::test::special_kinds()) {
      for (const bool second : {false, true}) {
        SCOPED_TRACE(type + " " + kind + (second ? " in the second field" : ""));
        const std::string base = type + "_" + kind + (second ? "2" : "1");
        const fs::path pred = folder(base + "/pred"), gt = folder(base + "/gt");
        for (const char* n : {"a.png", "b.png"}) write(pred / n, gray(2, 2, 8).encode());
        write(gt / "a.png", gray(2, 2, 8).encode());
        const fs::path bad = second ? gt / "b.png" : pred / "c.PNG";
        ASSERT_TRUE(tally::test::make_special(kind, bad));
        const std::string msg = input_error(type, {{"pred", pred}, {"gt", gt}});
        EXPECT_EQ(msg.rfind(type + " reader: field '" + (second ? "gt" : "pred") +
                                "': " + bad.string() + " is not a regular file " + words,
                            0),
                  0u)
            << msg;
      }
    }
  }
  // A link to a regular PNG is read.
  const fs::path linked = folder("linked"), target = folder("target");
  write(target / "t.png", gray(2, 2, 8).encode());
  fs::create_symlink(target / "t.png", linked / "a.png");
  EXPECT_EQ(make_reader("png_masks", {{"m", linked}})->total_samples(), 1);
}

TEST_F(PngReaderTest, BadParametersAreConfigErrors) {
  const fs::path d = folder("m");
  write(d / "a.png", gray(1, 1, 8).encode());
  EXPECT_THROW(make_reader("png_masks", {{"m", d}}, 0), tally::ConfigError);
  EXPECT_THROW(make_reader("images", {}), tally::ConfigError);
}

}  // namespace
