// CPU benchmarks of tally's metric hot paths (Google Benchmark), through the real plugins as
// `tally run` loads them, on the data that bench/side_by_side.py writes, so that the reference
// tools (NumPy, mmeval, scikit-learn, scikit-image) and tally time the same bytes in one script.
//
//   tally_bench_metrics --data DIR [--benchmark_format=json ...]
//
// DIR/cases.json lists the cases:
//   [{"name": "accuracy_top5", "metric": "Accuracy", "params": {"topk": [5]},
//     "fields": {"pred_scores": "scores.npy", "gt_labels": "labels.npy"},   // relative to DIR
//     "batch_size": 8192, "units": 200000, "unit": "samples",
//     "value": ["top5"]}]                                 // the result key path to report
// One iteration = a fresh metric, add() of every batch (already read: the .npy files are
// memory-mapped and touched once before timing), compute(). Reported per case: real time,
// units per second, and the metric's value as the counter "value" (the script checks it equals
// the reference tool's). Also `memcpy/<case>`: copying the same input bytes, the memory-bandwidth
// bound that an accumulation which reads its input once cannot beat.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <msgpack.hpp>
#include <nlohmann/json.hpp>

#include "config.hpp"
#include "registry.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/reader.hpp"
#include "tally/sdk/value.hpp"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

tally::Value to_value(const Json& j) {
  switch (j.type()) {
    case Json::value_t::boolean:
      return tally::Value(j.get<bool>());
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return tally::Value(j.get<long long>());
    case Json::value_t::number_float:
      return tally::Value(j.get<double>());
    case Json::value_t::string:
      return tally::Value(j.get<std::string>());
    case Json::value_t::array: {
      tally::Value::Array a;
      for (const auto& e : j) a.push_back(to_value(e));
      return tally::Value(std::move(a));
    }
    case Json::value_t::object: {
      tally::Value::Map m;
      for (const auto& [k, e] : j.items()) m.emplace_back(k, to_value(e));
      return tally::Value(std::move(m));
    }
    default:
      return tally::Value();
  }
}

const tally::Registry& registry() {
  static const tally::Registry r = tally::Registry::load();
  return r;
}

struct Case {
  std::string name;
  std::string metric;
  tally::Params params;
  std::vector<tally::Batch> batches;
  double units = 0;
  std::string unit;
  std::vector<std::string> value_path;
  std::size_t input_bytes = 0;
};

std::shared_ptr<Case> load_case(const Json& c, const fs::path& dir) {
  auto out = std::make_shared<Case>();
  out->name = c.at("name").get<std::string>();
  out->metric = c.at("metric").get<std::string>();
  out->units = c.at("units").get<double>();
  out->unit = c.value("unit", "samples");
  for (const auto& k : c.at("value")) out->value_path.push_back(k.get<std::string>());

  const tally::Component& m = registry().get(tally::ComponentKind::Metric, out->metric);
  out->params = tally::make_params(*m.info, to_value(c.value("params", Json::object())).as_map(),
                                   "metric '" + out->metric + "'");

  // The npy reader, as a config would use it: paths relative to the data folder.
  Json fields = Json::object();
  for (const auto& [k, v] : c.at("fields").items())
    fields[k] = (dir / v.get<std::string>()).string();
  tally::Value::Map reader_params{{"fields", to_value(fields)},
                                  {"batch_size", tally::Value(c.value("batch_size", 8192LL))}};
  const tally::Component& r = registry().get(tally::ComponentKind::Reader, "npy");
  auto reader = tally::Registry::make_reader(r, tally::make_params(*r.info, reader_params, "data"),
                                             tally::ShardInfo{});
  while (auto b = reader->next()) {
    for (const auto& [name, f] : b->fields())
      if (const auto* t = std::get_if<tally::Tensor>(&f)) out->input_bytes += t->nbytes();
    out->batches.push_back(std::move(*b));
  }
  return out;
}

double value_at(const tally::Value& v, const std::vector<std::string>& path) {
  const tally::Value* at = &v;
  for (const auto& k : path) {
    const tally::Value* next = nullptr;
    for (const auto& [key, e] : at->as_map())
      if (key == k) next = &e;
    if (next == nullptr) throw std::runtime_error("no result key " + k + " in " + v.to_json());
    at = next;
  }
  return at->is_int() ? static_cast<double>(at->as_int()) : at->as_double();
}

void run_metric(benchmark::State& st, const std::shared_ptr<Case>& c) {
  const tally::Component& m = registry().get(tally::ComponentKind::Metric, c->metric);
  double value = 0;
  for (auto _ : st) {
    auto metric = tally::Registry::make_metric(m, c->params);
    for (const auto& b : c->batches) metric->add(b);
    // As the engine does in a world of one: compute from the local state.
    const tally::Value result = metric->compute_local();
    value = value_at(result, c->value_path);
    benchmark::DoNotOptimize(value);
  }
  st.counters["value"] = value;
  st.counters[c->unit + "_per_second"] =
      benchmark::Counter(c->units, benchmark::Counter::kIsIterationInvariantRate);
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations()) *
                       static_cast<std::int64_t>(c->input_bytes));
}

void run_memcpy(benchmark::State& st, const std::shared_ptr<Case>& c) {
  std::vector<std::vector<unsigned char>> dst;
  for (const auto& b : c->batches)
    for (const auto& [name, f] : b.fields())
      if (const auto* t = std::get_if<tally::Tensor>(&f)) dst.emplace_back(t->nbytes());
  for (auto _ : st) {
    std::size_t i = 0;
    for (const auto& b : c->batches)
      for (const auto& [name, f] : b.fields())
        if (const auto* t = std::get_if<tally::Tensor>(&f)) {
          std::memcpy(dst[i].data(), t->data(), t->nbytes());
          benchmark::DoNotOptimize(dst[i].data());
          ++i;
        }
    benchmark::ClobberMemory();
  }
  st.counters[c->unit + "_per_second"] =
      benchmark::Counter(c->units, benchmark::Counter::kIsIterationInvariantRate);
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations()) *
                       static_cast<std::int64_t>(c->input_bytes));
}

}  // namespace

int main(int argc, char** argv) {
  fs::path dir;
  std::vector<char*> args{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--data") == 0 && i + 1 < argc)
      dir = argv[++i];
    else
      args.push_back(argv[i]);
  }
  if (dir.empty()) {
    std::fprintf(stderr,
                 "usage: tally_bench_metrics --data DIR [benchmark flags]\n"
                 "  (bench/side_by_side.py writes DIR and runs this)\n");
    return 2;
  }
  try {
    std::ifstream in(dir / "cases.json");
    if (!in) throw std::runtime_error("cannot open " + (dir / "cases.json").string());
    const Json cases = Json::parse(in);
    for (const auto& c : cases) {
      auto loaded = load_case(c, dir);
      benchmark::RegisterBenchmark(("tally/" + loaded->name).c_str(), run_metric, loaded)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(c.value("min_time", 1.0));
      benchmark::RegisterBenchmark(("memcpy/" + loaded->name).c_str(), run_memcpy, loaded)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->MinTime(0.5);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tally_bench_metrics: %s\n", e.what());
    return 2;
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
