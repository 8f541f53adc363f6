// Checkpoint files (engine/src/checkpoint.hpp, docs/checkpoint.md): the shard and metadata
// formats, their checksums, what a resumed run must match, durable writes and the pruning of old
// checkpoints; then the library API, in process: Evaluator::read_all writes checkpoints and a new
// Evaluator resumes from one to the same results. The real-process tests (SIGKILL, mpirun) are in
// tests/integration/test_resume.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <tuple>

#include <fmt/format.h>
#include <msgpack.hpp>

#include "checkpoint.hpp"
#include "file_io.hpp"
#include "support/npy.hpp"
#include "support/process.hpp"
#include "tally/evaluator.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/version.hpp"

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
  m.shards = {{"shard-00000.bin", 0xdeadbeef, 1234, {}, {}},
              {"shard-00001.bin", 0x01020304, 99, {}, {}}};
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
            }).find("format version expected 1 or 2, found 99"),
            std::string::npos);
}

TEST(CheckpointFiles, MismatchedMetadataIsRefusedNamingExpectedAndFound) {
  const auto m = sample_metadata();
  EXPECT_NO_THROW(ck::check(m, expected_of(m), "m.json"));

  // Another number of ranks is not refused: ck::plan hands the checkpoint's parts out anew.
  auto e = expected_of(m);
  e.world_size = 3;
  EXPECT_NO_THROW(ck::check(m, e, "d/m.json"));

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

  const ck::ShardRecord rec{"shard-00001.bin", ck::crc32_of(bytes), bytes.size(), {}, {}};
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
  // A missing folder is made; one that cannot be (a file in its way) is an error.
  tally::write_file_atomic(dir / "missing" / "a.bin", "x");
  EXPECT_EQ(read_file(dir / "missing" / "a.bin"), "x");
  EXPECT_THROW(tally::write_file_atomic(dir / "a.bin" / "b.bin", "x"), tally::ConfigError);
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
    EXPECT_EQ(seen, 37);  // the samples of the states it resumed count for progress too
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

// ---- integrity: every changed byte of a checkpoint or a host program's state is refused -------

namespace {

// The bytes of `s` with bit `bit` flipped.
std::string flip(std::string s, std::size_t bit) {
  s[bit / 8] = static_cast<char>(static_cast<unsigned char>(s[bit / 8]) ^ (1u << (bit % 8)));
  return s;
}

template <class F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const tally::InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not an InputError: ") + e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(CheckpointFiles, EveryBitFlipOfTheMetadataIsRefused) {
  const std::string text = sample_metadata().to_json();
  ASSERT_NO_THROW(ck::Metadata::parse(text, "d/metadata.json"));
  for (std::size_t bit = 0; bit < text.size() * 8; ++bit) {
    const auto msg =
        input_error_of([&] { ck::Metadata::parse(flip(text, bit), "d/metadata.json"); });
    ASSERT_TRUE(msg.starts_with("checkpoint file d/metadata.json")) << "bit " << bit << ": " << msg;
  }
  // Truncated anywhere, or extended by anything but whitespace.
  for (std::size_t n = 0; n < text.size() - 1; ++n) {
    const auto msg = input_error_of([&] { ck::Metadata::parse(text.substr(0, n), "m.json"); });
    ASSERT_TRUE(msg.starts_with("checkpoint file m.json is corrupt")) << n << ": " << msg;
  }
  for (const std::string& tail : {std::string("x"), std::string("{}"), std::string(1, '\0'),
                                  std::string(",\"step\":1}"), std::string("\0\0garbage", 9)}) {
    const auto msg = input_error_of([&] { ck::Metadata::parse(text + tail, "m.json"); });
    EXPECT_TRUE(msg.starts_with("checkpoint file m.json is corrupt")) << msg;
  }
}

TEST(CheckpointFiles, EveryBitFlipTruncationAndExtensionOfAShardIsRefused) {
  ck::Shard s;
  s.rank = 0;
  s.step = 9;
  s.samples = 44;
  s.batches = 9;
  s.payload = std::string("\x92\x00\x91\x92\xc4\x10", 6) + std::string(16, '\x07') + "\x2c";
  const std::string bytes = s.serialize();
  const ck::ShardRecord rec{"shard-00000.bin", ck::crc32_of(bytes), bytes.size(), {}, {}};
  ASSERT_NO_THROW(ck::verify(bytes, rec, "d/shard-00000.bin", "d/metadata.json"));
  for (std::size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    const auto msg = input_error_of(
        [&] { ck::verify(flip(bytes, bit), rec, "d/shard-00000.bin", "d/metadata.json"); });
    ASSERT_TRUE(msg.starts_with("checkpoint shard d/shard-00000.bin: crc32 expected"))
        << "bit " << bit << ": " << msg;
  }
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    const auto msg = input_error_of(
        [&] { ck::verify(bytes.substr(0, n), rec, "d/shard-00000.bin", "d/metadata.json"); });
    ASSERT_NE(msg.find("the shard is truncated or corrupt"), std::string::npos) << n << ": " << msg;
  }
  for (const std::string& tail :
       {std::string(1, '\0'), std::string("\x90"), std::string(4096, 'x')}) {
    const auto msg = input_error_of(
        [&] { ck::verify(bytes + tail, rec, "d/shard-00000.bin", "d/metadata.json"); });
    EXPECT_NE(msg.find("the shard is truncated or corrupt"), std::string::npos) << msg;
  }
}

TEST_F(CheckpointApi, AChangedShardOrMetadataIsNeverResumed) {
  const auto want = evaluate(false);
  const fs::path step = dir / "ckpt" / "step-0000000009";
  const fs::path shard = step / ck::shard_name(0);
  const fs::path meta = step / ck::kMetadataName;
  const std::string shard_bytes = read_file(shard);
  const std::string meta_text = read_file(meta);
  const auto resume_error = [&] { return input_error_of([&] { (void)evaluate(true); }); };
  // Bits spread over the whole shard, its header and its states.
  for (std::size_t k = 0; k < 4; ++k) {
    const std::size_t bit = (shard_bytes.size() * 8 - 1) * k / 3;
    write_text(shard, flip(shard_bytes, bit));
    EXPECT_NE(resume_error().find("crc32 expected"), std::string::npos) << "bit " << bit;
  }
  for (const std::size_t n : {std::size_t{0}, shard_bytes.size() - 1}) {
    write_text(shard, shard_bytes.substr(0, n));
    EXPECT_NE(resume_error().find("truncated or corrupt"), std::string::npos) << n;
  }
  write_text(shard, shard_bytes + "\x90");
  EXPECT_NE(resume_error().find("truncated or corrupt"), std::string::npos);
  write_text(shard, shard_bytes);
  for (std::size_t k = 0; k < 3; ++k) {
    const std::size_t bit = (meta_text.size() * 8 - 1) * k / 2;
    write_text(meta, flip(meta_text, bit));
    EXPECT_NE(resume_error().find(meta.string()), std::string::npos) << "bit " << bit;
  }
  // Bytes after a NUL, which the JSON parser would not see.
  write_text(meta, meta_text + std::string("\0{\"step\": 3}", 13));
  EXPECT_NE(resume_error().find("a NUL byte at offset"), std::string::npos);
  write_text(meta, meta_text);
  EXPECT_EQ(evaluate(true), want);
}

// save_state / load_state (Python's state_dict): a header, the payload and a CRC-32.
namespace {

constexpr const char* kHostStateConfig =
    "metrics: [{type: Accuracy, topk: [1, 2]}, {type: ConfusionMatrix, num_classes: 3}]";

tally::Batch host_batch(std::int64_t begin, std::int64_t end) {
  std::vector<double> scores;
  std::vector<std::int64_t> labels;
  for (std::int64_t i = begin; i < end; ++i) {
    for (int c = 0; c < 3; ++c) scores.push_back(static_cast<double>((i * 7 + c * 5) % 11));
    labels.push_back(i % 3);
  }
  tally::Batch b;
  b.set("pred_scores", tally::Tensor::from_vector(scores, {end - begin, 3}));
  b.set("gt_labels", tally::Tensor::from_vector(labels));
  return b;
}

template <class T>
void put_le(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

// A state container around `payload`, sealed with a right CRC-32 (docs/checkpoint.md).
std::string seal(const std::string& payload, std::uint32_t version = 2) {
  std::string out = "tally-evaluator-state\n";
  put_le<std::uint32_t>(out, version);
  put_le<std::uint64_t>(out, payload.size());
  out += payload;
  put_le<std::uint32_t>(out, ck::crc32_of(out));
  return out;
}

void pack_counts(msgpack::packer<msgpack::sbuffer>& p, const std::vector<std::int64_t>& v) {
  p.pack_bin(static_cast<std::uint32_t>(v.size() * 8));
  p.pack_bin_body(reinterpret_cast<const char*>(v.data()),
                  static_cast<std::uint32_t>(v.size() * 8));
}

struct HostState {
  std::uint64_t fingerprint = 0;
  std::uint64_t samples = 0;
  std::vector<std::int64_t> hits;  // Accuracy
  std::int64_t n = 0;
  std::vector<std::int64_t> cells;  // ConfusionMatrix
  std::int64_t cm_n = 0;

  // What save_state() packs for kHostStateConfig's two metrics.
  std::string bytes() const {
    msgpack::sbuffer b;
    msgpack::packer<msgpack::sbuffer> p(b);
    p.pack_array(3);
    p.pack(fingerprint);
    p.pack(samples);
    p.pack_array(2);
    p.pack(0);
    p.pack_array(2);
    p.pack_array(2);
    pack_counts(p, hits);
    p.pack(n);
    p.pack_array(2);
    pack_counts(p, cells);
    p.pack(cm_n);
    return seal(std::string(b.data(), b.size()));
  }
};

HostState host_state_of(const std::string& saved) {
  const auto h = msgpack::unpack(saved.data() + 34, saved.size() - 38);
  const auto& a = h.get().via.array.ptr;
  const auto& states = a[2].via.array.ptr[1].via.array.ptr;
  const auto counts = [](const msgpack::object& o) {
    std::vector<std::int64_t> v(o.via.bin.size / 8);
    std::memcpy(v.data(), o.via.bin.ptr, o.via.bin.size);
    return v;
  };
  HostState s;
  s.fingerprint = a[0].via.u64;
  s.samples = a[1].via.u64;
  s.hits = counts(states[0].via.array.ptr[0]);
  s.n = states[0].via.array.ptr[1].as<std::int64_t>();
  s.cells = counts(states[1].via.array.ptr[0]);
  s.cm_n = states[1].via.array.ptr[1].as<std::int64_t>();
  return s;
}

}  // namespace

TEST(HostState, EveryBitFlipTruncationAndExtensionIsRefused) {
  auto a = tally::Evaluator::from_yaml(kHostStateConfig);
  a.add(host_batch(0, 37));
  const std::string saved = a.save_state();
  auto b = tally::Evaluator::from_yaml(kHostStateConfig);
  b.add(host_batch(0, 5));  // a refused state leaves b as it was
  std::size_t corrupt = 0, not_a_state = 0;
  for (std::size_t bit = 0; bit < saved.size() * 8; ++bit) {
    const auto msg = input_error_of([&] { b.load_state(flip(saved, bit)); });
    if (msg.starts_with("load_state: the state is corrupt: "))
      ++corrupt;
    else if (msg.find("are not a saved evaluator state") != std::string::npos)
      ++not_a_state;  // a flip in the leading tag
    else
      ADD_FAILURE() << "bit " << bit << ": " << msg;
  }
  EXPECT_EQ(not_a_state, 22u * 8);
  EXPECT_EQ(corrupt, saved.size() * 8 - 22 * 8);
  for (std::size_t n = 0; n < saved.size(); ++n) {
    const auto msg = input_error_of([&] { b.load_state(saved.substr(0, n)); });
    ASSERT_TRUE(msg.find("truncated or extended") != std::string::npos ||
                msg.find("are not a saved evaluator state") != std::string::npos)
        << n << ": " << msg;
  }
  for (const std::string& tail : {std::string(1, '\0'), std::string("\xc0"), saved}) {
    const auto msg = input_error_of([&] { b.load_state(saved + tail); });
    EXPECT_NE(msg.find("truncated or extended"), std::string::npos) << msg;
  }
  EXPECT_EQ(b.compute().run.samples, 5);
  b.load_state(saved);
  EXPECT_EQ(b.compute().metrics, a.compute().metrics);
}

TEST(HostState, AStateWithARightChecksumIsStillCheckedBeforeUse) {
  auto a = tally::Evaluator::from_yaml(kHostStateConfig);
  a.add(host_batch(0, 37));
  const std::string saved = a.save_state();
  const HostState real = host_state_of(saved);
  ASSERT_EQ(real.bytes(), saved);  // the forgery below packs what save_state() packs
  auto b = tally::Evaluator::from_yaml(kHostStateConfig);
  const auto refused = [&](const HostState& s, const std::string& expected) {
    const auto msg = input_error_of([&] { b.load_state(s.bytes()); });
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
  };
  HostState s = real;
  s.hits = {real.n + 1, real.n};  // top-1 accuracy above 1
  refused(s, "metric 'Accuracy' cannot read its saved state: the state counts " +
                 std::to_string(real.n + 1) + " hits of " + std::to_string(real.n) + " samples");
  s = real;
  s.n = -1;
  s.hits = {-3, -2};
  refused(s,
          "metric 'Accuracy' cannot read its saved state: the saved state is corrupt (state field "
          "0): a count is negative");
  s = real;
  s.cells[4] = -7;
  refused(s,
          "metric 'ConfusionMatrix' cannot read its saved state: the saved state is corrupt "
          "(state field 0): a count is negative (-7)");
  s = real;
  s.cells.resize(4);  // the counts of 2 classes where num_classes is 3
  refused(s, "(state field 0): 4 counts where this metric's parameters make 9");
  s = real;
  s.hits.push_back(0);
  refused(s, "(state field 0): 3 counts where this metric's parameters make 2");
  s = real;
  s.cells[0] = std::int64_t{1} << 62;
  refused(s, "the counts sum to 2^62 or more");
  s = real;
  s.samples = std::uint64_t{1} << 63;
  refused(s, "load_state: the state's sample count is not a count");
  s = real;
  s.fingerprint ^= 1;
  refused(s, "other metrics");
  // Payloads that are not the state's structure, sealed with a right checksum.
  for (const std::string& payload :
       {std::string(), std::string("\x90"), std::string("\x93\x01\x02"), std::string("\xc1")}) {
    const auto msg = input_error_of([&] { b.load_state(seal(payload)); });
    EXPECT_TRUE(msg.starts_with("load_state: the state's payload is not")) << msg;
  }
  // Another format version (sealed right), and a state of format 1 (no checksum).
  EXPECT_NE(input_error_of([&] {
              b.load_state(seal(saved.substr(34, saved.size() - 38), 3));
            }).find("state format version expected 2, found 3 (saved by another tally)"),
            std::string::npos);
  EXPECT_NE(input_error_of([&] {
              b.load_state(std::string("\x95\xb5", 2) + "tally-evaluator-state" +
                           std::string("\x01\x00\x00\x92\x00\x90", 6));
            }).find("saved by an older tally (state format 1, without a checksum)"),
            std::string::npos);
  // A state sealed right whose header declares more bytes than it holds.
  std::string big = saved;
  const std::uint64_t huge = std::uint64_t{1} << 62;
  std::memcpy(big.data() + 26, &huge, 8);
  EXPECT_NE(input_error_of([&] { b.load_state(big); })
                .find(fmt::format("its header declares {} payload bytes, it holds {}", huge,
                                  saved.size() - 38)),
            std::string::npos);
  b.load_state(real.bytes());
  EXPECT_EQ(b.compute().metrics, a.compute().metrics);
}

// ---- the plan of a resume on any number of ranks ---------------------------------------------

namespace {

using Kind = ck::Pending::Kind;

/// A format 2 checkpoint of `world` ranks over `total` samples where rank r has read the first
/// `read[r]` samples of its block (a first run's checkpoint).
ck::Metadata first_run(std::int64_t total, const std::vector<std::int64_t>& read) {
  ck::Metadata m = sample_metadata();
  m.world_size = static_cast<int>(read.size());
  m.dataset_samples = total;
  m.samples = read;
  m.batches.assign(read.size(), 0);
  m.shards.clear();
  for (int r = 0; r < m.world_size; ++r) {
    const auto block = tally::ShardRange::of(total, {r, m.world_size});
    ck::ShardRecord rec{ck::shard_name(r), 0, 0, {block.begin, block.begin + read[r]}, {}};
    if (block.begin + read[r] < block.end)
      rec.pending.push_back(
          {Kind::Read, {block.begin + read[r], block.end}, tally::ShardInfo{r, m.world_size}});
    m.shards.push_back(rec);
  }
  return m;
}

/// Every rank's plan, laid end to end: the samples in the order the ranks fold them.
std::vector<ck::Item> all_plans(const ck::Metadata& m, int world) {
  const auto per_shard = ck::items_of(m, false, "m.json");
  std::vector<ck::Item> out;
  for (int r = 0; r < world; ++r)
    for (const auto& it : ck::plan(per_shard, world, r)) out.push_back(it);
  return out;
}

}  // namespace

TEST(CheckpointPlan, EveryWorldSizeFoldsEverySampleOnceInDatasetOrder) {
  for (const std::int64_t total : {0, 1, 7, 60, 61}) {
    for (int from = 1; from <= 7; ++from) {
      std::vector<std::int64_t> read;
      for (int r = 0; r < from; ++r)
        read.push_back(tally::ShardRange::of(total, {r, from}).size() * (r % 3) / 3);
      const auto m = first_run(total, read);
      for (int to = 1; to <= 8; ++to) {
        SCOPED_TRACE(::testing::Message() << total << " samples, " << from << " -> " << to);
        std::int64_t at = 0, unread = 0, states = 0;
        std::vector<std::int64_t> per_rank;
        const auto per_shard = ck::items_of(m, false, "m.json");
        for (int r = 0; r < to; ++r) {
          std::int64_t mine = 0;
          for (const auto& it : ck::plan(per_shard, to, r)) {
            EXPECT_EQ(it.span.begin, at);
            EXPECT_GT(it.span.size(), 0);
            at = it.span.end;
            if (it.kind == Kind::State) {
              ++states;
              // A saved state is folded whole, from the shard that holds it.
              const auto& covers = m.shards[static_cast<std::size_t>(it.shard)].covers;
              EXPECT_EQ(it.span, covers);
              EXPECT_EQ(it.index, -1);
            } else {
              mine += it.span.size();
              const auto block = tally::ShardRange::of(total, it.origin);
              EXPECT_GE(it.span.begin, block.begin);
              EXPECT_LE(it.span.end, block.end);
            }
          }
          unread += mine;
          per_rank.push_back(mine);
        }
        EXPECT_EQ(at, total);
        std::int64_t want_states = 0, want_unread = 0;
        for (int r = 0; r < from; ++r) {
          want_states += read[r] > 0 ? 1 : 0;
          want_unread += tally::ShardRange::of(total, {r, from}).size() - read[r];
        }
        EXPECT_EQ(states, want_states);
        EXPECT_EQ(unread, want_unread);
        // On as many ranks, each rank its own shard; on another number, the samples to read
        // balanced within one.
        if (to != from) {
          const auto [lo, hi] = std::minmax_element(per_rank.begin(), per_rank.end());
          EXPECT_LE(*hi - *lo, 1);
        } else {
          for (int r = 0; r < to; ++r)
            EXPECT_EQ(per_rank[static_cast<std::size_t>(r)],
                      tally::ShardRange::of(total, {r, from}).size() - read[r]);
        }
      }
    }
  }
}

TEST(CheckpointPlan, PendingStatesOfAReshardedRunKeepTheirPlaceInTheOrder) {
  // Written by 2 ranks that resumed a 3-rank run: rank 0 covers [0, 12) and has [12, 20) to
  // read, then a state of [20, 28), then [28, 34) to read; rank 1 covers [34, 38), then reads
  // [38, 40), folds [40, 48), reads [48, 60).
  ck::Metadata m = sample_metadata();
  m.world_size = 2;
  m.dataset_samples = 60;
  m.samples = {12, 4};
  m.batches = {3, 1};
  m.shards = {{ck::shard_name(0),
               0,
               0,
               {0, 12},
               {{Kind::Read, {12, 20}, {0, 3}},
                {Kind::State, {20, 28}, {}},
                {Kind::Read, {28, 34}, {1, 3}}}},
              {ck::shard_name(1),
               0,
               0,
               {34, 38},
               {{Kind::Read, {38, 40}, {1, 3}},
                {Kind::State, {40, 48}, {}},
                {Kind::Read, {48, 60}, {2, 3}}}}};
  const auto back = ck::Metadata::parse(m.to_json(), "m.json");
  EXPECT_EQ(back.to_json(), m.to_json());
  ASSERT_EQ(back.shards[1].pending.size(), 3u);
  EXPECT_EQ(back.shards[1].pending[1].kind, Kind::State);
  EXPECT_EQ(back.shards[0].pending[2].origin.rank, 1);

  // On 3 ranks: 28 samples to read (8 + 6 + 2 + 12), 9 + 9 + 10 of them; a saved state goes to
  // the rank that reads the sample after it.
  const auto per_shard = ck::items_of(back, false, "m.json");
  const auto spans = [&](int rank) {
    std::vector<std::tuple<int, std::int64_t, std::int64_t, int, int>> out;
    for (const auto& it : ck::plan(per_shard, 3, rank))
      out.emplace_back(it.kind == Kind::State ? 0 : 1, it.span.begin, it.span.end,
                       it.kind == Kind::State ? it.shard : it.origin.rank,
                       it.kind == Kind::State ? it.index : it.origin.world_size);
    return out;
  };
  using T = std::vector<std::tuple<int, std::int64_t, std::int64_t, int, int>>;
  // (0 state, begin, end, shard, index) or (1 read, begin, end, origin rank, origin world size)
  EXPECT_EQ(spans(0),
            (T{{0, 0, 12, 0, -1}, {1, 12, 20, 0, 3}, {0, 20, 28, 0, 0}, {1, 28, 29, 1, 3}}));
  EXPECT_EQ(spans(1), (T{{1, 29, 34, 1, 3},
                         {0, 34, 38, 1, -1},
                         {1, 38, 40, 1, 3},
                         {0, 40, 48, 1, 0},
                         {1, 48, 50, 2, 3}}));
  EXPECT_EQ(spans(2), (T{{1, 50, 60, 2, 3}}));

  // On 1 rank: everything, in order, the reads of one origin that meet made one.
  EXPECT_EQ(all_plans(back, 1).size(), 8u);
}

TEST(CheckpointPlan, Format1ConvertsWithoutLoss) {
  ck::Metadata m = sample_metadata();  // 2 ranks of 100 samples: 48 and 47 read
  m.format = 1;
  const auto back = ck::Metadata::parse(m.to_json(), "m.json");
  EXPECT_EQ(back.format, 1);
  const auto per_shard = ck::items_of(back, false, "m.json");
  ASSERT_EQ(per_shard.size(), 2u);
  ASSERT_EQ(per_shard[1].size(), 2u);
  EXPECT_EQ(per_shard[1][0].span, (ck::Span{50, 97}));
  EXPECT_EQ(per_shard[1][1].span, (ck::Span{97, 100}));
  EXPECT_EQ(per_shard[1][1].origin.rank, 1);
  // A padded sampler's held-back sample was read but is not in the state: it is read again.
  const auto held = ck::items_of(back, true, "m.json");
  EXPECT_EQ(held[0][0].span, (ck::Span{0, 47}));
  EXPECT_EQ(held[0][1].span, (ck::Span{47, 50}));
}

TEST(CheckpointPlan, ShardsThatDoNotCoverEverySampleOnceAreRefused) {
  auto m = first_run(60, {5, 5, 5});
  m.shards[1].covers = {21, 25};  // a gap at 20
  EXPECT_NE(error_of([&] { ck::items_of(m, false, "d/m.json"); })
                .find("checkpoint file d/m.json is corrupt: shards[1] holds samples [21, 25), "
                      "expected samples from 20 on"),
            std::string::npos);
  m = first_run(60, {5, 5, 5});
  m.shards[2].pending.clear();  // [45, 60) lost
  EXPECT_NE(error_of([&] {
              ck::items_of(m, false, "m.json");
            }).find("the shards hold samples [0, 45), expected [0, 60)"),
            std::string::npos);
  m = first_run(60, {5, 5, 5});
  m.shards[0].pending[0].origin = {1, 3};  // [5, 20) is not in rank 1's block
  EXPECT_NE(error_of([&] { ck::items_of(m, false, "m.json"); })
                .find("reads samples [5, 20) with the reader of rank 1 of 3, whose block is "
                      "[20, 40)"),
            std::string::npos);
  // An origin outside its world is not valid metadata (its checksum is right: written so).
  m = first_run(60, {5, 5, 5});
  m.shards[0].pending[0].origin = {3, 3};
  EXPECT_NE(error_of([&] {
              ck::Metadata::parse(m.to_json(), "m.json");
            }).find("'shards[0].pending[0].origin' expects [rank, world size], rank < world size"),
            std::string::npos);
}
