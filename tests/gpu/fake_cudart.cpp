// A stand-in for the CUDA runtime, for tests on machines without a GPU: one "device" whose
// memory is host memory, synchronous copies, and the kernels of kernels.cu run on the CPU by
// cuda_emulation.hpp (emulated_kernels.cpp). Only the calls the classification GPU path, the
// nccl backend and their tests make; a test executable links this instead of libcudart. It lets the
// metrics' whole GPU path -- checks, workspace, launches, flags, folding into the state -- run and
// be compared with the CPU path here; what it cannot show is the behaviour of real device memory
// and hardware.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

namespace {

struct Allocation {
  std::size_t size = 0;
  cudaMemoryType type = cudaMemoryTypeDevice;
};

std::mutex g_mutex;
std::map<const std::byte*, Allocation>& allocations() {
  static std::map<const std::byte*, Allocation> a;
  return a;
}
thread_local int g_device = 0;

void* allocate(std::size_t n, cudaMemoryType type) {
  const std::size_t rounded = (std::max<std::size_t>(n, 1) + 255) / 256 * 256;
  void* p = std::aligned_alloc(256, rounded);
  if (p == nullptr) return nullptr;
  std::memset(p, 0xa5, rounded);  // device memory is not zeroed
  std::lock_guard lock(g_mutex);
  allocations()[static_cast<const std::byte*>(p)] = Allocation{n, type};
  return p;
}

cudaError_t release(void* p, cudaMemoryType type) {
  if (p == nullptr) return cudaSuccess;
  std::lock_guard lock(g_mutex);
  auto it = allocations().find(static_cast<const std::byte*>(p));
  if (it == allocations().end() || it->second.type != type) return cudaErrorInvalidValue;
  allocations().erase(it);
  std::free(p);
  return cudaSuccess;
}

}  // namespace

extern "C" {

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : "fake CUDA runtime error";
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) { return cudaSuccess; }

cudaError_t cudaGetDevice(int* device) {
  *device = g_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  g_device = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  switch (attr) {
    case cudaDevAttrMultiProcessorCount:
      *value = 2;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = 227 * 1024;
      break;
    default:
      *value = 0;
      break;
  }
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void*, enum cudaFuncAttribute, int value) {
  return value > 227 * 1024 ? cudaErrorInvalidValue : cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void*, int threads,
                                                          size_t shared) {
  *blocks = threads > 1024 || shared > 227 * 1024 ? 0 : 1;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t size) {
  *p = allocate(size, cudaMemoryTypeDevice);
  return *p != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void* p) { return release(p, cudaMemoryTypeDevice); }

cudaError_t cudaHostAlloc(void** p, size_t size, unsigned int) {
  *p = allocate(size, cudaMemoryTypeHost);
  return *p != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void* p) { return release(p, cudaMemoryTypeHost); }

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes* attr, const void* ptr) {
  std::memset(attr, 0, sizeof *attr);
  attr->type = cudaMemoryTypeUnregistered;
  attr->device = -2;
  const auto* p = static_cast<const std::byte*>(ptr);
  std::lock_guard lock(g_mutex);
  auto it = allocations().upper_bound(p);
  if (it == allocations().begin()) return cudaSuccess;
  --it;
  if (p < it->first + std::max<std::size_t>(it->second.size, 1)) {
    attr->type = it->second.type;
    attr->device = 0;
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind) {
  if (count != 0) std::memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t) {
  return cudaMemcpy(dst, src, count, kind);
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t count, cudaStream_t) {
  if (count != 0) std::memset(p, value, count);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

// Work is done when it is queued, unless TALLY_FAKE_CUDA_STREAM_HANG asks for a stream that
// never finishes (a collective another rank never joins).
cudaError_t cudaStreamQuery(cudaStream_t) {
  const char* hang = std::getenv("TALLY_FAKE_CUDA_STREAM_HANG");
  return hang != nullptr && *hang != '\0' && *hang != '0' ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  *stream = reinterpret_cast<cudaStream_t>(new char);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete reinterpret_cast<char*>(stream);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

}  // extern "C"
