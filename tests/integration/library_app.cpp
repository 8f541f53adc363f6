// A program that uses tally as a library, as a C++ inference loop would: it builds an Evaluator
// from YAML text, feeds its own batches, and calls compute(). The integration tests run it under
// mpirun.
//
//   tally_library_app PLUGIN_DIR N BACKEND SAMPLER [BATCH]
//     N        dataset size; sample i holds the value 7*i + 3
//     BACKEND  nondist | mpi
//     SAMPLER  blocks     contiguous blocks, as tally's readers shard
//              torch      PyTorch's DistributedSampler (shuffle=False): rank r reads indices
//                         r, r+W, ... of the dataset padded by repeating its head to a multiple of
//                         W; compute(N) must drop the padding
//     BATCH    batch size (default 3)
// Prints the results JSON on rank 0.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tally/evaluator.hpp"
#include "tally/sdk/error.hpp"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s PLUGIN_DIR N BACKEND SAMPLER [BATCH]\n", argv[0]);
    return 2;
  }
  const std::string plugin_dir = argv[1];
  const std::int64_t n = std::atoll(argv[2]);
  const std::string backend = argv[3];
  const std::string sampler = argv[4];
  const std::int64_t batch = argc > 5 ? std::atoll(argv[5]) : 3;
  try {
    tally::EvaluatorOptions options;
    options.padded_sampler = sampler == "torch";  // its shards are padded: say so
    auto ev = tally::Evaluator::from_yaml("backend: {type: " + backend + "}\n" +
                                              "plugins: {paths: ['" + plugin_dir + "']}\n" +
                                              "metrics:\n  - type: SequenceProbe\n",
                                          std::move(options));
    const std::int64_t w = ev.world_size();
    const std::int64_t r = ev.rank();
    std::vector<std::int64_t> mine;
    if (sampler == "torch") {
      const std::int64_t per_rank = (n + w - 1) / w;
      for (std::int64_t k = 0; k < per_rank; ++k) mine.push_back((r + k * w) % n);
    } else {
      for (std::int64_t i = n * r / w; i < n * (r + 1) / w; ++i) mine.push_back(i);
    }
    for (std::size_t b = 0; b < mine.size(); b += static_cast<std::size_t>(batch)) {
      std::vector<std::int64_t> xs;
      for (std::size_t i = b; i < mine.size() && i < b + static_cast<std::size_t>(batch); ++i)
        xs.push_back(7 * mine[i] + 3);
      tally::Batch bt;
      bt.set("x", tally::Tensor::from_vector(xs));
      ev.add(bt);
    }
    const auto results = sampler == "torch" ? ev.compute(n) : ev.compute();
    if (ev.rank() == 0) std::fputs(results.to_json().c_str(), stdout);
    return 0;
  } catch (const tally::Error& e) {
    std::fprintf(stderr, "tally: error: %s\n", e.what());
    return e.exit_code();
  }
}
