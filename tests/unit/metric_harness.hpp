// Test harness for metric plugins: a tiny .npy loader, the expected-value files of
// tests/reference/ and the inputs they name, metrics and readers built from the real plugin
// libraries through the Registry, and N simulated ranks (contiguous shards, one metric instance
// per rank, each state packed to msgpack bytes, unpacked, and computed on one instance), as the
// engine's sync protocol does (docs/architecture.md, "The sync protocol"); run_all_rank_counts
// checks a result on 1, 2, 3, 4 and 7 ranks, with an empty rank, in several batch sizes, bit for
// bit.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <msgpack.hpp>
#include <nlohmann/json.hpp>

#include "config.hpp"
#include "msgpack_spans.hpp"
#include "registry.hpp"
#include "support/abi6_msgpack.hpp"
#include "support/expect_error.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/reader.hpp"
#include "tally/sdk/tensor.hpp"
#include "tally/sdk/value.hpp"

namespace tally::test {

/// JSON with the key order of the file: result keys are compared in order.
using Json = nlohmann::ordered_json;

inline std::filesystem::path source_path(const std::string& relative) {
  return std::filesystem::path(TALLY_SOURCE_DIR) / relative;
}

// ---- .npy
// ----------------------------------------------------------------------------------------

/// Reads a .npy file (format 1.0-3.0, little-endian or single-byte dtype, C order) into a CPU
/// tensor that owns its memory. Enough for the test data, which numpy.save wrote.
inline Tensor load_npy(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("load_npy: cannot open " + path.string());
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    throw std::runtime_error("load_npy: not a .npy file: " + path.string());
  const auto major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) |
                 (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    offset = 10;
  } else {
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    offset = 12;
  }
  const std::string header = bytes.substr(offset, header_len);
  const auto field = [&](const std::string& key) {
    const auto at = header.find("'" + key + "'");
    if (at == std::string::npos)
      throw std::runtime_error("load_npy: no " + key + " in " + path.string());
    return header.substr(header.find(':', at) + 1);
  };
  const std::string descr_tail = field("descr");
  const auto q1 = descr_tail.find('\'');
  const std::string descr = descr_tail.substr(q1 + 1, descr_tail.find('\'', q1 + 1) - q1 - 1);
  if (field("fortran_order").find("True") < field("fortran_order").find(','))
    throw std::runtime_error("load_npy: Fortran order is not supported: " + path.string());
  static const std::vector<std::pair<std::string, DType>> kTypes = {
      {"|b1", DType::Bool}, {"|u1", DType::U8},  {"|i1", DType::I8},  {"<u2", DType::U16},
      {"<i2", DType::I16},  {"<i4", DType::I32}, {"<u4", DType::U32}, {"<i8", DType::I64},
      {"<f4", DType::F32},  {"<f8", DType::F64}};
  DType dtype{};
  bool known = false;
  for (const auto& [name, t] : kTypes)
    if (name == descr) dtype = t, known = true;
  if (!known)
    throw std::runtime_error("load_npy: unsupported dtype " + descr + " in " + path.string());
  std::vector<std::int64_t> shape;
  const std::string shape_tail = field("shape");
  std::istringstream dims(
      shape_tail.substr(shape_tail.find('(') + 1, shape_tail.find(')') - shape_tail.find('(') - 1));
  for (std::string part; std::getline(dims, part, ',');)
    if (part.find_first_of("0123456789") != std::string::npos) shape.push_back(std::stoll(part));
  Tensor t = Tensor::zeros(dtype, shape);
  const std::size_t data_at = offset + header_len;
  if (bytes.size() - data_at != t.nbytes())
    throw std::runtime_error("load_npy: size mismatch in " + path.string());
  if (t.nbytes() != 0) std::memcpy(t.mutable_data(), bytes.data() + data_at, t.nbytes());
  return t;
}

// ---- JSON <-> Value
// ------------------------------------------------------------------------------

inline Value to_value(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return Value();
    case Json::value_t::boolean:
      return Value(j.get<bool>());
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return Value(j.get<long long>());
    case Json::value_t::number_float:
      return Value(j.get<double>());
    case Json::value_t::string:
      return Value(j.get<std::string>());
    case Json::value_t::array: {
      Value::Array a;
      for (const auto& e : j) a.push_back(to_value(e));
      return Value(std::move(a));
    }
    case Json::value_t::object: {
      Value::Map m;
      for (const auto& [k, e] : j.items()) m.emplace_back(k, to_value(e));
      return Value(std::move(m));
    }
    default:
      break;
  }
  throw std::runtime_error("to_value: unsupported JSON value " + j.dump());
}

/// A JSON object (a case's "params") as metric parameters.
inline Value::Map to_map(const Json& j) { return to_value(j).as_map(); }

inline Json load_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return Json::parse(in);
}

/// One ragged field from per-image JSON objects (a reference script's data file): images[i][key]
/// as float32 rows of `cols` values ([n, cols] tensors; cols 0: a flat [n] list), float64 (the
/// same values) with `wide`.
inline Batch::Ragged json_ragged_floats(const Json& images, const std::string& key,
                                        std::int64_t cols, bool wide = false) {
  Batch::Ragged r;
  for (const auto& im : images) {
    std::vector<float> v;
    for (const auto& row : im.at(key)) {
      if (cols == 0) {
        v.push_back(row.get<float>());
        continue;
      }
      for (const auto& x : row) v.push_back(x.get<float>());
    }
    std::vector<std::int64_t> shape{static_cast<std::int64_t>(v.size())};
    if (cols > 0) shape = {static_cast<std::int64_t>(v.size()) / cols, cols};
    r.push_back(wide ? Tensor::from_vector(std::vector<double>(v.begin(), v.end()), shape)
                     : Tensor::from_vector(v, shape));
  }
  return r;
}

/// images[i][key] as int64 [n] tensors.
inline Batch::Ragged json_ragged_ints(const Json& images, const std::string& key) {
  Batch::Ragged r;
  for (const auto& im : images)
    r.push_back(Tensor::from_vector(im.at(key).get<std::vector<std::int64_t>>()));
  return r;
}

// ---- expected-value files
// ------------------------------------------------------------------------

/// An expected-value file of the source tree (tests/reference/expected_*.json, written by its
/// reference script), read once.
inline const Json& expected_json(const std::string& relative) {
  static std::map<std::string, Json> files;
  auto it = files.find(relative);
  if (it == files.end()) it = files.emplace(relative, load_json(source_path(relative))).first;
  return it->second;
}

/// The name of a case of an expected-value file ({"name": ...}) as a test parameter: GoogleTest
/// allows letters, digits and '_' only, so a '.' becomes '_'.
inline std::string case_name(const Json& c) {
  std::string n = c.at("name").get<std::string>();
  for (char& ch : n)
    if (ch == '.') ch = '_';
  return n;
}

/// The names of the cases of `file` ("cases": [{"name": ...}, ...]), in file order.
inline std::vector<std::string> case_names(const Json& file) {
  std::vector<std::string> names;
  for (const auto& c : file.at("cases")) names.push_back(case_name(c));
  return names;
}

/// The case of `file` called `name` (as case_names gives it).
inline const Json& find_case(const Json& file, const std::string& name) {
  for (const auto& c : file.at("cases"))
    if (case_name(c) == name) return c;
  throw std::runtime_error("no case " + name);
}

/// Names the instances of a TEST_P over case names by the case.
inline std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

// ---- inputs
// --------------------------------------------------------------------------------------

/// One tensor per sample (row) of `dense`, of shape dense.shape()[1:]: a ragged field of the
/// same samples. Each is a view of its own copy of the row.
inline Batch::Ragged per_sample(const Tensor& dense) {
  Batch::Ragged out;
  const std::vector<std::int64_t> shape(dense.shape().begin() + 1, dense.shape().end());
  for (std::int64_t i = 0; i < dense.size(0); ++i) {
    const Tensor row = dense.slice(i, i + 1).clone();
    out.push_back(
        Tensor::view(row.data(), row.dtype(), shape, Device::cpu(), std::make_shared<Tensor>(row)));
  }
  return out;
}

/// Cuts a flat file of samples of different shapes into one tensor per sample, by a shapes file
/// ([N, D] int64: row i is the shape of sample i).
inline Batch::Ragged cut_samples(const Tensor& flat, const Tensor& shapes) {
  Batch::Ragged out;
  const auto* dims = shapes.data_as<std::int64_t>();
  const std::int64_t d = shapes.size(1);
  const auto* bytes = static_cast<const char*>(flat.data());
  std::size_t offset = 0;
  for (std::int64_t i = 0; i < shapes.size(0); ++i) {
    Tensor t =
        Tensor::zeros(flat.dtype(), std::vector<std::int64_t>(dims + i * d, dims + i * d + d));
    std::memcpy(t.mutable_data(), bytes + offset, t.nbytes());
    offset += t.nbytes();
    out.push_back(t);
  }
  EXPECT_EQ(offset, flat.nbytes());
  return out;
}

/// Nested JSON arrays of integers ([[1, 2], [3, 4]]) as an int64 tensor of their shape.
inline Tensor int64_tensor(const Json& nested) {
  std::vector<std::int64_t> shape;
  for (const Json* j = &nested; j->is_array(); j = &j->at(0)) {
    shape.push_back(static_cast<std::int64_t>(j->size()));
    if (j->empty()) break;
  }
  std::vector<std::int64_t> values;
  const std::function<void(const Json&, std::size_t)> flatten = [&](const Json& j,
                                                                    std::size_t depth) {
    if (depth == shape.size()) {
      values.push_back(j.get<std::int64_t>());
      return;
    }
    if (!j.is_array() || static_cast<std::int64_t>(j.size()) != shape[depth])
      throw std::runtime_error("int64_tensor: not a rectangular array: " + nested.dump());
    for (const auto& e : j) flatten(e, depth + 1);
  };
  flatten(nested, 0);
  return Tensor::from_vector(values, shape);
}

/// The batch of a case's "inputs" map, field name to:
///   "file.npy"                          a dense field (the .npy file, a path in the source tree)
///   ["s0.npy", "s1.npy", ...]           a ragged field, one file a sample
///   {"flat": "f.npy", "shapes": "s.npy"} a ragged field cut from one file (cut_samples)
///   {"inline": [[...], ...]}            a dense int64 field written in the JSON (int64_tensor)
inline Batch load_inputs(const Json& inputs) {
  Batch b;
  for (const auto& [field, spec] : inputs.items()) {
    if (spec.is_string()) {
      b.set(field, load_npy(source_path(spec.get<std::string>())));
    } else if (spec.is_array()) {
      Batch::Ragged r;
      for (const auto& f : spec) r.push_back(load_npy(source_path(f.get<std::string>())));
      b.set_ragged(field, std::move(r));
    } else if (spec.contains("inline")) {
      b.set(field, int64_tensor(spec.at("inline")));
    } else {
      b.set_ragged(field, cut_samples(load_npy(source_path(spec.at("flat").get<std::string>())),
                                      load_npy(source_path(spec.at("shapes").get<std::string>()))));
    }
  }
  return b;
}

// ---- metrics and readers
// -------------------------------------------------------------------------

/// Every plugin of the build tree, found the way the CLI finds them.
inline const Registry& registry() {
  static const Registry r = Registry::load();
  return r;
}

/// The owner string the engine gives a metric labelled `label` of type `type`.
inline std::string owner_for(const std::string& type, const std::string& label) {
  return label.empty() || label == type ? "metric '" + type + "'"
                                        : "metric '" + label + "' (" + type + ")";
}

/// A metric of `type` from the loaded plugins, its parameters checked against its schema as the
/// engine checks a config (ConfigError for a bad one).
inline std::shared_ptr<Metric> make_metric(const std::string& type, const Value::Map& params,
                                           const std::string& label = {}) {
  const Component& c = registry().get(ComponentKind::Metric, type);
  return Registry::make_metric(c, make_params(*c.info, params, owner_for(type, label)));
}

/// A reader of `type` from the loaded plugins for rank `shard`, its parameters `given` checked
/// as the engine checks a config's (errors name `owner`).
inline std::shared_ptr<Reader> make_reader(const std::string& type, const Value::Map& given,
                                           ShardInfo shard = {},
                                           const std::string& owner = "data") {
  const Component& c = registry().get(ComponentKind::Reader, type);
  return Registry::make_reader(c, make_params(*c.info, given, owner), shard);
}

/// A reader of `type` whose parameter "fields" maps each field to a path (the npy, png_masks and
/// images readers), reading `batch_size` samples a batch.
inline std::shared_ptr<Reader> make_fields_reader(
    const std::string& type,
    const std::vector<std::pair<std::string, std::filesystem::path>>& fields,
    std::int64_t batch_size, ShardInfo shard = {}) {
  Value::Map paths;
  for (const auto& [name, p] : fields) paths.emplace_back(name, p.string());
  return make_reader(
      type, {{"fields", Value(paths)}, {"batch_size", Value(static_cast<long>(batch_size))}},
      shard);
}

/// The message of the InputError that opening a reader with `open` and reading every batch
/// gives; "" when there is none.
inline std::string read_error(const std::function<std::shared_ptr<Reader>()>& open) {
  try {
    auto reader = open();
    while (reader->next()) {
    }
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

/// Expects metric `name` registered by plugin `plugin` with a doc, declared results, and a doc
/// for each parameter and input; returns it (nullptr, and a failure, when it is not there).
inline const Component* expect_documented(const std::string& name, const std::string& plugin) {
  const Component* c = registry().find(ComponentKind::Metric, name);
  EXPECT_NE(c, nullptr) << name;
  if (c == nullptr) return nullptr;
  EXPECT_EQ(c->plugin_name, plugin) << name;
  EXPECT_FALSE(c->info->doc.empty()) << name;
  EXPECT_FALSE(c->info->results.empty()) << name;
  for (const auto& p : c->info->params) EXPECT_FALSE(p.doc.empty()) << name << "." << p.name;
  for (const auto& in : c->info->inputs) EXPECT_FALSE(in.doc.empty()) << name << "." << in.name;
  return c;
}

// ---- simulated ranks
// -----------------------------------------------------------------------------

using Shard = std::pair<std::int64_t, std::int64_t>;

/// `ranks` contiguous shards of `n` samples in dataset order; rank `empty_rank` (if >= 0) gets
/// none and the others share the samples as evenly as the reader's ShardRange does.
inline std::vector<Shard> contiguous_shards(std::int64_t n, int ranks, int empty_rank = -1) {
  std::vector<Shard> out;
  const std::int64_t busy = empty_rank >= 0 ? ranks - 1 : ranks;
  std::int64_t b = 0, i = 0;
  for (int r = 0; r < ranks; ++r) {
    if (r == empty_rank) {
      out.emplace_back(b, b);
      continue;
    }
    const std::int64_t e = n * (i + 1) / busy;
    out.emplace_back(b, e);
    b = e;
    ++i;
  }
  return out;
}

struct RunOptions {
  std::int64_t batch_size = 1 << 30;
  /// Whether a rank with an empty shard still calls add() with an empty (zero-row) batch.
  bool add_empty_batches = false;
};

/// The whole local state of `m`, as a checkpoint saves it (Metric::save).
inline msgpack::sbuffer pack_state(const Metric& m) {
  msgpack::sbuffer buf;
  tally::SbufferSink sink(buf);
  m.save(sink);
  return buf;
}

/// The bytes of `b` as the engine hands them to a metric.
inline tally::Bytes bytes_of(const msgpack::sbuffer& b) {
  return std::as_bytes(std::span(b.data(), b.size()));
}

/// What one rank sends at a sync: its counts, which the engine sums to rank 0
/// (Metric::write_sums), and the rest of its state, gathered to rank 0 (Metric::pack_gathered).
struct RankPayload {
  std::vector<std::int64_t> sums;
  msgpack::sbuffer gathered;  // empty when the metric gathers nothing
};

inline RankPayload sync_payload(const Metric& m) {
  RankPayload p;
  p.sums.assign(m.summed_size(), 0);
  m.write_sums(p.sums);
  if (m.gathers()) {
    tally::SbufferSink sink(p.gathered);
    m.pack_gathered(sink);
  }
  return p;
}

/// What rank 0 does with every rank's payload (rank order): sums the counts (as MPI_Reduce, but
/// failing the test on overflow), unpacks the gathered parts and calls compute_synced().
inline Value compute_payloads(const Metric& into, const std::vector<RankPayload>& ranks) {
  std::vector<std::int64_t> sums(into.summed_size(), 0);
  std::vector<tally::Bytes> objects;
  for (const auto& r : ranks) {
    if (r.sums.size() != sums.size())
      throw std::logic_error("a rank's payload has " + std::to_string(r.sums.size()) +
                             " counts, the metric sums " + std::to_string(sums.size()));
    // As the engine checks each rank's counts before the reduction (sync.cpp, write_counts):
    // each >= 0, and all of a rank's together < 2^62 / ranks, so the sums are exact.
    const std::int64_t limit = (std::int64_t{1} << 62) / static_cast<std::int64_t>(ranks.size());
    std::int64_t total = 0;
    for (const std::int64_t c : r.sums) {
      if (c < 0)
        throw RuntimeError("a count of its state is negative (" + std::to_string(c) +
                           "): the state is corrupt");
      if (__builtin_add_overflow(total, c, &total) || total >= limit)
        throw RuntimeError(
            "the state is corrupt: this rank's counts add up to 2^62 / ranks or more");
    }
    for (std::size_t i = 0; i < sums.size(); ++i)
      if (__builtin_add_overflow(sums[i], r.sums[i], &sums[i]))
        throw std::logic_error("the summed counts overflow");
    if (into.gathers()) objects.push_back(bytes_of(r.gathered));
  }
  return into.compute_synced(objects, sums);
}

/// Computes on `into` from the states of `ranks` (one metric a rank, in rank order), as the
/// engine's sync does (sums reduced, the rest packed, gathered and unpacked).
/// compute_states(*m, {m}): the result of m's state on a world of one rank that is not local.
inline Value compute_states(const Metric& into, const std::vector<std::shared_ptr<Metric>>& ranks) {
  std::vector<RankPayload> payloads;
  for (const auto& m : ranks) payloads.push_back(sync_payload(*m));
  return compute_payloads(into, payloads);
}

/// A fresh metric from `make` with the state `from` saved (a checkpoint round trip).
inline std::shared_ptr<Metric> restored(const std::function<std::shared_ptr<Metric>()>& make,
                                        const Metric& from) {
  const msgpack::sbuffer saved = pack_state(from);
  auto m = make();
  m->restore(bytes_of(saved));
  return m;
}

/// Simulates one rank per shard: a metric instance each, fed its shard in batches, its state
/// packed to msgpack bytes; then unpacks every state and computes on a fresh instance.
/// Bit-for-bit equality of two results: the same kinds, keys and bits (a NaN equals a NaN of
/// the same bits, which Value's == would deny; 0.0 and -0.0 differ, which it would allow).
inline bool same_bits(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  if (a.is_float())
    return std::bit_cast<std::uint64_t>(a.as_double()) ==
           std::bit_cast<std::uint64_t>(b.as_double());
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!same_bits(a.as_array()[i], b.as_array()[i])) return false;
    return true;
  }
  if (a.is_map()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (a.as_map()[i].first != b.as_map()[i].first ||
          !same_bits(a.as_map()[i].second, b.as_map()[i].second))
        return false;
    return true;
  }
  return a == b;
}

/// Every rank's state goes through a checkpoint round trip (save, restore into a fresh
/// instance) before the simulated sync, so every reference test also checks that restore() gives
/// back the state save() wrote. With one shard, run_ranks also checks that compute_local() (the
/// engine's path in a world of one) gives the bits of the synced path.
inline Value run_ranks(const std::function<std::shared_ptr<Metric>()>& make, const Batch& data,
                       const std::vector<Shard>& shards, const RunOptions& opt = {}) {
  std::vector<RankPayload> payloads;
  std::shared_ptr<Metric> only;
  for (const auto& [begin, end] : shards) {
    const auto metric = make();
    if (begin == end && opt.add_empty_batches) metric->add(data.slice(begin, end));
    for (std::int64_t b = begin; b < end; b += opt.batch_size)
      metric->add(data.slice(b, std::min(end, b + opt.batch_size)));
    payloads.push_back(sync_payload(*restored(make, *metric)));
    if (shards.size() == 1) only = metric;
  }
  const auto target = make();
  Value synced = compute_payloads(*target, payloads);
  if (only) {
    const Value local = only->compute_local();
    EXPECT_TRUE(same_bits(local, synced))
        << "compute_local: " << local.to_json() << " vs compute_synced: " << synced.to_json();
  }
  return synced;
}

/// `type` with `params` over `data` on one rank, in one batch.
inline Value run_single(const std::string& type, const Value::Map& params, const Batch& data) {
  return run_ranks([&] { return make_metric(type, params); }, data,
                   contiguous_shards(data.size(), 1));
}

/// The runs of run_all_rank_counts.
struct RankSweep {
  /// The batch sizes of the runs on 1, 2, 3, 4 and 7 even shards.
  std::vector<std::int64_t> batch_sizes = {std::int64_t{1} << 30, 16, 5};
  /// The batch size of the runs with an empty middle rank.
  std::int64_t empty_rank_batch_size = 16;
  /// If > 0, also runs with rank 0 empty (adding its empty batch), in batches of this size.
  std::int64_t first_rank_empty_batch_size = 0;
};

/// Runs `type` with `params` over `data` as 1, 2, 3, 4 and 7 ranks (even contiguous shards) in
/// batches of several sizes, and as 2, 3, 4 and 7 ranks with an empty middle rank (with and
/// without its empty batch); expects every result to equal the single-rank one bit for bit
/// (same_bits), and returns it.
inline Value run_all_rank_counts(const std::string& type, const Value::Map& params,
                                 const Batch& data, const std::string& label = {},
                                 const RankSweep& sweep = {}) {
  const auto make = [&] { return make_metric(type, params, label); };
  const Value one = run_ranks(make, data, contiguous_shards(data.size(), 1));
  for (int ranks : {1, 2, 3, 4, 7}) {
    for (std::int64_t batch : sweep.batch_sizes) {
      if (ranks == 1 && batch >= data.size()) continue;  // the run of `one` itself
      const Value got =
          run_ranks(make, data, contiguous_shards(data.size(), ranks), {batch, false});
      EXPECT_TRUE(same_bits(got, one)) << type << ": " << ranks << " ranks, batches of " << batch
                                       << ": " << got.to_json() << " vs " << one.to_json();
    }
    if (ranks == 1) continue;
    for (bool add_empty : {false, true}) {
      const Value got = run_ranks(make, data, contiguous_shards(data.size(), ranks, ranks / 2),
                                  {sweep.empty_rank_batch_size, add_empty});
      EXPECT_TRUE(same_bits(got, one))
          << type << ": " << ranks << " ranks with rank " << ranks / 2
          << " empty (add_empty=" << add_empty << "): " << got.to_json() << " vs " << one.to_json();
    }
    if (sweep.first_rank_empty_batch_size > 0) {
      const Value got = run_ranks(make, data, contiguous_shards(data.size(), ranks, 0),
                                  {sweep.first_rank_empty_batch_size, true});
      EXPECT_TRUE(same_bits(got, one))
          << type << ": " << ranks << " ranks with rank 0 empty: " << got.to_json() << " vs "
          << one.to_json();
    }
  }
  return one;
}

// ---- errors
// --------------------------------------------------------------------------------------

/// The InputError message of running `type` with `params` over `data` on one rank; "" when
/// there is none.
inline std::string input_error(const std::string& type, const Value::Map& params,
                               const Batch& data) {
  try {
    run_single(type, params, data);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

/// The ConfigError message of making `type` with `params`; "" when there is none.
inline std::string config_error(const std::string& type, const Value::Map& params) {
  try {
    make_metric(type, params);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// ---- comparison
// ----------------------------------------------------------------------------------

/// The largest relative difference seen by expect_matches, per metric type (for the report).
inline std::vector<std::pair<std::string, double>>& max_rel_diffs() {
  static std::vector<std::pair<std::string, double>> d;
  return d;
}
inline void record_rel_diff(const std::string& metric, double d) {
  for (auto& [m, v] : max_rel_diffs())
    if (m == metric) {
      v = std::max(v, d);
      return;
    }
  max_rel_diffs().emplace_back(metric, d);
}

/// Prints (and forgets) the largest relative differences to `reference` seen since the last
/// call.
inline void print_rel_diffs(const std::string& reference) {
  for (const auto& [metric, d] : max_rel_diffs())
    std::printf("[ reference ] %s: largest relative difference to %s %.3g\n", metric.c_str(),
                reference.c_str(), d);
  max_rel_diffs().clear();
}

/// Expects `actual` to match the expected JSON value: integers exactly (and as integers), other
/// numbers to `rel` relative difference, null as NaN (how the reference scripts write a NaN),
/// arrays element by element, maps key by key in order.
inline void expect_matches(const Value& actual, const Json& expected, const std::string& where,
                           const std::string& metric, double rel = 1e-9) {
  if (expected.is_null()) {
    EXPECT_TRUE(actual.is_float() && std::isnan(actual.as_double()))
        << where << ": expected NaN, got " << actual.to_json();
  } else if (expected.is_number_integer()) {
    ASSERT_TRUE(actual.is_int()) << where << ": expected the integer " << expected.dump()
                                 << ", got " << actual.to_json();
    EXPECT_EQ(actual.as_int(), expected.get<std::int64_t>()) << where;
  } else if (expected.is_number()) {
    ASSERT_TRUE(actual.is_number()) << where << ": expected a number, got " << actual.to_json();
    const double want = expected.get<double>(), got = actual.as_double();
    const double diff = want == 0.0 ? std::abs(got) : std::abs(got - want) / std::abs(want);
    record_rel_diff(metric, diff);
    EXPECT_LE(diff, rel) << where << ": expected " << want << ", got " << got;
    if (want == 0.0) {
      EXPECT_EQ(got, 0.0) << where;
    }
  } else if (expected.is_array()) {
    ASSERT_TRUE(actual.is_array()) << where << ": expected an array, got " << actual.to_json();
    ASSERT_EQ(actual.size(), expected.size()) << where;
    for (std::size_t i = 0; i < expected.size(); ++i)
      expect_matches(actual.as_array()[i], expected[i], where + "[" + std::to_string(i) + "]",
                     metric, rel);
  } else if (expected.is_object()) {
    ASSERT_TRUE(actual.is_map()) << where << ": expected a map, got " << actual.to_json();
    std::vector<std::string> want_keys, got_keys;
    for (const auto& [k, v] : expected.items()) want_keys.push_back(k);
    for (const auto& [k, v] : actual.as_map()) got_keys.push_back(k);
    ASSERT_EQ(got_keys, want_keys) << where << ": result keys (in order)";
    for (const auto& [k, v] : expected.items())
      expect_matches(actual.at(k), v, where + "." + k, metric, rel);
  } else if (expected.is_string()) {  // a label (a curve's x_label, say)
    ASSERT_TRUE(actual.is_string()) << where << ": expected a string, got " << actual.to_json();
    EXPECT_EQ(actual.as_string(), expected.get<std::string>()) << where;
  } else {
    FAIL() << where << ": unexpected expected value " << expected.dump();
  }
}

// ---- reference cases
// -----------------------------------------------------------------------------

/// Runs a case of an expected-value file ({"metric", "params", "expected", ...}) over `data` (its
/// inputs) on every rank count (run_all_rank_counts), and expects its "expected" values
/// (expect_matches); returns the result.
inline Value check_case(const Json& c, const Batch& data, const std::string& where,
                        const RankSweep& sweep = {}) {
  const std::string type = c.at("metric").get<std::string>();
  const Value got = run_all_rank_counts(type, to_map(c.at("params")), data, {}, sweep);
  expect_matches(got, c.at("expected"), where, type);
  return got;
}

/// Runs the metrics of an example section ({"inputs", "samples", "metrics": [{"label",
/// "metric", "params"}, ...]}) on every rank count, each labelled as in the example's config,
/// and expects the values of the metric's "expected" map, or else of the section's
/// "results"[label].
inline void check_example(const Json& ex, const RankSweep& sweep = {}) {
  const Batch data = load_inputs(ex.at("inputs"));
  EXPECT_EQ(data.size(), ex.at("samples").get<std::int64_t>());
  for (const auto& m : ex.at("metrics")) {
    const std::string label = m.at("label").get<std::string>();
    const std::string type = m.at("metric").get<std::string>();
    const Value got = run_all_rank_counts(type, to_map(m.at("params")), data, label, sweep);
    expect_matches(got, m.contains("expected") ? m.at("expected") : ex.at("results").at(label),
                   "example." + label, type);
  }
}

}  // namespace tally::test
