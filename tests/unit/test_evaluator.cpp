// The library API on the non-dist backend: Evaluator from YAML text, add() in the caller's loop,
// compute(). Uses the testkit plugin's SequenceProbe, whose order-sensitive hash proves that every
// sample was seen once, in order.
#include <algorithm>
#include <array>
#include <memory>

#include <gtest/gtest.h>

#include "tally/evaluator.hpp"
#include "tally/sdk/bytes.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/reader.hpp"

using tally::Batch;
using tally::Evaluator;
using tally::Tensor;

namespace {

const std::string kHeader =
    std::string("plugins: {paths: ['") + TALLY_TEST_PLUGIN_DIR + "/testkit']}\n";

Batch batch_of(std::vector<std::int64_t> xs, const std::string& field = "x") {
  Batch b;
  b.set(field, Tensor::from_vector(xs));
  return b;
}

/// An evaluator whose host declares a padded sampler: each rank holds its last sample back.
Evaluator padded(const std::string& yaml) {
  tally::EvaluatorOptions options;
  options.padded_sampler = true;
  return Evaluator::from_yaml(yaml, std::move(options));
}

std::uint64_t expected_hash(std::int64_t n) {
  std::uint64_t h = 0;
  for (std::int64_t i = 0; i < n; ++i) h = h * 1000003 + static_cast<std::uint64_t>(i);
  return h >> 1;
}

}  // namespace

TEST(Evaluator, AccumulatesBatchesInOrder) {
  auto ev = Evaluator::from_yaml(kHeader + "metrics: [{type: SequenceProbe}]\n");
  EXPECT_EQ(ev.rank(), 0);
  EXPECT_EQ(ev.world_size(), 1);
  EXPECT_EQ(ev.backend_name(), "nondist");
  std::int64_t next = 0;
  for (int size : {1, 4, 0, 7, 1, 2}) {
    std::vector<std::int64_t> xs;
    for (int i = 0; i < size; ++i) xs.push_back(next++);
    ev.add(batch_of(xs));
  }
  const auto r = ev.compute();
  const auto& p = r.metrics.at("SequenceProbe");
  EXPECT_EQ(p.at("count").as_int(), next);
  EXPECT_EQ(p.at("sum").as_int(), next * (next - 1) / 2);
  EXPECT_EQ(static_cast<std::uint64_t>(p.at("hash").as_int()), expected_hash(next));
  EXPECT_EQ(p.at("first").as_int(), 0);
  EXPECT_EQ(p.at("last").as_int(), next - 1);
  EXPECT_EQ(r.run.samples, next);
  EXPECT_EQ(r.run.world_size, 1);
  // compute(dataset_size) with the exact size drops nothing.
  EXPECT_EQ(ev.compute(next).metrics.at("SequenceProbe").at("count").as_int(), next);
}

TEST(Evaluator, CallerMayReuseItsBufferAfterAdd) {
  auto ev = padded(kHeader + "metrics: [{type: SequenceProbe}]\n");
  std::vector<std::int64_t> buf{0, 1, 2};
  Batch b;
  b.set("x", Tensor::view(buf.data(), tally::DType::I64, {3}));
  ev.add(b);
  buf = {3, 4, 5};  // the same memory, new values: the held-back sample must not change
  ev.add(b);
  const auto r = ev.compute();
  EXPECT_EQ(static_cast<std::uint64_t>(r.metrics.at("SequenceProbe").at("hash").as_int()),
            expected_hash(6));
}

namespace {

/// Batches of 3 samples of x = 0, 1, 2, ...: a plain reader rewrites one buffer for each batch;
/// a stable one (StableBatchReader) gives views of one tensor that the views keep alive.
class CountingReader : public tally::Reader {
 public:
  explicit CountingReader(std::int64_t n) : n_(n), all_(Tensor::zeros(tally::DType::I64, {n})) {
    for (std::int64_t i = 0; i < n; ++i) all_.mutable_data_as<std::int64_t>()[i] = i;
  }
  std::vector<std::string> fields() const override { return {"x"}; }
  std::int64_t total_samples() const override { return n_; }
  std::int64_t shard_samples() const override { return n_; }
  std::optional<Batch> next() override {
    if (next_ >= n_) return std::nullopt;
    const std::int64_t end = std::min(next_ + 3, n_);
    Batch b;
    if (stable()) {
      b.set("x", all_.slice(next_, end));
    } else {
      for (std::int64_t i = next_; i < end; ++i) buf_[static_cast<std::size_t>(i - next_)] = i;
      b.set("x", Tensor::view(buf_.data(), tally::DType::I64, {end - next_}));
    }
    next_ = end;
    return b;
  }
  virtual bool stable() const { return false; }

 private:
  std::int64_t n_, next_ = 0;
  Tensor all_;
  std::array<std::int64_t, 3> buf_{};
};

class StableCountingReader final : public CountingReader, public tally::StableBatchReader {
 public:
  using CountingReader::CountingReader;
  bool stable() const override { return true; }
};

}  // namespace

// The sample held back at the end of each batch is copied from a plain reader (which rewrites
// its buffer) and kept as a view from a StableBatchReader, whose views outlive it. Expected: the
// order-sensitive hash of 0..9 (SequenceProbe) both ways.
TEST(Evaluator, HeldSamplesOfAStableReaderAreViewsThatOutliveIt) {
  for (const bool stable : {false, true}) {
    auto ev = padded(kHeader + "metrics: [{type: SequenceProbe}]\n");
    {
      std::unique_ptr<tally::Reader> reader;
      if (stable)
        reader = std::make_unique<StableCountingReader>(10);
      else
        reader = std::make_unique<CountingReader>(10);
      ev.read_all(reader.get());
    }  // the reader is gone: the held sample 9 lives in its view (or copy)
    const auto r = ev.compute();
    EXPECT_EQ(static_cast<std::uint64_t>(r.metrics.at("SequenceProbe").at("hash").as_int()),
              expected_hash(10))
        << (stable ? "stable" : "plain");
  }
}

TEST(Evaluator, InputsMapMetricInputsToFields) {
  auto ev = Evaluator::from_yaml(
      kHeader + "metrics: [{type: SequenceProbe, name: probe, inputs: {x: values}}]\n");
  ev.add(batch_of({5, 6}, "values"));
  EXPECT_EQ(ev.compute().metrics.at("probe").at("sum").as_int(), 11);
}

TEST(Evaluator, ErrorInAddIsReportedByCompute) {
  auto ev = Evaluator::from_yaml(kHeader + "metrics: [{type: SequenceProbe, fail_on: 3}]\n");
  ev.add(batch_of({1, 2}));
  // The bad value is in the held-back sample of this batch; it fails when it is applied.
  EXPECT_THROW(ev.add(batch_of({3, 4})), tally::InputError);
  try {
    ev.compute();
    FAIL() << "compute() must fail after add() failed";
  } catch (const tally::InputError& e) {
    EXPECT_STREQ(e.what(),
                 "metric 'SequenceProbe': field 'x' holds the value 3 that fail_on rejects");
  }
}

// With a padded sampler the last sample is held back, so a bad one fails at compute(); without
// one every sample is applied by add(), which fails at once.
TEST(Evaluator, BadLastSampleFailsInComputeWithAPaddedSampler) {
  auto ev = padded(kHeader + "metrics: [{type: SequenceProbe, fail_on: 9}]\n");
  ev.add(batch_of({1, 9}));  // 9 is held back: it is only applied at compute()
  EXPECT_THROW(ev.compute(), tally::InputError);

  auto plain = Evaluator::from_yaml(kHeader + "metrics: [{type: SequenceProbe, fail_on: 9}]\n");
  EXPECT_THROW(plain.add(batch_of({1, 9})), tally::InputError);
  EXPECT_THROW(plain.compute(), tally::InputError);
}

// Without a padded sampler nothing is held back: a batch's samples are in the state as soon as
// add() returns (a world of one computes from it in place). Expected: SequenceProbe over 0..2.
TEST(Evaluator, WithoutAPaddedSamplerEverySampleIsAddedAtOnce) {
  auto ev = Evaluator::from_yaml(kHeader + "metrics: [{type: SequenceProbe}]\n");
  std::vector<std::int64_t> buf{0, 1, 2};
  Batch b;
  b.set("x", Tensor::view(buf.data(), tally::DType::I64, {3}));
  ev.add(b);
  buf = {7, 7, 7};  // already added: changing the buffer changes nothing
  const auto r = ev.compute();
  EXPECT_EQ(r.metrics.at("SequenceProbe").at("last").as_int(), 2);
  EXPECT_EQ(static_cast<std::uint64_t>(r.metrics.at("SequenceProbe").at("hash").as_int()),
            expected_hash(3));
}

TEST(Evaluator, RecordedErrorsFailCompute) {
  auto ev = Evaluator::from_yaml(kHeader + "metrics: [{type: SequenceProbe}]\n");
  ev.record_error(2, "data.npy: truncated");
  EXPECT_THROW(ev.compute(), tally::InputError);
  ev.reset();
  ev.add(batch_of({1}));
  EXPECT_EQ(ev.compute().metrics.at("SequenceProbe").at("count").as_int(), 1);
}

TEST(Evaluator, DatasetSizeThatPaddingCannotExplainIsAnError) {
  auto ev = Evaluator::from_yaml(kHeader + "metrics: [{type: SequenceProbe}]\n");
  ev.add(batch_of({0, 1, 2}));
  try {
    ev.compute(2);  // one rank cannot hold padding
    FAIL();
  } catch (const tally::InputError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "compute(dataset_size=2): the ranks added 3 samples (3 per rank)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ev.compute(4), tally::InputError);
}

TEST(Evaluator, ConfigErrorsNameTheirPlace) {
  const auto error_of = [](const std::string& yaml) -> std::string {
    try {
      Evaluator::from_yaml(yaml, {}, "eval.yaml");
    } catch (const tally::ConfigError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_NE(error_of(kHeader + "metrics:\n  - type: SequenceProbes\n")
                .find("eval.yaml:3:5: unknown metric 'SequenceProbes'"),
            std::string::npos);
  EXPECT_NE(error_of(kHeader + "metrics:\n  - type: SequenceProbe\n    inputs: {y: values}\n")
                .find("unknown input 'y' in inputs (the metric reads x)"),
            std::string::npos);
  // An unknown backend names its place and the backends there are (auto among them).
  const std::string unknown_backend =
      error_of(kHeader + "backend: {type: glooo}\nmetrics: [{type: SequenceProbe}]\n");
  EXPECT_NE(unknown_backend.find("eval.yaml:2:10: unknown backend 'glooo' (known: auto, "),
            std::string::npos)
      << unknown_backend;
  EXPECT_NE(error_of(kHeader).find("no metrics"), std::string::npos);
  EXPECT_NE(error_of(kHeader + "metrics: [{type: SequenceProbe}]\n").find("(no error)"),
            std::string::npos);
}

TEST(Evaluator, NoDataSectionMeansNoReader) {
  auto ev = Evaluator::from_yaml(kHeader + "metrics: [{type: SequenceProbe}]\n");
  EXPECT_THROW(ev.make_reader(), tally::ConfigError);
}

TEST(Evaluator, ResultsJsonFollowsTheContract) {
  auto ev = Evaluator::from_yaml(kHeader + "metrics: [{type: SequenceProbe}]\n");
  ev.add(batch_of({1, 2}));
  const auto json = ev.compute().to_json();
  EXPECT_NE(json.find("\"results\": {\n    \"SequenceProbe\": {"), std::string::npos) << json;
  EXPECT_NE(json.find("\"tally_version\": \"0.1.0\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"backend\": \"nondist\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"samples\": 2"), std::string::npos) << json;
}

// Where an error happened travels in its context, not only in its text (tally::ErrorContext): the
// metric's label, the component whose words start the message, the field or parameter, the place
// in the config.
TEST(Evaluator, ErrorsCarryTheirContext) {
  auto ev =
      Evaluator::from_yaml(kHeader + "metrics: [{type: SequenceProbe, name: probe, fail_on: 3}]\n");
  try {
    ev.add(batch_of({3}));
    FAIL() << "add() must fail";
  } catch (const tally::InputError& e) {
    EXPECT_EQ(e.context().metric, "probe");
    EXPECT_EQ(e.context().rank, -1);
    EXPECT_TRUE(e.context().backend.empty());
    // The testkit words its message without its owner: the engine names the metric, once.
    EXPECT_STREQ(e.what(), "metric 'probe': field 'x' holds the value 3 that fail_on rejects");
  }
  try {
    Evaluator::from_yaml(kHeader + "metrics:\n  - type: SequenceProbes\n", {}, "eval.yaml");
    FAIL() << "an unknown metric must fail";
  } catch (const tally::ConfigError& e) {
    EXPECT_EQ(e.context().file, "eval.yaml:3:5");
    EXPECT_EQ(std::string(e.what()).find("eval.yaml:3:5: "), 0u) << e.what();
  }
}

// A failed add() is recorded with its context: compute() and save_state() report that error again,
// its class, text and context (the metric) as add() threw it.
TEST(Evaluator, AFailedAddIsReportedLaterWithItsContext) {
  auto ev =
      Evaluator::from_yaml(kHeader + "metrics: [{type: SequenceProbe, name: probe, fail_on: 3}]\n");
  EXPECT_THROW(ev.add(batch_of({3})), tally::InputError);
  const auto check = [](const tally::InputError& e) {
    EXPECT_EQ(e.context().metric, "probe");
    EXPECT_STREQ(e.what(), "metric 'probe': field 'x' holds the value 3 that fail_on rejects");
  };
  try {
    (void)ev.save_state();
    FAIL() << "save_state() after a failed add() must fail";
  } catch (const tally::InputError& e) {
    check(e);
  }
  try {
    (void)ev.compute();
    FAIL() << "compute() after a failed add() must fail";
  } catch (const tally::InputError& e) {
    check(e);
    EXPECT_EQ(e.context().rank, 0);  // the rank that failed, as the sync reports it
  }
}

TEST(ErrorContext, RethrowWithKeepsTheClassAndFillsWhatIsMissing) {
  const tally::InputError first("bad", tally::ErrorContext{.owner = "metric 'a'", .field = "x"});
  try {
    tally::rethrow_with(first, {.owner = "other", .metric = "a", .rank = 2}, "metric 'a': bad");
  } catch (const tally::InputError& e) {
    EXPECT_EQ(e.context().owner, "metric 'a'");  // kept: it was set
    EXPECT_EQ(e.context().metric, "a");
    EXPECT_EQ(e.context().field, "x");
    EXPECT_EQ(e.context().rank, 2);
    EXPECT_STREQ(e.what(), "metric 'a': bad");
    EXPECT_EQ(e.exit_code(), 2);
  }
  const tally::Error plain("no context");
  EXPECT_TRUE(plain.context().metric.empty());
  EXPECT_EQ(plain.context().rank, -1);
  const tally::Error copy = first;  // a copy shares the context
  EXPECT_EQ(copy.context().field, "x");
  EXPECT_THROW(tally::rethrow_with(tally::ConfigError("c"), {}, "c"), tally::ConfigError);
  EXPECT_THROW(tally::rethrow_with(tally::RuntimeError("r"), {}, "r"), tally::RuntimeError);
  EXPECT_THROW(tally::rethrow_with(tally::StateFormatError("s"), {}, "s"), tally::StateFormatError);
}

TEST(ErrorContext, CheckersAndParamsNameTheirOwnerAndField) {
  const tally::InputChecker check("metric 'top5' (Accuracy)");
  try {
    check.fail("pred_scores", "must be 2-D");
  } catch (const tally::InputError& e) {
    EXPECT_EQ(e.context().owner, "metric 'top5' (Accuracy)");
    EXPECT_EQ(e.context().field, "pred_scores");
    EXPECT_STREQ(e.what(), "metric 'top5' (Accuracy): field 'pred_scores' must be 2-D");
  }
  EXPECT_THROW(check.fail_runtime("the state is corrupt"), tally::RuntimeError);
  EXPECT_THROW(check.fail_config("k and average do not go together"), tally::ConfigError);
  const tally::Params params("metric 'top5' (Accuracy)", {});
  try {
    params.fail("top_k", "must be >= 1");
  } catch (const tally::ConfigError& e) {
    EXPECT_EQ(e.context().owner, "metric 'top5' (Accuracy)");
    EXPECT_EQ(e.context().field, "top_k");
  }
}
