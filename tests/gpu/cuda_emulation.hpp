// A CPU emulation of the few parts of CUDA's execution model that the classification kernels use
// (plugins/classification/cuda/kernels_device.cuh), so that the kernels' own code runs on a
// machine without a GPU: every thread of a block is an std::thread; __syncthreads is a barrier
// of the block; a warp's shuffles and votes exchange values through slots and a barrier of its 32
// lanes; atomics are std::atomic_ref operations; dynamic shared memory is a per-block buffer.
// Blocks run one after another. Slow, and only as faithful as the kernels' use of these pieces
// (whole warps, every lane of a warp calling the same shuffles): enough to check their logic.
//
// Include it before kernels_device.cuh (or kernels.cu), and in no file compiled by nvcc.
#pragma once

#include <cuda_runtime.h>  // the vector types (uint4, dim3) and the C++ API templates

#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#undef __global__
#define __global__
#undef __device__
#define __device__
#undef __forceinline__
#define __forceinline__ inline
#define TALLY_DYNAMIC_SHARED(name) unsigned int* name = ::cuda_emulation::current.shared
#define TALLY_LAUNCH(kernel, blocks, threads, shared, stream, ...)                          \
  do {                                                                                      \
    (void)(stream); /* work runs at once: every stream is synchronous */                    \
    ::cuda_emulation::launch(static_cast<unsigned>(blocks), static_cast<unsigned>(threads), \
                             shared, [&] { kernel(__VA_ARGS__); });                         \
  } while (0)

namespace cuda_emulation {

struct Thread {
  std::barrier<>* block = nullptr;
  std::barrier<>* warp = nullptr;
  std::uint64_t* slots = nullptr;  // the warp's 32 exchange slots
  unsigned int* shared = nullptr;
  unsigned lane = 0;
};
inline thread_local Thread current;

}  // namespace cuda_emulation

// The built-in variables.
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;

inline void __syncthreads() { cuda_emulation::current.block->arrive_and_wait(); }

inline unsigned int atomicAdd(unsigned int* p, unsigned int v) {
  return std::atomic_ref<unsigned int>(*p).fetch_add(v);
}
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return std::atomic_ref<unsigned long long>(*p).fetch_add(v);
}
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  std::atomic_ref<unsigned long long> r(*p);
  unsigned long long old = r.load();
  while (v < old && !r.compare_exchange_weak(old, v)) {
  }
  return old;
}

inline long long min(long long a, long long b) { return a < b ? a : b; }

template <class T>
T __shfl_xor_sync(unsigned /*mask*/, T v, int lane_mask) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8);
  auto& t = cuda_emulation::current;
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  t.slots[t.lane] = bits;
  t.warp->arrive_and_wait();
  bits = t.slots[t.lane ^ static_cast<unsigned>(lane_mask)];
  t.warp->arrive_and_wait();  // every lane has read before the slots are reused
  T out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

inline int __any_sync(unsigned /*mask*/, int predicate) {
  auto& t = cuda_emulation::current;
  t.slots[t.lane] = predicate != 0;
  t.warp->arrive_and_wait();
  int any = 0;
  for (int l = 0; l < 32; ++l) any |= t.slots[l] != 0;
  t.warp->arrive_and_wait();
  return any;
}

namespace cuda_emulation {

/// Runs `kernel()` as a grid of `blocks` x `threads` (a multiple of 32) with `shared_bytes` of
/// dynamic shared memory.
template <class F>
void launch(unsigned blocks, unsigned threads, std::size_t shared_bytes, F&& kernel) {
  gridDim = dim3(blocks);
  blockDim = dim3(threads);
  const unsigned warps = (threads + 31) / 32;
  for (unsigned b = 0; b < blocks; ++b) {
    std::vector<unsigned int> shared(shared_bytes / sizeof(unsigned int) + 1, 0xdeadbeefu);
    std::barrier<> block_barrier(threads);
    std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
    for (unsigned w = 0; w < warps; ++w)
      warp_barriers.push_back(std::make_unique<std::barrier<>>(32));
    std::vector<std::uint64_t> slots(warps * 32, 0);
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        threadIdx = uint3{t, 0, 0};
        blockIdx = uint3{b, 0, 0};
        current = Thread{&block_barrier, warp_barriers[t / 32].get(), slots.data() + (t / 32) * 32,
                         shared.data(), t % 32};
        kernel();
      });
    }
    for (auto& th : pool) th.join();
  }
}

}  // namespace cuda_emulation
