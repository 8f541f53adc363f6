// A stand-in for libnccl.so.2, for tests on machines without a GPU: a world of one whose
// collectives are host copies (with fake_cudart.cpp, "device" memory is host memory). It answers
// like a non-blocking communicator -- ncclInProgress first, then ncclSuccess through
// ncclCommGetAsyncError -- so the backend's polling runs, and injects faults on request:
//   TALLY_FAKE_NCCL_INIT_HANG=1     the communicator never finishes initialising
//   TALLY_FAKE_NCCL_ASYNC_ERROR=1   every later ncclCommGetAsyncError reports ncclRemoteError
// Built as libnccl.so.2 (its SONAME) in a folder of its own; the test loads it by its path
// first, so that the backend's dlopen("libnccl.so.2") finds it rather than the real one.
#include <nccl.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

struct FakeComm {
  int pending = 0;  // polls of ncclCommGetAsyncError still answering ncclInProgress
  bool init_hang = false;
};

bool flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

thread_local const char* g_last = "";

}  // namespace

extern "C" {

// Lets a test check that this library, not the real one, was loaded.
__attribute__((visibility("default"))) int tally_fake_nccl = 1;

__attribute__((visibility("default"))) ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id->internal, 'F', sizeof id->internal);
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t ncclCommInitRankConfig(
    ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  if (nranks != 1 || rank != 0 || id.internal[0] != 'F') {
    g_last = "fake NCCL: a world of one only";
    return ncclInvalidArgument;
  }
  auto* c = new FakeComm;
  c->init_hang = flag("TALLY_FAKE_NCCL_INIT_HANG");
  *comm = reinterpret_cast<ncclComm_t>(c);
  if (config != nullptr && config->blocking == 0) {
    c->pending = 3;
    return ncclInProgress;
  }
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t ncclCommGetAsyncError(ncclComm_t comm,
                                                                          ncclResult_t* state) {
  auto* c = reinterpret_cast<FakeComm*>(comm);
  if (flag("TALLY_FAKE_NCCL_ASYNC_ERROR")) {
    g_last = "fake NCCL: injected remote error";
    *state = ncclRemoteError;
  } else if (c->init_hang || c->pending > 0) {
    if (c->pending > 0) --c->pending;
    *state = ncclInProgress;
  } else {
    *state = ncclSuccess;
  }
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t ncclAllGather(const void* send, void* recv,
                                                                  size_t count, ncclDataType_t type,
                                                                  ncclComm_t comm, cudaStream_t) {
  if (type != ncclUint8) return ncclInvalidArgument;
  if (send != recv) std::memmove(recv, send, count);
  reinterpret_cast<FakeComm*>(comm)->pending = 1;
  return ncclInProgress;  // enqueued a moment later, as a non-blocking communicator may answer
}

__attribute__((visibility("default"))) ncclResult_t ncclBroadcast(const void* send, void* recv,
                                                                  size_t count, ncclDataType_t type,
                                                                  int root, ncclComm_t,
                                                                  cudaStream_t) {
  if (type != ncclUint8 || root != 0) return ncclInvalidArgument;
  if (send != recv) std::memmove(recv, send, count);
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t ncclReduce(const void* send, void* recv,
                                                               size_t count, ncclDataType_t type,
                                                               ncclRedOp_t op, int root,
                                                               ncclComm_t comm, cudaStream_t) {
  if (type != ncclInt64 || root != 0 || (op != ncclSum && op != ncclMin && op != ncclMax))
    return ncclInvalidArgument;
  if (send != recv) std::memmove(recv, send, count * sizeof(std::int64_t));
  reinterpret_cast<FakeComm*>(comm)->pending = 1;
  return ncclInProgress;
}

__attribute__((visibility("default"))) ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  reinterpret_cast<FakeComm*>(comm)->pending = 2;
  return ncclInProgress;
}

__attribute__((visibility("default"))) ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete reinterpret_cast<FakeComm*>(comm);
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t ncclCommAbort(ncclComm_t comm) {
  delete reinterpret_cast<FakeComm*>(comm);
  return ncclSuccess;
}

__attribute__((visibility("default"))) const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unhandled error";
  }
}

__attribute__((visibility("default"))) const char* ncclGetLastError(ncclComm_t) { return g_last; }

}  // extern "C"
