// The wav reader (plugins/readers/wav), loaded as the real libtally_wav.so through the Registry:
// values of real WAV files (PCM 16/24/32-bit and float32, mono and stereo), sharding, matching by
// name, and bad files.
//
// Expected values come from the "wav" section of tests/reference/expected_audio.json, written by
// tests/reference/audio.py (which wrote the files with Python's wave module and
// scipy.io.wavfile, and the values libsndfile gives: PCM x of b bits is x / 2^(b-1)), unless a
// test says otherwise.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "support/process.hpp"
#include "tally/batch.hpp"
#include "tally/error.hpp"
#include "tally/reader.hpp"

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

}  // namespace
}  // namespace tally::test
