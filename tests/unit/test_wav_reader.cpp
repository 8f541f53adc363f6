// The wav reader (plugins/readers/wav), loaded as the real libtally_wav.so through the Registry:
// values of real WAV files (PCM 16/24/32-bit and float32, mono and stereo), sharding, matching by
// name, and bad files.
//
// Expected values come from the "wav" section of tests/reference/expected_audio.json, written by
// tests/reference/audio.py (which wrote the files with Python's wave module and
// scipy.io.wavfile, and the values libsndfile gives: PCM x of b bits is x / 2^(b-1)), unless a
// test says otherwise.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "support/process.hpp"
#include "support/special_files.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/reader.hpp"

namespace tally::test {
namespace {

namespace fs = std::filesystem;

const Json& wav_cases() { return expected_json("tests/reference/expected_audio.json").at("wav"); }

/// A folder holding copies of the given source-tree files (under their own names).
fs::path folder_with(const fs::path& dir,
                     const std::vector<std::pair<std::string, std::string>>& files) {
  fs::create_directories(dir);
  for (const auto& [name, source] : files) fs::copy_file(source_path(source), dir / name);
  return dir;
}

std::shared_ptr<Reader> wav_reader(const std::vector<std::pair<std::string, fs::path>>& fields,
                                   std::int64_t batch_size = 16, ShardInfo shard = {},
                                   Value::Map extra = {}) {
  Value::Map paths;
  for (const auto& [name, p] : fields) paths.emplace_back(name, p.string());
  Value::Map params{{"fields", Value(paths)}, {"batch_size", Value(static_cast<long>(batch_size))}};
  for (auto& kv : extra) params.push_back(kv);
  return make_reader("wav", params, shard);
}

// Every reference file reads as the values recorded for it: [T] mono, [C, T] stereo, float64.
TEST(WavReader, ReadsPcmAndFloatFilesAsLibsndfileValues) {
  TempDir dir;
  ASSERT_GE(wav_cases().size(), 8u);
  for (const auto& c : wav_cases()) {
    const std::string name = c.at("name").get<std::string>();
    SCOPED_TRACE(name);
    const fs::path d = folder_with(dir.path / name, {{"x.wav", c.at("file").get<std::string>()}});
    auto reader = wav_reader({{"audio", d}});
    EXPECT_EQ(reader->total_samples(), 1);
    auto batch = reader->next();
    ASSERT_TRUE(batch.has_value());
    EXPECT_FALSE(reader->next().has_value());
    const Tensor got = batch->ragged("audio").at(0);
    const Tensor want = load_npy(source_path(c.at("values").get<std::string>()));
    EXPECT_EQ(got.dtype(), DType::F64);
    ASSERT_EQ(got.shape(), want.shape());
    const std::int64_t channels = c.at("channels").get<std::int64_t>();
    EXPECT_EQ(got.dim(), channels == 1 ? 1 : 2);
    EXPECT_EQ(got.shape().back(), c.at("frames").get<std::int64_t>());
    for (std::int64_t i = 0; i < got.numel(); ++i)
      ASSERT_EQ(got.data_as<double>()[i], want.data_as<double>()[i]) << "value " << i;
  }
}

// Two folders matched by name; shards are contiguous blocks on any number of ranks; batches of
// ragged [T] tensors of each file's length. Expected: the files' lengths (160, 240, 200 frames,
// written by audio.py) in name order.
TEST(WavReader, FoldersMatchedByNameAndShardedContiguously) {
  const fs::path preds = source_path("tests/data/audio/wav/pair/preds");
  const fs::path target = source_path("tests/data/audio/wav/pair/target");
  for (int world = 1; world <= 4; ++world) {
    std::vector<std::int64_t> lengths;
    for (int rank = 0; rank < world; ++rank) {
      auto reader = wav_reader({{"preds", preds}, {"target", target}}, 2, {rank, world});
      EXPECT_EQ(reader->total_samples(), 3);
      while (auto b = reader->next()) {
        ASSERT_EQ(b->ragged("preds").size(), b->ragged("target").size());
        for (std::size_t i = 0; i < b->ragged("preds").size(); ++i) {
          EXPECT_EQ(b->ragged("preds")[i].shape(), b->ragged("target")[i].shape());
          lengths.push_back(b->ragged("preds")[i].size(0));
        }
      }
    }
    EXPECT_EQ(lengths, (std::vector<std::int64_t>{160, 240, 200})) << world << " ranks";
  }
  // The audio metrics read the ragged samples.
  auto reader = wav_reader({{"preds", preds}, {"target", target}});
  const Batch all = *reader->next();
  const Value v = run_single("ScaleInvariantSignalDistortionRatio", {}, all);
  EXPECT_TRUE(std::isfinite(v.at("scale_invariant_signal_distortion_ratio").as_double()));
}

TEST(WavReader, BadAndTruncatedFilesNameTheFile) {
  TempDir dir;
  const fs::path trunc =
      folder_with(dir.path / "t", {{"a.wav", "tests/data/audio/wav/bad_truncated.wav"}});
  EXPECT_HAS(read_error([&] {
               return wav_reader({{"x", trunc}});
             }),
             "wav reader: field 'x' sample 0: " + (trunc / "a.wav").string() +
                 " is truncated: its data chunk declares 480 bytes, the file holds 300 after it");
  const fs::path junk =
      folder_with(dir.path / "j", {{"a.wav", "tests/data/audio/wav/bad_not_wav.wav"}});
  EXPECT_HAS(
      read_error([&] {
        return wav_reader({{"x", junk}});
      }),
      "wav reader: field 'x' sample 0: cannot read " + (junk / "a.wav").string() + " as audio");
}

TEST(WavReader, SampleRateAndLengthMismatches) {
  TempDir dir;
  // Another rate than the first file's.
  const fs::path rates =
      folder_with(dir.path / "r", {{"a.wav", "tests/data/audio/wav/pcm16_mono.wav"},
                                   {"b.wav", "tests/data/audio/wav/pcm16_16k.wav"}});
  EXPECT_HAS(read_error([&] {
               return wav_reader({{"x", rates}});
             }),
             "wav reader: field 'x' sample 1: " + (rates / "b.wav").string() +
                 " has sample rate 16000 Hz, expected 8000 Hz (the rate of the first file)");
  EXPECT_HAS(read_error([&] {
               return wav_reader({{"x", rates}}, 16, {}, {{"sample_rate", Value(16000L)}});
             }),
             "sample 0: " + (rates / "a.wav").string() +
                 " has sample rate 8000 Hz, expected 16000 Hz (the sample_rate parameter)");
  // One sample's files of different lengths (and channels) in two fields.
  const fs::path p =
      folder_with(dir.path / "p", {{"a.wav", "tests/data/audio/wav/pcm16_mono.wav"}});
  const fs::path t =
      folder_with(dir.path / "t", {{"a.wav", "tests/data/audio/wav/pcm16_stereo.wav"}});
  EXPECT_HAS(read_error([&] {
               return wav_reader({{"preds", p}, {"target", t}});
             }),
             "wav reader: field 'target' sample 0: " + (t / "a.wav").string() +
                 " holds 160 frames of 2 channel(s), but " + (p / "a.wav").string() +
                 " holds 240 of 1: the files of one sample must have the same length and "
                 "channels");
}

TEST(WavReader, MismatchedNamesAndMissingFolders) {
  TempDir dir;
  const fs::path a =
      folder_with(dir.path / "a", {{"u1.wav", "tests/data/audio/wav/pcm16_mono.wav"},
                                   {"u2.wav", "tests/data/audio/wav/pcm16_mono.wav"}});
  const fs::path b =
      folder_with(dir.path / "b", {{"u1.wav", "tests/data/audio/wav/pcm16_mono.wav"}});
  EXPECT_HAS(read_error([&] {
               return wav_reader({{"preds", a}, {"target", b}});
             }),
             "wav reader: 'u2.wav' is in " + a.string() + " (field 'preds') but not in " +
                 b.string() + " (field 'target')");
  EXPECT_HAS(read_error([&] {
               return wav_reader({{"preds", dir.path / "nope"}});
             }),
             "wav reader: field 'preds': " + (dir.path / "nope").string() +
                 " is not a folder (it does not exist)");
  fs::create_directories(dir.path / "empty");
  EXPECT_HAS(read_error([&] {
               return wav_reader({{"preds", dir.path / "empty"}});
             }),
             "no .wav files in");
}

// ---- containers written byte by byte: each declares `declared` frames of 16-bit mono PCM at
// 8000 Hz and holds `present` of them (the sample values 0, 1, 2, ...).

/// Little- or big-endian unsigned integers of n bytes appended to `out`.
void put(std::string& out, std::uint64_t v, int n, bool big = false) {
  for (int i = 0; i < n; ++i) {
    const int shift = 8 * (big ? n - 1 - i : i);
    out.push_back(static_cast<char>((v >> shift) & 0xff));
  }
}

std::string samples(std::int64_t frames, bool big) {
  std::string out;
  for (std::int64_t i = 0; i < frames; ++i) put(out, static_cast<std::uint64_t>(i), 2, big);
  return out;
}

/// The body of a PCM "fmt " chunk: 1 channel, 8000 Hz, 16-bit.
std::string wav_fmt() {
  std::string f;
  put(f, 1, 2);      // PCM
  put(f, 1, 2);      // channels
  put(f, 8000, 4);   // rate
  put(f, 16000, 4);  // bytes a second
  put(f, 2, 2);      // block align
  put(f, 16, 2);     // bits
  return f;
}

std::string riff(std::int64_t declared, std::int64_t present) {
  std::string out = "RIFF";
  put(out, 36 + 2 * static_cast<std::uint64_t>(declared), 4);
  out += "WAVEfmt ";
  put(out, 16, 4);
  out += wav_fmt() + "data";
  put(out, 2 * static_cast<std::uint64_t>(declared), 4);
  return out + samples(present, false);
}

std::string rf64(std::int64_t declared, std::int64_t present) {
  std::string out = "RF64";
  put(out, 0xffffffffu, 4);
  out += "WAVEds64";
  put(out, 28, 4);
  put(out, 36 + 2 * static_cast<std::uint64_t>(declared) + 36, 8);  // RIFF size
  put(out, 2 * static_cast<std::uint64_t>(declared), 8);            // data size
  put(out, static_cast<std::uint64_t>(declared), 8);                // sample count
  put(out, 0, 4);                                                   // table length
  out += "fmt ";
  put(out, 16, 4);
  out += wav_fmt() + "data";
  put(out, 0xffffffffu, 4);
  return out + samples(present, false);
}

std::string w64_guid(const char* tag) {
  static const unsigned char riff_tail[12] = {0x2e, 0x91, 0xcf, 0x11, 0xa5, 0xd6,
                                              0x28, 0xdb, 0x04, 0xc1, 0x00, 0x00};
  static const unsigned char tail[12] = {0xf3, 0xac, 0xd3, 0x11, 0x8c, 0xd1,
                                         0x00, 0xc0, 0x4f, 0x8e, 0xdb, 0x8a};
  const unsigned char* t = std::string(tag) == "riff" ? riff_tail : tail;
  return std::string(tag, 4) + std::string(reinterpret_cast<const char*>(t), 12);
}

std::string w64(std::int64_t declared, std::int64_t present) {
  const std::uint64_t data = 2 * static_cast<std::uint64_t>(declared);
  std::string out = w64_guid("riff");
  put(out, 40 + 40 + 24 + data, 8);
  out += w64_guid("wave") + w64_guid("fmt ");
  put(out, 24 + 16, 8);
  out += wav_fmt() + w64_guid("data");
  put(out, 24 + data, 8);
  return out + samples(present, false);
}

/// AIFF: COMM declares `comm_frames`, SSND's size `declared` frames, the file holds `present`.
std::string aiff(std::int64_t comm_frames, std::int64_t declared, std::int64_t present) {
  std::string out = "FORM";
  put(out, 4 + 26 + 16 + 2 * static_cast<std::uint64_t>(declared), 4, true);
  out += "AIFFCOMM";
  put(out, 18, 4, true);
  put(out, 1, 2, true);
  put(out, static_cast<std::uint64_t>(comm_frames), 4, true);
  put(out, 16, 2, true);
  out += std::string("\x40\x0b\xfa\x00\x00\x00\x00\x00\x00\x00", 10);  // 8000.0, 80-bit
  out += "SSND";
  put(out, 8 + 2 * static_cast<std::uint64_t>(declared), 4, true);
  put(out, 0, 8, true);  // offset, block size
  return out + samples(present, true);
}

std::string caf(std::int64_t declared, std::int64_t present) {
  std::string out = "caff";
  put(out, 1, 2, true);
  put(out, 0, 2, true);
  out += "desc";
  put(out, 32, 8, true);
  put(out, 0x40bf400000000000u, 8, true);  // 8000.0
  out += "lpcm";
  put(out, 0, 4, true);  // flags: big-endian integers
  put(out, 2, 4, true);  // bytes a packet
  put(out, 1, 4, true);  // frames a packet
  put(out, 1, 4, true);  // channels
  put(out, 16, 4, true);
  out += "data";
  put(out, 4 + 2 * static_cast<std::uint64_t>(declared), 8, true);
  put(out, 0, 4, true);  // edit count
  return out + samples(present, true);
}

std::string au(std::int64_t declared, std::int64_t present) {
  std::string out = ".snd";
  put(out, 24, 4, true);
  put(out, 2 * static_cast<std::uint64_t>(declared), 4, true);
  put(out, 3, 4, true);  // 16-bit linear PCM
  put(out, 8000, 4, true);
  put(out, 1, 4, true);
  return out + samples(present, true);
}

/// A NIST SPHERE file: a container libsndfile reads that the reader does not accept.
std::string nist(std::int64_t frames) {
  std::string head =
      "NIST_1A\n   1024\nsample_count -i " + std::to_string(frames) +
      "\nsample_n_bytes -i 2\nchannel_count -i 1\nsample_byte_format -s2 01\nsample_rate -i "
      "8000\nsample_coding -s3 pcm\nend_head\n";
  head.resize(1024, ' ');
  return head + samples(frames, false);
}

fs::path write_file(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

struct Container {
  std::string name;
  std::function<std::string(std::int64_t declared, std::int64_t present)> make;
  std::string truncated;  // the message for 8000 declared, 400 present
};

std::vector<Container> containers() {
  return {
      {"RIFF", riff,
       "is truncated: its data chunk declares 16000 bytes, the file holds 800 after it"},
      {"RF64", rf64,
       "is truncated: its data (ds64) chunk declares 16000 bytes, the file holds 800 after it"},
      {"W64", w64,
       "is truncated: its data chunk declares 16000 bytes, the file holds 800 after it"},
      {"AIFF (SSND cut)", [](std::int64_t d, std::int64_t p) { return aiff(d, d, p); },
       "is truncated: its SSND chunk declares 16008 bytes, the file holds 808 after it"},
      {"AIFF (COMM frames)", [](std::int64_t d, std::int64_t p) { return aiff(d, p, p); },
       "is truncated: its COMM chunk declares 8000 frames, its SSND chunk of 808 bytes holds 400"},
      // libsndfile refuses a cut CAF itself (its data chunk is checked there as well).
      {"CAF", caf, "as audio: Supported file format but file is malformed"},
      {"AU", au, "is truncated: its data chunk declares 16000 bytes, the file holds 800 after it"},
  };
}

// Every container the reader accepts, whole, reads as the frames it holds; cut off (8000 frames
// declared, 400 in the file) it is an error naming the file and both sizes, never a shorter
// recording.
TEST(WavReader, EveryContainerIsCheckedForTheDataItDeclares) {
  TempDir dir;
  for (const auto& c : containers()) {
    SCOPED_TRACE(c.name);
    const fs::path whole = dir.path / ("whole " + c.name);
    write_file(whole / "a.wav", c.make(400, 400));
    auto reader = wav_reader({{"x", whole}});
    const Tensor t = reader->next()->ragged("x").at(0);
    ASSERT_EQ(t.shape(), (std::vector<std::int64_t>{400}));
    EXPECT_EQ(t.data_as<double>()[7], 7.0 / 32768);
    for (const std::int64_t present : {400, 1, 0}) {
      const fs::path cut = dir.path / (c.name + " cut " + std::to_string(present));
      const fs::path file = write_file(cut / "a.wav", c.make(8000, present));
      const std::string msg = read_error([&] { return wav_reader({{"x", cut}}); });
      EXPECT_EQ(msg.rfind("wav reader: field 'x' sample 0: ", 0), 0u) << msg;
      EXPECT_HAS(msg, file.string());
      if (present == 400) {
        EXPECT_HAS(msg, c.truncated);
      }
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
}

// FLAC: sine_8000.flac (8000 frames of a 440 Hz sine at 8000 Hz, 16-bit, written by libsndfile
// 1.2 through ctypes: sf_open(SFM_WRITE, SF_FORMAT_FLAC | SF_FORMAT_PCM_16), sf_writef_short of
// int(8000 sin(2 pi 440 i / 8000)), truncated as Python's int()) reads whole; cut anywhere after
// its header it is an error naming the file and STREAMINFO's 8000 frames, never a shorter
// recording.
TEST(WavReader, CutFlacStreamsAreErrors) {
  TempDir dir;
  const std::string whole = read_file(source_path("tests/data/audio/wav/sine_8000.flac"));
  {
    const fs::path d = dir.path / "whole";
    write_file(d / "a.wav", whole);
    const Tensor t = wav_reader({{"x", d}})->next()->ragged("x").at(0);
    ASSERT_EQ(t.shape(), (std::vector<std::int64_t>{8000}));
    EXPECT_EQ(t.data_as<double>()[1], std::trunc(8000 * std::sin(2 * M_PI * 440 / 8000)) / 32768);
  }
  for (const std::size_t keep : {whole.size() - 1, whole.size() / 2, std::size_t{200}}) {
    SCOPED_TRACE(keep);
    const fs::path d = dir.path / ("cut" + std::to_string(keep));
    const fs::path file = write_file(d / "a.wav", whole.substr(0, keep));
    EXPECT_HAS(read_error([&] {
                 return wav_reader({{"x", d}});
               }),
               "wav reader: field 'x' sample 0: " + file.string() +
                   " is truncated or corrupt: its header promises 8000 frames");
  }
}

// A format libsndfile reads but that is not a container the reader checks is refused naming it.
TEST(WavReader, ContainersWithoutACheckedLengthAreRefused) {
  TempDir dir;
  const fs::path d = dir.path / "nist";
  const fs::path file = write_file(d / "a.wav", nist(400));
  const std::string msg = read_error([&] { return wav_reader({{"x", d}}); });
  EXPECT_HAS(msg, "wav reader: field 'x' sample 0: " + file.string() + " is a ");
  EXPECT_HAS(msg, "NIST");
  EXPECT_HAS(msg, "the wav reader reads WAV (RIFF), RF64, W64, AIFF/AIFC, CAF, FLAC and AU files");
}

// A FIFO, a socket, a link to /dev/zero, a dangling link or a folder named .wav in either
// field's folder is an error naming it (never skipped, never opened: the test would hang on a
// FIFO); a link to a regular WAV file is read.
TEST(WavReader, NonRegularEntriesAreErrorsNamingThem) {
  TempDir dir;
  for (const auto& [kind, words] : special_kinds()) {
    for (const bool second_field : {false, true}) {
      SCOPED_TRACE(kind + (second_field ? " in the second field" : ""));
      const fs::path base = dir.path / (kind + (second_field ? "2" : "1"));
      const fs::path a =
          folder_with(base / "a", {{"a.wav", "tests/data/audio/wav/pcm16_mono.wav"},
                                   {"b.wav", "tests/data/audio/wav/pcm16_mono.wav"}});
      const fs::path b =
          folder_with(base / "b", {{"a.wav", "tests/data/audio/wav/pcm16_mono.wav"}});
      const fs::path bad = (second_field ? b : a) / (second_field ? "b.wav" : "c.wav");
      ASSERT_TRUE(make_special(kind, bad));
      const std::string msg = read_error([&] { return wav_reader({{"preds", a}, {"target", b}}); });
      EXPECT_HAS(msg, fmt::format("wav reader: field '{}': {} is not a regular file {}",
                                  second_field ? "target" : "preds", bad.string(), words));
    }
  }
  const fs::path linked = dir.path / "linked";
  fs::create_directories(linked);
  fs::create_symlink(source_path("tests/data/audio/wav/pcm16_mono.wav"), linked / "a.wav");
  EXPECT_EQ(wav_reader({{"x", linked}})->total_samples(), 1);
}

}  // namespace
}  // namespace tally::test
