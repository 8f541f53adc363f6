// Test harness for metric plugins: a tiny .npy loader, metrics built from the real plugin
// libraries through the Registry, and N simulated ranks (contiguous shards, one metric instance
// per rank, each state packed to msgpack bytes, unpacked, and computed on one instance), as the
// engine's sync protocol does (DESIGN.md, "The sync protocol").
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <msgpack.hpp>
#include <nlohmann/json.hpp>

#include "config.hpp"
#include "registry.hpp"
#include "tally/batch.hpp"
#include "tally/metric.hpp"
#include "tally/tensor.hpp"
#include "tally/value.hpp"

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

inline Json load_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return Json::parse(in);
}

// ---- metrics
// -------------------------------------------------------------------------------------

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

/// Simulates one rank per shard: a metric instance each, fed its shard in batches, its state
/// packed to msgpack bytes; then unpacks every state and computes on a fresh instance.
inline Value run_ranks(const std::function<std::shared_ptr<Metric>()>& make, const Batch& data,
                       const std::vector<Shard>& shards, const RunOptions& opt = {}) {
  std::vector<msgpack::sbuffer> buffers(shards.size());
  for (std::size_t r = 0; r < shards.size(); ++r) {
    const auto metric = make();
    const auto [begin, end] = shards[r];
    if (begin == end && opt.add_empty_batches) metric->add(data.slice(begin, end));
    for (std::int64_t b = begin; b < end; b += opt.batch_size)
      metric->add(data.slice(b, std::min(end, b + opt.batch_size)));
    Packer packer(buffers[r]);
    metric->pack(packer);
  }
  std::vector<msgpack::object_handle> handles;
  std::vector<msgpack::object> objects;
  for (const auto& buf : buffers) {
    handles.push_back(msgpack::unpack(buf.data(), buf.size()));
    objects.push_back(handles.back().get());
  }
  return make()->compute_packed(objects);
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

/// Expects `actual` to match the expected JSON value: integers exactly (and as integers), other
/// numbers to `rel` relative difference, arrays element by element, maps key by key in order.
inline void expect_matches(const Value& actual, const Json& expected, const std::string& where,
                           const std::string& metric, double rel = 1e-9) {
  if (expected.is_number_integer()) {
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
  } else {
    FAIL() << where << ": unexpected expected value " << expected.dump();
  }
}

}  // namespace tally::test
