// Per-sample records (output.records) and bootstrap intervals (intervals:), docs/significance.md:
// the records file is the same byte for byte on 1, 2, 3, 4 and 7 ranks and for any batch size,
// and so are the intervals; the point estimate lies inside its interval; the records file reads
// back (and a corrupt or truncated one is InputError, exit 2); bad `intervals:` keys are exit 2
// naming the key; and Accuracy's interval equals one recomputed here from the per-sample
// correctness and the stats core's multinomial resamples (same seed).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include <zlib.h>
#include <msgpack.hpp>

#include "integration/cli_fixture.hpp"
#include "tally/records.hpp"
#include "tally/registry.hpp"
#include "tally/reports/reports.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/params.hpp"
#include "tally/stats/random.hpp"

namespace fs = std::filesystem;
using namespace tally::test;

namespace {

const char* kRecordsMetrics = R"(metrics:
  - type: Accuracy
    topk: [1, 2]
  - type: SingleLabelMetric
    name: prf_macro
  - type: ConfusionMatrix
    num_classes: 5
)";

const char* kIntervals = "intervals: {confidence: 0.9, resamples: 200, seed: 7}\n";

class RecordsTest : public CliTest {
 protected:
  /// Runs the config (np == 0: one process, no launcher) and returns the results JSON; the
  /// records land in `records`.
  nlohmann::json run(int np, const fs::path& cfg, const fs::path& records,
                     const std::string& extra = "") {
    const auto out = dir / "out.json";
    std::string cmd = np == 0 ? kTally : mpirun(np) + kTally;
    cmd += " run -q " + cfg.string() + " --set output.records=" + records.string() + " -o " +
           out.string() + " " + extra;
    if (np > 0) cmd += " --set backend.type=mpi";
    const auto r = run_command(cmd);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return read_json(out);
  }
};

/// NumPy's default (linear) percentile of ascending values, written out here.
double np_percentile(const std::vector<double>& sorted, double q) {
  const double h = (static_cast<double>(sorted.size()) - 1) * q / 100.0;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  const double t = h - static_cast<double>(lo);
  const double a = sorted[lo], b = sorted[hi];
  return t >= 0.5 ? b - (b - a) * (1 - t) : a + (b - a) * t;
}

}  // namespace

TEST_F(RecordsTest, RecordsAndIntervalsAreTheSameForAnyBatchSizeAndRankCount) {
  const auto cfg = config(kRecordsMetrics, kIntervals);
  const auto first = dir / "single.rec";
  const auto single = run(0, cfg, first);
  const std::string bytes = read_file(first);
  ASSERT_FALSE(bytes.empty());
  ASSERT_TRUE(single.contains("intervals"));
  for (int bs : {1, 3, 50}) {
    SCOPED_TRACE(bs);
    const auto rec = dir / "bs.rec";
    const auto j = run(0, cfg, rec, "--set data.batch_size=" + std::to_string(bs));
    EXPECT_EQ(read_file(rec), bytes);
    EXPECT_EQ(j["intervals"], single["intervals"]);
  }
#ifdef TALLY_MPIEXEC
  for (int np : {1, 2, 3, 4, 7}) {
    SCOPED_TRACE(np);
    const auto rec = dir / ("np" + std::to_string(np) + ".rec");
    const auto j = run(np, cfg, rec);
    EXPECT_EQ(read_file(rec), bytes);
    EXPECT_EQ(j["intervals"], single["intervals"]);
    EXPECT_EQ(j["results"], single["results"]);
  }
  // More ranks than samples: empty ranks send empty records.
  write_data(make_dataset(5, 5));
  const auto few = dir / "few.rec";
  const auto j1 = run(0, cfg, few);
  const auto rec7 = dir / "few7.rec";
  const auto j7 = run(7, cfg, rec7, "--set data.batch_size=1");
  EXPECT_EQ(read_file(rec7), read_file(few));
  EXPECT_EQ(j7["intervals"], j1["intervals"]);
#endif
}

TEST_F(RecordsTest, PointEstimateInsideItsIntervalAndReportsShowIt) {
  const auto cfg = config(kRecordsMetrics, kIntervals);
  const auto md = dir / "r.md";
  const auto html = dir / "r.html";
  const auto j =
      run(0, cfg, dir / "r.rec", "--markdown " + md.string() + " --html " + html.string());
  const auto& iv = j["intervals"];
  EXPECT_EQ(iv["settings"]["confidence"], 0.9);
  EXPECT_EQ(iv["settings"]["resamples"], 200);
  EXPECT_EQ(iv["settings"]["seed"], 7);
  EXPECT_EQ(iv["settings"]["method"], "percentile");
  int checked = 0;
  for (const auto& [label, keys] : j["results"].items())
    for (const auto& [key, v] : keys.items()) {
      if (!v.is_number()) continue;
      ASSERT_TRUE(iv["metrics"][label].contains(key)) << label << "." << key;
      const auto& e = iv["metrics"][label][key];
      EXPECT_LE(e["low"].get<double>(), v.get<double>() + 1e-12) << label << "." << key;
      EXPECT_GE(e["high"].get<double>(), v.get<double>() - 1e-12) << label << "." << key;
      EXPECT_GE(e["standard_error"].get<double>(), 0.0);
      ++checked;
    }
  EXPECT_GE(checked, 5);
  const auto r = tally("run " + cfg.string() + " --set intervals.resamples=50");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("top1"), std::string::npos);
  EXPECT_NE(r.out.find(" ["), std::string::npos) << r.out;
  EXPECT_NE(read_file(md).find(" \\["), std::string::npos) << read_file(md);
  EXPECT_NE(read_file(html).find("0."), std::string::npos);
  EXPECT_NE(read_file(html).find(" ["), std::string::npos);
  // The results JSON reads back with its intervals.
  EXPECT_FALSE(tally::read_results_json(dir / "out.json").intervals.is_null());
}

TEST_F(RecordsTest, AccuracyIntervalEqualsAnIndependentBootstrap) {
  // No ties: the per-sample correctness is argmax == label, recomputed here.
  auto d = make_dataset(301, 4, 11);
  for (std::int64_t i = 0; i < d.n; ++i)
    for (std::int64_t k = 0; k < d.c; ++k)
      d.scores[static_cast<std::size_t>(i * d.c + k)] += 1e-3f * static_cast<float>(k);
  write_data(d);
  const auto cfg = config("metrics:\n  - type: Accuracy\n",
                          "intervals: {confidence: 0.95, resamples: 500, seed: 42}\n");
  const auto j = run(0, cfg, dir / "acc.rec");
  std::vector<int> correct;
  for (std::int64_t i = 0; i < d.n; ++i) {
    std::int64_t best = 0;
    for (std::int64_t k = 1; k < d.c; ++k)
      if (d.scores[static_cast<std::size_t>(i * d.c + k)] >
          d.scores[static_cast<std::size_t>(i * d.c + best)])
        best = k;
    correct.push_back(best == d.labels[static_cast<std::size_t>(i)] ? 1 : 0);
  }
  double hits = 0;
  for (int c : correct) hits += c;
  const double acc = hits / static_cast<double>(d.n);
  ASSERT_NEAR(j["results"]["Accuracy"]["top1"].get<double>(), acc, 1e-15);
  std::vector<double> theta;
  std::vector<std::uint32_t> w(static_cast<std::size_t>(d.n));
  for (std::uint64_t b = 0; b < 500; ++b) {
    tally::stats::resample_counts(42, b, w);
    double s = 0;
    for (std::size_t i = 0; i < w.size(); ++i) s += static_cast<double>(w[i]) * correct[i];
    theta.push_back(s / static_cast<double>(d.n));
  }
  double mean = 0;
  for (double t : theta) mean += t;
  mean /= static_cast<double>(theta.size());
  double ss = 0;
  for (double t : theta) ss += (t - mean) * (t - mean);
  const double se = std::sqrt(ss / static_cast<double>(theta.size() - 1));
  std::sort(theta.begin(), theta.end());
  const auto& e = j["intervals"]["metrics"]["Accuracy"]["top1"];
  EXPECT_NEAR(e["low"].get<double>(), np_percentile(theta, 2.5), 1e-14);
  EXPECT_NEAR(e["high"].get<double>(), np_percentile(theta, 97.5), 1e-14);
  EXPECT_NEAR(e["standard_error"].get<double>(), se, 1e-14);
  EXPECT_LT(e["low"].get<double>(), acc);
  EXPECT_GT(e["high"].get<double>(), acc);

  // BCa gives another interval around the same estimate.
  const auto bca = run(0, cfg, dir / "acc2.rec", "--set intervals.method=bca");
  const auto& eb = bca["intervals"]["metrics"]["Accuracy"]["top1"];
  EXPECT_EQ(bca["intervals"]["settings"]["method"], "bca");
  EXPECT_LT(eb["low"].get<double>(), acc);
  EXPECT_GT(eb["high"].get<double>(), acc);
  EXPECT_EQ(eb["standard_error"], e["standard_error"]);
}

TEST_F(RecordsTest, RecordsFileReadsBackAndReplays) {
  const auto cfg = config(kRecordsMetrics);
  const auto rec = dir / "r.rec";
  const auto j = run(0, cfg, rec);
  EXPECT_FALSE(j.contains("intervals"));  // records alone: no intervals
  const std::string bytes = read_file(rec);
  const tally::Records r = tally::read_records(rec);
  EXPECT_EQ(r.units, 50u);
  EXPECT_EQ(r.sample_hash_of, "dataset index");
  ASSERT_EQ(r.metrics.size(), 3u);
  EXPECT_EQ(r.metrics[0].label, "Accuracy");
  EXPECT_EQ(r.metrics[0].type, "Accuracy");
  EXPECT_EQ(r.metrics[2].parameters.at("num_classes").as_int(), 5);
  for (const auto& m : r.metrics) {
    EXPECT_EQ(m.units(), 50u);
    EXPECT_EQ(m.offsets.size(), 51u);
  }
  EXPECT_EQ(tally::pack_records(r), bytes);  // a round trip, byte for byte
  // Replayed through a metric of the label's type and parameters, every weight 1, the records
  // give the run's results.
  const auto reg = tally::Registry::load({});
  for (const auto& m : r.metrics) {
    SCOPED_TRACE(m.label);
    const auto& comp = reg.get(tally::ComponentKind::Metric, m.type);
    const auto metric =
        tally::Registry::make_metric(comp, tally::Params(m.label, m.parameters.as_map()));
    const tally::UnitReplay replay(m);
    const tally::Value v = replay.compute(*metric);
    EXPECT_EQ(nlohmann::json::parse(v.to_json()), j["results"][m.label]);
    // Twice the weight on every unit: the same ratios.
    const std::vector<std::uint32_t> twos(m.units(), 2);
    const auto flat1 = tally::flatten_scalars(v);
    const auto flat2 = tally::flatten_scalars(replay.compute(*metric, twos));
    ASSERT_EQ(flat1.size(), flat2.size());
    for (std::size_t k = 0; k < flat1.size(); ++k) {
      if (flat1[k].first.find("support") == std::string::npos &&
          flat1[k].first.find("matrix") == std::string::npos) {
        EXPECT_DOUBLE_EQ(flat1[k].second, flat2[k].second) << flat1[k].first;
      }
    }
  }
}

TEST_F(RecordsTest, CorruptOrTruncatedRecordsAreInputErrors) {
  const auto rec = dir / "r.rec";
  run(0, config(kRecordsMetrics), rec);
  const std::string bytes = read_file(rec);
  const auto expect_bad = [&](const std::string& content, const std::string& what) {
    SCOPED_TRACE(what);
    const auto p = dir / "bad.rec";
    write_text(p, content);
    try {
      tally::read_records(p);
      ADD_FAILURE() << "accepted";
    } catch (const tally::InputError& e) {
      EXPECT_EQ(e.exit_code(), 2);
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
    }
  };
  for (std::size_t cut :
       {std::size_t{0}, std::size_t{1}, std::size_t{10}, bytes.size() / 2, bytes.size() - 1})
    expect_bad(bytes.substr(0, cut), "truncated at " + std::to_string(cut));
  expect_bad(bytes + "x", "trailing byte");
  std::string other = bytes;
  other.replace(other.find("tally-records"), 13, "tally-recordz");
  expect_bad(other, "format");
  // A byte of the compressed data changed: zlib's checksum (or its stream) catches it.
  std::string flipped = bytes;
  flipped[bytes.size() / 2] = static_cast<char>(flipped[bytes.size() / 2] ^ 0x5a);
  expect_bad(flipped, "a compressed byte changed");
  // An offset pointing past the counts, and a count index at summed_size, written by
  // pack_records itself (it checks nothing): the reader's bounds checks refuse them.
  auto records = tally::read_records(rec);
  auto wrong = records;
  wrong.metrics[0].offsets[3] = wrong.metrics[0].index.size() + 5;
  expect_bad(tally::pack_records(wrong), "offsets");
  wrong = records;
  wrong.metrics[0].index[0] = static_cast<std::uint32_t>(wrong.metrics[0].summed_size);
  expect_bad(tally::pack_records(wrong), "count index");
  // The file's version must be the one this tally writes.
  std::string v1 = bytes;
  const auto at = v1.find("version");
  ASSERT_NE(at, std::string::npos);
  v1[at + 7] = 0x01;  // the positive fixint after the key
  expect_bad(v1, "version 1");
  // Not a file at all.
  try {
    tally::read_records(dir / "missing.rec");
    ADD_FAILURE();
  } catch (const tally::InputError& e) {
    EXPECT_EQ(e.exit_code(), 2);
  }
}

namespace {

using Pk = msgpack::packer<msgpack::sbuffer>;

template <class F>
std::string packed(F&& fill) {
  msgpack::sbuffer b;
  Pk p(b);
  fill(p);
  return std::string(b.data(), b.size());
}

template <class T>
std::string raw_of(std::initializer_list<T> xs) {
  std::string out(xs.size() * sizeof(T), '\0');
  std::memcpy(out.data(), std::data(xs), out.size());
  return out;
}

void pack_bin(Pk& p, const std::string& b) {
  p.pack_bin(static_cast<std::uint32_t>(b.size()));
  p.pack_bin_body(b.data(), static_cast<std::uint32_t>(b.size()));
}

/// zlib's stream of `bytes` (level 1, as tally writes).
std::string zlib_of(const std::string& bytes) {
  uLongf n = compressBound(static_cast<uLong>(bytes.size()));
  std::string out(n, '\0');
  EXPECT_EQ(compress2(reinterpret_cast<Bytef*>(out.data()), &n,
                      reinterpret_cast<const Bytef*>(bytes.data()), bytes.size(), 1),
            Z_OK);
  out.resize(n);
  return out;
}

/// A records file around the zlib stream `data` that says its records take `size` bytes.
std::string records_file(const std::string& data, std::uint64_t size) {
  return packed([&](Pk& p) {
    p.pack_map(5);
    p.pack("format");
    p.pack("tally-records");
    p.pack("version");
    p.pack(2);
    p.pack("compression");
    p.pack("zlib");
    p.pack("size");
    p.pack(size);
    p.pack("data");
    pack_bin(p, data);
  });
}

/// The records map of one Accuracy-typed metric, every field given (crafted, not written by tally).
struct Crafted {
  std::uint64_t units = 3, summed_size = 3;
  std::string offsets = raw_of<std::uint64_t>({0, 1, 2, 3});
  std::string index = raw_of<std::uint32_t>({0, 1, 2});
  std::string count = raw_of<std::int64_t>({1, 1, 1});
  std::optional<std::string> gathered_offsets, gathered;

  std::string inner() const {
    return packed([&](Pk& p) {
      p.pack_map(7);
      p.pack("format");
      p.pack("tally-records");
      p.pack("version");
      p.pack(2);
      p.pack("tally_version");
      p.pack("0");
      p.pack("units");
      p.pack(units);
      p.pack("sample_hash");
      p.pack(0);
      p.pack("sample_hash_of");
      p.pack("dataset index");
      p.pack("metrics");
      p.pack_array(1);
      p.pack_map(9);
      p.pack("label");
      p.pack("Accuracy");
      p.pack("type");
      p.pack("Accuracy");
      p.pack("parameters");
      p.pack_map(0);
      p.pack("summed_size");
      p.pack(summed_size);
      for (const auto& [k, v] : {std::pair{"offsets", &offsets}, std::pair{"index", &index},
                                 std::pair{"count", &count}}) {
        p.pack(k);
        pack_bin(p, *v);
      }
      for (const auto& [k, v] :
           {std::pair{"gathered_offsets", &gathered_offsets}, std::pair{"gathered", &gathered}}) {
        p.pack(k);
        if (*v)
          pack_bin(p, **v);
        else
          p.pack_nil();
      }
    });
  }
  std::string file() const {
    const std::string i = inner();
    return records_file(zlib_of(i), i.size());
  }
};

}  // namespace

// Issue 32, item 5: records files whose counts and sizes do not fit their data (crafted here
// with msgpack and zlib): exit 2 naming the file and the field, before anything of the declared
// size is allocated. Before: units 2^64-1 crashed (SIGSEGV), a declared size was allocated whole.
TEST_F(RecordsTest, CountsAndSizesThatDoNotFitTheDataAreInputErrorsNamingTheField) {
  const auto expect_bad = [&](const std::string& bytes, const std::string& field) {
    const auto p = dir / "crafted.rec";
    write_text(p, bytes);
    try {
      tally::read_records(p);
      ADD_FAILURE() << "accepted";
    } catch (const tally::InputError& e) {
      const std::string msg = e.what();
      EXPECT_TRUE(msg.starts_with(p.string() + ": not a valid tally records file: ")) << msg;
      EXPECT_NE(msg.find(field), std::string::npos) << msg;
    }
  };
  Crafted ok;
  write_text(dir / "ok.rec", ok.file());
  EXPECT_EQ(tally::read_records(dir / "ok.rec").metrics.at(0).units(), 3u);  // the crafting works

  for (const std::uint64_t units :
       {std::numeric_limits<std::uint64_t>::max(), std::numeric_limits<std::uint64_t>::max() - 1,
        std::uint64_t{1} << 40, std::uint64_t{4}, std::uint64_t{0}}) {
    SCOPED_TRACE(units);
    Crafted c;
    c.units = units;
    expect_bad(c.file(), "offsets has 4 entries, expected units + 1");
    c.offsets.clear();  // no offsets at all: units + 1 wraps to 0 for 2^64 - 1
    c.index.clear();
    c.count.clear();
    expect_bad(c.file(), "offsets has 0 entries");
  }
  {
    Crafted c;  // gathered offsets of another length than units + 1
    c.gathered_offsets = raw_of<std::uint64_t>({0, 1});
    c.gathered = std::string("\xc0", 1);
    expect_bad(c.file(), "gathered_offsets has 2 entries");
    c.gathered_offsets = raw_of<std::uint64_t>({0, 1, 1, 1u << 30});  // past the gathered bytes
    expect_bad(c.file(), "gathered_offsets ends at 1073741824, the data holds 1");
  }
  {
    Crafted c;
    c.summed_size = std::uint64_t{1} << 33;
    expect_bad(c.file(), "summed_size is too large");
    c.summed_size = 2;  // index 2 is not below it
    expect_bad(c.file(), "count index 2 is not below summed_size 2");
  }
  // Declared sizes: above the records limit, above what the data can inflate to, or a stream
  // that gives fewer or more bytes than declared (a zlib bomb: 64 MiB of zeros in 64 KiB).
  const std::string inner = ok.inner(), stream = zlib_of(inner);
  expect_bad(records_file(stream, std::uint64_t{3} << 30), "size 3221225472 is more than");
  expect_bad(records_file(stream, std::numeric_limits<std::uint64_t>::max()), "is more than");
  expect_bad(records_file(stream, 1032 * stream.size() + 65), "cannot come from");
  expect_bad(records_file(stream, 1032 * stream.size()), "does not inflate to the");
  expect_bad(records_file(stream, inner.size() - 1), "does not inflate to the");
  const std::string bomb = zlib_of(std::string(64u << 20, '\0'));
  ASSERT_LT(bomb.size(), 1u << 20);
  expect_bad(records_file(bomb, 1u << 20), "does not inflate to the 1048576 bytes");
  expect_bad(records_file(bomb, 64u << 20), "not one msgpack document");  // inflated, then parsed
}

// Issue 32, item 5: a summed_size that its metric does not sum (a 30 KB file declaring 2^32 - 1
// counts made each replay allocate 32 GiB), or gathered state for a metric that gathers none:
// tally compare --records is exit 2 naming the file and the field, before any replay.
TEST_F(RecordsTest, RecordsTheirMetricCannotReplayAreExit2NamingTheFileAndField) {
  const auto rec = dir / "r.rec";
  run(0, config(kRecordsMetrics), rec);
  const auto results = dir / "res.json";
  fs::copy_file(dir / "out.json", results);
  const auto good = tally::read_records(rec);
  const auto compare_with = [&](const tally::Records& bad, const std::string& field) {
    const auto p = dir / "bad.rec";
    write_text(p, tally::pack_records(bad));
    for (const bool as_baseline : {false, true}) {
      const std::string recs =
          as_baseline ? " --records " + rec.string() + " --baseline-records " + p.string()
                      : " --records " + p.string() + " --baseline-records " + rec.string();
      const auto r = tally("compare -q " + results.string() + " " + results.string() + recs +
                           " --resamples 20");
      EXPECT_EQ(r.exit_code, 2) << field << "\n" << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      EXPECT_NE(r.err.find(p.string() + ": not a valid tally records file"), std::string::npos)
          << r.err;
      EXPECT_NE(r.err.find(field), std::string::npos) << r.err;
    }
  };
  for (const std::uint64_t size : {std::uint64_t{0xFFFFFFFF}, std::uint64_t{1000000}}) {
    auto bad = good;
    bad.metrics[0].summed_size = size;  // Accuracy sums a few counts
    compare_with(bad, fmt::format("summed_size is {}", size));
  }
  auto bad = good;
  const auto matrix = good.metrics[2].summed_size;  // the confusion matrix's counts
  bad.metrics[2].summed_size = matrix + 1;
  compare_with(bad, fmt::format("summed_size is {}, but a metric of its type and parameters sums "
                                "{} counts",
                                matrix + 1, matrix));
  bad = good;
  bad.metrics[0].gathers = true;
  bad.metrics[0].gathered_offsets.assign(bad.metrics[0].units() + 1, 0);
  compare_with(bad, "gathered_offsets is a bin, but a metric of its type and parameters gathers");
  // The records themselves compare fine.
  const auto r = tally("compare -q " + results.string() + " " + results.string() + " --records " +
                       rec.string() + " --baseline-records " + rec.string() + " --resamples 20");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(RecordsTest, BadIntervalKeysAreExit2NamingTheKey) {
  const auto cfg = config(kRecordsMetrics, kIntervals);
  for (const auto& [set, key] : std::vector<std::pair<std::string, std::string>>{
           {"intervals.resamples=0", "intervals.resamples"},
           {"intervals.resamples=1.5", "intervals.resamples"},
           {"intervals.confidence=1.5", "intervals.confidence"},
           {"intervals.confidence=0", "intervals.confidence"},
           {"intervals.seed=-1", "intervals.seed"},
           {"intervals.method=normal", "intervals.method"},
           {"intervals.level=0.9", "intervals.level"},
           {"intervals=3", "intervals"},
           {"output.records=[1]", "output.records"}}) {
    SCOPED_TRACE(set);
    const auto r = tally("run " + cfg.string() + " --set " + set);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(key), std::string::npos) << r.err;
  }
  // checkpoint: cannot be combined with records yet.
  const auto ck =
      config(kRecordsMetrics,
             "checkpoint: {dir: ck, every_n_batches: 1}\n" + std::string(kIntervals), "ck.yaml");
  const auto r = tally("run " + ck.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("checkpoint"), std::string::npos) << r.err;
}

TEST_F(RecordsTest, SampleHashCoversTheIndicesAndTheReadersIds) {
  // An id field (img_id, as the COCO reader's) enters the hash: FNV-1a 64 over (index, id) per
  // sample, little-endian, recomputed here.
  std::vector<std::int64_t> ids;
  for (std::int64_t i = 0; i < 50; ++i) ids.push_back(1000 + 7 * i);
  write_npy(dir / "ids.npy", ids);
  const auto cfg_with = [&](const std::string& name) {
    const auto p = dir / name;
    write_text(p,
               "data:\n  type: npy\n  batch_size: 8\n  fields:\n    pred_scores: scores.npy\n"
               "    gt_labels: labels.npy\n    img_id: ids.npy\n"
               "metrics:\n  - type: Accuracy\n");
    return p;
  };
  const auto rec = dir / "ids.rec";
  run(0, cfg_with("ids.yaml"), rec);
  const auto r = tally::read_records(rec);
  EXPECT_EQ(r.sample_hash_of, "dataset index, img_id");
  std::uint64_t h = 0xcbf29ce484222325ULL;
  const auto mix = [&](std::uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xFF;
      h *= 0x100000001b3ULL;
    }
  };
  for (std::uint64_t u = 0; u < 50; ++u) {
    mix(u);
    mix(static_cast<std::uint64_t>(ids[u]));
  }
  EXPECT_EQ(r.sample_hash, h);
#ifdef TALLY_MPIEXEC
  const auto rec3 = dir / "ids3.rec";
  run(3, cfg_with("ids.yaml"), rec3);
  EXPECT_EQ(read_file(rec3), read_file(rec));
#endif
  // Other ids (two samples swapped): another hash, the same counts.
  std::swap(ids[3], ids[4]);
  write_npy(dir / "ids.npy", ids);
  const auto rec2 = dir / "ids2.rec";
  run(0, cfg_with("ids.yaml"), rec2);
  const auto r2 = tally::read_records(rec2);
  EXPECT_NE(r2.sample_hash, r.sample_hash);
  EXPECT_EQ(r2.metrics[0].count, r.metrics[0].count);
  // Without an id field: the dataset indices alone.
  const auto rec4 = dir / "plain.rec";
  run(0, config("metrics:\n  - type: Accuracy\n"), rec4);
  const auto r4 = tally::read_records(rec4);
  EXPECT_EQ(r4.sample_hash_of, "dataset index");
  h = 0xcbf29ce484222325ULL;
  for (std::uint64_t u = 0; u < 50; ++u) mix(u);
  EXPECT_EQ(r4.sample_hash, h);
}
