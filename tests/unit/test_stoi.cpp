// ShortTimeObjectiveIntelligibility (plugins/audio/stoi.cpp), loaded as the real
// libtally_audio.so through the Registry: values against torchmetrics / pystoi, independence
// from the number of ranks, and bad inputs.
//
// Expected values come from tests/reference/expected_stoi.json, written by
// tests/reference/stoi.py with torchmetrics 1.9.0 and pystoi 0.4.1 in float64 (the versions and,
// for each value, the exact call are recorded in the file), unless a test says otherwise.
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

constexpr const char* kType = "ShortTimeObjectiveIntelligibility";
constexpr const char* kKey = "short_time_objective_intelligibility";

const Json& expected_file() { return expected_json("tests/reference/expected_stoi.json"); }

// ---- values against torchmetrics, 1..7 ranks --------------------------------------------------

class StoiReference : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_stoi.json (torchmetrics'
// ShortTimeObjectiveIntelligibility(fs, extended) in float64, after np.random.seed(0); the call is
// in the case's "calls" map). extended: pystoi's EPS * standard_normal dither moves its own value
// by the case's "seed_spread" (at most 2e-14 relative on these signals); tally computes the
// dither-free value ("noise_free"), so 1e-9 holds for every case.
TEST_P(StoiReference, MatchesTorchmetricsOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  RankSweep sweep;
  sweep.first_rank_empty_batch_size = 1;
  const Value got =
      run_all_rank_counts(kType, to_map(c.at("params")), load_inputs(c.at("inputs")), {}, sweep);
  expect_matches(got, c.at("expected"), GetParam(), kType);
  print_rel_diffs("torchmetrics");
}

INSTANTIATE_TEST_SUITE_P(Stoi, StoiReference, ::testing::ValuesIn(case_names(expected_file())),
                         param_name);

// ---- the documented example ---------------------------------------------------------------------

Batch pair(std::vector<double> p, std::vector<double> t, std::vector<std::int64_t> shape) {
  Batch b;
  b.set("preds", Tensor::from_vector(p, shape));
  b.set("target", Tensor::from_vector(t, shape));
  return b;
}

// Expected: section "doc_example" of expected_stoi.json (pystoi 0.4.1's stoi(target, preds, 8000,
// extended) on tests/data/audio/stoi_doc_*.npy: two tones gated on/off every 800 samples as
// target, plus an ungated third as preds): 0.9890252472778004, extended 0.8595037602820043.
TEST(Stoi, DocumentedExample) {
  const Json& ex = expected_file().at("doc_example");
  const Batch b = load_inputs(ex.at("inputs"));
  for (const bool extended : {false, true}) {
    const double want = ex.at("expected").at(extended ? "true" : "false").get<double>();
    EXPECT_NEAR(
        run_single(kType, {{"fs", Value(8000L)}, {"extended", extended}}, b).at(kKey).as_double(),
        want, 1e-9 * want);
    EXPECT_NEAR(
        run_single("STOI", {{"fs", Value(8000L)}, {"extended", extended}}, b).at(kKey).as_double(),
        want, 1e-9 * want);
  }
}

// Ragged samples ([T] tensors of different lengths, as the wav reader gives) average per signal,
// and float32 inputs are the float64 values (pystoi computes in float64 either way). Expected:
// the mean of the one-sample results, and the float64 run's bits.
TEST(Stoi, RaggedSamplesAndFloat32) {
  const Json& c = find_case(expected_file(), "STOI_speech8k_extended_False");
  const Batch dense = load_inputs(c.at("inputs"));
  Batch ragged;
  Batch::Ragged p = per_sample(dense.tensor("preds")), t = per_sample(dense.tensor("target"));
  p[2] = p[2].slice(0, 5000).clone();
  t[2] = t[2].slice(0, 5000).clone();
  ragged.set_ragged("preds", p);
  ragged.set_ragged("target", t);
  const Value::Map params = {{"fs", Value(8000L)}};
  const Value got = run_all_rank_counts(kType, params, ragged);
  double sum = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    Batch one;
    for (const auto& [field, x] : {std::pair{"preds", &p[i]}, std::pair{"target", &t[i]}})
      one.set(field, Tensor::view(x->data(), x->dtype(), {1, x->numel()}, Device::cpu(),
                                  std::make_shared<Tensor>(*x)));
    sum += run_single(kType, params, one).at(kKey).as_double();
  }
  EXPECT_NEAR(got.at(kKey).as_double(), sum / static_cast<double>(p.size()), 1e-15);
  // The .npy files are float32: the same numbers as float64 give the same bits.
  Batch f64;
  for (const char* field : {"preds", "target"}) {
    const Tensor x = dense.tensor(field);
    std::vector<double> v(static_cast<std::size_t>(x.numel()));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(x.data_as<float>()[i]);
    f64.set(field, Tensor::from_vector(v, x.shape()));
  }
  EXPECT_EQ(run_single(kType, params, f64).at(kKey).as_double(),
            run_single(kType, params, dense).at(kKey).as_double());
}

// No samples: torchmetrics' compute() divides 0 by 0 (NaN).
TEST(Stoi, NoSamplesIsNaN) {
  const auto m = make_metric(kType, {{"fs", Value(16000L)}});
  EXPECT_TRUE(std::isnan(m->compute_local().at(kKey).as_double()));
}

// Shortest signals: pystoi needs one 256-sample frame at 10 kHz (it raises on shorter ones, at
// np.max of no frame energies); with fewer than 30 STFT frames left it returns 1e-5. Expected:
// 257 samples at 10 kHz are one frame -> 1e-5 (pystoi: stoi(x, y, 10000) = 1e-05 with a warning);
// 256 are none -> an InputError; at 8 kHz, 205 samples are 257 at 10 kHz (ceil(205 * 5 / 4)), 204
// are 255.
TEST(Stoi, ShortestSignals) {
  const auto sig = [](std::int64_t n, double f) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(f * static_cast<double>(i));
    return v;
  };
  EXPECT_EQ(run_single(kType, {{"fs", Value(10000L)}}, pair(sig(257, 0.3), sig(257, 0.2), {1, 257}))
                .at(kKey)
                .as_double(),
            1e-5);
  EXPECT_HAS(
      input_error(kType, {{"fs", Value(10000L)}}, pair(sig(256, 0.3), sig(256, 0.2), {1, 256})),
      "metric 'ShortTimeObjectiveIntelligibility': field 'preds' sample 0: 256 time steps: "
      "STOI needs more than 256 at 10 kHz");
  EXPECT_EQ(run_single(kType, {{"fs", Value(8000L)}}, pair(sig(205, 0.3), sig(205, 0.2), {1, 205}))
                .at(kKey)
                .as_double(),
            1e-5);
  EXPECT_HAS(
      input_error(kType, {{"fs", Value(8000L)}}, pair(sig(204, 0.3), sig(204, 0.2), {1, 204})),
      "sample 0: 204 time steps (255 once resampled to 10 kHz): STOI needs more than 256");
}

// A silent target (exact zeros): every band envelope is zero. Standard STOI is 0
// (expected_stoi.json case STOI_silent_target10k_extended_False, second signal: pystoi gives 0.0).
// Extended: each segment's rows have zero norm; pystoi's EPS * standard_normal dither is all that
// is left, so its value is random; tally's is NaN (0 * 1 / sqrt(0)), and the mean over signals NaN.
TEST(Stoi, SilentTargetExtendedIsNaN) {
  const Json& c = find_case(expected_file(), "STOI_silent_target10k_extended_False");
  const Batch data = load_inputs(c.at("inputs"));
  EXPECT_TRUE(std::isnan(
      run_single(kType, {{"fs", Value(10000L)}, {"extended", true}}, data).at(kKey).as_double()));
}

// ---- bad inputs ---------------------------------------------------------------------------------

TEST(StoiErrors, Parameters) {
  EXPECT_HAS(config_error(kType, {}), "fs");
  EXPECT_HAS(config_error(kType, {{"fs", Value(0L)}}),
             "parameter 'fs' must be the signals' sample rate in Hz (> 0), got 0");
  EXPECT_HAS(config_error(kType, {{"fs", Value(-8000L)}}), "(> 0), got -8000");
  EXPECT_HAS(config_error(kType, {{"fs", "16k"}}), "fs");
  EXPECT_HAS(config_error(kType, {{"fs", Value(std::int64_t{1} << 40)}}),
             "parameter 'fs' must be at most 1048576 Hz");
  // 10000 / 99991 does not reduce: Octave's filter would have 7 million taps.
  EXPECT_HAS(config_error(kType, {{"fs", Value(99991L)}}),
             "parameter 'fs' 99991 Hz: resampling to 10 kHz by 10000 / 99991 needs a filter");
  // Every common rate is accepted.
  for (std::int64_t fs : {8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000, 96000, 192000})
    EXPECT_EQ(config_error(kType, {{"fs", Value(fs)}}), "") << fs;
}

TEST(StoiErrors, ShapesDtypesAndValues) {
  const std::string owner = "metric 'ShortTimeObjectiveIntelligibility'";
  const Value::Map params = {{"fs", Value(8000L)}};
  std::vector<double> v(2 * 600), w(2 * 500);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.3 * static_cast<double>(i));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.2 * static_cast<double>(i));
  Batch mismatch;
  mismatch.set("preds", Tensor::from_vector(v, {2, 600}));
  mismatch.set("target", Tensor::from_vector(w, {2, 500}));
  EXPECT_HAS(input_error(kType, params, mismatch),
             owner + ": field 'preds' sample 0: shape [600] differs from 'target' [500]");
  Batch ragged;
  ragged.set_ragged("preds",
                    {Tensor::from_vector(std::vector<double>(v.begin(), v.begin() + 600), {600})});
  ragged.set_ragged("target",
                    {Tensor::from_vector(std::vector<double>(w.begin(), w.begin() + 500), {500})});
  EXPECT_HAS(input_error(kType, params, ragged),
             owner + ": field 'preds' sample 0: shape [600] differs from 'target' [500]");
  Batch nan = pair(v, v, {2, 600});
  std::vector<double> bad = v;
  bad[700] = std::numeric_limits<double>::quiet_NaN();
  nan.set("target", Tensor::from_vector(bad, {2, 600}));
  EXPECT_HAS(input_error(kType, params, nan),
             owner + ": field 'target' sample 1, time step 100: NaN (audio must be finite)");
  Batch ints;
  ints.set("preds", Tensor::from_vector<std::int64_t>({1, 2, 3, 4}, {1, 4}));
  ints.set("target", Tensor::from_vector<std::int64_t>({1, 2, 3, 4}, {1, 4}));
  EXPECT_HAS(input_error(kType, params, ints),
             owner + ": field 'preds' sample 0: must hold float32 or float64 audio, got i64");
  Batch missing;
  missing.set("preds", Tensor::from_vector(v, {2, 600}));
  EXPECT_HAS(error_of([&] { make_metric(kType, params)->add(missing); }),
             "field 'target' is missing from the batch (it has: preds)");
}

}  // namespace
}  // namespace tally::test
