// The launchers of kernels.hpp: launch shapes from the device's properties, and the dispatch
// to the kernels of kernels_device.cuh by score type and team size.
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>

#include "kernels.hpp"
#include "kernels_device.cuh"

namespace tally_cuda {
namespace {

constexpr int kDefaultThreads = 256;
constexpr long long kMaxItemsPerBlock = 1ll << 31;  // keeps shared uint32 counters from overflowing

using namespace kernels;

// ---- launch shapes ----------------------------------------------------------------------------

struct DeviceInfo {
  int sms = 1;
  int max_shared = 48 << 10;  // opt-in maximum of dynamic shared memory per block
};

cudaError_t device_info(DeviceInfo& out) {
  static std::mutex mutex;
  static std::map<int, DeviceInfo> cache;
  int dev = 0;
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(dev); it != cache.end()) {
    out = it->second;
    return cudaSuccess;
  }
  DeviceInfo info;
  if (const cudaError_t e = cudaDeviceGetAttribute(&info.sms, cudaDevAttrMultiProcessorCount, dev);
      e != cudaSuccess)
    return e;
  if (const cudaError_t e =
          cudaDeviceGetAttribute(&info.max_shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
      e != cudaSuccess)
    return e;
  cache[dev] = info;
  out = info;
  return cudaSuccess;
}

long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

// The grid for a kernel needing `steps` thread-steps (rows * G for a team of G per row; tiles
// for label pairs) that reads `elements` values and counts into `cells` 32-bit counters: in
// shared memory when they fit, flushed once per block, so each block gets at least `per_cell`
// elements per counter to pay for its flush; in global memory otherwise.
struct Shape {
  int blocks = 1;
  int threads = kDefaultThreads;
  std::size_t shared = 0;
  bool use_shared = false;
};

template <class Kernel>
cudaError_t shape_for(Kernel kernel, long long steps, long long elements, long long cells,
                      long long per_cell, const Launch& launch, Shape& shape) {
  DeviceInfo info;
  if (const cudaError_t e = device_info(info); e != cudaSuccess) return e;
  // Whole warps: a team of 32 is a warp, and its shuffles name every lane.
  shape.threads =
      launch.threads > 0 ? std::clamp((launch.threads + 31) / 32 * 32, 32, 1024) : kDefaultThreads;
  const long long bytes = cells * static_cast<long long>(sizeof(unsigned int));
  shape.use_shared = cells > 0 && bytes <= info.max_shared;
  shape.shared = shape.use_shared ? static_cast<std::size_t>(bytes) : 0;
  if (shape.shared > (48u << 10)) {
    const cudaError_t e = cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(shape.shared));
    if (e != cudaSuccess) return e;
  }
  int per_sm = 0;
  cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_sm, reinterpret_cast<const void*>(kernel), shape.threads, shape.shared);
  if (e != cudaSuccess) return e;
  if (per_sm < 1 && shape.use_shared) {  // too much shared memory after all: count globally
    shape.use_shared = false;
    shape.shared = 0;
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, reinterpret_cast<const void*>(kernel), shape.threads, 0);
    if (e != cudaSuccess) return e;
  }
  long long blocks = static_cast<long long>(info.sms) * std::max(per_sm, 1);
  blocks = std::min(blocks, ceil_div(std::max(steps, 1ll), shape.threads));
  // Never fewer than two blocks per multiprocessor where the work allows: with many cells (150
  // classes: 22,500 counters) the flush rule alone left 11 blocks for one 1024 x 2048 map (30
  // Gpx/s on an H100) and 186 for 16 maps (339 Gpx/s), where 264 blocks counted 161 and 456 Gpx/s
  // (bench/gpu/run.sh --sweep, bench/RESULTS.md).
  if (shape.use_shared)
    blocks = std::min(blocks, std::max<long long>({1ll, 2ll * info.sms,
                                                    elements / (cells * per_cell)}));
  if (launch.blocks > 0) blocks = launch.blocks;
  shape.blocks = static_cast<int>(std::max(blocks, 1ll));
  return cudaSuccess;
}

// Runs `launch_range(begin, end)` over [0, n) in segments of at most blocks * 2^31 items, so that
// no block counts 2^32 items into a 32-bit shared counter.
template <class F>
cudaError_t in_segments(long long n, const Shape& shape, F&& launch_range) {
  const long long segment = static_cast<long long>(shape.blocks) * kMaxItemsPerBlock;
  for (long long begin = 0; begin < n; begin += segment) {
    launch_range(begin, std::min(n, begin + segment));
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

bool is_f64(const Scores& s) { return s.type == Scalar::F64; }

template <class T, int G>
cudaError_t launch_accuracy(const Scores& s, const Labels& y, long long maxk, const Thresholds& thr,
                            Flags* flags, unsigned long long* hist, cudaStream_t stream,
                            const Launch& launch) {
  const auto kernel = accuracy_kernel<T, G>;
  Shape shape;
  const long long cells = (maxk + 1) * thr.count;
  if (const cudaError_t e =
          shape_for(kernel, s.rows * G, s.rows * s.cols, cells, 16, launch, shape);
      e != cudaSuccess)
    return e;
  return in_segments(s.rows, shape, [&](long long b, long long e) {
    TALLY_LAUNCH(kernel, shape.blocks, shape.threads, shape.shared, stream,
                 static_cast<const T*>(s.data), y.data, y.type, y.limit, s.cols, b, e, maxk,
                 static_cast<const T*>(thr.values), thr.active, thr.count, flags, hist,
                 shape.use_shared);
  });
}

template <class T, int G, ArgmaxUse U>
cudaError_t launch_argmax(const Scores& s, const Labels& y, const Thresholds& thr, Flags* flags,
                          unsigned long long* out, cudaStream_t stream, const Launch& launch) {
  const auto kernel = argmax_kernel<T, G, U>;
  Shape shape;
  const long long cells =
      U == ArgmaxUse::Confusion ? s.cols * s.cols : s.cols * (1 + 2ll * thr.count);
  if (const cudaError_t e =
          shape_for(kernel, s.rows * G, s.rows * s.cols, cells, 16, launch, shape);
      e != cudaSuccess)
    return e;
  return in_segments(s.rows, shape, [&](long long b, long long e) {
    TALLY_LAUNCH(kernel, shape.blocks, shape.threads, shape.shared, stream,
                 static_cast<const T*>(s.data), y.data, y.type, y.limit, s.cols, b, e,
                 static_cast<const T*>(thr.values), thr.active, thr.count, flags, out,
                 shape.use_shared);
  });
}

template <PairMode M>
cudaError_t launch_pairs(const Labels& pred, const Labels& gt, long long k, Flags* flags,
                         unsigned long long* out, cudaStream_t stream, const Launch& launch) {
  const long long n = std::min(pred.n, gt.n);
  const long long cells = M == PairMode::Equal ? 1 : M == PairMode::SingleLabel ? 3 * k : k * k;
  const bool vector = pred.type == Scalar::U8 && gt.type == Scalar::U8 &&
                      reinterpret_cast<std::uintptr_t>(pred.data) % 16 == 0 &&
                      reinterpret_cast<std::uintptr_t>(gt.data) % 16 == 0;
  long long done = 0;
  if (vector && n >= kTile) {
    const auto kernel = pair_u8_kernel<M>;
    const long long vectors = n / kTile;
    Shape shape;
    if (const cudaError_t e = shape_for(kernel, vectors, n, cells, 8, launch, shape);
        e != cudaSuccess)
      return e;
    // Segments are whole vectors: blocks * 2^31 is a multiple of kTile.
    const cudaError_t e = in_segments(vectors * kTile, shape, [&](long long b, long long e2) {
      TALLY_LAUNCH(kernel, shape.blocks, shape.threads, shape.shared, stream,
                   static_cast<const uint4*>(pred.data), pred.limit,
                   static_cast<const uint4*>(gt.data), gt.limit, k, b / kTile, e2 / kTile, flags,
                   out, shape.use_shared);
    });
    if (e != cudaSuccess) return e;
    done = vectors * kTile;
  }
  if (done == n) return cudaSuccess;
  const auto kernel = pair_kernel<M>;
  Shape shape;
  if (const cudaError_t e =
          shape_for(kernel, ceil_div(n - done, kTile), n - done, cells, 8, launch, shape);
      e != cudaSuccess)
    return e;
  return in_segments(n - done, shape, [&](long long b, long long e) {
    TALLY_LAUNCH(kernel, shape.blocks, shape.threads, shape.shared, stream, pred.data, pred.type,
                 pred.limit, gt.data, gt.type, gt.limit, k, done + b, done + e, flags, out,
                 shape.use_shared);
  });
}

}  // namespace

// ---- the launchers --------------------------------------------------------------------------

cudaError_t accuracy_counts(const Scores& scores, const Labels& labels, std::int64_t maxk,
                            const Thresholds& thrs, Flags* flags, unsigned long long* hist,
                            cudaStream_t stream, const Launch& launch) {
  if (scores.rows == 0 || thrs.count == 0) return cudaSuccess;
  const bool wide = scores.cols > 32;
  if (is_f64(scores))
    return wide ? launch_accuracy<double, 32>(scores, labels, maxk, thrs, flags, hist, stream,
                                              launch)
                : launch_accuracy<double, 1>(scores, labels, maxk, thrs, flags, hist, stream,
                                             launch);
  return wide ? launch_accuracy<float, 32>(scores, labels, maxk, thrs, flags, hist, stream, launch)
              : launch_accuracy<float, 1>(scores, labels, maxk, thrs, flags, hist, stream, launch);
}

cudaError_t single_label_counts(const Scores& scores, const Labels& labels, const Thresholds& thrs,
                                Flags* flags, unsigned long long* out, cudaStream_t stream,
                                const Launch& launch) {
  if (scores.rows == 0) return cudaSuccess;
  constexpr auto U = ArgmaxUse::SingleLabel;
  const bool wide = scores.cols > 32;
  if (is_f64(scores))
    return wide ? launch_argmax<double, 32, U>(scores, labels, thrs, flags, out, stream, launch)
                : launch_argmax<double, 1, U>(scores, labels, thrs, flags, out, stream, launch);
  return wide ? launch_argmax<float, 32, U>(scores, labels, thrs, flags, out, stream, launch)
              : launch_argmax<float, 1, U>(scores, labels, thrs, flags, out, stream, launch);
}

cudaError_t confusion_matrix_scores(const Scores& scores, const Labels& labels, Flags* flags,
                                    unsigned long long* counts, cudaStream_t stream,
                                    const Launch& launch) {
  if (scores.rows == 0) return cudaSuccess;
  constexpr auto U = ArgmaxUse::Confusion;
  const Thresholds none{};
  const bool wide = scores.cols > 32;
  if (is_f64(scores))
    return wide ? launch_argmax<double, 32, U>(scores, labels, none, flags, counts, stream, launch)
                : launch_argmax<double, 1, U>(scores, labels, none, flags, counts, stream, launch);
  return wide ? launch_argmax<float, 32, U>(scores, labels, none, flags, counts, stream, launch)
              : launch_argmax<float, 1, U>(scores, labels, none, flags, counts, stream, launch);
}

cudaError_t label_pair_counts(const Labels& pred, const Labels& gt, PairMode mode, std::int64_t k,
                              Flags* flags, unsigned long long* out, cudaStream_t stream,
                              const Launch& launch) {
  if (std::min(pred.n, gt.n) == 0) return cudaSuccess;
  switch (mode) {
    case PairMode::Equal:
      return launch_pairs<PairMode::Equal>(pred, gt, k, flags, out, stream, launch);
    case PairMode::SingleLabel:
      return launch_pairs<PairMode::SingleLabel>(pred, gt, k, flags, out, stream, launch);
    case PairMode::Confusion:
      return launch_pairs<PairMode::Confusion>(pred, gt, k, flags, out, stream, launch);
  }
  return cudaErrorInvalidValue;
}

cudaError_t find_nan_rows(const Scores& scores, Flags* flags, cudaStream_t stream) {
  if (scores.rows == 0 || scores.cols == 0) return cudaSuccess;
  const int threads = kDefaultThreads;
  const bool wide = scores.cols > 32;
  const long long blocks =
      std::min<long long>(4096, ceil_div(scores.rows * (wide ? 32 : 1), threads));
  const auto b = static_cast<int>(std::max(blocks, 1ll));
  const auto run = [&](auto kernel, const auto* data) {
    TALLY_LAUNCH(kernel, b, threads, 0, stream, data, scores.rows, scores.cols, flags);
    return cudaGetLastError();
  };
  const auto* f64 = static_cast<const double*>(scores.data);
  const auto* f32 = static_cast<const float*>(scores.data);
  if (is_f64(scores))
    return wide ? run(nan_rows_kernel<double, 32>, f64) : run(nan_rows_kernel<double, 1>, f64);
  return wide ? run(nan_rows_kernel<float, 32>, f32) : run(nan_rows_kernel<float, 1>, f32);
}

cudaError_t find_bad_ids(const Labels& labels, unsigned long long* first, cudaStream_t stream) {
  if (labels.n == 0) return cudaSuccess;
  const int threads = kDefaultThreads;
  const auto blocks =
      static_cast<int>(std::max(1ll, std::min<long long>(4096, ceil_div(labels.n, threads))));
  TALLY_LAUNCH(bad_ids_kernel, blocks, threads, 0, stream, labels.data, labels.type, labels.n,
               labels.limit, first);
  return cudaGetLastError();
}

}  // namespace tally_cuda
