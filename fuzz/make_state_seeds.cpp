// Writes the seeds of the state_payload corpus: for each example config (kStateExamples), rank
// 0's real state payload after its first batch (4 samples, and 2 batches of 2), prefixed with
// the example's index byte. Usage: make_state_seeds OUTDIR [EXAMPLE...]
// (fuzz/corpus/state_payload; default every example).
#include <cstdio>
#include <exception>
#include <string>

#include <fmt/format.h>

#include "fuzz_entry_points.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: make_state_seeds OUTDIR [EXAMPLE...]\n");
    return 2;
  }
  const tally_fuzz::fs::path out = argv[1];
  tally_fuzz::fs::create_directories(out);
  try {
    for (std::size_t i = 0; i < tally_fuzz::kStateExamples.size(); ++i) {
      bool wanted = argc == 2;
      for (int a = 2; a < argc; ++a)
        wanted = wanted || tally_fuzz::kStateExamples[i] == std::string(argv[a]);
      if (!wanted) continue;
      // 4 samples in one batch, and 6 in two batches of 3 (the same samples in other batches
      // give the same state, bit for bit).
      for (const auto& [batch_size, batches] : {std::pair{4, 1}, std::pair{3, 2}}) {
        const std::string payload = tally_fuzz::capture_state_payload(i, batch_size, batches);
        std::string seed(1, static_cast<char>(i));
        seed += payload;
        const auto file =
            out / fmt::format("{}_{}x{}", tally_fuzz::kStateExamples[i], batches, batch_size);
        tally_fuzz::write_file(file, seed);
        fmt::print("{}: {} bytes\n", file.string(), seed.size());
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "make_state_seeds: {}\n", e.what());
    return 1;
  }
  return 0;
}
