// Hot loops compiled for more than one instruction set, chosen when the plugin is loaded.
//
// tally (and a plugin built against the SDK) targets baseline x86-64 (SSE2) so that one build runs
// on any x86-64 machine. A function marked TALLY_SIMD_CLONES is compiled twice, for baseline and
// for AVX2 (+FMA off: results stay bitwise identical between the two), and the dynamic loader
// picks the clone the CPU runs (GCC's target_clones, an ifunc): 8 float32 lanes instead of 4 where
// the CPU has them, with no run-time check in the loop.
//
// Mark whole kernels (a loop over a chunk of rows or pixels), not per-element helpers: a clone
// is called through the resolved pointer and is never inlined into its caller. Write the loop so
// the compiler vectorises it (`#pragma omp simd` with -fopenmp-simd, or GCC vector extensions).
//
// Elsewhere (not x86-64, not GCC, Clang, whose target_clones does not take function templates
// -- clang 14 refuses them, and the kernels are templates --, nvcc, or TALLY_NO_SIMD_CLONES
// defined) it expands to nothing and the function is compiled once for the target.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(TALLY_NO_SIMD_CLONES) && !defined(__CUDACC__)
#define TALLY_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TALLY_SIMD_CLONES
#endif
