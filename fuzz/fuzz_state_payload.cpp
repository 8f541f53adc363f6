// libFuzzer target: a state payload from another rank (the msgpack bytes of rank 1 in the
// gather of the metric states), unpacked by the evaluator (unpack_bounded in
// engine/src/msgpack_bounds.hpp, the payload checks of sync::run in engine/src/sync.cpp) and
// decoded into the TypedMetric states of the real metric plugins (classification, detection,
// keypoints, language, multi-label, regression, restoration, segmentation, text), which compute
// results from it next to rank 0's own state. Input format and the checks: fuzz_entry_points.hpp
// (state_payload). Any input must end in success or a tally::Error; a crash, UB, a leak, a huge
// allocation, a hang or another exception is a finding. Run: fuzz/run.sh (fuzz/README.md); crash
// inputs are kept under tests/data/fuzz_regressions/state_payload/.
#include <cstddef>
#include <cstdint>

#include "fuzz_entry_points.hpp"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  tally_fuzz::prepare(tally_fuzz::Target::StatePayload);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tally_fuzz::fuzz_one(tally_fuzz::Target::StatePayload, data, size);
}
