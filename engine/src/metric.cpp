#include "tally/sdk/metric.hpp"

#include <string>

#include "tally/sdk/reader.hpp"

namespace tally {

// Key functions: the vtables and type_info of the plugin interfaces live in libtally.
Metric::~Metric() = default;
DecodedStates::~DecodedStates() = default;
Reader::~Reader() = default;
std::string Reader::layout() const { return {}; }
StableBatchReader::~StableBatchReader() = default;

namespace {

/// The default DecodedStates: the bytes themselves (a metric that is not a TypedMetric).
struct KeptBytes final : DecodedStates {
  std::vector<Bytes> units;
};

}  // namespace

std::unique_ptr<DecodedStates> Metric::decode_gathered(std::span<const Bytes> gathered) const {
  auto kept = std::make_unique<KeptBytes>();
  kept->units.assign(gathered.begin(), gathered.end());
  return kept;
}

Value Metric::compute_weighted(const DecodedStates& decoded, std::span<const std::uint32_t> weights,
                               std::span<const std::int64_t> sums) const {
  const auto* kept = dynamic_cast<const KeptBytes*>(&decoded);
  if (kept == nullptr || weights.size() != kept->units.size())
    throw RuntimeError("compute_weighted: not the states this metric decoded, or " +
                       std::to_string(weights.size()) + " weights for them");
  std::vector<Bytes> gathered;
  for (std::size_t u = 0; u < weights.size(); ++u)
    gathered.insert(gathered.end(), weights[u], kept->units[u]);
  return compute_synced(gathered, sums);
}

}  // namespace tally
