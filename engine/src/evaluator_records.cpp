// Evaluator::Impl::gather_records: the per-sample records of every rank to rank 0 after the sync,
// and the bootstrap intervals computed from them there (docs/significance.md).
#include <functional>

#include <fmt/format.h>

#include "evaluator_impl.hpp"
#include "msgpack_bounds.hpp"
#include "tally/records.hpp"

namespace tally {

namespace {

/// Runs `work` on rank 0 alone (it fills a map) and broadcasts its answer: every rank returns the
/// map, or throws the error `work` threw (its exit code and message), on every rank alike. `what`
/// names the step in messages ("computing intervals").
Value on_root_to_all(Collectives& col, const std::string& what,
                     const std::function<void(Value&)>& work) {
  msgpack::sbuffer reply;
  col.run_on_root(0,
                  [&] {
                    Value out = Value::map();
                    out.set("status", 0);
                    try {
                      work(out);
                    } catch (const Error& e) {
                      out = Value::map();
                      out.set("status", e.exit_code());
                      out.set("message", e.what());
                    } catch (const std::exception& e) {
                      out = Value::map();
                      out.set("status", 1);
                      out.set("message", fmt::format("rank 0 failed while {}: {}", what, e.what()));
                    }
                    msgpack::pack(reply, out);
                  },
                  {"rank 0 " + what});
  const auto answer =
      col.broadcast_object(std::as_bytes(std::span(reply.data(), reply.size())), 0, {what});
  Value out;
  try {
    unpack_bounded(answer, /*reference_bins=*/false).get().convert(out);
  } catch (const std::exception& e) {
    throw RuntimeError(fmt::format("rank {} could not read what rank 0 broadcast after {}: {}",
                                   col.rank(), what, e.what()));
  }
  if (const auto code = out.at("status").as_int(); code != 0)
    throw_error(static_cast<int>(code), out.at("message").as_string());
  return out;
}

}  // namespace

void Evaluator::Impl::gather_records(Results& results) {
  auto& col = collectives();
  // Every rank sends its records, also an empty rank; a rank that cannot pack them sends its
  // error as a string, which rank 0 reports to every rank.
  msgpack::sbuffer mine;
  try {
    recorder->pack(mine);
  } catch (const std::exception& e) {
    mine.clear();
    msgpack::pack(mine, fmt::format("rank {}: per-sample records: {}", col.rank(), e.what()));
  }
  const GatheredObjects got =
      col.gather_object(std::as_bytes(std::span(mine.data(), mine.size())), 0, {"records"});

  std::shared_ptr<Records> merged;
  const Value out = on_root_to_all(col, "computing intervals", [&](Value& answer) {
    for (std::size_t r = 0; r < got.size(); ++r) {
      const auto h = unpack_bounded(got[r], /*reference_bins=*/true);
      if (h.get().type == msgpack::type::STR) throw RuntimeError(h.get().as<std::string>());
    }
    merged = std::make_shared<Records>(recorder->merge(got.objects));
    if (static_cast<std::int64_t>(merged->units) != results.run.samples)
      throw RuntimeError(
          fmt::format("per-sample records: {} units recorded, the run counted {} samples",
                      merged->units, results.run.samples));
    if (config.intervals) {
      const auto factory = [this](const std::string& label) -> MetricMaker {
        for (const auto& m : metrics)
          if (m.label == label) {
            const Component* comp = m.component;
            const Params params = m.params;
            return [comp, params] { return Registry::make_metric(*comp, params); };
          }
        throw RuntimeError(fmt::format("intervals: no metric labelled '{}'", label));
      };
      // {settings: {...}, metrics: {label: {key: {low, high, standard_error}}}}: the labels
      // apart from the settings, so that no label can take a setting's name.
      Value settings = Value::map();
      settings.set("confidence", config.intervals->confidence);
      settings.set("method", config.intervals->method);
      settings.set("resamples", static_cast<std::int64_t>(config.intervals->resamples));
      settings.set("seed", static_cast<std::int64_t>(config.intervals->seed));
      Value iv = Value::map();
      iv.set("settings", std::move(settings));
      iv.set("metrics", bootstrap_intervals(*merged, factory, *config.intervals));
      answer.set("intervals", std::move(iv));
    }
  });
  if (const Value* iv = out.find("intervals")) results.intervals = *iv;
  if (col.rank() == 0) results.records = std::move(merged);
}

std::vector<MetricPairedTests> Evaluator::paired_tests(
    const Results& results, const std::filesystem::path& baseline_records,
    const PairedTestSettings& settings) {
  const Value out =
      on_root_to_all(impl_->collectives(), "running the paired tests", [&](Value& answer) {
        if (!results.records)
          throw ConfigError(
              "paired tests need this run's per-sample records: the run kept none (it needs "
              "output.records, intervals or regression.baseline_records)");
        const Records baseline = read_records(baseline_records);
        answer.set("tests", paired_tests_to_value(tally::paired_tests(
                                baseline, *results.records, records_factory(impl_->registry),
                                settings, baseline_records.string(), "this run's records")));
      });
  return paired_tests_from_value(out.at("tests"));
}

}  // namespace tally
