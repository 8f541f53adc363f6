// GPU benchmarks of tally, printing Markdown tables (bench/gpu/run.sh builds and runs them).
//
//   tally_gpu_bench allgather [--min BYTES] [--max BYTES] [--seconds S]
//       all_gather_object over the nccl backend (through the registry, as `tally run` loads it),
//       1 KiB to 1 GiB per rank in steps of 4x. Run it alone (a world of one) or under
//       `mpirun -np N` (one GPU per rank). Rank 0 prints, per size: the median time of one call,
//       the algorithm bandwidth (bytes gathered by a rank / time) and the bus bandwidth
//       (x (N-1)/N, as nccl-tests reports). A call is host to host: it includes the copies into
//       and out of the staging buffers, and the size exchange.
//
//   tally_gpu_bench confusion [--classes 19,150] [--images 1,16] [--seconds S] [--sweep]
//       Device-side ConfusionMatrix accumulation of uint8 label maps of 1024 x 2048 pixels, in
//       pixels per second, against a device-to-device cudaMemcpy of the same bytes (prediction
//       and ground truth) timed in the same run; for label maps made of runs of one class (as
//       segmentation maps are) and of uniform noise (the worst case for the histograms). Also the
//       whole metric update (ConfusionMatrix::add on CUDA tensors: checks, kernel, counters back
//       to the host). --sweep also times fixed grid sizes and reports the fastest.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "config.hpp"
#include "kernels.hpp"
#include "registry.hpp"
#include "tally/collectives.hpp"
#include "tally/sdk/batch.hpp"
#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/tensor.hpp"

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "tally_gpu_bench: %s\n", what.c_str());
  std::exit(1);
}

void cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    die(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

std::string bytes_text(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf,
                b == static_cast<double>(static_cast<long long>(b)) ? "%.0f %s" : "%.1f %s", b,
                units[u]);
  return buf;
}

std::string rate_text(double per_s, const char* unit) {
  const char* prefix[] = {"", "K", "M", "G", "T"};
  int p = 0;
  while (per_s >= 1000 && p < 4) {
    per_s /= 1000;
    ++p;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f %s%s/s", per_s, prefix[p], unit);
  return buf;
}

std::string time_text(double s) {
  char buf[32];
  if (s < 1e-3)
    std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  else if (s < 1)
    std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

std::vector<long long> int_list(const std::string& s) {
  std::vector<long long> out;
  std::size_t at = 0;
  while (at < s.size()) {
    const std::size_t comma = s.find(',', at);
    out.push_back(std::atoll(s.substr(at, comma - at).c_str()));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

const tally::Registry& registry() {
  static const tally::Registry r = tally::Registry::load();
  return r;
}

// ---- (a) object all-gather over NCCL
// -------------------------------------------------------------

int bench_allgather(long long min_bytes, long long max_bytes, double seconds) {
  const auto& c = registry().get(tally::ComponentKind::Backend, "nccl");
  const auto transport =
      tally::Registry::make_backend(c, tally::make_params(*c.info, {}, "backend 'nccl'"));
  // The engine's object collectives over the plugin's transport, as a sync uses them.
  const auto backend = std::make_unique<tally::Collectives>(*transport);
  const int world = backend->world_size();
  const int rank = backend->rank();
  if (rank == 0) {
    std::printf("### all_gather_object over NCCL: %d rank%s, chunk %s\n\n", world,
                world == 1 ? "" : "s",
                bytes_text(static_cast<double>(backend->chunk_bytes())).c_str());
    std::printf(
        "| bytes per rank | time per call (median) | algbw | busbw |\n|---:|---:|---:|---:|\n");
  }
  std::vector<std::byte> object(static_cast<std::size_t>(max_bytes));
  for (std::size_t i = 0; i < object.size(); ++i)
    object[i] = static_cast<std::byte>((i * 7 + rank) & 0xff);
  for (long long n = min_bytes; n <= max_bytes; n *= 4) {
    const std::span<const std::byte> mine(object.data(), static_cast<std::size_t>(n));
    for (int w = 0; w < 2; ++w)
      backend->all_gather_object(mine);  // warm: buffers grown, paths set up
    // Every rank runs the same number of calls: rank 0 decides from its warm-up time.
    backend->barrier();
    const auto t0 = Clock::now();
    backend->all_gather_object(mine);
    const double one = std::chrono::duration<double>(Clock::now() - t0).count();
    std::int64_t iters =
        std::clamp<std::int64_t>(static_cast<std::int64_t>(seconds / std::max(one, 1e-7)), 3, 2000);
    const auto agreed = backend->broadcast_object(std::as_bytes(std::span(&iters, 1)), 0);
    std::memcpy(&iters, agreed.data(), sizeof iters);
    std::vector<double> times;
    for (std::int64_t i = 0; i < iters; ++i) {
      const auto a = Clock::now();
      const auto got = backend->all_gather_object(mine);
      times.push_back(std::chrono::duration<double>(Clock::now() - a).count());
      if (got.size() != static_cast<std::size_t>(world) ||
          got[static_cast<std::size_t>(rank)].size() != mine.size())
        die("all_gather_object returned the wrong sizes");
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    const double algbw = static_cast<double>(n) * world / median;
    const double busbw = algbw * (world - 1) / std::max(world, 1);
    if (rank == 0)
      std::printf("| %s | %s | %s | %s |\n", bytes_text(static_cast<double>(n)).c_str(),
                  time_text(median).c_str(), rate_text(algbw, "B").c_str(),
                  world > 1 ? rate_text(busbw, "B").c_str() : "-");
  }
  if (rank == 0) std::printf("\n");
  return 0;
}

// ---- (b) device-side confusion matrix
// ------------------------------------------------------------

constexpr std::int64_t kHeight = 1024, kWidth = 2048;

// uint8 label maps of `images` images: runs of one class along rows (segmentation-like), or noise.
std::vector<std::uint8_t> label_maps(std::int64_t images, int classes, bool runs,
                                     std::uint32_t seed) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(images * kHeight * kWidth));
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> cls(0, classes - 1), len(16, 2048);
  for (std::size_t i = 0; i < v.size();) {
    const auto c = static_cast<std::uint8_t>(cls(gen));
    const int l = runs ? len(gen) : 1;
    for (int j = 0; j < l && i < v.size(); ++j) v[i++] = c;
  }
  return v;
}

// Seconds per call of `f` (queued on the default stream), timed with events over enough calls.
template <class F>
double device_seconds(F&& f, double seconds) {
  cudaEvent_t a, b;
  cuda(cudaEventCreate(&a), "cudaEventCreate");
  cuda(cudaEventCreate(&b), "cudaEventCreate");
  f();
  cuda(cudaDeviceSynchronize(), "warm-up");
  cuda(cudaEventRecord(a), "cudaEventRecord");
  f();
  cuda(cudaEventRecord(b), "cudaEventRecord");
  cuda(cudaEventSynchronize(b), "cudaEventSynchronize");
  float ms = 0;
  cuda(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
  const int iters = std::clamp(static_cast<int>(seconds * 1000 / std::max(ms, 1e-3f)), 5, 5000);
  cuda(cudaEventRecord(a), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) f();
  cuda(cudaEventRecord(b), "cudaEventRecord");
  cuda(cudaEventSynchronize(b), "cudaEventSynchronize");
  cuda(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / 1000.0 / iters;
}

int bench_confusion(const std::vector<long long>& classes, const std::vector<long long>& images,
                    double seconds, bool sweep) {
  int dev = 0;
  cuda(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp prop{};
  cuda(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  std::printf("### ConfusionMatrix of uint8 label maps (%lld x %lld) on %s\n\n",
              static_cast<long long>(kHeight), static_cast<long long>(kWidth), prop.name);
  std::printf(
      "pixels/s: prediction + ground truth pixels counted per second. memcpy: cudaMemcpy device to "
      "device of the same bytes (2 per pixel), in the same run. kernel: "
      "tally_cuda::confusion_matrix_counts, "
      "no sync between calls. add(): ConfusionMatrix::add on CUDA tensors, checks and counters to "
      "the host "
      "included.%s\n\n",
      sweep ? " best grid: the fastest of a sweep of fixed grid sizes." : "");
  std::printf(
      "| classes | images per call | data | memcpy | kernel | kernel / memcpy | add() |%s\n",
      sweep ? " best grid |" : "");
  std::printf("|---:|---:|---|---:|---:|---:|---:|%s\n", sweep ? "---:|" : "");
  for (const long long k : classes) {
    if (k < 1 || k > 256) die("--classes: uint8 label maps hold 1 to 256 classes");
    for (const long long imgs : images) {
      const std::int64_t n = imgs * kHeight * kWidth;
      for (const bool runs : {true, false}) {
        const auto pred = label_maps(imgs, static_cast<int>(k), runs, 1);
        const auto gt = label_maps(imgs, static_cast<int>(k), runs, 2);
        void *dp = nullptr, *dg = nullptr, *dcopy = nullptr, *dflags = nullptr, *dcounts = nullptr;
        cuda(cudaMalloc(&dp, static_cast<std::size_t>(n)), "cudaMalloc");
        cuda(cudaMalloc(&dg, static_cast<std::size_t>(n)), "cudaMalloc");
        cuda(cudaMalloc(&dcopy, static_cast<std::size_t>(2 * n)), "cudaMalloc");
        cuda(cudaMalloc(&dflags, sizeof(tally_cuda::Flags)), "cudaMalloc");
        cuda(cudaMalloc(&dcounts, static_cast<std::size_t>(k * k * 8)), "cudaMalloc");
        cuda(cudaMemcpy(dp, pred.data(), pred.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
        cuda(cudaMemcpy(dg, gt.data(), gt.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
        const tally_cuda::Flags none{};
        cuda(cudaMemcpy(dflags, &none, sizeof none, cudaMemcpyHostToDevice), "cudaMemcpy");
        const tally_cuda::Labels lp{dp, tally_cuda::Scalar::U8, n,
                                    static_cast<unsigned long long>(k)};
        const tally_cuda::Labels lg{dg, tally_cuda::Scalar::U8, n,
                                    static_cast<unsigned long long>(k)};
        auto* flags = static_cast<tally_cuda::Flags*>(dflags);
        auto* counts = static_cast<unsigned long long*>(dcounts);

        const double t_copy = device_seconds(
            [&] {
              cuda(cudaMemcpyAsync(dcopy, dp, static_cast<std::size_t>(n), cudaMemcpyDeviceToDevice,
                                   nullptr),
                   "memcpy");
              cuda(cudaMemcpyAsync(static_cast<char*>(dcopy) + n, dg, static_cast<std::size_t>(n),
                                   cudaMemcpyDeviceToDevice, nullptr),
                   "memcpy");
            },
            seconds);
        const auto kernel_time = [&](tally_cuda::Launch shape) {
          return device_seconds(
              [&] {
                cuda(tally_cuda::confusion_matrix_counts(lp, lg, k, flags, counts, nullptr, shape),
                     "kernel");
              },
              seconds);
        };
        const double t_kernel = kernel_time({});
        std::string best;
        if (sweep) {
          double t_best = t_kernel;
          int b_best = 0;
          for (const int blocks : {4, 8, 16, 33, 66, 132, 264, 528, 1056, 2112}) {
            const double t = kernel_time({blocks, 0});
            if (t < t_best) {
              t_best = t;
              b_best = blocks;
            }
          }
          best = (b_best == 0 ? std::string("default") : std::to_string(b_best) + " blocks") +
                 ": " + rate_text(static_cast<double>(n) / t_best, "px");
        }

        // The whole metric update, through the plugin as `tally run` uses it.
        const auto& mc = registry().get(tally::ComponentKind::Metric, "ConfusionMatrix");
        const auto metric = tally::Registry::make_metric(
            mc, tally::make_params(*mc.info, {{"num_classes", static_cast<long long>(k)}},
                                   "metric 'ConfusionMatrix'"));
        tally::Batch batch;
        batch.set("pred_labels",
                  tally::Tensor::view(dp, tally::DType::U8, {n}, tally::Device::cuda(dev)));
        batch.set("gt_labels",
                  tally::Tensor::view(dg, tally::DType::U8, {n}, tally::Device::cuda(dev)));
        metric->add(batch);
        const auto a = Clock::now();
        int adds = 0;
        while (adds < 5 || std::chrono::duration<double>(Clock::now() - a).count() < seconds) {
          metric->add(batch);
          ++adds;
        }
        const double t_add = std::chrono::duration<double>(Clock::now() - a).count() / adds;

        const double px = static_cast<double>(n);
        std::printf("| %lld | %lld | %s | %s | %s | %.2f | %s |%s\n", k, imgs,
                    runs ? "runs" : "noise", rate_text(px / t_copy, "px").c_str(),
                    rate_text(px / t_kernel, "px").c_str(), t_copy / t_kernel,
                    rate_text(px / t_add, "px").c_str(), sweep ? (" " + best + " |").c_str() : "");
        std::fflush(stdout);
        for (void* p : {dp, dg, dcopy, dflags, dcounts}) cudaFree(p);
      }
    }
  }
  std::printf("\n");
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: tally_gpu_bench allgather [--min BYTES] [--max BYTES] [--seconds S]\n"
               "       tally_gpu_bench confusion [--classes 19,150] [--images 1,16] [--seconds S] "
               "[--sweep]\n"
               "       tally_gpu_bench devices      (prints the number of visible CUDA devices)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string what = argv[1];
  long long min_bytes = 1 << 10, max_bytes = 1ll << 30;
  double seconds = 0.5;
  std::vector<long long> classes = {19, 150}, images = {1, 16};
  bool sweep = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--min")
      min_bytes = std::atoll(value().c_str());
    else if (a == "--max")
      max_bytes = std::atoll(value().c_str());
    else if (a == "--seconds")
      seconds = std::atof(value().c_str());
    else if (a == "--classes")
      classes = int_list(value());
    else if (a == "--images")
      images = int_list(value());
    else if (a == "--sweep")
      sweep = true;
    else
      return usage();
  }
  try {
    if (what == "devices") {
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
      std::printf("%d\n", n);
      return 0;
    }
    if (what == "allgather") return bench_allgather(std::max(1ll, min_bytes), max_bytes, seconds);
    if (what == "confusion") return bench_confusion(classes, images, seconds, sweep);
  } catch (const tally::Error& e) {
    std::fprintf(stderr, "tally_gpu_bench: %s\n", e.what());
    return e.exit_code();
  }
  return usage();
}
