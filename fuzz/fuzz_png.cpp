// libFuzzer target: one PNG file decoded by the real png_masks and images readers
// (plugins/readers/png/png_decode.cpp over libspng); chunk CRCs are fixed up first so that
// mutated headers and chunks reach the decoder.
// Input format and the checks: fuzz_entry_points.hpp (png). Any input must end in success or a
// tally::Error; a crash, UB, a leak, a huge allocation, a hang or another exception is a finding.
// Run: fuzz/run.sh (fuzz/README.md); crash inputs are kept under tests/data/fuzz_regressions/png/.
#include <cstddef>
#include <cstdint>

#include "fuzz_entry_points.hpp"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  tally_fuzz::prepare(tally_fuzz::Target::Png);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tally_fuzz::fuzz_one(tally_fuzz::Target::Png, data, size);
}
