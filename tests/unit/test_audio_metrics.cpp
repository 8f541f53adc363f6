// The audio plugin (plugins/audio), loaded as the real libtally_audio.so through the Registry:
// values against torchmetrics, independence from the number of ranks, and bad inputs.
//
// Expected values come from tests/reference/expected_audio.json, written by
// tests/reference/audio.py with torchmetrics 1.9.0 in float64 (the versions and, for each value,
// the exact torchmetrics call are recorded in the file), unless a test says otherwise.
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"
#include "tally/sdk/error.hpp"

namespace tally::test {
namespace {

const Json& expected_file() { return expected_json("tests/reference/expected_audio.json"); }

/// SDR solves an L x L system per signal: fewer batchings than the default sweep keep the
/// sanitizer build fast (every rank count and the empty ranks are still run).
RankSweep sweep_for(const Json& c) {
  RankSweep s;
  const std::string m = c.at("metric").get<std::string>();
  const bool sdr = m == "SignalDistortionRatio" ||
                   c.at("params").value("metric_func", "") == "signal_distortion_ratio";
  if (sdr) {
    s.batch_sizes = {std::int64_t{1} << 30, 1};
  } else {
    s.first_rank_empty_batch_size = 1;
  }
  return s;
}

// ---- values against torchmetrics, 1..7 ranks --------------------------------------------------

class AudioReference : public ::testing::TestWithParam<std::string> {};

// Expected: the case's "expected" map in expected_audio.json (the torchmetrics call for each key
// is in the case's "calls" map).
//
// A case's "tolerance" (default 1e-9 relative) is looser only for SDR with use_cg_iter:
// fast-bss-eval's conjugate gradient amplifies rounding (its clamps at 1e-6 break the iteration's
// orthogonality), so its own result moves when its correlations change by rounding; audio.py
// measures that move (the same call fed correlations summed directly instead of by FFT) and
// records 10 times it.
TEST_P(AudioReference, MatchesTorchmetricsOnAnyNumberOfRanks) {
  const Json& c = find_case(expected_file(), GetParam());
  const std::string type = c.at("metric").get<std::string>();
  const Value got = run_all_rank_counts(type, to_map(c.at("params")), load_inputs(c.at("inputs")),
                                        {}, sweep_for(c));
  expect_matches(got, c.at("expected"), GetParam(), type, c.value("tolerance", 1e-9));
  print_rel_diffs("torchmetrics");
}

INSTANTIATE_TEST_SUITE_P(Audio, AudioReference, ::testing::ValuesIn(case_names(expected_file())),
                         param_name);

// ---- documented examples ------------------------------------------------------------------------

Batch pair(std::vector<double> p, std::vector<double> t, std::vector<std::int64_t> shape) {
  Batch b;
  b.set("preds", Tensor::from_vector(p, shape));
  b.set("target", Tensor::from_vector(t, shape));
  return b;
}

// Expected: torchmetrics 1.9.0's docstring examples, and the same calls in float64 for their
// full digits: scale_invariant_signal_distortion_ratio -> 18.40299157132488,
// scale_invariant_signal_noise_ratio -> 15.091756165757422, signal_distortion_ratio(...,
// filter_length=2) -> 19.23153878637855, permutation_invariant_training(...,
// scale_invariant_signal_distortion_ratio) -> -5.109104534948086.
TEST(Audio, TorchmetricsDocstringExamples) {
  const Batch b = pair({2.5, 0, 2, 8}, {3, -0.5, 2, 7}, {1, 4});
  EXPECT_NEAR(run_single("ScaleInvariantSignalDistortionRatio", {}, b)
                  .at("scale_invariant_signal_distortion_ratio")
                  .as_double(),
              18.40299157132488, 1e-12);
  EXPECT_NEAR(run_single("ScaleInvariantSignalNoiseRatio", {}, b)
                  .at("scale_invariant_signal_noise_ratio")
                  .as_double(),
              15.091756165757422, 1e-12);
  EXPECT_NEAR(run_single("SignalDistortionRatio", {{"filter_length", Value(2L)}},
                         pair({1, 2, 3, 5}, {1, 2, 3, 4}, {1, 4}))
                  .at("signal_distortion_ratio")
                  .as_double(),
              19.23153878637855, 1e-12);
  const Batch spk = pair({-0.0579, 0.3560, -0.9604, -0.1719, 0.3205, 0.2951},
                         {1.0958, -0.1648, 0.5228, -0.4100, 1.1942, -0.5103}, {1, 2, 3});
  EXPECT_NEAR(run_single("PermutationInvariantTraining",
                         {{"metric_func", "scale_invariant_signal_distortion_ratio"}}, spk)
                  .at("permutation_invariant_training")
                  .as_double(),
              -5.109104534948086, 1e-12);
  // The aliases.
  EXPECT_NEAR(run_single("SI_SDR", {}, b).at("scale_invariant_signal_distortion_ratio").as_double(),
              18.40299157132488, 1e-12);
}

// Ragged samples ([T] tensors of different lengths, as the wav reader gives) average per signal,
// as the dense rows do. Expected: the mean of the one-sample results (each checked above or by
// the reference cases), computed here.
TEST(Audio, RaggedSamplesOfDifferentLengths) {
  const Json& c = find_case(expected_file(), "SISDR_speech8k_zero_mean_False");
  const Batch dense = load_inputs(c.at("inputs"));
  Batch ragged;
  Batch::Ragged p = per_sample(dense.tensor("preds")), t = per_sample(dense.tensor("target"));
  // Cut sample 1 short: a sample of another length.
  p[1] = p[1].slice(0, 1000).clone();
  t[1] = t[1].slice(0, 1000).clone();
  ragged.set_ragged("preds", p);
  ragged.set_ragged("target", t);
  const Value got = run_all_rank_counts("ScaleInvariantSignalDistortionRatio", {}, ragged);
  double sum = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    Batch one;
    for (const auto& [field, x] : {std::pair{"preds", &p[i]}, std::pair{"target", &t[i]}})
      one.set(field, Tensor::view(x->data(), x->dtype(), {1, x->numel()}, Device::cpu(),
                                  std::make_shared<Tensor>(*x)));
    sum += run_single("ScaleInvariantSignalDistortionRatio", {}, one)
               .at("scale_invariant_signal_distortion_ratio")
               .as_double();
  }
  EXPECT_NEAR(got.at("scale_invariant_signal_distortion_ratio").as_double(),
              sum / static_cast<double>(p.size()), 1e-12);
}

// No samples: torchmetrics' compute() divides 0 by 0 (NaN).
TEST(Audio, NoSamplesIsNaN) {
  for (const char* type : {"ScaleInvariantSignalDistortionRatio", "SignalDistortionRatio"}) {
    const auto m = make_metric(type, {});
    const Value v = m->compute_local();
    EXPECT_TRUE(std::isnan(v.as_map().front().second.as_double())) << type;
  }
}

// The state does not grow with the data: one exact accumulator and five counts.
TEST(Audio, StateStaysSmall) {
  const Json& c = find_case(expected_file(), "SISDR_speech8k_zero_mean_False");
  const Batch data = load_inputs(c.at("inputs"));
  const auto m = make_metric("ScaleInvariantSignalDistortionRatio", {});
  m->add(data);
  EXPECT_LT(pack_state(*m).size(), 600u);
}

// ---- bad inputs ---------------------------------------------------------------------------------

const std::vector<std::string>& all_types() {
  static const std::vector<std::string> t = {
      "ScaleInvariantSignalDistortionRatio", "ScaleInvariantSignalNoiseRatio",
      "SignalDistortionRatio", "PermutationInvariantTraining"};
  return t;
}

Value::Map params_for(const std::string& type) {
  if (type == "PermutationInvariantTraining")
    return {{"metric_func", "scale_invariant_signal_distortion_ratio"}};
  return {};
}

TEST(AudioErrors, ShapesDtypesAndValues) {
  for (const auto& type : all_types()) {
    const auto params = params_for(type);
    const std::string owner = "metric '" + type + "'";
    std::vector<double> v(24, 0.5);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.3 * static_cast<double>(i));
    Batch mismatch;
    mismatch.set("preds", Tensor::from_vector(v, {2, 2, 6}));
    mismatch.set("target", Tensor::from_vector(v, {2, 3, 4}));
    EXPECT_HAS(error_of([&] { make_metric(type, params)->add(mismatch); }),
               owner + ": field 'preds' sample 0: shape [2, 6] differs from 'target' [3, 4]");
    Batch nan = pair(v, v, {2, 2, 6});
    std::vector<double> w = v;
    w[19] = std::numeric_limits<double>::quiet_NaN();
    nan.set("target", Tensor::from_vector(w, {2, 2, 6}));
    EXPECT_HAS(error_of([&] { make_metric(type, params)->add(nan); }),
               owner + ": field 'target' sample 1, time step 1: NaN (audio must be finite)");
    w[19] = std::numeric_limits<double>::infinity();
    nan.set("target", Tensor::from_vector(w, {2, 2, 6}));
    EXPECT_HAS(error_of([&] { make_metric(type, params)->add(nan); }),
               owner + ": field 'target' sample 1, time step 1: infinity");
    Batch ints;
    ints.set("preds", Tensor::from_vector<std::int64_t>({1, 2, 3, 4}, {1, 2, 2}));
    ints.set("target", Tensor::from_vector<std::int64_t>({1, 2, 3, 4}, {1, 2, 2}));
    EXPECT_HAS(error_of([&] { make_metric(type, params)->add(ints); }),
               owner + ": field 'preds' sample 0: must hold float32 or float64 audio, got i64");
    Batch missing;
    missing.set("preds", Tensor::from_vector(v, {2, 2, 6}));
    EXPECT_HAS(error_of([&] { make_metric(type, params)->add(missing); }),
               "field 'target' is missing from the batch (it has: preds)");
    Batch empty_time = pair({}, {}, {2, 2, 0});
    EXPECT_HAS(error_of([&] { make_metric(type, params)->add(empty_time); }),
               owner + ": field 'preds' sample 0: has no time steps");
  }
  // 1-D fields: no time axis per sample.
  Batch flat = pair({1, 2, 3}, {1, 2, 3}, {3});
  EXPECT_HAS(error_of([&] { make_metric("ScaleInvariantSignalDistortionRatio", {})->add(flat); }),
             "field 'preds' sample 0: must be [T] (a [N, T] or [N, S, T] field), got f64[]");
  // PIT needs speakers: [N, T] is one signal a sample.
  Batch single = pair({1, 2, 3, 4}, {1, 2, 3, 4}, {2, 2});
  EXPECT_HAS(error_of([&] {
               make_metric("PermutationInvariantTraining",
                           params_for("PermutationInvariantTraining"))
                   ->add(single);
             }),
             "metric 'PermutationInvariantTraining': field 'preds' sample 0: must be [S, T] "
             "(a [N, S, T] field: speakers, time), got f64[2]");
}

// Expected: torchmetrics' torch.linalg.solve raises for a silent target (a zero Toeplitz matrix).
// With load_diag it is defined: R = load_diag I and b = 0 give coh = 0, 10 log10(0) = -inf (by
// hand; torchmetrics gives the same).
TEST(AudioErrors, SilentTargetSdr) {
  Batch b = pair({0.1, 0.2, -0.3, 0.4, 0.1, -0.2}, {0, 0, 0, 0, 0, 0}, {1, 6});
  EXPECT_HAS(error_of([&] { make_metric("SignalDistortionRatio", {})->add(b); }),
             "metric 'SignalDistortionRatio': field 'target' sample 0: the Toeplitz system is "
             "singular (a silent target; torchmetrics' torch.linalg.solve raises): set load_diag");
  const Value v = run_single("SignalDistortionRatio", {{"load_diag", Value(1e-3)}}, b);
  EXPECT_EQ(v.at("signal_distortion_ratio").as_double(), -std::numeric_limits<double>::infinity());
}

TEST(AudioErrors, BadParameters) {
  EXPECT_HAS(config_error("SignalDistortionRatio", {{"filter_length", Value(0L)}}),
             "parameter 'filter_length' must be >= 1, got 0");
  EXPECT_HAS(config_error("SignalDistortionRatio", {{"filter_length", Value(100000L)}}),
             "parameter 'filter_length' must be at most 4096");
  EXPECT_HAS(config_error("SignalDistortionRatio", {{"use_cg_iter", Value(0L)}}),
             "parameter 'use_cg_iter' must be >= 1, got 0");
  EXPECT_HAS(config_error("PermutationInvariantTraining", {}), "metric_func");
  EXPECT_HAS(config_error("PermutationInvariantTraining", {{"metric_func", "sdr"}}),
             "must be one of scale_invariant_signal_distortion_ratio");
  EXPECT_HAS(
      config_error("PermutationInvariantTraining",
                   {{"metric_func", "scale_invariant_signal_noise_ratio"}, {"zero_mean", true}}),
      "parameter 'zero_mean' is not a parameter of scale_invariant_signal_noise_ratio");
  EXPECT_HAS(config_error("PermutationInvariantTraining",
                          {{"metric_func", "scale_invariant_signal_distortion_ratio"},
                           {"filter_length", Value(64L)}}),
             "parameter 'filter_length' is a parameter of signal_distortion_ratio only");
  EXPECT_HAS(
      config_error("PermutationInvariantTraining",
                   {{"metric_func", "scale_invariant_signal_distortion_ratio"}, {"mode", "all"}}),
      "must be one of speaker-wise, permutation-wise");
}

// Permutation-wise search is bounded: 9 speakers would be 362880 permutations a sample.
TEST(AudioErrors, TooManySpeakersForPermutationWise) {
  std::vector<double> v(9 * 4);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.7 * static_cast<double>(i));
  const Batch b = pair(v, v, {1, 9, 4});
  EXPECT_HAS(error_of([&] {
               make_metric("PermutationInvariantTraining",
                           {{"metric_func", "scale_invariant_signal_distortion_ratio"},
                            {"mode", "permutation-wise"}})
                   ->add(b);
             }),
             "field 'preds' sample 0: has 9 speakers: mode permutation-wise tries all S! "
             "permutations, at most 8");
  // speaker-wise handles them (Hungarian): the identity assignment is the best for equal
  // signals. Expected, by hand: each speaker against itself gives 10 log10((|t|^2 + eps) / eps).
  const Value ok = run_single("PermutationInvariantTraining",
                              {{"metric_func", "scale_invariant_signal_distortion_ratio"}}, b);
  EXPECT_GT(ok.at("permutation_invariant_training").as_double(), 100.0);
}

}  // namespace
}  // namespace tally::test
