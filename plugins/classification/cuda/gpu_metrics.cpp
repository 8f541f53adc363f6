// See gpu_metrics.hpp.
//
// One update: the metadata checks (fields present, dense, on one CUDA device, dtypes, shapes) on
// the host; then, on the tensors' device, the counters of a per-device workspace are zeroed, one
// fused kernel checks the values (NaN scores, class ids) and counts, and one copy brings the
// check flags and the counters back; the counters are added into the metric's state only when
// every check passed. Only the counters cross to the host, never the batch.
//
// Same errors as the CPU path, in the same order. The CPU path interleaves metadata checks and
// value checks (scores' NaN check comes before the labels' dtype check); here the value checks
// are fused into the counting kernel, after all the metadata checks. So when a metadata check
// fails, the value checks the CPU path runs before it are first run on their own, and the first
// failure is the one reported; when every metadata check passes, the kernel's flags are read in
// the CPU's order.
//
// Work goes on the legacy default stream: it orders after work the host program queued on the
// default stream or any blocking stream, so a batch produced there is complete before it is read.
#include "gpu_metrics.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "../common.hpp"
#include "kernels.hpp"
#include "tally/sdk/error.hpp"

namespace tally::classification::gpu {
namespace {

using tally_cuda::Scalar;

std::string cuda_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

Scalar scalar_of(DType t) {
  switch (t) {
    case DType::U8:
      return Scalar::U8;
    case DType::I8:
      return Scalar::I8;
    case DType::U16:
      return Scalar::U16;
    case DType::I16:
      return Scalar::I16;
    case DType::I32:
      return Scalar::I32;
    case DType::U32:
      return Scalar::U32;
    case DType::I64:
      return Scalar::I64;
    case DType::F32:
      return Scalar::F32;
    case DType::F64:
      return Scalar::F64;
    case DType::Bool:
      break;
  }
  return Scalar::U8;  // unreachable: Bool is refused by the dtype checks first
}

// ---- fields: present, dense, on the metric's CUDA device --------------------------------------

bool cuda_field(const Batch& batch, const char* name) {
  return batch.has(name) && !batch.is_ragged(name) && batch.tensor(name).is_cuda();
}

const char* prediction_field(const Batch& batch) {
  return batch.has(kScores) ? kScores : kPredLabels;
}

// The device of this update: that of the first CUDA tensor among the metric's inputs.
struct Placement {
  const char* field = nullptr;
  int device = 0;
};

Placement placement(const Batch& batch) {
  for (const char* f : {prediction_field(batch), kGtLabels})
    if (cuda_field(batch, f)) return {f, batch.tensor(f).device().index};
  return {};
}

// As InputChecker::tensor(), for tensors that must be on `where`'s CUDA device, which this
// process must see and whose memory CUDA must know.
const Tensor& device_tensor(const InputChecker& check, const Batch& batch, const char* field,
                            const Placement& where) {
  if (!batch.has(field)) {
    std::string have;
    for (const auto& [name, value] : batch.fields()) {
      (void)value;
      have += (have.empty() ? "" : ", ") + name;
    }
    check.fail(field,
               "is missing from the batch (it has: " + (have.empty() ? "no fields" : have) + ")");
  }
  if (batch.is_ragged(field)) check.fail(field, "must be a dense tensor, got a ragged field");
  const Tensor& t = batch.tensor(field);
  const std::string other =
      std::string("'") + where.field + "' is on cuda:" + std::to_string(where.device);
  if (!t.is_cuda())
    check.fail(field, "is on the CPU but " + other + ": give all inputs of a metric on one device");
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count < 1) {
    cudaGetLastError();
    check.fail(field, "is a CUDA tensor (" + t.describe() +
                          ") but this process sees no CUDA device (" +
                          (e != cudaSuccess ? "cudaGetDeviceCount: " + cuda_text(e)
                                            : std::string("cudaGetDeviceCount returned 0")) +
                          ")");
  }
  const int index = t.device().index;
  if (index < 0 || index >= count)
    check.fail(field, "is a CUDA tensor (" + t.describe() + ") but this process sees " +
                          std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s"));
  if (index != where.device)
    check.fail(field, "is on cuda:" + std::to_string(index) + " but " + other +
                          ": give all inputs of a metric on one device");
  if (t.numel() > 0) {
    cudaPointerAttributes attr{};
    const cudaError_t pe = cudaPointerGetAttributes(&attr, t.data());
    if (pe != cudaSuccess) {
      cudaGetLastError();
      check.fail(field, "is a CUDA tensor (" + t.describe() +
                            ") whose memory CUDA does not know (cudaPointerGetAttributes: " +
                            cuda_text(pe) + ")");
    }
    if (attr.type == cudaMemoryTypeUnregistered)
      check.fail(field, "is a CUDA tensor (" + t.describe() +
                            ") whose memory is not CUDA memory (a host pointer?)");
    if (attr.type == cudaMemoryTypeDevice && attr.device != index)
      check.fail(field, "is a CUDA tensor on cuda:" + std::to_string(index) +
                            " whose memory is on cuda:" + std::to_string(attr.device));
  }
  return t;
}

// As InputChecker::scores() and labels(), without their value checks (done on the device).
const Tensor& score_tensor(const InputChecker& check, const Batch& batch, const char* field,
                           const Placement& where) {
  const Tensor& t = device_tensor(check, batch, field, where);
  if (!is_floating(t.dtype()))
    check.fail(field, "must hold float32 or float64 scores, got " + t.describe());
  check.dims(t, field, 2, "[N, C]");
  return t;
}

const Tensor& label_tensor(const InputChecker& check, const Batch& batch, const char* field,
                           const Placement& where) {
  const Tensor& t = device_tensor(check, batch, field, where);
  if (!is_integral(t.dtype()))
    check.fail(field, "must hold integer class ids, got " + t.describe());
  check.dims(t, field, 1, "[N]");
  return t;
}

tally_cuda::Scores scores_view(const Tensor& t) {
  return {t.data(), scalar_of(t.dtype()), t.size(0), t.size(1)};
}

// num_classes < 0: no upper bound, as InputChecker (ids must still be >= 0).
unsigned long long id_limit(std::int64_t num_classes) {
  return static_cast<unsigned long long>(num_classes < 0 ? INT64_MAX : num_classes);
}

tally_cuda::Labels labels_view(const Tensor& t, std::int64_t num_classes) {
  return {t.data(), scalar_of(t.dtype()), t.numel(), id_limit(num_classes)};
}

// ---- the per-device workspace ------------------------------------------------------------------

// Device memory and a pinned host mirror: [Flags | thresholds | counters]. One per device for the
// process, grown as needed, reused by every metric; its mutex serialises updates on a device.
class Workspace {
 public:
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace() {
    if (device_ != nullptr) cudaFree(device_);
    if (host_ != nullptr) cudaFreeHost(host_);
  }
  std::mutex mutex;
  std::byte* device() const { return device_; }
  std::byte* host() const { return host_; }
  // Capacity for `bytes`; the caller holds the mutex and has made the device current.
  cudaError_t reserve(std::size_t bytes) {
    if (bytes <= capacity_) return cudaSuccess;
    const std::size_t cap = std::max(bytes, capacity_ * 2);
    if (device_ != nullptr) cudaFree(device_);
    if (host_ != nullptr) cudaFreeHost(host_);
    device_ = nullptr;
    host_ = nullptr;
    capacity_ = 0;
    void* d = nullptr;
    if (const cudaError_t e = cudaMalloc(&d, cap); e != cudaSuccess) return e;
    device_ = static_cast<std::byte*>(d);
    void* h = nullptr;
    if (const cudaError_t e = cudaHostAlloc(&h, cap, cudaHostAllocDefault); e != cudaSuccess)
      return e;
    host_ = static_cast<std::byte*>(h);
    capacity_ = cap;
    return cudaSuccess;
  }

 private:
  std::byte* device_ = nullptr;
  std::byte* host_ = nullptr;
  std::size_t capacity_ = 0;
};

Workspace& workspace(int device) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<Workspace>> spaces;
  std::lock_guard lock(mutex);
  auto& w = spaces[device];
  if (!w) w = std::make_unique<Workspace>();
  return *w;
}

constexpr std::size_t kParamsAt = 64;  // after Flags (32 bytes)

std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

// One update on one device: the device made current (and restored after), the workspace held,
// errors worded with the metric's owner string.
class Session {
 public:
  Session(const InputChecker& check, int device)
      : check_(check), device_(device), ws_(workspace(device)), lock_(ws_.mutex) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device_) ok(cudaSetDevice(device_), "cudaSetDevice");
  }
  ~Session() {
    if (previous_ >= 0 && previous_ != device_) cudaSetDevice(previous_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void ok(cudaError_t e, const std::string& what) const {
    if (e == cudaSuccess) return;
    cudaGetLastError();
    check_.fail_runtime(std::string("CUDA error on cuda:") + std::to_string(device_) + " in " +
                        what + ": " + cuda_text(e));
  }

  // Lays out the workspace for `cells` counters and thresholds in type T (none when `thrs` is
  // null), uploads the flags and thresholds, zeroes the counters.
  template <class T>
  void prepare(std::size_t cells, const ThresholdSet<T>* thrs) {
    const std::size_t nthr = thrs != nullptr ? thrs->value.size() : 0;
    active_at_ = kParamsAt + nthr * sizeof(T);
    counts_at_ = align_up(active_at_ + nthr, 256);
    total_ = counts_at_ + cells * sizeof(unsigned long long);
    ok(ws_.reserve(total_), "allocating " + std::to_string(total_) + " bytes of workspace");
    const tally_cuda::Flags none{};
    std::memcpy(ws_.host(), &none, sizeof none);
    if (nthr != 0) {
      std::memcpy(ws_.host() + kParamsAt, thrs->value.data(), nthr * sizeof(T));
      std::memcpy(ws_.host() + active_at_, thrs->active.data(), nthr);
    }
    ok(cudaMemcpyAsync(ws_.device(), ws_.host(), counts_at_, cudaMemcpyHostToDevice, stream()),
       "cudaMemcpyAsync (flags to the device)");
    ok(cudaMemsetAsync(ws_.device() + counts_at_, 0, total_ - counts_at_, stream()),
       "cudaMemsetAsync (counters)");
  }

  tally_cuda::Flags* flags() const { return reinterpret_cast<tally_cuda::Flags*>(ws_.device()); }
  tally_cuda::Thresholds thresholds(std::size_t count) const {
    return {ws_.device() + kParamsAt,
            reinterpret_cast<const unsigned char*>(ws_.device() + active_at_),
            static_cast<int>(count)};
  }
  unsigned long long* counters() const {
    return reinterpret_cast<unsigned long long*>(ws_.device() + counts_at_);
  }

  // Copies the flags and the counters back and waits for them.
  void finish(cudaError_t launched, const char* kernel) {
    ok(launched, kernel);
    ok(cudaMemcpyAsync(ws_.host(), ws_.device(), total_, cudaMemcpyDeviceToHost, stream()),
       "cudaMemcpyAsync (counters to the host)");
    ok(cudaStreamSynchronize(stream()), std::string(kernel) + " (cudaStreamSynchronize)");
    std::memcpy(&flags_, ws_.host(), sizeof flags_);
  }

  const tally_cuda::Flags& host_flags() const { return flags_; }
  const unsigned long long* host_counters() const {
    return reinterpret_cast<const unsigned long long*>(ws_.host() + counts_at_);
  }

  // ---- the checks and their messages, as InputChecker words them ----

  // The first NaN of row `row` (it holds one): its class, read back from the device.
  void fail_nan(const Tensor& scores, const char* field, unsigned long long row,
                std::int64_t first_sample) {
    const std::int64_t cols = scores.size(1);
    const std::size_t es = dtype_size(scores.dtype());
    std::vector<std::byte> buf(static_cast<std::size_t>(cols) * es);
    ok(cudaMemcpy(buf.data(), static_cast<const std::byte*>(scores.data()) + row * buf.size(),
                  buf.size(), cudaMemcpyDeviceToHost),
       "cudaMemcpy (a row with a NaN)");
    std::int64_t c = 0;
    for (; c < cols; ++c) {
      const bool nan = scores.dtype() == DType::F32
                           ? std::isnan(reinterpret_cast<const float*>(buf.data())[c])
                           : std::isnan(reinterpret_cast<const double*>(buf.data())[c]);
      if (nan) break;
    }
    check_.fail(field, "sample " + std::to_string(first_sample + static_cast<std::int64_t>(row)) +
                           ": score of class " + std::to_string(c) + " is NaN");
  }

  // The class id at `index`, read back from the device, outside [0, num_classes).
  void fail_id(const Tensor& ids, const char* field, unsigned long long index,
               std::int64_t num_classes, std::int64_t first_sample) {
    const std::size_t es = dtype_size(ids.dtype());
    std::byte raw[8] = {};
    ok(cudaMemcpy(raw, static_cast<const std::byte*>(ids.data()) + index * es, es,
                  cudaMemcpyDeviceToHost),
       "cudaMemcpy (a class id)");
    const Tensor one = Tensor::view(raw, ids.dtype(), {1});
    const std::int64_t id =
        visit_integral(one, [](const auto* p) { return static_cast<std::int64_t>(p[0]); });
    check_.fail(field, "sample " + std::to_string(first_sample + static_cast<std::int64_t>(index)) +
                           ": class id " + std::to_string(id) + " is outside [0, " +
                           (num_classes < 0 ? std::string("inf") : std::to_string(num_classes)) +
                           ")");
  }

  // Standalone value checks (for the error order when a metadata check fails).
  void check_nan(const Tensor& scores, const char* field, std::int64_t first_sample) {
    prepare<float>(0, nullptr);
    finish(tally_cuda::find_nan_rows(scores_view(scores), flags(), stream()), "find_nan_rows");
    if (flags_.nan_row != tally_cuda::kNone) fail_nan(scores, field, flags_.nan_row, first_sample);
  }
  void check_ids(const Tensor& ids, const char* field, std::int64_t num_classes,
                 std::int64_t first_sample) {
    prepare<float>(0, nullptr);
    finish(tally_cuda::find_bad_ids(labels_view(ids, num_classes), &flags()->bad_a, stream()),
           "find_bad_ids");
    if (flags_.bad_a != tally_cuda::kNone)
      fail_id(ids, field, flags_.bad_a, num_classes, first_sample);
  }

  static cudaStream_t stream() { return cudaStreamLegacy; }

 private:
  const InputChecker& check_;
  int device_;
  int previous_ = -1;
  Workspace& ws_;
  std::lock_guard<std::mutex> lock_;
  std::size_t active_at_ = kParamsAt;
  std::size_t counts_at_ = 0;
  std::size_t total_ = 0;
  tally_cuda::Flags flags_{};
};

// ---- check sequences
// ------------------------------------------------------------------------------

// One check of the CPU path, in its order: a metadata check (run before the kernel), or a value
// check (fused into the kernel; `value` runs it on its own when a later metadata check fails).
struct Step {
  std::function<void()> meta;
  std::function<void()> value;
};

// Runs the metadata checks in order. When one fails, the value checks before it run first, so
// the error reported is the one the CPU path reports.
void run_metadata_checks(const std::vector<Step>& steps) {
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].meta) continue;
    try {
      steps[i].meta();
    } catch (const Error&) {
      for (std::size_t j = 0; j < i; ++j)
        if (steps[j].value) steps[j].value();
      throw;
    }
  }
}

// Runs `f` with the scores' element type as a tag: f(float{}) or f(double{}).
template <class F>
decltype(auto) with_score_type(const Tensor& scores, F&& f) {
  if (scores.dtype() == DType::F64) return f(double{});
  return f(float{});
}

}  // namespace

bool on_cuda(const Batch& batch) {
  return cuda_field(batch, prediction_field(batch)) || cuda_field(batch, kGtLabels);
}

// ---- Accuracy
// --------------------------------------------------------------------------------------

void accuracy_update(const InputChecker& check, const std::vector<std::int64_t>& topk,
                     std::int64_t maxk, const std::vector<std::optional<double>>& thrs,
                     const Batch& batch, std::vector<std::int64_t>& hits, std::int64_t& n) {
  const Placement where = placement(batch);
  const std::int64_t seen = n;
  if (has_scores(batch, check)) {
    const Tensor* scores = nullptr;
    const Tensor* labels = nullptr;
    std::int64_t cols = 0;
    std::optional<Session> s;
    const auto session = [&]() -> Session& {
      if (!s) s.emplace(check, where.device);
      return *s;
    };
    run_metadata_checks({
        {[&] { scores = &score_tensor(check, batch, kScores, where); }, {}},
        {{}, [&] { session().check_nan(*scores, kScores, seen); }},
        {[&] { cols = score_classes(*scores, check); }, {}},
        {[&] { labels = &label_tensor(check, batch, kGtLabels, where); }, {}},
        {{}, [&] { session().check_ids(*labels, kGtLabels, cols, seen); }},
        {[&] { check.same_rows(*scores, kScores, *labels, kGtLabels); }, {}},
        {[&] {
           if (maxk > cols)
             check.fail(kScores, "has " + std::to_string(cols) + " columns: top-" +
                                     std::to_string(maxk) +
                                     " accuracy is unavailable since the number of categories is " +
                                     std::to_string(cols));
         },
         {}},
    });
    const std::int64_t rows = scores->size(0);
    const std::size_t nthr = thrs.size();
    const auto width = static_cast<std::size_t>(maxk) + 1;
    Session& ss = session();
    with_score_type(*scores, [&](auto tag) {
      using T = decltype(tag);
      const ThresholdSet<T> set(thrs);
      ss.prepare<T>(nthr * width, &set);
      ss.finish(tally_cuda::accuracy_counts(scores_view(*scores), labels_view(*labels, cols), maxk,
                                            ss.thresholds(nthr), ss.flags(), ss.counters(),
                                            Session::stream()),
                "accuracy_counts");
    });
    const auto& f = ss.host_flags();
    if (f.nan_row != tally_cuda::kNone) ss.fail_nan(*scores, kScores, f.nan_row, seen);
    if (f.bad_a != tally_cuda::kNone) ss.fail_id(*labels, kGtLabels, f.bad_a, cols, seen);
    const unsigned long long* hist = ss.host_counters();
    for (std::size_t i = 0; i < topk.size(); ++i) {
      const auto k = static_cast<std::size_t>(topk[i]);
      for (std::size_t j = 0; j < nthr; ++j) {
        std::int64_t sum = 0;
        for (std::size_t r = 0; r < k; ++r) sum += static_cast<std::int64_t>(hist[j * width + r]);
        hits[i * nthr + j] += sum;
      }
    }
    n += rows;
    return;
  }

  // pred_labels: top-1 only, no thresholds (the same refusals as the CPU path, first).
  if (maxk != 1)
    check.fail(kPredLabels, "holds one label per sample, so only top-1 is defined (topk is " +
                                Value(topk).to_json() + "); give '" + kScores +
                                "' for top-k accuracy");
  for (const auto& t : thrs)
    if (t)
      check.fail(kPredLabels,
                 "holds labels, not scores: thresholds (thrs) need '" + std::string(kScores) + "'");
  const Tensor* pred = nullptr;
  const Tensor* gt = nullptr;
  std::optional<Session> s;
  const auto session = [&]() -> Session& {
    if (!s) s.emplace(check, where.device);
    return *s;
  };
  run_metadata_checks({
      {[&] { pred = &label_tensor(check, batch, kPredLabels, where); }, {}},
      {{}, [&] { session().check_ids(*pred, kPredLabels, -1, seen); }},
      {[&] { gt = &label_tensor(check, batch, kGtLabels, where); }, {}},
      {{}, [&] { session().check_ids(*gt, kGtLabels, -1, seen); }},
      {[&] { check.same_rows(*pred, kPredLabels, *gt, kGtLabels); }, {}},
  });
  Session& ss = session();
  ss.prepare<float>(1, nullptr);
  ss.finish(tally_cuda::label_pair_counts(labels_view(*pred, -1), labels_view(*gt, -1),
                                          tally_cuda::PairMode::Equal, 1, ss.flags(), ss.counters(),
                                          Session::stream()),
            "label_pair_counts");
  const auto& f = ss.host_flags();
  if (f.bad_a != tally_cuda::kNone) ss.fail_id(*pred, kPredLabels, f.bad_a, -1, seen);
  if (f.bad_b != tally_cuda::kNone) ss.fail_id(*gt, kGtLabels, f.bad_b, -1, seen);
  const auto correct = static_cast<std::int64_t>(ss.host_counters()[0]);
  for (auto& h : hits) h += correct;
  n += pred->size(0);
}

// ---- SingleLabelMetric -------------------------------------------------------------------------

void single_label_update(const InputChecker& check, const std::vector<std::optional<double>>& thrs,
                         std::int64_t num_classes, const Batch& batch, std::int64_t& n,
                         const std::function<SingleLabelCounters(std::int64_t)>& size_state) {
  const Placement where = placement(batch);
  const std::int64_t seen = n;
  std::optional<Session> s;
  const auto session = [&]() -> Session& {
    if (!s) s.emplace(check, where.device);
    return *s;
  };
  if (has_scores(batch, check)) {
    const Tensor* scores = nullptr;
    const Tensor* labels = nullptr;
    std::int64_t cols = 0;
    run_metadata_checks({
        {[&] { scores = &score_tensor(check, batch, kScores, where); }, {}},
        {{}, [&] { session().check_nan(*scores, kScores, seen); }},
        {[&] { cols = score_classes(*scores, check); }, {}},
        {[&] { labels = &label_tensor(check, batch, kGtLabels, where); }, {}},
        {{}, [&] { session().check_ids(*labels, kGtLabels, cols, seen); }},
        {[&] { check.same_rows(*scores, kScores, *labels, kGtLabels); }, {}},
    });
    const std::int64_t rows = scores->size(0);
    const auto c = static_cast<std::size_t>(cols);
    const std::size_t nthr = thrs.size();
    Session& ss = session();
    with_score_type(*scores, [&](auto tag) {
      using T = decltype(tag);
      const ThresholdSet<T> set(thrs);
      ss.prepare<T>(c * (1 + 2 * nthr), &set);
      ss.finish(tally_cuda::single_label_counts(scores_view(*scores), labels_view(*labels, cols),
                                                ss.thresholds(nthr), ss.flags(), ss.counters(),
                                                Session::stream()),
                "single_label_counts");
    });
    const auto& f = ss.host_flags();
    if (f.nan_row != tally_cuda::kNone) ss.fail_nan(*scores, kScores, f.nan_row, seen);
    if (f.bad_a != tally_cuda::kNone) ss.fail_id(*labels, kGtLabels, f.bad_a, cols, seen);
    // The metric's own check of the class count comes last, as on the CPU path.
    const SingleLabelCounters out = size_state(cols);
    const unsigned long long* got = ss.host_counters();
    for (std::size_t i = 0; i < c; ++i) out.support[i] += static_cast<std::int64_t>(got[i]);
    for (std::size_t i = 0; i < nthr * c; ++i) {
      out.tp[i] += static_cast<std::int64_t>(got[c + i]);
      out.predicted[i] += static_cast<std::int64_t>(got[c + nthr * c + i]);
    }
    n += rows;
    return;
  }

  if (num_classes <= 0)
    check.fail_config(
        std::string(
            "parameter 'num_classes' is required when the predictions are labels (field '") +
        kPredLabels + "')");
  for (const auto& t : thrs)
    if (t)
      check.fail(kPredLabels,
                 "holds labels, not scores: thresholds (thrs) need '" + std::string(kScores) + "'");
  const Tensor* pred = nullptr;
  const Tensor* gt = nullptr;
  run_metadata_checks({
      {[&] { pred = &label_tensor(check, batch, kPredLabels, where); }, {}},
      {{}, [&] { session().check_ids(*pred, kPredLabels, num_classes, seen); }},
      {[&] { gt = &label_tensor(check, batch, kGtLabels, where); }, {}},
      {{}, [&] { session().check_ids(*gt, kGtLabels, num_classes, seen); }},
      {[&] { check.same_rows(*pred, kPredLabels, *gt, kGtLabels); }, {}},
  });
  const auto c = static_cast<std::size_t>(num_classes);
  Session& ss = session();
  ss.prepare<float>(3 * c, nullptr);
  ss.finish(
      tally_cuda::label_pair_counts(labels_view(*pred, num_classes), labels_view(*gt, num_classes),
                                    tally_cuda::PairMode::SingleLabel, num_classes, ss.flags(),
                                    ss.counters(), Session::stream()),
      "label_pair_counts");
  const auto& f = ss.host_flags();
  if (f.bad_a != tally_cuda::kNone) ss.fail_id(*pred, kPredLabels, f.bad_a, num_classes, seen);
  if (f.bad_b != tally_cuda::kNone) ss.fail_id(*gt, kGtLabels, f.bad_b, num_classes, seen);
  const SingleLabelCounters out = size_state(num_classes);
  const unsigned long long* got = ss.host_counters();
  for (std::size_t i = 0; i < c; ++i) {
    out.support[i] += static_cast<std::int64_t>(got[i]);
    out.tp[i] += static_cast<std::int64_t>(got[c + i]);
    out.predicted[i] += static_cast<std::int64_t>(got[2 * c + i]);
  }
  n += pred->size(0);
}

// ---- ConfusionMatrix ---------------------------------------------------------------------------

void confusion_matrix_update(const InputChecker& check, std::int64_t k, const Batch& batch,
                             std::vector<std::int64_t>& counts, std::int64_t& n) {
  const Placement where = placement(batch);
  const std::int64_t seen = n;
  std::optional<Session> s;
  const auto session = [&]() -> Session& {
    if (!s) s.emplace(check, where.device);
    return *s;
  };
  const auto cells = static_cast<std::size_t>(k * k);
  std::int64_t rows = 0;
  if (has_scores(batch, check)) {
    const Tensor* scores = nullptr;
    const Tensor* gt = nullptr;
    run_metadata_checks({
        {[&] { scores = &score_tensor(check, batch, kScores, where); }, {}},
        {{}, [&] { session().check_nan(*scores, kScores, seen); }},
        {[&] {
           const std::int64_t cols = score_classes(*scores, check);
           if (cols != k)
             check.fail(kScores, "has " + std::to_string(cols) + " columns, but num_classes is " +
                                     std::to_string(k));
         },
         {}},
        {[&] { gt = &label_tensor(check, batch, kGtLabels, where); }, {}},
        {{}, [&] { session().check_ids(*gt, kGtLabels, k, seen); }},
        {[&] { check.same_rows(*scores, kScores, *gt, kGtLabels); }, {}},
    });
    Session& ss = session();
    ss.prepare<float>(cells, nullptr);
    ss.finish(tally_cuda::confusion_matrix_scores(scores_view(*scores), labels_view(*gt, k),
                                                  ss.flags(), ss.counters(), Session::stream()),
              "confusion_matrix_scores");
    const auto& f = ss.host_flags();
    if (f.nan_row != tally_cuda::kNone) ss.fail_nan(*scores, kScores, f.nan_row, seen);
    if (f.bad_a != tally_cuda::kNone) ss.fail_id(*gt, kGtLabels, f.bad_a, k, seen);
    rows = scores->size(0);
  } else {
    const Tensor* pred = nullptr;
    const Tensor* gt = nullptr;
    run_metadata_checks({
        {[&] { pred = &label_tensor(check, batch, kPredLabels, where); }, {}},
        {{}, [&] { session().check_ids(*pred, kPredLabels, k, seen); }},
        {[&] { gt = &label_tensor(check, batch, kGtLabels, where); }, {}},
        {{}, [&] { session().check_ids(*gt, kGtLabels, k, seen); }},
        {[&] { check.same_rows(*pred, kPredLabels, *gt, kGtLabels); }, {}},
    });
    Session& ss = session();
    ss.prepare<float>(cells, nullptr);
    ss.finish(tally_cuda::confusion_matrix_counts(labels_view(*pred, k), labels_view(*gt, k), k,
                                                  ss.flags(), ss.counters(), Session::stream()),
              "confusion_matrix_counts");
    const auto& f = ss.host_flags();
    if (f.bad_a != tally_cuda::kNone) ss.fail_id(*pred, kPredLabels, f.bad_a, k, seen);
    if (f.bad_b != tally_cuda::kNone) ss.fail_id(*gt, kGtLabels, f.bad_b, k, seen);
    rows = pred->size(0);
  }
  const unsigned long long* got = s->host_counters();
  for (std::size_t i = 0; i < cells; ++i) counts[i] += static_cast<std::int64_t>(got[i]);
  n += rows;
}

}  // namespace tally::classification::gpu
