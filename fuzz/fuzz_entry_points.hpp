// The entry points of the libFuzzer targets (fuzz/fuzz_*.cpp), shared with the regression test
// tests/unit/test_fuzz_regressions.cpp: every seed under fuzz/corpus/<target>/ and every input a
// fuzzer crashed on, kept under tests/data/fuzz_regressions/<target>/, replays through the same
// code in the regular (gcc) build and under the asan preset.
//
// The contract: any input ends in success or in a tally::Error (ConfigError, InputError,
// RuntimeError: one clean message). A crash, undefined behaviour or a leak (the sanitizers), an
// allocation above the fuzzer's -malloc_limit_mb, a hang (-timeout), or any other exception that
// escapes (std::out_of_range, a raw simdjson or msgpack error, an error a metric leaks through
// the evaluator as "rank 0 failed while computing") is a finding: run_input() reports the last
// kind as UncleanError.
//
// Every target reaches the code under test the way tally does: readers and metrics are the real
// plugin libraries, loaded once through the Registry; a reader reads a file written to a scratch
// folder; a state payload goes through Evaluator::compute() over a simulated second rank.
#pragma once

#include <cxxabi.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include "config.hpp"
#include "registry.hpp"
#include "tally/evaluator.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/reader.hpp"
#include "tally/sdk/value.hpp"

#ifndef TALLY_SOURCE_DIR
#error "TALLY_SOURCE_DIR must name the tally source folder (the example configs live there)"
#endif

namespace tally_fuzz {

namespace fs = std::filesystem;
using Bytes = std::span<const std::uint8_t>;

enum class Target { StatePayload, Npy, Config, Jsonl, CocoJson, Png };

struct TargetInfo {
  Target target;
  const char*
      name;  // fuzz/fuzz_<name>.cpp, fuzz/corpus/<name>/, tests/data/fuzz_regressions/<name>/
};
inline constexpr std::array<TargetInfo, 6> kTargets = {{
    {Target::StatePayload, "state_payload"},
    {Target::Npy, "npy"},
    {Target::Config, "config"},
    {Target::Jsonl, "jsonl"},
    {Target::CocoJson, "coco_json"},
    {Target::Png, "png"},
}};

/// An exception other than tally::Error escaped: not a crash, but not a clean error either.
class UncleanError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// ---- helpers ------------------------------------------------------------------------------------

inline std::string_view as_text(Bytes b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

inline std::string type_name(const std::type_info& t) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(t.name(), nullptr, nullptr, &status), &std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(t.name());
}

/// A folder of this process for the files the readers read; removed at exit.
inline const fs::path& scratch_dir() {
  struct Scratch {
    fs::path dir;
    Scratch() {
      std::string tmpl = (fs::temp_directory_path() / "tally-fuzz-XXXXXX").string();
      if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("tally_fuzz: mkdtemp failed");
      dir = tmpl;
    }
    ~Scratch() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
  };
  static const Scratch scratch;
  return scratch.dir;
}

inline void write_file(const fs::path& path, std::string_view bytes) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f || (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size()))
    throw std::runtime_error("tally_fuzz: cannot write " + path.string());
}

inline std::string read_file(const fs::path& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw std::runtime_error("tally_fuzz: cannot read " + path.string());
  std::string out;
  char buf[1 << 16];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f.get())) > 0;) out.append(buf, n);
  return out;
}

/// The plugins of the build (the built-in plugin folder beside libtally), loaded once and never
/// unloaded (nor are the state harness's evaluators destroyed): unloading a plugin at exit would
/// leave the caches of the libraries it pulled in (ICU) unreachable, a leak report that is not
/// tally's.
inline const tally::Registry& registry() {
  static const auto* r = new tally::Registry(tally::Registry::load());
  return *r;
}

/// Every byte of every field of `b`: a view past the end of a mapping faults here, under ASan
/// a read of freed or unowned memory is reported here.
inline std::uint64_t touch(const tally::Batch& b) {
  std::uint64_t sum = 0;
  const auto add_tensor = [&sum](const tally::Tensor& t) {
    if (!t.is_cuda() && t.data() != nullptr) {
      const auto* p = static_cast<const unsigned char*>(t.data());
      for (std::size_t i = 0; i < t.nbytes(); ++i) sum += p[i];
    }
  };
  for (const auto& [name, field] : b.fields()) {
    sum += name.size();
    if (const auto* t = std::get_if<tally::Tensor>(&field)) {
      add_tensor(*t);
    } else if (const auto* r = std::get_if<tally::Batch::Ragged>(&field)) {
      for (const auto& e : *r) add_tensor(e);
    } else if (const auto* x = std::get_if<tally::Text>(&field)) {
      for (std::int64_t i = 0; i < x->size(); ++i)
        for (const auto& s : (*x)[i])
          for (const char c : s) sum += static_cast<unsigned char>(c);
    }
  }
  return sum;
}

/// Builds the reader `type` of the real plugin with `params` for `shard` and reads it to the end.
inline void read_all(const char* type, const tally::Value::Map& params, tally::ShardInfo shard) {
  const auto& c = registry().get(tally::ComponentKind::Reader, type);
  const auto p =
      tally::make_params(*c.info, params, std::string("data (") + type + ")", scratch_dir());
  const auto reader = tally::Registry::make_reader(c, p, shard);
  std::uint64_t sum = static_cast<std::uint64_t>(reader->total_samples() + reader->shard_samples());
  for (const auto& f : reader->fields()) sum += f.size();
  std::int64_t rows = 0;
  for (auto b = reader->next(); b; b = reader->next()) {
    rows += b->size();
    sum += touch(*b);
  }
  if (rows != reader->shard_samples())
    throw UncleanError("the reader handed out " + std::to_string(rows) +
                       " samples, its shard has " + std::to_string(reader->shard_samples()));
  static volatile std::uint64_t sink = 0;
  sink = sink + sum;
}

/// World size 1 to 3 and a rank in it, from two bits each of `mode`.
inline tally::ShardInfo shard_of(unsigned world_bits, unsigned rank_bits) {
  const int world = 1 + static_cast<int>(world_bits % 3);
  return {static_cast<int>(rank_bits % static_cast<unsigned>(world)), world};
}

// ---- 1. state payloads ------------------------------------------------------------------------

/// Rank 0 of two. Rank 1's payload in the gather of the states is whatever the fuzzer says, and
/// so are its counts in the reduction of the states of counts; the other collectives (the sync
/// header, the broadcast of the results from rank 0) see rank 1 as a copy of rank 0, so every
/// input reaches the unpacking of the states and the computing from the summed counts.
class TwoRankBackend final : public tally::DistBackend,
                             public tally::VaryingAllGather,
                             public tally::Reducer {
 public:
  std::string name() const override { return "fuzz"; }
  bool is_initialized() const override { return true; }
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  void barrier(const tally::CallOptions&) override {}
  std::size_t chunk_bytes() const override { return std::size_t{1} << 30; }
  void* find_primitive(std::string_view id) override {
    return tally::offer_primitives<tally::VaryingAllGather, tally::Reducer>(this, id);
  }

  /// Rank 1's state payload in the next compute(); nullopt: rank 1 sends what rank 0 sends.
  std::optional<std::string> rank1;
  /// Rank 0's state payload in the last compute().
  std::string captured;

  void all_gather_equal(const std::byte* send, std::size_t n, std::byte* recv,
                        const tally::CallOptions&) override {
    std::memcpy(recv, send, n);
    // The size exchange of all_gather_object is the only 8-byte record (the header has 48).
    if (n == sizeof(std::int64_t) && rank1) {
      const auto size = static_cast<std::int64_t>(rank1->size());
      std::memcpy(recv + n, &size, n);
    } else {
      std::memcpy(recv + n, send, n);
    }
  }
  // The rooted gather of the states is the engine's fallback over this: rank 0 gets both.
  void all_gather_varying(const std::byte* send, std::span<const std::size_t> counts,
                          std::byte* recv, const tally::CallOptions&) override {
    if (counts[0] != 0) std::memcpy(recv, send, counts[0]);
    captured.assign(reinterpret_cast<const char*>(send), counts[0]);
    const void* other = rank1 ? static_cast<const void*>(rank1->data()) : send;
    if (counts[1] != 0) std::memcpy(recv + counts[0], other, counts[1]);
  }
  void broadcast(std::byte*, std::size_t, int, const tally::CallOptions&) override {
  }  // the source is rank 0, this rank
  /// The sum of the metrics' `sum` fields (Metric::write_sums): rank 1's counts are the first bytes
  /// of its payload read as int64 (0 past its end), so the sums rank 0 computes from are the
  /// fuzzer's too; without rank1, rank 1's counts are rank 0's. Wraps as MPI_SUM does.
  void reduce_values(std::int64_t* values, std::size_t n, tally::ReduceOp op, int,
                     const tally::CallOptions&) override {
    for (std::size_t i = 0; i < n; ++i) {
      std::int64_t other = values[i];
      if (rank1) {
        other = 0;
        const std::size_t at = i * sizeof(std::int64_t);
        if (at < rank1->size())
          std::memcpy(&other, rank1->data() + at, std::min(sizeof other, rank1->size() - at));
      }
      values[i] = tally::combine(op, values[i], other);
    }
  }
};

/// The example configs whose metrics decode the payloads: byte 0 of an input picks one (this
/// order is part of the corpus format: append, never reorder).
inline constexpr std::array<const char*, 9> kStateExamples = {
    "classification", "detection",    "keypoints", "language_model", "multilabel", "regression",
    "restoration",    "segmentation", "text"};

struct StateHarness {
  std::shared_ptr<TwoRankBackend> backend;
  std::optional<tally::Evaluator> evaluator;
};

inline StateHarness make_state_harness(std::size_t example,
                                       const std::vector<std::string>& overrides = {}) {
  StateHarness h;
  h.backend = std::make_shared<TwoRankBackend>();
  tally::EvaluatorOptions opts;
  opts.backend = h.backend;
  opts.overrides = overrides;
  h.evaluator.emplace(
      tally::Evaluator::from_file(fs::path(TALLY_SOURCE_DIR) / "configs/examples" /
                                      (std::string(kStateExamples[example]) + ".yaml"),
                                  std::move(opts)));
  return h;
}

inline StateHarness& state_harness(std::size_t example) {
  static auto* all = [] {
    auto* v = new std::vector<StateHarness>;  // never destroyed: see registry()
    for (std::size_t i = 0; i < kStateExamples.size(); ++i) v->push_back(make_state_harness(i));
    return v;
  }();
  return (*all)[example];
}

/// Byte 0 picks the example config (kStateExamples); the rest is rank 1's state payload, which
/// rank 0 unpacks (unpack_bounded) and hands, metric by metric, to the metrics' compute_synced()
/// together with its own (empty) states.
inline void state_payload(Bytes in) {
  if (in.empty()) return;
  StateHarness& h = state_harness(in[0] % kStateExamples.size());
  h.backend->rank1.emplace(as_text(in.subspan(1)));
  h.evaluator->reset();
  try {
    h.evaluator->compute();
  } catch (const tally::Error& e) {
    // The evaluator turns any exception into a RuntimeError; one that was not a tally::Error or
    // msgpack's type_error comes out as "rank 0 failed while computing: <what>".
    if (std::string_view(e.what()).find("failed while computing") != std::string_view::npos)
      throw UncleanError(e.what());
    throw;
  }
}

/// Rank 0's real payload after adding the first `batches` batches of the example's data (with
/// batch_size `batch_size`): the seeds of the state_payload corpus (fuzz/make_state_seeds.cpp).
inline std::string capture_state_payload(std::size_t example, int batch_size, int batches) {
  (void)registry();  // keeps the plugins loaded after `h` is gone
  StateHarness h = make_state_harness(example, {"data.batch_size=" + std::to_string(batch_size)});
  const auto reader = h.evaluator->make_reader();
  for (int i = 0; i < batches; ++i) {
    auto b = reader->next();
    if (!b) break;
    h.evaluator->add(*b);
  }
  h.evaluator->compute();
  return h.backend->captured;
}

// ---- 2. npy -------------------------------------------------------------------------------------

/// Byte 0: bit 0 .npz archive (else .npy), bits 1-2 world size, bits 3-4 rank, bits 5-6 batch
/// size - 1, bit 7 a second field. The rest is the file: an .npy read as field x, or an archive
/// whose members x (and y) are read.
inline void npy(Bytes in) {
  if (in.empty()) return;
  const unsigned mode = in[0];
  const bool npz = (mode & 1u) != 0;
  const fs::path file = scratch_dir() / (npz ? "in.npz" : "in.npy");
  write_file(file, as_text(in.subspan(1)));
  tally::Value::Map fields{{"x", tally::Value(file.string())}};
  if ((mode & 0x80u) != 0) fields.emplace_back("y", tally::Value(file.string()));
  read_all("npy",
           {{"fields", tally::Value(std::move(fields))},
            {"batch_size", tally::Value(1 + static_cast<int>((mode >> 5) & 3u))}},
           shard_of((mode >> 1) & 3u, (mode >> 3) & 3u));
}

// ---- 3. config ----------------------------------------------------------------------------------

/// The input up to the first NUL byte is the YAML config; each NUL-separated piece after it is a
/// --set override (KEY=VALUE). Config::parse, then what `tally validate` checks short of opening
/// data: Evaluator::from_yaml (plugins, metric parameters, inputs) and the reader's parameters.
inline void config(Bytes in) {
  const std::string_view text = as_text(in);
  const auto nul = text.find('\0');
  const std::string yaml(text.substr(0, nul));
  std::vector<std::string> overrides;
  if (nul != std::string_view::npos) {
    std::string_view rest = text.substr(nul + 1);
    for (;;) {
      const auto end = rest.find('\0');
      overrides.emplace_back(rest.substr(0, end));
      if (end == std::string_view::npos) break;
      rest.remove_prefix(end + 1);
    }
  }
  const fs::path& base = scratch_dir();
  const tally::Config cfg = tally::Config::parse(yaml, "fuzz.yaml", base, overrides);
  // plugins.paths would make the registry load whatever libraries the input names.
  if (!cfg.plugin_paths.empty()) return;
  tally::EvaluatorOptions opts;
  opts.overrides = overrides;
  opts.validate_only = true;
  (void)tally::Evaluator::from_yaml(yaml, std::move(opts), "fuzz.yaml", base);
  if (cfg.data_type) {
    const auto& c = registry().get(tally::ComponentKind::Reader, *cfg.data_type);
    (void)tally::make_params(*c.info, cfg.data_params, "data (" + *cfg.data_type + ")", base);
  }
}

// ---- 4. JSON readers ----------------------------------------------------------------------------

/// Byte 0: bit 0 a `fields` map on the first line ("name=key;name=key", dotted keys allowed;
/// otherwise every key of the first JSON line is a field), bits 1-3 batch size - 1, bits 4-5
/// world size, bits 6-7 rank. The rest is the .jsonl file.
inline void jsonl(Bytes in) {
  if (in.empty()) return;
  const unsigned mode = in[0];
  std::string_view body = as_text(in.subspan(1));
  tally::Value::Map params;
  if ((mode & 1u) != 0) {
    const auto eol = body.find('\n');
    std::string_view spec = body.substr(0, eol);
    body = eol == std::string_view::npos ? std::string_view() : body.substr(eol + 1);
    tally::Value::Map fields;
    while (!spec.empty()) {
      const auto semi = spec.find(';');
      const std::string_view item = spec.substr(0, semi);
      spec = semi == std::string_view::npos ? std::string_view() : spec.substr(semi + 1);
      const auto eq = item.find('=');
      const std::string name(item.substr(0, eq));
      const std::string key(eq == std::string_view::npos ? item : item.substr(eq + 1));
      bool seen = false;  // a YAML map cannot repeat a key
      for (const auto& f : fields) seen = seen || f.first == name;
      if (!seen) fields.emplace_back(name, tally::Value(key));
    }
    params.emplace_back("fields", tally::Value(std::move(fields)));
  }
  const fs::path file = scratch_dir() / "in.jsonl";
  write_file(file, body);
  params.emplace_back("path", tally::Value(file.string()));
  params.emplace_back("batch_size", tally::Value(1 + static_cast<int>((mode >> 1) & 7u)));
  read_all("jsonl", params, shard_of((mode >> 4) & 3u, (mode >> 6) & 3u));
}

/// Byte 0: bits 0-1 masks (auto, true, false), bits 2-3 batch size - 1, bits 4-6 block_bytes
/// (0: the default 8 MiB; else 1 + 13 * value bytes: blocks of a few elements), bit 7 threads 2.
/// Byte 1: bits 0-1 world size, bits 2-3 rank. Then the annotations JSON, a NUL byte, and the
/// results JSON (no NUL: results "[]").
inline void coco_json(Bytes in) {
  if (in.size() < 2) return;
  const unsigned mode = in[0];
  const unsigned shard = in[1];
  const std::string_view text = as_text(in.subspan(2));
  const auto nul = text.find('\0');
  const fs::path ann = scratch_dir() / "instances.json";
  const fs::path res = scratch_dir() / "results.json";
  write_file(ann, text.substr(0, nul));
  write_file(res, nul == std::string_view::npos ? std::string_view("[]") : text.substr(nul + 1));
  static constexpr std::array<const char*, 4> kMasks = {"auto", "true", "false", "auto"};
  tally::Value::Map params{{"annotations", tally::Value(ann.string())},
                           {"results", tally::Value(res.string())},
                           {"masks", tally::Value(kMasks[mode & 3u])},
                           {"batch_size", tally::Value(1 + static_cast<int>((mode >> 2) & 3u))},
                           {"threads", tally::Value((mode & 0x80u) != 0 ? 2 : 1)}};
  if (const unsigned blocks = (mode >> 4) & 7u; blocks != 0)
    params.emplace_back("block_bytes", tally::Value(1 + 13 * static_cast<int>(blocks)));
  read_all("coco_json", params, shard_of(shard & 3u, (shard >> 2) & 3u));
}

// ---- 5. PNG -------------------------------------------------------------------------------------

/// Rewrites the CRC of every complete chunk after the PNG signature, so that mutations of chunk
/// contents reach the decoder instead of failing libspng's CRC check.
inline void fix_png_crcs(std::string& png) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t n = 0; n < 256; ++n) {
      std::uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1u) != 0 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  const auto byte = [&png](std::size_t i) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(png[i]));
  };
  std::size_t at = 8;
  while (at + 12 <= png.size()) {
    const std::uint32_t len =
        byte(at) << 24 | byte(at + 1) << 16 | byte(at + 2) << 8 | byte(at + 3);
    if (len > png.size() - at - 12) break;
    std::uint32_t crc = 0xffffffffu;
    for (std::size_t i = at + 4; i < at + 8 + len; ++i)
      crc = table[(crc ^ byte(i)) & 0xffu] ^ (crc >> 8);
    crc ^= 0xffffffffu;
    for (int k = 0; k < 4; ++k)
      png[at + 8 + len + static_cast<std::size_t>(k)] =
          static_cast<char>((crc >> (24 - 8 * k)) & 0xffu);
    at += 12 + len;
  }
}

/// Byte 0: bit 0 `images` (else `png_masks`), bit 1 keep the CRCs as they are (else fix them).
/// The rest is one .png file in a folder read by the reader.
inline void png(Bytes in) {
  if (in.empty()) return;
  const unsigned mode = in[0];
  std::string file(as_text(in.subspan(1)));
  if ((mode & 2u) == 0) fix_png_crcs(file);
  const fs::path dir = scratch_dir() / "png";
  fs::create_directories(dir);
  write_file(dir / "a.png", file);
  read_all((mode & 1u) != 0 ? "images" : "png_masks",
           {{"fields", tally::Value(tally::Value::Map{{"x", tally::Value(dir.string())}})},
            {"batch_size", tally::Value(1)}},
           {0, 1});
}

// ---- dispatch -----------------------------------------------------------------------------------

inline void run(Target t, Bytes in) {
  switch (t) {
    case Target::StatePayload:
      return state_payload(in);
    case Target::Npy:
      return npy(in);
    case Target::Config:
      return config(in);
    case Target::Jsonl:
      return jsonl(in);
    case Target::CocoJson:
      return coco_json(in);
    case Target::Png:
      return png(in);
  }
}

/// Loads what every input of `t` needs once (plugins, the state harness), before fuzzing starts:
/// libFuzzer then sees the plugins' coverage counters from the first input on.
inline void prepare(Target t) {
  (void)scratch_dir();
  (void)registry();
  if (t == Target::StatePayload) (void)state_harness(0);
}

enum class Outcome { Ok, CleanError };

/// Runs one input: Ok, or CleanError with the tally::Error's message in `message`. Throws
/// UncleanError when any other exception escapes.
inline Outcome run_input(Target t, Bytes in, std::string* message = nullptr) {
  try {
    run(t, in);
    return Outcome::Ok;
  } catch (const tally::Error& e) {
    if (message != nullptr) *message = e.what();
    return Outcome::CleanError;
  } catch (const UncleanError&) {
    throw;
  } catch (const std::exception& e) {
    throw UncleanError(type_name(typeid(e)) + ": " + e.what());
  } catch (...) {
    throw UncleanError("an exception that is not a std::exception");
  }
}

/// LLVMFuzzerTestOneInput's body: an unclean error aborts, so libFuzzer keeps the input.
inline int fuzz_one(Target t, const std::uint8_t* data, std::size_t size) {
  try {
    (void)run_input(t, Bytes(data, size));
  } catch (const UncleanError& e) {
    std::fprintf(stderr, "tally fuzz: unclean error: %s\n", e.what());
    std::abort();
  }
  return 0;
}

}  // namespace tally_fuzz
