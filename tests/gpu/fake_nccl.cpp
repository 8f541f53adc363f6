// A stand-in for libnccl.so.2, for tests on machines without a GPU (with fake_cudart.cpp, "device"
// memory is host memory). It answers like a non-blocking communicator -- ncclInProgress first,
// then ncclSuccess through ncclCommGetAsyncError -- so the backend's polling runs, and injects
// faults on request:
//   TALLY_FAKE_NCCL_INIT_HANG=1     the communicator never finishes initialising
//   TALLY_FAKE_NCCL_ASYNC_ERROR=1   every later ncclCommGetAsyncError reports ncclRemoteError
//
// A world of one: the collectives are host copies. A world of several processes on one machine
// (or on network namespaces that share its file system): the unique id names a folder (under
// TMPDIR, else /tmp), made by the first rank to join, in which every message from rank s to rank d
// is a file "m-<s>-<d>-<k>" (the k-th from s to d: point-to-point calls match in order per pair,
// as NCCL's do), written to a temporary name and renamed. Sends write at once; receives are
// pending until their file is there, and are completed by ncclCommGetAsyncError, which answers
// ncclInProgress until then. The collectives are made of these: ncclAllGather (to and from every
// rank), ncclBroadcast (from the root), ncclReduce (to the root, combined there in rank order);
// ncclSend/ncclRecv inside ncclGroupStart/ncclGroupEnd are the point-to-point calls themselves.
// Initialisation waits until every rank has joined (a file "joined-<r>" each), so a missing
// rank, or a rank given another id, leaves the others in ncclInProgress until their timeout. The
// last rank to leave (ncclCommDestroy or ncclCommAbort) removes the folder.
//
// Built as libnccl.so.2 (its SONAME) in a folder of its own; the test loads it by its path first,
// so that the backend's dlopen("libnccl.so.2") finds it rather than the real one.
#include <fcntl.h>
#include <nccl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace {

// A receive not yet completed: `count` bytes from `src` into `dst`.
struct PendingRecv {
  int src = 0;
  std::uint64_t k = 0;  // the k-th message from src to this rank
  std::byte* dst = nullptr;
  std::size_t count = 0;
};

// A reduction at the root, applied once every contribution has arrived.
struct PendingReduce {
  std::int64_t* values = nullptr;
  std::size_t count = 0;
  ncclRedOp_t op = ncclSum;
  std::vector<std::vector<std::int64_t>> from;  // from[r]: rank r's values (the root's unused)
};

struct FakeComm {
  int pending = 0;  // polls of ncclCommGetAsyncError still answering ncclInProgress
  bool init_hang = false;
  int rank = 0;
  int nranks = 1;
  std::filesystem::path dir;            // a world of several: the folder of the messages
  bool joining = false;                 // waiting for every rank to join
  std::vector<std::uint64_t> sent;      // sent[d]: messages sent to rank d so far
  std::vector<std::uint64_t> received;  // received[s]: receives posted from rank s so far
  std::vector<PendingRecv> recvs;
  std::vector<PendingReduce> reduces;
  ncclResult_t error = ncclSuccess;  // a failed message (wrong size, unreadable)
};

bool flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

thread_local const char* g_last = "";
thread_local std::string g_last_text;
thread_local int g_group_depth = 0;

void set_last(std::string text) {
  g_last_text = std::move(text);
  g_last = g_last_text.c_str();
}

std::filesystem::path message_path(const FakeComm& c, int src, int dst, std::uint64_t k) {
  return c.dir / ("m-" + std::to_string(src) + "-" + std::to_string(dst) + "-" + std::to_string(k));
}

// Writes `n` bytes to `path` whole: a temporary name, then a rename.
bool write_file(const std::filesystem::path& path, const void* data, std::size_t n) {
  const std::string tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const auto* p = static_cast<const char*>(data);
  std::size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ::close(fd);
      return false;
    }
    done += static_cast<std::size_t>(w);
  }
  if (::close(fd) != 0) return false;
  return ::rename(tmp.c_str(), path.c_str()) == 0;
}

ncclResult_t send_to(FakeComm& c, const void* data, std::size_t n, int dst) {
  const std::uint64_t k = c.sent[static_cast<std::size_t>(dst)]++;
  if (!write_file(message_path(c, c.rank, dst, k), data, n)) {
    set_last("fake NCCL: cannot write a message in " + c.dir.string() + ": " +
             std::strerror(errno));
    return ncclSystemError;
  }
  return ncclSuccess;
}

void recv_from(FakeComm& c, void* dst, std::size_t n, int src) {
  const std::uint64_t k = c.received[static_cast<std::size_t>(src)]++;
  c.recvs.push_back(PendingRecv{src, k, static_cast<std::byte*>(dst), n});
}

// Completes the receives whose messages have arrived. True when none is left.
bool progress(FakeComm& c) {
  for (auto it = c.recvs.begin(); it != c.recvs.end();) {
    const auto path = message_path(c, it->src, c.rank, it->k);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      ++it;
      continue;
    }
    struct stat st {};
    ::fstat(fd, &st);
    if (static_cast<std::size_t>(st.st_size) != it->count) {
      ::close(fd);
      set_last("fake NCCL: rank " + std::to_string(it->src) + " sent " +
               std::to_string(st.st_size) + " bytes, rank " + std::to_string(c.rank) +
               " receives " + std::to_string(it->count));
      c.error = ncclInvalidUsage;
      return false;
    }
    std::size_t done = 0;
    while (done < it->count) {
      const ssize_t r = ::read(fd, it->dst + done, it->count - done);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      done += static_cast<std::size_t>(r);
    }
    ::close(fd);
    ::unlink(path.c_str());
    if (done != it->count) {
      set_last("fake NCCL: cannot read " + path.string());
      c.error = ncclSystemError;
      return false;
    }
    it = c.recvs.erase(it);
  }
  if (!c.recvs.empty()) return false;
  for (auto& red : c.reduces) {
    for (std::size_t r = 0; r < red.from.size(); ++r) {
      if (static_cast<int>(r) == c.rank) continue;
      for (std::size_t i = 0; i < red.count; ++i) {
        const std::int64_t a = red.values[i];
        const std::int64_t b = red.from[r][i];
        red.values[i] = red.op == ncclMin ? (b < a ? b : a)
                        : red.op == ncclMax
                            ? (b > a ? b : a)
                            : static_cast<std::int64_t>(static_cast<std::uint64_t>(a) +
                                                        static_cast<std::uint64_t>(b));
      }
    }
  }
  c.reduces.clear();
  return true;
}

bool everyone_joined(const FakeComm& c) {
  for (int r = 0; r < c.nranks; ++r) {
    std::error_code ec;
    if (!std::filesystem::exists(c.dir / ("joined-" + std::to_string(r)), ec)) return false;
  }
  return true;
}

// The last rank to go removes the folder.
void leave(FakeComm* c) {
  if (c->dir.empty()) return;
  write_file(c->dir / ("left-" + std::to_string(c->rank)), "", 0);
  for (int r = 0; r < c->nranks; ++r) {
    std::error_code ec;
    if (!std::filesystem::exists(c->dir / ("left-" + std::to_string(r)), ec)) return;
  }
  std::error_code ec;
  std::filesystem::remove_all(c->dir, ec);
}

// The id: 'F', then the folder of a world of several, NUL-terminated.
std::string folder_of(const ncclUniqueId& id) {
  const std::size_t n = strnlen(id.internal + 1, sizeof id.internal - 1);
  return std::string(id.internal + 1, n);
}

}  // namespace

extern "C" {

// Lets a test check that this library, not the real one, was loaded.
__attribute__((visibility("default"))) int tally_fake_nccl = 1;
// The id the last communicator of this process was made with: a test compares it across ranks.
__attribute__((visibility("default"))) char tally_fake_nccl_last_id[NCCL_UNIQUE_ID_BYTES] = {};
// ncclSend and ncclRecv calls made in this process: a test sees which primitive the engine used.
__attribute__((visibility("default"))) std::atomic<long> tally_fake_nccl_sends{0};
__attribute__((visibility("default"))) std::atomic<long> tally_fake_nccl_recvs{0};

__attribute__((visibility("default"))) ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static std::atomic<unsigned> counter{0};
  std::memset(id->internal, 0, sizeof id->internal);
  id->internal[0] = 'F';
  const char* tmp = std::getenv("TMPDIR");
  std::string base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  std::string name = "/tally-fake-nccl-" + std::to_string(::getpid()) + "-" +
                     std::to_string(counter++) + "-" + std::to_string(now % 1000000007);
  if (base.size() + name.size() + 2 > sizeof id->internal) base = "/tmp";
  const std::string folder = base + name;
  std::memcpy(id->internal + 1, folder.data(), folder.size());
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t ncclCommInitRankConfig(
    ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  if (nranks < 1 || rank < 0 || rank >= nranks || id.internal[0] != 'F') {
    g_last = "fake NCCL: a rank outside the world, or an id not made by this fake";
    return ncclInvalidArgument;
  }
  const bool blocking = config == nullptr || config->blocking != 0;
  if (nranks > 1 && blocking) {
    g_last = "fake NCCL: a world of several needs a non-blocking communicator";
    return ncclInvalidArgument;
  }
  std::memcpy(tally_fake_nccl_last_id, id.internal, sizeof id.internal);
  auto* c = new FakeComm;
  c->init_hang = flag("TALLY_FAKE_NCCL_INIT_HANG");
  c->rank = rank;
  c->nranks = nranks;
  c->sent.assign(static_cast<std::size_t>(nranks), 0);
  c->received.assign(static_cast<std::size_t>(nranks), 0);
  if (nranks > 1) {
    c->dir = folder_of(id);
    std::error_code ec;
    std::filesystem::create_directories(c->dir, ec);
    if (!write_file(c->dir / ("joined-" + std::to_string(rank)), "", 0)) {
      set_last("fake NCCL: cannot join in " + c->dir.string() + ": " + std::strerror(errno));
      delete c;
      return ncclSystemError;
    }
    c->joining = true;
  }
  *comm = reinterpret_cast<ncclComm_t>(c);
  if (!blocking) {
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
    return ncclSuccess;
  }
  if (c->error != ncclSuccess) {
    *state = c->error;
    return ncclSuccess;
  }
  if (c->joining && everyone_joined(*c)) c->joining = false;
  const bool done = progress(*c);
  if (c->error != ncclSuccess) {
    *state = c->error;
  } else if (c->init_hang || c->pending > 0 || c->joining || !done) {
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
  auto* c = reinterpret_cast<FakeComm*>(comm);
  if (type != ncclUint8) return ncclInvalidArgument;
  auto* out = static_cast<std::byte*>(recv);
  if (send != out + count * static_cast<std::size_t>(c->rank))
    std::memmove(out + count * static_cast<std::size_t>(c->rank), send, count);
  for (int r = 0; r < c->nranks; ++r) {
    if (r == c->rank) continue;
    if (const ncclResult_t e = send_to(*c, send, count, r); e != ncclSuccess) return e;
    recv_from(*c, out + count * static_cast<std::size_t>(r), count, r);
  }
  c->pending = 1;
  return ncclInProgress;  // enqueued a moment later, as a non-blocking communicator may answer
}

__attribute__((visibility("default"))) ncclResult_t ncclBroadcast(const void* send, void* recv,
                                                                  size_t count, ncclDataType_t type,
                                                                  int root, ncclComm_t comm,
                                                                  cudaStream_t) {
  auto* c = reinterpret_cast<FakeComm*>(comm);
  if (type != ncclUint8 || root < 0 || root >= c->nranks) return ncclInvalidArgument;
  if (c->rank == root) {
    if (send != recv) std::memmove(recv, send, count);
    for (int r = 0; r < c->nranks; ++r)
      if (r != root)
        if (const ncclResult_t e = send_to(*c, send, count, r); e != ncclSuccess) return e;
    return ncclSuccess;
  }
  recv_from(*c, recv, count, root);
  return ncclInProgress;
}

__attribute__((visibility("default"))) ncclResult_t ncclReduce(const void* send, void* recv,
                                                               size_t count, ncclDataType_t type,
                                                               ncclRedOp_t op, int root,
                                                               ncclComm_t comm, cudaStream_t) {
  auto* c = reinterpret_cast<FakeComm*>(comm);
  if (type != ncclInt64 || root < 0 || root >= c->nranks ||
      (op != ncclSum && op != ncclMin && op != ncclMax))
    return ncclInvalidArgument;
  const std::size_t bytes = count * sizeof(std::int64_t);
  if (c->rank != root) {
    if (const ncclResult_t e = send_to(*c, send, bytes, root); e != ncclSuccess) return e;
  } else {
    if (send != recv) std::memmove(recv, send, bytes);
    PendingReduce red;
    red.values = static_cast<std::int64_t*>(recv);
    red.count = count;
    red.op = op;
    red.from.resize(static_cast<std::size_t>(c->nranks));
    c->reduces.push_back(std::move(red));
    auto& from = c->reduces.back().from;
    for (int r = 0; r < c->nranks; ++r) {
      if (r == root) continue;
      from[static_cast<std::size_t>(r)].resize(count);
      recv_from(*c, from[static_cast<std::size_t>(r)].data(), bytes, r);
    }
  }
  c->pending = 1;
  return ncclInProgress;
}

__attribute__((visibility("default"))) ncclResult_t ncclGroupStart() {
  ++g_group_depth;
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t ncclGroupEnd() {
  if (g_group_depth == 0) {
    g_last = "fake NCCL: ncclGroupEnd without ncclGroupStart";
    return ncclInvalidUsage;
  }
  --g_group_depth;
  // Work is pending until ncclCommGetAsyncError completes it.
  return ncclInProgress;
}

__attribute__((visibility("default"))) ncclResult_t ncclSend(const void* send, size_t count,
                                                             ncclDataType_t type, int peer,
                                                             ncclComm_t comm, cudaStream_t) {
  auto* c = reinterpret_cast<FakeComm*>(comm);
  if ((type != ncclUint8 && type != ncclChar) || peer < 0 || peer >= c->nranks || peer == c->rank) {
    g_last = "fake NCCL: ncclSend of another type than ncclUint8, or to no other rank";
    return ncclInvalidArgument;
  }
  if (g_group_depth == 0) {
    g_last = "fake NCCL: ncclSend outside a group (tally always groups them)";
    return ncclInvalidUsage;
  }
  ++tally_fake_nccl_sends;
  return send_to(*c, send, count, peer);
}

__attribute__((visibility("default"))) ncclResult_t ncclRecv(void* recv, size_t count,
                                                             ncclDataType_t type, int peer,
                                                             ncclComm_t comm, cudaStream_t) {
  auto* c = reinterpret_cast<FakeComm*>(comm);
  if ((type != ncclUint8 && type != ncclChar) || peer < 0 || peer >= c->nranks || peer == c->rank) {
    g_last = "fake NCCL: ncclRecv of another type than ncclUint8, or from no other rank";
    return ncclInvalidArgument;
  }
  if (g_group_depth == 0) {
    g_last = "fake NCCL: ncclRecv outside a group (tally always groups them)";
    return ncclInvalidUsage;
  }
  ++tally_fake_nccl_recvs;
  recv_from(*c, recv, count, peer);
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  reinterpret_cast<FakeComm*>(comm)->pending = 2;
  return ncclInProgress;
}

__attribute__((visibility("default"))) ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  auto* c = reinterpret_cast<FakeComm*>(comm);
  leave(c);
  delete c;
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t ncclCommAbort(ncclComm_t comm) {
  auto* c = reinterpret_cast<FakeComm*>(comm);
  leave(c);
  delete c;
  return ncclSuccess;
}

__attribute__((visibility("default"))) const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
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
