// libFuzzer target: an .npy file or an .npz archive read by the real npy reader plugin: the .npy
// preamble and header dict parser and the data-size checks (plugins/readers/npy/npy_file.cpp),
// the .npz member reader over libzip (npz_member.cpp), sharding and batching (npy_reader.cpp),
// every byte of every batch touched.
// Input format and the checks: fuzz_entry_points.hpp (npy). Any input must end in success or a
// tally::Error; a crash, UB, a leak, a huge allocation, a hang or another exception is a finding.
// Run: fuzz/run.sh (fuzz/README.md); crash inputs are kept under tests/data/fuzz_regressions/npy/.
#include <cstddef>
#include <cstdint>

#include "fuzz_entry_points.hpp"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  tally_fuzz::prepare(tally_fuzz::Target::Npy);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tally_fuzz::fuzz_one(tally_fuzz::Target::Npy, data, size);
}
