// libFuzzer target: COCO annotations and results JSON read by the real coco_json reader
// plugin (plugins/readers/coco_json): images, categories, annotations, results parsed in blocks
// (also 2 threads), polygons and RLE masks decoded, one image per sample.
// Input format and the checks: fuzz_entry_points.hpp (coco_json). Any input must end in success or
// a tally::Error; a crash, UB, a leak, a huge allocation, a hang or another exception is a finding.
// Run: fuzz/run.sh (fuzz/README.md); crash inputs are kept under
// tests/data/fuzz_regressions/coco_json/.
#include <cstddef>
#include <cstdint>

#include "fuzz_entry_points.hpp"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  tally_fuzz::prepare(tally_fuzz::Target::CocoJson);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tally_fuzz::fuzz_one(tally_fuzz::Target::CocoJson, data, size);
}
