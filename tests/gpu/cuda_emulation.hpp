// A CPU emulation of the few parts of CUDA's execution model that the classification kernels use
// (plugins/classification/cuda/kernels_device.cuh), so that the kernels' own code runs on a
// machine without a GPU. Every thread of a block is a fiber (ucontext) on the calling OS thread,
// run one at a time by a small scheduler: __syncthreads parks a fiber until every thread of the
// block has arrived; a warp's shuffles and votes exchange values through slots and park until
// its 32 lanes have arrived; atomics are std::atomic_ref operations; dynamic shared memory is a
// per-block buffer. Blocks run one after another. Fibers instead of OS threads (as before) make
// a __syncthreads a few function calls rather than a wake-up of every thread: about 30x less
// time for the emulated GPU tests, and the same interleaving on every run. Only as faithful as
// the kernels' use of these pieces (whole warps, every lane of a warp calling the same shuffles,
// every thread of a block reaching the same __syncthreads): a block whose threads wait on a
// barrier some never reach is reported and aborts, where a GPU would hang.
//
// Include it before kernels_device.cuh (or kernels.cu), and in no file compiled by nvcc.
#pragma once

#include <cuda_runtime.h>  // the vector types (uint4, dim3) and the C++ API templates

#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

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

/// What a fiber is doing: runnable, parked at its warp's barrier or the block's, or finished.
enum class State : unsigned char { Ready, AtWarp, AtBlock, Done };

struct Fiber {
  ucontext_t ctx{};
  char* stack = nullptr;  // kFiberStack bytes from stack_pool
  State state = State::Ready;
};

inline constexpr std::size_t kFiberStack = 256 * 1024;
/// Fiber stacks, kept for the next launch on this OS thread (uninitialised: pages are touched
/// only as deep as the kernels go).
inline thread_local std::vector<std::unique_ptr<char[]>> stack_pool;

/// The block being run on this OS thread, and the fiber of it running now.
struct Block {
  ucontext_t scheduler{};
  std::vector<Fiber> fibers;
  Fiber* running = nullptr;
  void (*body)(void*) = nullptr;  // runs the kernel (a type-erased call of launch's functor)
  void* kernel = nullptr;
#if defined(__SANITIZE_ADDRESS__)
  const void* scheduler_stack = nullptr;  // the OS thread's stack, for ASan's fiber switches
  std::size_t scheduler_stack_size = 0;
#endif
};

/// The running thread's view: its warp's 32 exchange slots, the block's shared memory, its lane.
struct Thread {
  std::uint64_t* slots = nullptr;
  unsigned int* shared = nullptr;
  unsigned lane = 0;
};
inline thread_local Thread current;
inline thread_local Block* block = nullptr;

/// Parks the running fiber in `state` and returns to the scheduler; returns when released.
[[gnu::noinline]] inline void park(State state) {
  Block& b = *block;
  Fiber& f = *b.running;
  f.state = state;
#if defined(__SANITIZE_ADDRESS__)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, b.scheduler_stack, b.scheduler_stack_size);
  swapcontext(&f.ctx, &b.scheduler);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  swapcontext(&f.ctx, &b.scheduler);
#endif
}

}  // namespace cuda_emulation

// The built-in variables.
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;

inline void __syncthreads() { cuda_emulation::park(cuda_emulation::State::AtBlock); }

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
  cuda_emulation::park(cuda_emulation::State::AtWarp);
  bits = t.slots[t.lane ^ static_cast<unsigned>(lane_mask)];
  // Every lane has read before the slots are reused.
  cuda_emulation::park(cuda_emulation::State::AtWarp);
  T out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

inline int __any_sync(unsigned /*mask*/, int predicate) {
  auto& t = cuda_emulation::current;
  t.slots[t.lane] = predicate != 0;
  cuda_emulation::park(cuda_emulation::State::AtWarp);
  int any = 0;
  for (int l = 0; l < 32; ++l) any |= t.slots[l] != 0;
  cuda_emulation::park(cuda_emulation::State::AtWarp);
  return any;
}

namespace cuda_emulation {

/// A fiber's first frame: runs the kernel for the thread it was started as, then finishes.
inline void fiber_main() {
  Block& b = *block;
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(nullptr, &b.scheduler_stack, &b.scheduler_stack_size);
#endif
  b.body(b.kernel);
  b.running->state = State::Done;
#if defined(__SANITIZE_ADDRESS__)
  // This fiber's stack dies: no fake stack to keep.
  __sanitizer_start_switch_fiber(nullptr, b.scheduler_stack, b.scheduler_stack_size);
#endif
  // Returning resumes uc_link, the scheduler.
}

[[noreturn]] inline void deadlock(unsigned b, const Block& blk) {
  unsigned at_warp = 0, at_block = 0, done = 0;
  for (const Fiber& f : blk.fibers) {
    at_warp += f.state == State::AtWarp;
    at_block += f.state == State::AtBlock;
    done += f.state == State::Done;
  }
  std::fprintf(stderr,
               "cuda_emulation: block %u deadlocks: %u threads wait at __syncthreads, %u at a "
               "warp shuffle or vote, %u have returned (on a GPU: a hang)\n",
               b, at_block, at_warp, done);
  std::abort();
}

// getcontext and swapcontext return twice: calling them from launch() itself would make g++
// warn that launch's locals "might be clobbered" (-Wclobbered). Out-of-line helpers hold them.

/// Makes `f` start at fiber_main on its own stack, returning to `link` when done.
[[gnu::noinline]] inline void start_fiber(Fiber& f, ucontext_t* link) {
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = f.stack;
  f.ctx.uc_stack.ss_size = kFiberStack;
  f.ctx.uc_link = link;
  makecontext(&f.ctx, fiber_main, 0);
  f.state = State::Ready;
}

/// Runs fiber `f` of `blk` until it parks or returns.
[[gnu::noinline]] inline void resume(Block& blk, Fiber& f) {
  blk.running = &f;
#if defined(__SANITIZE_ADDRESS__)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack, kFiberStack);
  swapcontext(&blk.scheduler, &f.ctx);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  swapcontext(&blk.scheduler, &f.ctx);
#endif
}

/// Runs `kernel()` as a grid of `blocks` x `threads` (a multiple of 32) with `shared_bytes` of
/// dynamic shared memory.
template <class F>
void launch(unsigned blocks, unsigned threads, std::size_t shared_bytes, F&& kernel) {
  gridDim = dim3(blocks);
  blockDim = dim3(threads);
  const unsigned warps = (threads + 31) / 32;
  Block blk;
  blk.fibers.resize(threads);
  while (stack_pool.size() < threads)
    stack_pool.emplace_back(new char[kFiberStack]);  // NOLINT: uninitialised on purpose
  for (unsigned t = 0; t < threads; ++t) blk.fibers[t].stack = stack_pool[t].get();
  blk.kernel = &kernel;
  blk.body = [](void* k) { (*static_cast<std::remove_reference_t<F>*>(k))(); };
  Block* const outer = block;
  block = &blk;
  std::vector<std::uint64_t> slots(warps * 32, 0);
  for (unsigned b = 0; b < blocks; ++b) {
    std::vector<unsigned int> shared(shared_bytes / sizeof(unsigned int) + 1, 0xdeadbeefu);
    for (Fiber& f : blk.fibers) start_fiber(f, &blk.scheduler);
    for (;;) {
      // Run every runnable thread until it parks or returns, in thread order.
      for (unsigned t = 0; t < threads; ++t) {
        Fiber& f = blk.fibers[t];
        if (f.state != State::Ready) continue;
        threadIdx = uint3{t, 0, 0};
        blockIdx = uint3{b, 0, 0};
        current = Thread{slots.data() + (t / 32) * 32, shared.data(), t % 32};
        resume(blk, f);
      }
      // Release a warp whose 32 lanes all wait at its barrier, and the block when all wait.
      bool released = false, all_done = true, all_at_block = true;
      for (unsigned w = 0; w < warps; ++w) {
        bool full = true;
        for (unsigned t = w * 32; t < std::min(threads, w * 32 + 32); ++t)
          full = full && blk.fibers[t].state == State::AtWarp;
        if (!full) continue;
        for (unsigned t = w * 32; t < std::min(threads, w * 32 + 32); ++t)
          blk.fibers[t].state = State::Ready;
        released = true;
      }
      for (const Fiber& f : blk.fibers) {
        all_done = all_done && f.state == State::Done;
        all_at_block = all_at_block && f.state == State::AtBlock;
      }
      if (all_done) break;
      if (all_at_block) {
        for (Fiber& f : blk.fibers) f.state = State::Ready;
        released = true;
      }
      if (!released) deadlock(b, blk);
    }
  }
  block = outer;
}

}  // namespace cuda_emulation
