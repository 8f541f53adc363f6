// The plugin boundary of plain bytes (ABI 7, docs/abi.md): StateWriter / StateReader
// (tally/sdk/bytes.hpp) and the field codec TypedMetric uses (tally/sdk/internal/state_codec.hpp).
//
// Expected values: msgpack-c 4.1 (Debian libmsgpack-cxx-dev), the library ABI 6 plugins packed
// their states with: every StateWriter call and every codec-written field is compared byte for
// byte with what msgpack::pack writes for the same value (or MSGPACK_DEFINE for the same members),
// so that checkpoints and records written before ABI 7 restore. Hostile bytes are
// StateFormatError, never a crash or an allocation of what a header claims.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <msgpack.hpp>

#include "tally/sdk/bytes.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"

namespace {

using tally::Bytes;
using tally::StateFormatError;
using tally::StateReader;
using tally::StateWriter;
using tally::internal::StringSink;

template <class T>
std::string msgpack_bytes(const T& v) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, v);
  return {buf.data(), buf.size()};
}

template <class T>
std::string codec_bytes(const T& v) {
  StringSink sink;
  StateWriter w(sink);
  tally::internal::write(w, v);
  return sink.bytes;
}

Bytes bytes_of(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

template <class T>
T codec_read(const std::string& bytes) {
  StateReader r(bytes_of(bytes));
  T v{};
  tally::internal::read(r, v);
  EXPECT_TRUE(r.done());
  return v;
}

// Every scalar StateWriter call against msgpack-c's packer for the same value.
TEST(StateBytes, ScalarsAreMsgpackCsBytes) {
  for (const std::int64_t v :
       {std::int64_t{0}, std::int64_t{1}, std::int64_t{-1}, std::int64_t{127}, std::int64_t{128},
        std::int64_t{-33}, std::int64_t{65536}, std::numeric_limits<std::int64_t>::min(),
        std::numeric_limits<std::int64_t>::max()}) {
    EXPECT_EQ(codec_bytes(v), msgpack_bytes(v)) << v;
    EXPECT_EQ(codec_read<std::int64_t>(msgpack_bytes(v)), v);
  }
  for (const std::uint64_t v : {std::uint64_t{0}, std::uint64_t{255}, std::uint64_t{1} << 40,
                                std::numeric_limits<std::uint64_t>::max()}) {
    EXPECT_EQ(codec_bytes(v), msgpack_bytes(v)) << v;
    EXPECT_EQ(codec_read<std::uint64_t>(msgpack_bytes(v)), v);
  }
  for (const double v :
       {0.0, -0.0, 1.0, 0.5, -2.25, 1e300, 3.0e-320, std::numeric_limits<double>::infinity()}) {
    EXPECT_EQ(codec_bytes(v), msgpack_bytes(v)) << v;
    EXPECT_EQ(codec_read<double>(msgpack_bytes(v)), v);
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(codec_bytes(nan), msgpack_bytes(nan));
  EXPECT_TRUE(std::isnan(codec_read<double>(msgpack_bytes(nan))));
  for (const float v : {0.0f, 1.5f, -3.0f, 1e30f}) {
    EXPECT_EQ(codec_bytes(v), msgpack_bytes(v)) << v;
    EXPECT_EQ(codec_read<float>(msgpack_bytes(v)), v);
  }
  EXPECT_EQ(codec_bytes(true), msgpack_bytes(true));
  EXPECT_EQ(codec_bytes(std::string("straße")), msgpack_bytes(std::string("straße")));
  EXPECT_EQ(codec_read<std::string>(msgpack_bytes(std::string("straße"))), "straße");
  EXPECT_EQ(codec_bytes(std::string(70000, 'x')), msgpack_bytes(std::string(70000, 'x')));
  EXPECT_EQ(codec_bytes(std::int32_t{-7}), msgpack_bytes(std::int32_t{-7}));
  EXPECT_EQ(codec_bytes(std::uint8_t{200}), msgpack_bytes(std::uint8_t{200}));
}

TEST(StateBytes, ContainersAreMsgpackCsBytes) {
  const std::vector<std::int64_t> ints{1, -2, 300, 1LL << 40};
  EXPECT_EQ(codec_bytes(ints), msgpack_bytes(ints));
  EXPECT_EQ(codec_read<std::vector<std::int64_t>>(msgpack_bytes(ints)), ints);

  const std::vector<std::string> words{"a", "", "ccc"};
  EXPECT_EQ(codec_bytes(words), msgpack_bytes(words));
  EXPECT_EQ(codec_read<std::vector<std::string>>(msgpack_bytes(words)), words);

  const std::map<std::string, std::int64_t> counts{{"cat", 3}, {"dog", 0}};
  EXPECT_EQ(codec_bytes(counts), msgpack_bytes(counts));
  const auto back = codec_read<std::map<std::string, std::int64_t>>(msgpack_bytes(counts));
  EXPECT_EQ(back, counts);

  const std::unordered_map<std::int64_t, double> one{{5, 0.25}};
  EXPECT_EQ(codec_bytes(one), msgpack_bytes(one));

  const std::set<std::int64_t> ids{9, 2, 5};
  EXPECT_EQ(codec_bytes(ids), msgpack_bytes(ids));
  EXPECT_EQ(codec_read<std::set<std::int64_t>>(msgpack_bytes(ids)), ids);

  const std::pair<std::int64_t, std::string> pair{4, "four"};
  EXPECT_EQ(codec_bytes(pair), msgpack_bytes(pair));
  const auto pair_back = codec_read<std::pair<std::int64_t, std::string>>(msgpack_bytes(pair));
  EXPECT_EQ(pair_back, pair);

  const std::tuple<bool, double, std::int64_t> tuple{true, 0.5, -9};
  EXPECT_EQ(codec_bytes(tuple), msgpack_bytes(tuple));

  const std::array<std::int64_t, 3> fixed{7, 8, 9};
  EXPECT_EQ(codec_bytes(fixed), msgpack_bytes(fixed));
  EXPECT_EQ((codec_read<std::array<std::int64_t, 3>>(msgpack_bytes(fixed))), fixed);

  const std::vector<char> raw{'\0', 'a', '\xff'};
  EXPECT_EQ(codec_bytes(raw), msgpack_bytes(raw));
  EXPECT_EQ(codec_read<std::vector<char>>(msgpack_bytes(raw)), raw);

  const std::optional<std::int64_t> some = 12;
  const std::optional<std::int64_t> none;
  EXPECT_EQ(codec_bytes(some), msgpack_bytes(some));
  EXPECT_EQ(codec_bytes(none), msgpack_bytes(none));
  EXPECT_EQ(codec_read<std::optional<std::int64_t>>(msgpack_bytes(some)), some);
  EXPECT_EQ(codec_read<std::optional<std::int64_t>>(msgpack_bytes(none)), none);

  const std::vector<std::vector<double>> nested{{1.0, 2.5}, {}, {-0.125}};
  EXPECT_EQ(codec_bytes(nested), msgpack_bytes(nested));
  EXPECT_EQ(codec_read<std::vector<std::vector<double>>>(msgpack_bytes(nested)), nested);
}

// A PackedVector is one bin of its little-endian values (ABI 6's adaptor wrote the same bin).
TEST(StateBytes, PackedVectorIsOneBinOfItsValues) {
  const tally::PackedVector<double> v{0.5, -1.0, 1e-300};
  msgpack::sbuffer expected;
  msgpack::packer<msgpack::sbuffer> p(expected);
  p.pack_bin(static_cast<std::uint32_t>(v.size() * sizeof(double)));
  p.pack_bin_body(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
  EXPECT_EQ(codec_bytes(v), std::string(expected.data(), expected.size()));
  EXPECT_EQ(codec_read<tally::PackedVector<double>>(codec_bytes(v)), v);
  EXPECT_TRUE(codec_read<tally::PackedVector<std::int64_t>>(
                  codec_bytes(tally::PackedVector<std::int64_t>{}))
                  .empty());
  // 12 bytes are no whole number of doubles: corrupt, not a truncated read.
  std::string odd;
  {
    msgpack::sbuffer b;
    msgpack::packer<msgpack::sbuffer> q(b);
    q.pack_bin(12);
    q.pack_bin_body("0123456789ab", 12);
    odd.assign(b.data(), b.size());
  }
  StateReader r(bytes_of(odd));
  tally::PackedVector<double> out;
  EXPECT_THROW(tally::internal::read(r, out), StateFormatError);
}

// TALLY_FIELDS writes a plugin's own type as MSGPACK_DEFINE wrote the same members.
struct Fold {
  std::int64_t count = 0;
  std::uint64_t hash = 0;
  std::string name;
  std::vector<double> xs;
  TALLY_FIELDS(count, hash, name, xs)
};
struct OldFold {
  std::int64_t count = 0;
  std::uint64_t hash = 0;
  std::string name;
  std::vector<double> xs;
  MSGPACK_DEFINE(count, hash, name, xs)
};

TEST(StateBytes, TallyFieldsAreMsgpackDefinesBytes) {
  const Fold f{-3, 1ULL << 63, "run", {0.5, 2.0}};
  const OldFold old{-3, 1ULL << 63, "run", {0.5, 2.0}};
  EXPECT_EQ(codec_bytes(f), msgpack_bytes(old));
  const Fold back = codec_read<Fold>(msgpack_bytes(old));
  EXPECT_EQ(back.count, -3);
  EXPECT_EQ(back.hash, 1ULL << 63);
  EXPECT_EQ(back.name, "run");
  EXPECT_EQ(back.xs, (std::vector<double>{0.5, 2.0}));
  // A vector of them (a concat field of records) too.
  const std::vector<Fold> many{f, Fold{}};
  const std::vector<OldFold> old_many{old, OldFold{}};
  EXPECT_EQ(codec_bytes(many), msgpack_bytes(old_many));
  // Three members where four are declared: corrupt.
  const std::tuple<std::int64_t, std::uint64_t, std::string> short_fold{1, 2, "x"};
  const std::string short_bytes = msgpack_bytes(short_fold);  // outlives the reader
  StateReader r(bytes_of(short_bytes));
  Fold out;
  EXPECT_THROW(tally::internal::read(r, out), StateFormatError);
}

std::string expect_format_error(const std::string& bytes, auto&& read) {
  try {
    StateReader r(bytes_of(bytes));
    read(r);
  } catch (const StateFormatError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no StateFormatError";
  return {};
}

TEST(StateBytes, HostileBytesAreFormatErrors) {
  // The reader checks as it reads: a whole value read with skip(), then nothing may follow.
  const auto whole = [](StateReader& r) {
    r.skip();
    if (!r.done()) StateReader::fail("bytes follow the value");
  };
  // Nothing / truncated / two values where one is expected.
  EXPECT_NE(expect_format_error("", whole).find("truncated"), std::string::npos);
  const std::string ints = msgpack_bytes(std::vector<std::int64_t>{1, 2, 3});
  expect_format_error(ints.substr(0, ints.size() - 1), whole);
  EXPECT_NE(expect_format_error(ints + ints, whole).find("bytes follow"), std::string::npos);
  // An array32 header claiming 2^32 - 1 elements with none behind it: refused when it is entered,
  // before a caller reserves room for them.
  const std::string huge("\xdd\xff\xff\xff\xff", 5);
  EXPECT_NE(
      expect_format_error(huge, [](StateReader& r) { r.array(); }).find("in the 0 bytes left"),
      std::string::npos);
  expect_format_error(huge, [](StateReader& r) {
    std::vector<std::int64_t> v;
    tally::internal::read(r, v);
  });
  // A bin32 claiming 4 GiB.
  expect_format_error(std::string("\xc6\xff\xff\xff\xff", 5), [](StateReader& r) { r.bin(); });
  expect_format_error(std::string("\xc6\xff\xff\xff\xff", 5), whole);
  // Deep nesting (10,000 single-element arrays).
  expect_format_error(std::string(10000, '\x91') + '\x00', whole);
  // The byte msgpack never uses.
  expect_format_error(std::string("\xc1", 1), whole);
  // The wrong type where a field is read, with what was expected and found.
  const std::string msg = expect_format_error(msgpack_bytes(std::string("x")), [](StateReader& r) {
    std::int64_t v;
    tally::internal::read(r, v);
  });
  EXPECT_NE(msg.find("expected an integer, found a string"), std::string::npos) << msg;
  // Out of range for the field's type.
  expect_format_error(msgpack_bytes(std::int64_t{300}), [](StateReader& r) {
    std::uint8_t v;
    tally::internal::read(r, v);
  });
  expect_format_error(msgpack_bytes(std::int64_t{-1}), [](StateReader& r) {
    std::uint64_t v;
    tally::internal::read(r, v);
  });
  expect_format_error(msgpack_bytes(std::numeric_limits<std::uint64_t>::max()),
                      [](StateReader& r) { (void)r.integer(); });
  // Reading past the last value.
  expect_format_error(msgpack_bytes(std::vector<std::int64_t>{}), [](StateReader& r) {
    r.array();
    (void)r.integer();
  });
  // A tuple of another size.
  expect_format_error(msgpack_bytes(std::vector<std::int64_t>{1, 2, 3}), [](StateReader& r) {
    std::pair<std::int64_t, std::int64_t> v;
    tally::internal::read(r, v);
  });
}

TEST(StateBytes, ReaderWalksNestedValuesAndSkips) {
  const std::tuple<std::vector<std::int64_t>, std::map<std::string, double>, std::string> v{
      {1, 2}, {{"a", 0.5}}, "tail"};
  const std::string bytes = msgpack_bytes(v);
  StateReader r(bytes_of(bytes));
  EXPECT_EQ(r.peek(), StateReader::Kind::Array);
  EXPECT_EQ(r.array(), 3u);
  EXPECT_EQ(r.peek(), StateReader::Kind::Array);
  r.skip();
  EXPECT_EQ(r.map(), 1u);
  EXPECT_EQ(r.str(), "a");
  EXPECT_EQ(r.float64(), 0.5);
  EXPECT_FALSE(r.done());
  EXPECT_EQ(r.str(), "tail");
  EXPECT_TRUE(r.done());
}

// ---- a TypedMetric's save / restore / merge_saved ----------------------------------------------

struct CountState {
  tally::PackedVector<std::int64_t> hits = tally::PackedVector<std::int64_t>(3, 0);
  std::int64_t n = 0;
  tally::PackedVector<double> scores;
  double lowest = std::numeric_limits<double>::infinity();
  TALLY_STATE(sum(hits), sum(n), concat(scores), min(lowest))
};

class CountMetric final : public tally::TypedMetric<CountState> {
 public:
  void feed(std::initializer_list<std::int64_t> labels) {
    auto& s = state();
    for (const auto c : labels) {
      ++s.hits[static_cast<std::size_t>(c)];
      ++s.n;
      s.scores.push_back(static_cast<double>(c) / 4);
      s.lowest = std::min(s.lowest, static_cast<double>(c));
    }
  }
  std::string saved() const {
    StringSink sink;
    save(sink);
    return sink.bytes;
  }

 protected:
  void update(CountState&, const tally::Batch&) override {}
  tally::Value compute(const CountState& s) const override {
    tally::Value out = tally::Value::map();
    out.set("n", s.n);
    out.set("hits2", s.hits[2]);
    out.set("scores", static_cast<std::int64_t>(s.scores.size()));
    out.set("last_score", s.scores.empty() ? -1.0 : s.scores.back());
    out.set("lowest", s.lowest);
    return out;
  }
};

// save() writes the fields as MSGPACK_DEFINE(hits, n, scores, lowest) would have (ABI 6).
TEST(StateBytes, SaveIsTheAbi6Layout) {
  CountMetric m;
  m.feed({0, 2, 2});
  msgpack::sbuffer expected;
  msgpack::packer<msgpack::sbuffer> p(expected);
  p.pack_array(4);
  const std::vector<std::int64_t> hits{1, 0, 2};
  const std::vector<double> scores{0.0, 0.5, 0.5};
  p.pack_bin(24);
  p.pack_bin_body(reinterpret_cast<const char*>(hits.data()), 24);
  p.pack(std::int64_t{3});
  p.pack_bin(24);
  p.pack_bin_body(reinterpret_cast<const char*>(scores.data()), 24);
  p.pack(0.0);
  EXPECT_EQ(m.saved(), std::string(expected.data(), expected.size()));
  CountMetric back;
  back.restore(bytes_of(m.saved()));
  EXPECT_EQ(back.saved(), m.saved());
}

// merge_saved folds a saved state in as if its samples followed the local ones: the same state as
// one metric that saw every sample, whatever the split.
TEST(StateBytes, MergeSavedEqualsOneMetricOfAllTheSamples) {
  CountMetric whole;
  whole.feed({0, 1, 2, 2, 1, 0, 2});
  CountMetric first, second, third;
  first.feed({0, 1});
  second.feed({2, 2, 1});
  third.feed({0, 2});
  CountMetric resumed;
  for (const CountMetric* part : {&first, &second, &third})
    resumed.merge_saved(bytes_of(part->saved()));
  EXPECT_EQ(resumed.saved(), whole.saved());
  EXPECT_EQ(resumed.compute_local(), whole.compute_local());
  // An empty part changes nothing.
  CountMetric empty;
  resumed.merge_saved(bytes_of(empty.saved()));
  EXPECT_EQ(resumed.saved(), whole.saved());
  // A corrupt one is a StateFormatError and leaves the state as it was.
  const std::string bad = first.saved().substr(0, 5);
  EXPECT_THROW(resumed.merge_saved(bytes_of(bad)), StateFormatError);
  EXPECT_EQ(resumed.saved(), whole.saved());
  // Counts of another size than this metric's parameters make: refused (RuntimeError).
  msgpack::sbuffer other;
  msgpack::packer<msgpack::sbuffer> p(other);
  p.pack_array(4);
  const std::vector<std::int64_t> five{1, 1, 1, 1, 1};
  p.pack_bin(40);
  p.pack_bin_body(reinterpret_cast<const char*>(five.data()), 40);
  p.pack(std::int64_t{5});
  p.pack_bin(0);
  p.pack(1.0);
  EXPECT_THROW(resumed.merge_saved(bytes_of(std::string(other.data(), other.size()))),
               tally::RuntimeError);
  EXPECT_EQ(resumed.saved(), whole.saved());
}

}  // namespace
