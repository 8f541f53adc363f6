// libFuzzer target: a JSON Lines file read by the real jsonl reader plugin
// (plugins/readers/jsonl): line indexing, per-line simdjson parsing, field lookup by dotted key,
// kind and shape inference over the whole file, batches of text, bool and numeric fields.
// Input format and the checks: fuzz_entry_points.hpp (jsonl). Any input must end in success or a
// tally::Error; a crash, UB, a leak, a huge allocation, a hang or another exception is a finding.
// Run: fuzz/run.sh (fuzz/README.md); crash inputs are kept under
// tests/data/fuzz_regressions/jsonl/.
#include <cstddef>
#include <cstdint>

#include "fuzz_entry_points.hpp"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  tally_fuzz::prepare(tally_fuzz::Target::Jsonl);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tally_fuzz::fuzz_one(tally_fuzz::Target::Jsonl, data, size);
}
