// The audio plugin: ScaleInvariantSignalDistortionRatio, ScaleInvariantSignalNoiseRatio,
// SignalDistortionRatio, PermutationInvariantTraining and ShortTimeObjectiveIntelligibility, equal
// to torchmetrics 1.9's classes of those names in float64. Each metric lives in its own file with
// its formula and reference; the kernels they share are in kernels.cpp.
#include <vector>

#include "common.hpp"
#include "tally/sdk/plugin.hpp"

namespace {

std::vector<tally::ComponentInfo> audio_components() {
  using tally::Better;
  using tally::Plot;
  auto si_sdr = tally::audio::si_sdr_info();
  si_sdr.results = {{"scale_invariant_signal_distortion_ratio", Better::Higher, Plot::None,
                     "mean SI-SDR over signals, dB"}};
  auto si_snr = tally::audio::si_snr_info();
  si_snr.results = {{"scale_invariant_signal_noise_ratio", Better::Higher, Plot::None,
                     "mean SI-SNR over signals, dB"}};
  auto sdr = tally::audio::sdr_info();
  sdr.results = {
      {"signal_distortion_ratio", Better::Higher, Plot::None, "mean SDR over signals, dB"}};
  auto pit = tally::audio::pit_info();
  pit.results = {{"permutation_invariant_training", Better::Higher, Plot::None,
                  "mean over samples of the best permutation's metric_func (higher is better for "
                  "the dB metrics with eval_func max)"}};
  auto stoi = tally::audio::stoi_info();
  stoi.results = {{"short_time_objective_intelligibility", Better::Higher, Plot::None,
                   "mean STOI (extended: ESTOI) over signals, about 0..1"}};
  return {std::move(si_sdr), std::move(si_snr), std::move(sdr), std::move(pit), std::move(stoi)};
}

}  // namespace

TALLY_PLUGIN("audio", "0.1.0", audio_components)
