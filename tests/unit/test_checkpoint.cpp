// Checkpoint files (engine/src/checkpoint.hpp, docs/checkpoint.md): the shard and metadata
// formats, their checksums, what a resumed run must match, durable writes and the pruning of old
// checkpoints; then the library API, in process: Evaluator::read_all writes checkpoints and a new
// Evaluator resumes from one to the same results. The real-process tests (SIGKILL, mpirun) are in
// tests/integration/test_resume.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "checkpoint.hpp"
#include "file_io.hpp"
#include "support/npy.hpp"
#include "support/process.hpp"
#include "tally/error.hpp"
#include "tally/evaluator.hpp"
#include "tally/version.hpp"

namespace fs = std::filesystem;
namespace ck = tally::checkpoint;
using tally::test::read_file;
using tally::test::TempDir;
using tally::test::write_text;

namespace {

ck::Metadata sample_metadata() {
  ck::Metadata m;
  m.tally_version = tally::kVersion;
  m.protocol = tally::kProtocolVersion;
  m.step = 12;
  m.every_n_batches = 4;
  m.world_size = 2;
  m.config_fingerprint = "0123456789abcdef";
  m.plugins = {{"classification", "0.1.0"}, {"npy", "0.1.0"}};
  m.dataset_samples = 100;
  m.samples = {48, 47};
  m.batches = {12, 12};
  m.shards = {{"shard-00000.bin", 0xdeadbeef, 1234}, {"shard-00001.bin", 0x01020304, 99}};
  return m;
}

ck::Expected expected_of(const ck::Metadata& m) {
  return ck::Expected{m.world_size, m.config_fingerprint, m.plugins};
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(CheckpointFiles, NamesSortByStep) {
  EXPECT_EQ(ck::step_name(12), "step-0000000012");
  EXPECT_EQ(ck::shard_name(3), "shard-00003.bin");
  EXPECT_LT(ck::step_name(9), ck::step_name(10));
}

TEST(CheckpointFiles, Crc32IsZlibs) {
  EXPECT_EQ(ck::crc32_of("123456789"), 0xCBF43926u);  // the CRC-32 check value
  EXPECT_EQ(ck::crc32_of(""), 0u);
}

TEST(CheckpointFiles, MetadataRoundTrips) {
  const auto m = sample_metadata();
  const auto text = m.to_json();
  const auto back = ck::Metadata::parse(text, "m.json");
  EXPECT_EQ(back.to_json(), text);
  EXPECT_EQ(back.step, 12);
  EXPECT_EQ(back.world_size, 2);
  EXPECT_EQ(back.plugins, m.plugins);
  EXPECT_EQ(back.samples, m.samples);
  EXPECT_EQ(back.batches, m.batches);
  ASSERT_EQ(back.shards.size(), 2u);
  EXPECT_EQ(back.shards[0].crc32, 0xdeadbeefu);
  EXPECT_EQ(back.shards[1].size, 99u);
  EXPECT_NE(text.find("\"metadata_crc32\""), std::string::npos);
}

TEST(CheckpointFiles, CorruptMetadataIsAnInputErrorNamingTheFile) {
  const auto text = sample_metadata().to_json();
  // A changed digit is still JSON: the metadata checksum catches it.
  std::string changed = text;
  changed[changed.find("\"step\": 12") + 9] = '3';
  EXPECT_THROW(ck::Metadata::parse(changed, "m.json"), tally::InputError);
  EXPECT_NE(error_of([&] {
              ck::Metadata::parse(changed, "dir/m.json");
            }).find("checkpoint file dir/m.json is corrupt: metadata_crc32 expected "),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              ck::Metadata::parse(text.substr(0, text.size() / 2), "m.json");
            }).find("is corrupt: not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ck::Metadata::parse("[1, 2]", "m.json"); }).find("a JSON object"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ck::Metadata::parse("{}", "m.json"); }).find("no metadata_crc32"),
            std::string::npos);

  // Per-rank lists that do not match the world size (a consistent checksum: written so).
  auto m = sample_metadata();
  m.samples = {1};
  EXPECT_NE(error_of([&] {
              ck::Metadata::parse(m.to_json(), "m.json");
            }).find("'samples' expects 2 entries, one per rank"),
            std::string::npos);
  m = sample_metadata();
  m.shards[1].file = "other.bin";
  EXPECT_NE(error_of([&] {
              ck::Metadata::parse(m.to_json(), "m.json");
            }).find("shards[1].file expected 'shard-00001.bin', found 'other.bin'"),
            std::string::npos);
  m = sample_metadata();
  m.format = 99;
  EXPECT_NE(error_of([&] {
              ck::Metadata::parse(m.to_json(), "m.json");
            }).find("format version expected 1, found 99"),
            std::string::npos);
}

TEST(CheckpointFiles, MismatchedMetadataIsRefusedNamingExpectedAndFound) {
  const auto m = sample_metadata();
  EXPECT_NO_THROW(ck::check(m, expected_of(m), "m.json"));

  auto e = expected_of(m);
  e.world_size = 3;
  EXPECT_THROW(ck::check(m, e, "m.json"), tally::ConfigError);
  EXPECT_EQ(error_of([&] { ck::check(m, e, "d/m.json"); }),
            "checkpoint d/m.json: world size expected 3 (this run), found 2: resume on as many "
            "ranks as wrote it");

  e = expected_of(m);
  e.plugins[1].second = "0.2.0";
  EXPECT_EQ(error_of([&] { ck::check(m, e, "m.json"); }),
            "checkpoint m.json: plugin 'npy' version expected 0.2.0 (this run), found 0.1.0");

  e = expected_of(m);
  e.plugins.emplace_back("testkit", "0.0.1");
  EXPECT_EQ(error_of([&] { ck::check(m, e, "m.json"); }),
            "checkpoint m.json: plugin 'testkit' expected (this run loads version 0.0.1), found "
            "none");

  e = expected_of(m);
  e.config_fingerprint = "fedcba9876543210";
  EXPECT_EQ(error_of([&] { ck::check(m, e, "m.json"); }),
            "checkpoint m.json: config fingerprint expected fedcba9876543210 (this run), found "
            "0123456789abcdef: the data, metrics or backend type changed since it was written");

  auto old = m;
  old.tally_version = "0.0.1";
  EXPECT_NE(error_of([&] {
              ck::check(old, expected_of(m), "m.json");
            }).find(std::string("tally version expected ") + tally::kVersion + ", found 0.0.1"),
            std::string::npos);
}

TEST(CheckpointFiles, ShardRoundTripsAndIsVerified) {
  ck::Shard s;
  s.rank = 1;
  s.step = 6;
  s.samples = 23;
  s.batches = 6;
  s.payload = std::string("\x92\x00\x90", 3);  // [0, []]
  const auto bytes = s.serialize();
  const auto back = ck::Shard::parse(bytes, "s.bin");
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.step, 6);
  EXPECT_EQ(back.samples, 23);
  EXPECT_EQ(back.batches, 6);
  EXPECT_EQ(back.payload, s.payload);

  const ck::ShardRecord rec{"shard-00001.bin", ck::crc32_of(bytes), bytes.size()};
  EXPECT_NO_THROW(ck::verify(bytes, rec, "d/shard-00001.bin", "d/metadata.json"));
  std::string flipped = bytes;
  flipped[5] = static_cast<char>(flipped[5] ^ 1);
  EXPECT_EQ(error_of([&] { ck::verify(flipped, rec, "d/shard-00001.bin", "d/metadata.json"); }),
            fmt::format("checkpoint shard d/shard-00001.bin: crc32 expected {:08x} "
                        "(metadata.json), found {:08x}: the shard is corrupt",
                        rec.crc32, ck::crc32_of(flipped)));
  EXPECT_EQ(
      error_of([&] { ck::verify(bytes.substr(1), rec, "d/shard-00001.bin", "d/metadata.json"); }),
      fmt::format("checkpoint shard d/shard-00001.bin: size expected {} bytes (metadata.json), "
                  "found {}: the shard is truncated or corrupt",
                  bytes.size(), bytes.size() - 1));

  EXPECT_THROW(ck::Shard::parse(bytes.substr(0, bytes.size() - 1), "s.bin"), tally::InputError);
  EXPECT_THROW(ck::Shard::parse("\x93\x01\x02\x03", "s.bin"), tally::InputError);
  EXPECT_NE(error_of([&] { ck::Shard::parse(flipped, "s.bin"); }).find("s.bin"), std::string::npos);
}

TEST(CheckpointFiles, WriteDurableReplacesTheFileAndLeavesNoTemporary) {
  TempDir dir;
  tally::write_file_atomic(dir / "a.bin", "first");
  tally::write_file_atomic(dir / "a.bin", "second");
  EXPECT_EQ(read_file(dir / "a.bin"), "second");
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++files;
  EXPECT_EQ(files, 1u);
  EXPECT_THROW(tally::write_file_atomic(dir / "missing" / "a.bin", "x"), tally::RuntimeError);
  ck::make_dir(dir / "sub");
  ck::make_dir(dir / "sub");  // another rank made it first: fine
  EXPECT_TRUE(fs::is_directory(dir / "sub"));
}

TEST(CheckpointFiles, PruneKeepsTheLastTwoCompleteCheckpoints) {
  TempDir dir;
  // Complete: 2, 4, 6, 10; incomplete: 8 (older than 10), 12 (newer: being written).
  for (int step : {2, 4, 6, 8, 10, 12}) {
    ck::make_dir(dir / ck::step_name(step));
    write_text(dir / ck::step_name(step) / ck::shard_name(0), "x");
    if (step != 8 && step != 12) write_text(dir / ck::step_name(step) / ck::kMetadataName, "{}");
  }
  fs::create_directory(dir / "not-a-step");
  EXPECT_TRUE(ck::prune(dir.path, 10).empty());
  std::vector<std::string> left;
  for (const auto& s : ck::list_steps(dir.path))
    left.push_back(s.path.filename().string() + (s.complete ? "" : " (incomplete)"));
  EXPECT_EQ(left, (std::vector<std::string>{"step-0000000006", "step-0000000010",
                                            "step-0000000012 (incomplete)"}));
  EXPECT_TRUE(fs::exists(dir / "not-a-step"));
  EXPECT_TRUE(ck::list_steps(dir / "absent").empty());
}

// ---- the library API ----------------------------------------------------------------------------

namespace {

class CheckpointApi : public ::testing::Test {
 protected:
  TempDir dir;

  void SetUp() override {
    std::vector<std::int64_t> x(37);
    std::iota(x.begin(), x.end(), 0);
    tally::test::write_npy(dir / "x.npy", x);
    write_text(dir / "eval.yaml", std::string("plugins: {paths: ['") + TALLY_TEST_PLUGIN_DIR +
                                      "/testkit']}\n"
                                      "data: {type: npy, batch_size: 5, fields: {x: x.npy}}\n"
                                      "metrics: [{type: SequenceProbe}]\n"
                                      "checkpoint: {dir: ckpt, every_n_batches: 3}\n");
  }

  tally::Value evaluate(bool resume, std::vector<std::string>* notices = nullptr,
                        std::vector<std::string> sets = {}) {
    tally::EvaluatorOptions o;
    o.overrides = std::move(sets);
    auto ev = tally::Evaluator::from_file(dir / "eval.yaml", o);
    auto reader = ev.make_reader();
    tally::ReadOptions read;
    read.resume = resume;
    std::int64_t seen = 0;
    read.on_batch = [&](std::int64_t n) { seen += n; };
    read.on_notice = [&](const std::string& m) {
      if (notices) notices->push_back(m);
    };
    ev.read_all(reader.get(), read);
    EXPECT_EQ(seen, 37);  // skipped batches count for progress too
    return ev.compute().metrics;
  }
};

}  // namespace

TEST_F(CheckpointApi, ResumesFromACheckpointToTheSameResults) {
  const auto want = evaluate(false, nullptr, {"checkpoint=null"});
  EXPECT_EQ(want.at("SequenceProbe").at("count").as_int(), 37);
  // 8 batches: checkpoints after 3, 6 and 9 batches (the last finds the shard done).
  EXPECT_EQ(evaluate(false), want);
  std::vector<std::string> steps;
  for (const auto& s : ck::list_steps(dir / "ckpt"))
    if (s.complete) steps.push_back(s.path.filename().string());
  EXPECT_EQ(steps, (std::vector<std::string>{"step-0000000006", "step-0000000009"}));

  // From the checkpoint after 6 batches: 30 samples read, 29 of them in the metric's state and
  // the last held back, as add() holds it.
  fs::remove(dir / "ckpt" / "step-0000000009" / ck::kMetadataName);
  std::vector<std::string> notices;
  EXPECT_EQ(evaluate(true, &notices), want);
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].find("resuming from " + (dir / "ckpt" / "step-0000000006").string() +
                            " (step 6: 30 of 37 samples read); ignoring step-0000000009"),
            std::string::npos)
      << notices[0];

  // Another every_n_batches is fine (not part of the config fingerprint).
  EXPECT_EQ(evaluate(true, nullptr, {"checkpoint.every_n_batches=1"}), want);
}

TEST_F(CheckpointApi, ResumeNeedsACheckpointSection) {
  tally::EvaluatorOptions o;
  o.overrides = {"checkpoint=null"};
  auto ev = tally::Evaluator::from_file(dir / "eval.yaml", o);
  auto reader = ev.make_reader();
  tally::ReadOptions read;
  read.resume = true;
  EXPECT_THROW(ev.read_all(reader.get(), read), tally::ConfigError);
}

TEST_F(CheckpointApi, ARankWithoutAReaderFailsReadAllAndCompute) {
  // read_all's start exchange fails every rank before anything is read; a compute() after it
  // fails the same way.
  auto ev = tally::Evaluator::from_file(dir / "eval.yaml");
  EXPECT_THROW(ev.read_all(nullptr), tally::RuntimeError);
  EXPECT_THROW(ev.compute(), tally::RuntimeError);
}
