// Host-callable launchers of the classification kernels (kernels.cu). Plain C++: the callers
// (gpu_metrics.cpp, the benchmarks, the tests) need only the CUDA runtime API header.
//
// Every launcher enqueues its work on `stream` and returns the launch status; results are read
// after the stream is synchronised. Counters are 64-bit and accumulate (+=): the caller zeroes
// them. Checks are reported through Flags rather than by failing: each field holds the smallest
// offending index found (kNone when none), so the caller can word the same error the CPU path
// gives for the first bad value.
//
// Semantics, identical to the CPU metrics (bit for bit for the counts):
//   - a class id is valid when (uint64)(int64)id < limit (a negative id is invalid);
//   - argmax is the first index among the maximal scores (numpy.argmax);
//   - Accuracy's rank of the true class y: #{c : s_c > s_y} + #{c > y : s_c == s_y};
//   - a threshold j passes when !active[j] || score > value[j], compared in the scores' type.
// Work is split so that no block counts more than 2^31 items in one launch: the per-block
// 32-bit shared-memory counters never overflow.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace tally_cuda {

enum class Scalar : std::uint8_t { U8, I8, U16, I16, I32, U32, I64, F32, F64 };

inline constexpr unsigned long long kNone = ~0ull;

/// The first offending index of each check, kNone when none (set them to kNone before a launch).
struct Flags {
  unsigned long long nan_row = kNone;  // scores: the first row holding a NaN
  unsigned long long bad_a = kNone;    // the first invalid class id of the first label tensor
  unsigned long long bad_b = kNone;    // ... of the second (label pairs: gt_labels)
  unsigned long long unused = kNone;
};

/// Scores [rows, cols], C order, F32 or F64, in device memory.
struct Scores {
  const void* data = nullptr;
  Scalar type = Scalar::F32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

/// Class ids [n], any integer type, in device memory; valid ids are < limit.
struct Labels {
  const void* data = nullptr;
  Scalar type = Scalar::I64;
  std::int64_t n = 0;
  unsigned long long limit = 0;
};

/// Thresholds in device memory: `values` in the scores' type, `active` 0 for "no threshold".
struct Thresholds {
  const void* values = nullptr;
  const unsigned char* active = nullptr;
  int count = 0;
};

/// Grid shape; 0 picks a default from the device (the benchmarks sweep `blocks`).
struct Launch {
  int blocks = 0;
  int threads = 0;
};

/// Accuracy: hist[j * (maxk + 1) + min(rank, maxk)] += 1 for each row whose true-class score
/// passes threshold j. Rows with an invalid label are flagged (bad_a) and not counted; rows with a
/// NaN are flagged (nan_row). `hist` holds thresholds.count * (maxk + 1) counters.
cudaError_t accuracy_counts(const Scores& scores, const Labels& labels, std::int64_t maxk,
                            const Thresholds& thrs, Flags* flags, unsigned long long* hist,
                            cudaStream_t stream, const Launch& launch = {});

/// SingleLabelMetric: p = argmax of a row, y its label, C = scores.cols, T = thrs.count.
/// out[y] += 1 (support, C counters); for each threshold j that the max score passes:
/// out[C + j*C + p] += (p == y) (tp, T*C counters), out[C + T*C + j*C + p] += 1 (predicted).
cudaError_t single_label_counts(const Scores& scores, const Labels& labels, const Thresholds& thrs,
                                Flags* flags, unsigned long long* out, cudaStream_t stream,
                                const Launch& launch = {});

/// ConfusionMatrix from scores: counts[y * K + argmax] += 1, K = scores.cols.
cudaError_t confusion_matrix_scores(const Scores& scores, const Labels& labels, Flags* flags,
                                    unsigned long long* counts, cudaStream_t stream,
                                    const Launch& launch = {});

/// What a pair of label tensors (pred, gt) is counted into.
enum class PairMode : std::uint8_t {
  Equal,        // out[0] += (p == y)                                  (Accuracy top-1)
  SingleLabel,  // out[y] += 1, out[K + p] += (p == y), out[2K + p] += 1 (support, tp, predicted)
  Confusion,    // out[y * K + p] += 1                                  (ConfusionMatrix)
};

/// Counts a pair of label tensors of n elements each: per-block shared-memory sub-histograms
/// (32-bit) flushed with 64-bit atomics, consecutive equal pairs of a thread merged first (label
/// maps are mostly runs), 16-byte loads for two aligned uint8 tensors. Invalid ids of pred are
/// flagged in bad_a, of gt in bad_b, and not counted.
cudaError_t label_pair_counts(const Labels& pred, const Labels& gt, PairMode mode, std::int64_t k,
                              Flags* flags, unsigned long long* out, cudaStream_t stream,
                              const Launch& launch = {});

/// The ConfusionMatrix of label maps: label_pair_counts(pred, gt, Confusion, k, ...).
inline cudaError_t confusion_matrix_counts(const Labels& pred, const Labels& gt, std::int64_t k,
                                           Flags* flags, unsigned long long* counts,
                                           cudaStream_t stream, const Launch& launch = {}) {
  return label_pair_counts(pred, gt, PairMode::Confusion, k, flags, counts, stream, launch);
}

/// The checks alone (to find which error comes first when several do): the first row holding a
/// NaN into flags->nan_row; the first invalid id into *first.
cudaError_t find_nan_rows(const Scores& scores, Flags* flags, cudaStream_t stream);
cudaError_t find_bad_ids(const Labels& labels, unsigned long long* first, cudaStream_t stream);

}  // namespace tally_cuda
