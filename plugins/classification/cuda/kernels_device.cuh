// The device code of the classification kernels (kernels.cu holds the launchers). A header of
// its own so that tests/gpu/test_kernels_emulated.cpp can run these very functions on the CPU,
// through a small emulation of CUDA's thread model, on machines without a GPU.
//
// Rows of scores: a team of G threads per row (G = 1 for rows of at most 32 classes, else a warp)
// reads the row once, checking for NaN and computing the rank of the true class or the argmax on
// the way; the team's lane 0 then counts the row. Label pairs: each thread takes tiles of 16
// consecutive elements and merges runs of equal (gt, pred) pairs before counting (label maps are
// mostly runs). Counters first go to per-block shared-memory sub-histograms (uint32) flushed
// with 64-bit atomics into the caller's global counters; when a histogram does not fit in shared
// memory, the counts go straight to global memory.
#pragma once

#include "kernels.hpp"

// The block's dynamic shared memory, as 32-bit counters, and a kernel launch: the emulation
// defines its own.
#ifndef TALLY_DYNAMIC_SHARED
#define TALLY_DYNAMIC_SHARED(name) extern __shared__ unsigned int name[]
#endif
#ifndef TALLY_LAUNCH
#define TALLY_LAUNCH(kernel, blocks, threads, shared, stream, ...) \
  kernel<<<blocks, threads, shared, stream>>>(__VA_ARGS__)
#endif

namespace tally_cuda::kernels {

constexpr int kTile = 16;  // label pairs: consecutive elements per thread and step
constexpr long long kNoIndex = 0x7fffffffffffffffll;
constexpr unsigned kFullMask = 0xffffffffu;

// ---- device helpers -------------------------------------------------------------------------

__device__ __forceinline__ long long label_at(const void* p, Scalar t, long long i) {
  switch (t) {
    case Scalar::U8:
      return static_cast<const unsigned char*>(p)[i];
    case Scalar::I8:
      return static_cast<const signed char*>(p)[i];
    case Scalar::U16:
      return static_cast<const unsigned short*>(p)[i];
    case Scalar::I16:
      return static_cast<const short*>(p)[i];
    case Scalar::I32:
      return static_cast<const int*>(p)[i];
    case Scalar::U32:
      return static_cast<const unsigned int*>(p)[i];
    default:
      return static_cast<const long long*>(p)[i];
  }
}

__device__ __forceinline__ bool valid_id(long long id, unsigned long long limit) {
  return static_cast<unsigned long long>(id) < limit;
}

// Counters: the block's shared sub-histogram, or the global counters when it does not fit.
struct Hist {
  unsigned int* shared;
  unsigned long long* global;
  __device__ __forceinline__ void add(long long cell, unsigned int v) const {
    if (shared != nullptr)
      atomicAdd(shared + cell, v);
    else
      atomicAdd(global + cell, static_cast<unsigned long long>(v));
  }
};

__device__ inline Hist begin_hist(unsigned int* sh, bool use_shared, long long cells,
                                  unsigned long long* global) {
  if (use_shared) {
    for (long long c = threadIdx.x; c < cells; c += blockDim.x) sh[c] = 0;
    __syncthreads();
    return Hist{sh, global};
  }
  return Hist{nullptr, global};
}

__device__ inline void end_hist(const Hist& h, long long cells) {
  if (h.shared == nullptr) return;
  __syncthreads();
  for (long long c = threadIdx.x; c < cells; c += blockDim.x) {
    const unsigned int v = h.shared[c];
    if (v != 0) atomicAdd(h.global + c, static_cast<unsigned long long>(v));
  }
}

__device__ __forceinline__ void flag_min(unsigned long long* at, long long i) {
  if (i != kNoIndex) atomicMin(at, static_cast<unsigned long long>(i));
}

template <int G>
__device__ __forceinline__ long long team_sum(long long v) {
#pragma unroll
  for (int off = G / 2; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off);
  return v;
}

template <int G>
__device__ __forceinline__ bool team_any(bool v) {
  if constexpr (G == 1)
    return v;
  else
    return __any_sync(kFullMask, v) != 0;
}

// (value, index) of the first maximum; index kNoIndex: none seen.
template <class T>
__device__ __forceinline__ bool better(T v, long long i, T best_v, long long best_i) {
  return i != kNoIndex && (best_i == kNoIndex || v > best_v || (v == best_v && i < best_i));
}

template <class T, int G>
__device__ __forceinline__ void team_argmax(T& best_v, long long& best_i) {
#pragma unroll
  for (int off = G / 2; off > 0; off >>= 1) {
    const T v = __shfl_xor_sync(kFullMask, best_v, off);
    const long long i = __shfl_xor_sync(kFullMask, best_i, off);
    if (better(v, i, best_v, best_i)) {
      best_v = v;
      best_i = i;
    }
  }
}

__device__ __forceinline__ long long global_thread() {
  return static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ long long grid_threads() {
  return static_cast<long long>(gridDim.x) * blockDim.x;
}

// ---- kernels ----------------------------------------------------------------------------------

template <class T, int G>
__global__ void accuracy_kernel(const T* __restrict__ s, const void* __restrict__ y, Scalar yt,
                                unsigned long long limit, long long cols, long long begin,
                                long long end, long long maxk, const T* __restrict__ thr,
                                const unsigned char* __restrict__ active, int nthr, Flags* flags,
                                unsigned long long* hist, bool use_shared) {
  TALLY_DYNAMIC_SHARED(sh);
  const long long width = maxk + 1;
  const Hist h = begin_hist(sh, use_shared, width * nthr, hist);
  const int lane = static_cast<int>(threadIdx.x) % G;
  const long long teams = grid_threads() / G;
  long long nan_row = kNoIndex, bad_row = kNoIndex;
  for (long long i = begin + global_thread() / G; i < end; i += teams) {
    const T* row = s + i * cols;
    const long long yi = label_at(y, yt, i);
    const bool ok = valid_id(yi, limit);
    const T sy = ok ? row[yi] : T(0);
    long long above = 0;
    bool nan = false;
    for (long long c = lane; c < cols; c += G) {
      const T v = row[c];
      nan |= v != v;
      above += c < yi ? (v > sy) : (c > yi && v >= sy);
    }
    if constexpr (G > 1) above = team_sum<G>(above);
    nan = team_any<G>(nan);
    if (lane != 0) continue;
    if (nan) nan_row = min(nan_row, i);
    if (!ok) bad_row = min(bad_row, i);
    if (nan || !ok) continue;
    const long long rank = min(above, maxk);
    for (int j = 0; j < nthr; ++j)
      if (active[j] == 0 || sy > thr[j]) h.add(j * width + rank, 1u);
  }
  flag_min(&flags->nan_row, nan_row);
  flag_min(&flags->bad_a, bad_row);
  end_hist(h, width * nthr);
}

enum class ArgmaxUse { SingleLabel, Confusion };

template <class T, int G, ArgmaxUse U>
__global__ void argmax_kernel(const T* __restrict__ s, const void* __restrict__ y, Scalar yt,
                              unsigned long long limit, long long cols, long long begin,
                              long long end, const T* __restrict__ thr,
                              const unsigned char* __restrict__ active, int nthr, Flags* flags,
                              unsigned long long* out, bool use_shared) {
  TALLY_DYNAMIC_SHARED(sh);
  const long long cells = U == ArgmaxUse::Confusion ? cols * cols : cols * (1 + 2ll * nthr);
  const Hist h = begin_hist(sh, use_shared, cells, out);
  const int lane = static_cast<int>(threadIdx.x) % G;
  const long long teams = grid_threads() / G;
  long long nan_row = kNoIndex, bad_row = kNoIndex;
  for (long long i = begin + global_thread() / G; i < end; i += teams) {
    const T* row = s + i * cols;
    T best_v = T(0);
    long long best_i = kNoIndex;
    bool nan = false;
    for (long long c = lane; c < cols; c += G) {
      const T v = row[c];
      nan |= v != v;
      if (best_i == kNoIndex || v > best_v) {
        best_v = v;
        best_i = c;
      }
    }
    if constexpr (G > 1) team_argmax<T, G>(best_v, best_i);
    nan = team_any<G>(nan);
    if (lane != 0) continue;
    const long long yi = label_at(y, yt, i);
    const bool ok = valid_id(yi, limit);
    if (nan) nan_row = min(nan_row, i);
    if (!ok) bad_row = min(bad_row, i);
    if (nan || !ok) continue;
    const long long p = best_i;
    if constexpr (U == ArgmaxUse::Confusion) {
      h.add(yi * cols + p, 1u);
    } else {
      h.add(yi, 1u);
      for (int j = 0; j < nthr; ++j) {
        if (active[j] != 0 && !(best_v > thr[j])) continue;
        if (p == yi) h.add(cols + j * cols + p, 1u);
        h.add(cols + static_cast<long long>(nthr) * cols + j * cols + p, 1u);
      }
    }
  }
  flag_min(&flags->nan_row, nan_row);
  flag_min(&flags->bad_a, bad_row);
  end_hist(h, cells);
}

template <PairMode M>
__device__ __forceinline__ void count_pair(const Hist& h, long long k, long long y, long long p,
                                           unsigned int run) {
  if constexpr (M == PairMode::Equal) {
    if (p == y) h.add(0, run);
  } else if constexpr (M == PairMode::SingleLabel) {
    h.add(y, run);
    if (p == y) h.add(k + p, run);
    h.add(2 * k + p, run);
  } else {
    h.add(y * k + p, run);
  }
}

// One thread's run of equal (gt, pred) pairs, counted when the pair changes.
template <PairMode M>
struct Run {
  long long y = -1, p = -1;
  unsigned int n = 0;
  __device__ __forceinline__ void push(const Hist& h, long long k, long long yi, long long pi) {
    if (n != 0 && yi == y && pi == p) {
      ++n;
      return;
    }
    if (n != 0) count_pair<M>(h, k, y, p, n);
    y = yi;
    p = pi;
    n = 1;
  }
  __device__ __forceinline__ void finish(const Hist& h, long long k) {
    if (n != 0) count_pair<M>(h, k, y, p, n);
    n = 0;
  }
};

template <PairMode M>
__device__ long long pair_cells(long long k) {
  return M == PairMode::Equal ? 1 : M == PairMode::SingleLabel ? 3 * k : k * k;
}

template <PairMode M>
__global__ void pair_kernel(const void* __restrict__ pred, Scalar pt, unsigned long long plimit,
                            const void* __restrict__ gt, Scalar gtt, unsigned long long glimit,
                            long long k, long long begin, long long end, Flags* flags,
                            unsigned long long* out, bool use_shared) {
  TALLY_DYNAMIC_SHARED(sh);
  const Hist h = begin_hist(sh, use_shared, pair_cells<M>(k), out);
  long long bad_p = kNoIndex, bad_y = kNoIndex;
  Run<M> run;
  const long long step = grid_threads() * kTile;
  for (long long t0 = begin + global_thread() * kTile; t0 < end; t0 += step) {
    const long long t1 = min(t0 + kTile, end);
    for (long long i = t0; i < t1; ++i) {
      const long long p = label_at(pred, pt, i);
      const long long yi = label_at(gt, gtt, i);
      const bool pv = valid_id(p, plimit);
      const bool yv = valid_id(yi, glimit);
      if (!pv) bad_p = min(bad_p, i);
      if (!yv) bad_y = min(bad_y, i);
      if (pv && yv) run.push(h, k, yi, p);
    }
  }
  run.finish(h, k);
  flag_min(&flags->bad_a, bad_p);
  flag_min(&flags->bad_b, bad_y);
  end_hist(h, pair_cells<M>(k));
}

// Two uint8 tensors, both 16-byte aligned at `begin`: one 16-byte load from each per step.
// [begin, end) is in 16-byte vectors; the caller counts the elements past the last vector.
template <PairMode M>
__global__ void pair_u8_kernel(const uint4* __restrict__ pred, unsigned long long plimit,
                               const uint4* __restrict__ gt, unsigned long long glimit, long long k,
                               long long begin, long long end, Flags* flags,
                               unsigned long long* out, bool use_shared) {
  TALLY_DYNAMIC_SHARED(sh);
  const Hist h = begin_hist(sh, use_shared, pair_cells<M>(k), out);
  long long bad_p = kNoIndex, bad_y = kNoIndex;
  Run<M> run;
  for (long long v = begin + global_thread(); v < end; v += grid_threads()) {
    const uint4 a = pred[v];
    const uint4 b = gt[v];
    const unsigned int pa[4] = {a.x, a.y, a.z, a.w};
    const unsigned int pb[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
      const long long p = (pa[j / 4] >> (8 * (j % 4))) & 0xffu;
      const long long yi = (pb[j / 4] >> (8 * (j % 4))) & 0xffu;
      const bool pv = valid_id(p, plimit);
      const bool yv = valid_id(yi, glimit);
      const long long i = v * kTile + j;
      if (!pv) bad_p = min(bad_p, i);
      if (!yv) bad_y = min(bad_y, i);
      if (pv && yv) run.push(h, k, yi, p);
    }
  }
  run.finish(h, k);
  flag_min(&flags->bad_a, bad_p);
  flag_min(&flags->bad_b, bad_y);
  end_hist(h, pair_cells<M>(k));
}

template <class T, int G>
__global__ void nan_rows_kernel(const T* __restrict__ s, long long rows, long long cols,
                                Flags* flags) {
  const int lane = static_cast<int>(threadIdx.x) % G;
  const long long teams = grid_threads() / G;
  long long first = kNoIndex;
  for (long long i = global_thread() / G; i < rows; i += teams) {
    bool nan = false;
    for (long long c = lane; c < cols; c += G) nan |= s[i * cols + c] != s[i * cols + c];
    if (team_any<G>(nan) && lane == 0) first = min(first, i);
  }
  flag_min(&flags->nan_row, first);
}

__global__ void bad_ids_kernel(const void* __restrict__ ids, Scalar t, long long n,
                               unsigned long long limit, unsigned long long* first) {
  long long mine = kNoIndex;
  for (long long i = global_thread(); i < n; i += grid_threads())
    if (!valid_id(label_at(ids, t, i), limit)) mine = min(mine, i);
  flag_min(first, mine);
}

}  // namespace tally_cuda::kernels
