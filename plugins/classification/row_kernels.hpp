// The per-row passes over [N, C] score matrices that Accuracy, SingleLabelMetric and
// ConfusionMatrix run: one read of each score, the NaN check folded into the same pass, in
// vector registers (GCC vector extensions), compiled for baseline x86-64 and for AVX2
// (TALLY_SIMD_CLONES, row_kernels.cpp). The scores are read once: a separate NaN pass would
// read a batch of 8192 x 1000 float32 (32 MB, more than the caches hold) twice from memory.
#pragma once

#include <cstdint>

namespace tally::classification {

/// For each row i in [0, rows): ranks[i] = min(cap, #{c : s_c > s_y} + #{c > y : s_c == s_y}),
/// with y = y[i] in [0, cols) (checked before), the rank of the true class in scikit-learn's
/// top_k_accuracy_score order. Returns the first row holding a NaN, or -1 (then the ranks of
/// that row and the following ones are unspecified).
template <class T>
std::int64_t true_class_ranks(const T* s, std::int64_t rows, std::int64_t cols,
                              const std::int64_t* y, std::int32_t cap, std::int32_t* ranks);

/// For each row i in [0, rows): out[i] = the index of its largest score, the first among equal
/// ones (numpy.argmax). cols >= 1. Returns the first row holding a NaN, or -1 (then out[] of that
/// row and the following ones is unspecified).
template <class T>
std::int64_t row_argmax(const T* s, std::int64_t rows, std::int64_t cols, std::int64_t* out);

}  // namespace tally::classification
