// libFuzzer target: a YAML config plus --set overrides through Config::parse
// (engine/src/config.cpp) and what `tally validate` checks short of opening data:
// Evaluator::from_yaml (plugins, metric parameters and inputs) and the reader's parameters.
// Input format and the checks: fuzz_entry_points.hpp (config). Any input must end in success or a
// tally::Error; a crash, UB, a leak, a huge allocation, a hang or another exception is a finding.
// Run: fuzz/run.sh (fuzz/README.md); crash inputs are kept under
// tests/data/fuzz_regressions/config/.
#include <cstddef>
#include <cstdint>

#include "fuzz_entry_points.hpp"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  tally_fuzz::prepare(tally_fuzz::Target::Config);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tally_fuzz::fuzz_one(tally_fuzz::Target::Config, data, size);
}
