// See tcp_store.hpp. The wire protocol is PyTorch's c10d TCPStore (TCPStoreBackend.hpp): every
// request is a QueryType byte and its arguments; integers travel in the host's byte order (as
// torch sends them: every rank of a job runs on little-endian x86-64 or aarch64), strings and
// byte vectors as a uint64 length and the bytes. A connection begins with VALIDATE and the magic
// number. Like torch's own client, this one puts "/" before every key (torch's TCPStore has
// keyPrefix_ "/"), so a key is named the same from tally and from torch.distributed.TCPStore.
#include "tcp_store.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "tally/sdk/error.hpp"
#include "tally/sdk/params.hpp"

namespace tally_store {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kMagic = 0x3C85F7CE;
enum class Query : std::uint8_t {
  Validate = 0,
  Set,
  CompareSet,
  Get,
  Add,
  Check,
  Wait,
  GetNumKeys,
  DeleteKey,
  Append,
  MultiGet,
  MultiSet,
  CancelWait,
  Ping,
};
constexpr std::uint8_t kReady = 0;         // CheckResponseType::READY
constexpr std::uint8_t kNotReady = 1;      // CheckResponseType::NOT_READY
constexpr std::uint8_t kStopWaiting = 0;   // WaitResponseType::STOP_WAITING
constexpr std::uint8_t kWaitCanceled = 1;  // WaitResponseType::WAIT_CANCELED

[[noreturn]] void config_error(std::string_view who, const std::string& what) {
  throw tally::ConfigError(std::string(who) + what);
}

std::string errno_text(int e) { return std::strerror(e); }

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return 0;
  return static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30));
}

std::string seconds_text(std::chrono::milliseconds t) {
  const double s = static_cast<double>(t.count()) / 1000.0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", s);
  return buf;
}

std::string host_port(const std::string& host, std::uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

/// An I/O failure on a connection: the caller adds who, where and what for.
struct IoFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
  bool timed_out = false;
};

[[noreturn]] void io_fail(const std::string& what, bool timed_out = false) {
  IoFailure f(what);
  f.timed_out = timed_out;
  throw f;
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Writes all of `data` before `deadline`.
void send_all(int fd, const std::uint8_t* data, std::size_t n, Clock::time_point deadline) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w > 0) {
      data += w;
      n -= static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, ms_left(deadline));
      if (r == 0) io_fail("sending timed out", true);
      if (r < 0 && errno != EINTR) io_fail("poll: " + errno_text(errno));
      continue;
    }
    io_fail("the store closed the connection (send: " + errno_text(errno) + ")");
  }
}

// Reads exactly `n` bytes before `deadline`; a closed connection is an error.
void recv_all(int fd, std::uint8_t* data, std::size_t n, Clock::time_point deadline) {
  while (n > 0) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, ms_left(deadline));
    if (r == 0) io_fail("timed out", true);
    if (r < 0) {
      if (errno == EINTR) continue;
      io_fail("poll: " + errno_text(errno));
    }
    const ssize_t got = ::recv(fd, data, n, 0);
    if (got > 0) {
      data += got;
      n -= static_cast<std::size_t>(got);
      continue;
    }
    if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    // A reset is the store closing the connection while our requests were still unread in its
    // buffer (it does when a client breaks a bound): the same event as an orderly close.
    if (got == 0 || errno == ECONNRESET)
      io_fail(got == 0 ? std::string("the store closed the connection")
                       : "the store closed the connection (" + errno_text(errno) + ")");
    io_fail("the connection failed: " + errno_text(errno));
  }
}

/// A request being written: the query and its arguments, as torch's client sends them.
class Request {
 public:
  explicit Request(Query q) { bytes_.push_back(static_cast<std::uint8_t>(q)); }
  template <class T>
  Request& value(T v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof v);
    return *this;
  }
  Request& bytes(const void* data, std::size_t n) {
    value<std::uint64_t>(n);
    const auto* p = static_cast<const std::uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
    return *this;
  }
  Request& string(std::string_view s) { return bytes(s.data(), s.size()); }
  const std::vector<std::uint8_t>& data() const { return bytes_; }

 private:
  std::vector<std::uint8_t> bytes_;
};

// Connects to host:port once (every address getaddrinfo gives, IPv4 or IPv6), non-blocking,
// before `deadline`. Returns -1 and the reason in `why` when no address accepts.
int connect_once(const std::string& host, std::uint16_t port, Clock::time_point deadline,
                 std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
  if (rc != 0) {
    why = "cannot resolve '" + host + "': " + ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = list; a != nullptr && fd < 0; a = a->ai_next) {
    const int s = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (s < 0) {
      why = "socket: " + errno_text(errno);
      continue;
    }
    set_nonblocking(s);
    int r = ::connect(s, a->ai_addr, a->ai_addrlen);
    if (r != 0 && errno == EINPROGRESS) {
      pollfd p{s, POLLOUT, 0};
      const int pr = ::poll(&p, 1, std::min(ms_left(deadline), 2000));
      int err = ETIMEDOUT;
      if (pr > 0) {
        socklen_t len = sizeof err;
        ::getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
      }
      r = err == 0 ? 0 : -1;
      errno = err;
    }
    if (r == 0) {
      set_nodelay(s);
      fd = s;
    } else {
      why = "connect: " + errno_text(errno);
      ::close(s);
    }
  }
  ::freeaddrinfo(list);
  return fd;
}

}  // namespace

// ---- the environment ------------------------------------------------------------------------

std::string first_slurm_host(std::string_view nodelist, std::string_view who) {
  const auto bad = [&](const std::string& why) -> std::string {
    config_error(who, "SLURM_STEP_NODELIST='" + std::string(nodelist) +
                          "' is not a Slurm host list (" + why + ")");
  };
  // The first entry: up to the first comma outside brackets.
  std::string out;
  int depth = 0;
  std::size_t i = 0;
  for (; i < nodelist.size(); ++i) {
    const char c = nodelist[i];
    if (c == '[') {
      if (depth++ != 0) bad("nested '['");
      // The first number of the first range inside the brackets, with its leading zeros.
      std::size_t j = i + 1;
      std::string digits;
      while (j < nodelist.size() && nodelist[j] >= '0' && nodelist[j] <= '9')
        digits += nodelist[j++];
      if (digits.empty()) bad("'[' not followed by a number");
      out += digits;
      // Skip to the closing bracket.
      while (j < nodelist.size() && nodelist[j] != ']') {
        const char d = nodelist[j];
        if (!((d >= '0' && d <= '9') || d == '-' || d == ','))
          bad("'" + std::string(1, d) + "' in brackets");
        ++j;
      }
      if (j >= nodelist.size()) bad("'[' without ']'");
      depth = 0;
      i = j;
      continue;
    }
    if (c == ']') bad("']' without '['");
    if (c == ',') break;
    if (c == ' ' || c == '\t' || c == '\n') bad("a space");
    out += c;
  }
  if (out.empty()) bad("no host name");
  return out;
}

namespace {

std::uint16_t parse_port(const char* name, const char* value, std::string_view who) {
  const std::string_view s(value);
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 1 || v > 65535)
    config_error(who, std::string(name) + "='" + std::string(s) +
                          "' is not a port number (an integer from 1 to 65535)");
  return static_cast<std::uint16_t>(v);
}

}  // namespace

std::optional<StoreAddress> store_address_from_env(const GetEnv& env, int rank,
                                                   std::string_view who) {
  const char* addr = env("MASTER_ADDR");
  const char* port = env("MASTER_PORT");
  if (addr != nullptr || (port != nullptr && env("SLURM_STEP_NODELIST") == nullptr)) {
    if (addr == nullptr || port == nullptr) {
      config_error(who, std::string(addr != nullptr ? "MASTER_ADDR" : "MASTER_PORT") +
                            " is set but " + (addr != nullptr ? "MASTER_PORT" : "MASTER_ADDR") +
                            " is not: the store's address needs both (torchrun sets them)");
    }
    if (*addr == '\0') config_error(who, "MASTER_ADDR is set but empty");
    StoreAddress out;
    out.host = addr;
    out.port = parse_port("MASTER_PORT", port, who);
    const char* agent = env("TORCHELASTIC_USE_AGENT_STORE");
    const bool agent_store =
        agent != nullptr && (std::string_view(agent) == "True" ||
                             std::string_view(agent) == "true" || std::string_view(agent) == "1");
    out.host_here = rank == 0 && !agent_store;
    out.agent_store = agent_store;
    out.source = "MASTER_ADDR=" + out.host + ", MASTER_PORT=" + port;
    if (agent_store) out.source += ", TORCHELASTIC_USE_AGENT_STORE=" + std::string(agent);
    out.source += env("TORCHELASTIC_RUN_ID") != nullptr ? " (torchrun)" : "";
    return out;
  }
  const char* nodes = env("SLURM_STEP_NODELIST");
  const char* job = env("SLURM_JOB_ID");
  if (nodes != nullptr && job != nullptr) {
    StoreAddress out;
    out.host = first_slurm_host(nodes, who);
    if (port != nullptr) {
      out.port = parse_port("MASTER_PORT", port, who);
    } else {
      const std::string_view s(job);
      unsigned long long id = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
      if (s.empty() || ec != std::errc() || end != s.data() + s.size())
        config_error(who, "SLURM_JOB_ID='" + std::string(s) + "' is not an integer");
      out.port = static_cast<std::uint16_t>(20000 + id % 10000);
    }
    out.host_here = rank == 0;
    out.source = "SLURM_STEP_NODELIST=" + std::string(nodes) + ", SLURM_JOB_ID=" + job +
                 (port != nullptr ? ", MASTER_PORT=" + std::string(port) : "") + " (Slurm)";
    return out;
  }
  return std::nullopt;
}

void check_world_fits(int world, int per_peer, bool hosts_store, const std::string& source,
                      std::string_view who) {
  const std::string what = "a world of " + std::to_string(world) + " ranks (" + source + ")";
  if (world > kMaxWorldSize)
    config_error(who, what + " is more than the largest a job over the TCP store may have (" +
                          std::to_string(kMaxWorldSize) + ")");
  const std::uint64_t need = 64 + static_cast<std::uint64_t>(per_peer) * (world - 1) +
                             (hosts_store ? 2 * static_cast<std::uint64_t>(world) : 0);
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < need) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max == RLIM_INFINITY ? need : std::min<rlim_t>(lim.rlim_max, need);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < need)
    config_error(
        who, what + " needs about " + std::to_string(need) + " file descriptors in this process" +
                 (hosts_store ? " (it serves the store to every rank)" : "") +
                 ", and its limit is " + std::to_string(lim.rlim_cur) + " (ulimit -n; hard limit " +
                 (lim.rlim_max == RLIM_INFINITY ? std::string("unlimited")
                                                : std::to_string(lim.rlim_max)) +
                 "): raise the limit or start fewer ranks");
}

// ---- trust: the secret, where the server listens --------------------------------------------

namespace {

constexpr std::size_t kMaxSecretBytes = 4096;
// The reserved keys of the authentication (on the wire, with torch's "/" before them).
const std::string kNonceKey = "/tally/auth/nonce";
const std::string kProofKey = "/tally/auth/proof";

std::string hex_of(const unsigned char* p, std::size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

// The kernel's random bytes (getrandom): no per-thread state of a library to outlive.
std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> b(bytes);
  for (std::size_t at = 0; at < b.size();) {
    const ssize_t got = ::getrandom(b.data() + at, b.size() - at, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw tally::RuntimeError("TCP store: getrandom: " + errno_text(errno));
    at += static_cast<std::size_t>(got);
  }
  return hex_of(b.data(), b.size());
}

// libcrypto without its clean-up at exit: servers of the job serve until the process exits, and
// a clean-up that came before their threads end would leave those threads' state behind (each
// thread frees its own when it ends, OPENSSL_thread_stop).
void init_openssl() {
  static const bool ok = OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr) == 1;
  if (!ok) throw tally::RuntimeError("TCP store: OpenSSL's libcrypto did not initialize");
}

// The proof of `secret` for `nonce`: the hex HMAC-SHA256 of the nonce under the secret.
std::string proof_of(const std::string& secret, std::string_view nonce) {
  init_openssl();
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(nonce.data()), nonce.size(), mac,
           &len) == nullptr)
    throw tally::RuntimeError("TCP store: OpenSSL's HMAC failed");
  return hex_of(mac, len);
}

bool is_loopback(const sockaddr* a) {
  if (a->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
  if (a->sa_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

std::string mode_text(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// A folder of this user only (made 0700 when absent): ConfigError naming it otherwise.
void private_folder(const std::string& dir, std::string_view who) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    config_error(who, "cannot make the folder '" + dir +
                          "' for the TCP store's secret: " + errno_text(errno));
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    config_error(who, "'" + dir + "' (the folder of the TCP store's secret) is not a folder");
  if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)
    config_error(who, "'" + dir + "' (the folder of the TCP store's secret) is not this user's " +
                          "private folder (owner " + std::to_string(st.st_uid) + ", mode " +
                          mode_text(st.st_mode) + "; expected owner " +
                          std::to_string(::geteuid()) + ", mode 0700)");
}

// Writes `secret` to `path` (0600) through a new file renamed over it.
void write_secret(const std::string& path, const std::string& secret, std::string_view who) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + random_hex(4);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
            ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
  if (fd >= 0) ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw tally::RuntimeError(std::string(who) + "cannot write the TCP store's secret to '" + path +
                              "': " + errno_text(e));
  }
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &list) != 0) return false;
  bool all = list != nullptr;
  for (addrinfo* a = list; a != nullptr; a = a->ai_next) all = all && is_loopback(a->ai_addr);
  ::freeaddrinfo(list);
  return all;
}

std::string read_secret_file(const std::string& path, std::string_view what, std::string_view who) {
  const std::string name = std::string(what) + "='" + path + "'";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) config_error(who, name + ": cannot open the secret file: " + errno_text(errno));
  struct stat st {};
  std::string out;
  std::string bad;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    bad = "is not a regular file";
  } else if (st.st_uid != ::geteuid()) {
    bad = "belongs to user " + std::to_string(st.st_uid) + ", not to this one (" +
          std::to_string(::geteuid()) + ")";
  } else if ((st.st_mode & 077) != 0) {
    bad = "may be read or written by others (mode " + mode_text(st.st_mode) +
          "): make it private (chmod 600)";
  } else if (st.st_size > static_cast<off_t>(kMaxSecretBytes)) {
    bad = "holds " + std::to_string(st.st_size) + " bytes (a secret is at most 4096)";
  } else {
    char buf[kMaxSecretBytes + 1];
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0) bad = "cannot be read: " + errno_text(errno);
    if (got > 0) out.assign(buf, static_cast<std::size_t>(got));
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    if (bad.empty() && out.empty()) bad = "is empty (expected the job's secret)";
  }
  ::close(fd);
  if (!bad.empty()) config_error(who, name + ": the secret file " + bad);
  return out;
}

std::string default_secret_file(const GetEnv& env, std::uint16_t port, std::string_view who) {
  std::string dir;
  if (const char* x = env("XDG_RUNTIME_DIR"); x != nullptr && *x == '/') {
    struct stat st {};
    if (::lstat(x, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
        (st.st_mode & 077) == 0)
      dir = std::string(x) + "/tally";
  }
  if (dir.empty()) dir = "/tmp/tally-" + std::to_string(::geteuid());
  private_folder(dir, who);
  return dir + "/store-" + std::to_string(port) + ".secret";
}

StoreAccessParams read_store_access(const tally::Params& params) {
  StoreAccessParams access;
  if (params.has("store_bind")) access.bind = params.get_string("store_bind");
  if (params.has("store_bind") && access.bind.empty())
    params.fail("store_bind", "is empty: expected 'any', 'loopback' or an address of this host");
  if (params.has("store_secret_file")) access.secret_file = params.get_string("store_secret_file");
  return access;
}

void secure_store_address(StoreAddress& a, const GetEnv& env, std::string_view bind_param,
                          std::string_view secret_file_param, std::string_view who) {
  a.bind = std::string(bind_param);
  a.secret.clear();
  a.secret_file.clear();
  a.write_secret_file = false;
  if (a.agent_store) return;  // torch's store: no authentication (docs/gloo.md)
  if (!secret_file_param.empty()) {
    a.secret = read_secret_file(std::string(secret_file_param), "backend.store_secret_file", who);
    return;
  }
  if (const char* f = env("TALLY_STORE_SECRET_FILE"); f != nullptr) {
    a.secret = read_secret_file(f, "TALLY_STORE_SECRET_FILE", who);
    return;
  }
  if (const char* s = env("TALLY_STORE_SECRET"); s != nullptr) {
    const std::size_t n = std::strlen(s);
    if (n == 0)
      config_error(who, "TALLY_STORE_SECRET is set but empty (expected the job's secret)");
    if (n > kMaxSecretBytes)
      config_error(who, "TALLY_STORE_SECRET holds " + std::to_string(n) +
                            " bytes (a secret is at most 4096)");
    a.secret = s;
    return;
  }
  if ((a.bind.empty() || a.bind == "loopback") && is_loopback_host(a.host)) {
    // One host: rank 0 makes a secret, the others read it from this user's private file.
    a.secret_file = default_secret_file(env, a.port, who);
    if (a.host_here) {
      a.secret = random_hex(32);
      a.write_secret_file = true;
    }
    return;
  }
  config_error(who, "the TCP store at " + host_port(a.host, a.port) + " (" + a.source +
                        (a.bind.empty() ? "" : ", backend.store_bind=" + a.bind) +
                        ") is reachable from other hosts, and no secret guards it: set "
                        "TALLY_STORE_SECRET_FILE to a file only you can read (chmod 600) holding "
                        "a secret, the same on every rank (or TALLY_STORE_SECRET, or "
                        "backend.store_secret_file)");
}

// ---- the server ---------------------------------------------------------------------------

struct TcpStoreServer::Impl {
  struct Conn {
    int fd = -1;
    std::string peer;       // "127.0.0.1:51234", "[::1]:51234"
    std::string peer_host;  // "127.0.0.1": what the per-peer bound counts
    Clock::time_point since;
    Clock::time_point last_active;  // when its last bytes came: the idle are evicted first
    bool validated = false;
    bool authenticated = false;
    std::string nonce;
    std::vector<std::uint8_t> in;
    bool need_more = false;  // the request at the head of `in` is incomplete
    std::vector<std::uint8_t> out;
    std::size_t out_at = 0;
    std::vector<std::string> waiting;  // keys of a pending WAIT not yet set
    bool closing = false;
    bool mute = false;  // the peer has gone: its last requests are applied, not answered
    std::size_t unsent() const { return out.size() - out_at; }
  };

  // A request that breaks a bound or the rules: its connection is closed and named.
  struct Refusal : std::runtime_error {
    using std::runtime_error::runtime_error;
  };

  std::string who;
  ServerOptions opt;
  std::vector<int> listeners;
  int wake[2] = {-1, -1};
  std::uint16_t port = 0;
  std::thread thread;
  std::atomic<bool> stop{false};
  std::map<std::string, std::vector<std::uint8_t>> data;
  std::uint64_t stored_bytes = 0;
  std::unordered_map<int, Conn> conns;
  std::vector<std::uint8_t> read_buf = std::vector<std::uint8_t>(kReadChunk);
  Clock::time_point accept_paused_until{};
  std::set<std::string> noticed;  // peers named once
  bool wrote_secret_file = false;
  std::atomic<std::uint64_t> n_turns{0}, n_accepted{0}, n_closed_bad{0}, n_stored{0}, n_keys{0},
      n_conns{0};

  static constexpr std::size_t kReadChunk = std::size_t{256} << 10;  // per connection and turn
  static constexpr std::size_t kSmallInput = std::size_t{64} << 10;  // pipelined requests read

  ~Impl() {
    if (wrote_secret_file) ::unlink(opt.secret_file.c_str());
    for (int fd : listeners) ::close(fd);
    for (auto& [fd, c] : conns) ::close(fd);
    if (wake[0] >= 0) ::close(wake[0]);
    if (wake[1] >= 0) ::close(wake[1]);
  }

  std::size_t max_request_bytes() const { return opt.limits.max_value_bytes + (1u << 20); }
  // The largest request a connection may send: small until it is authenticated.
  std::size_t request_bound(const Conn& c) const {
    return c.authenticated ? max_request_bytes() : kSmallInput;
  }

  // ---- listening ----

  // Binds and listens on `a`; -1 with errno on failure.
  int listen_one(const addrinfo* a, bool v6only) {
    const int s = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (s < 0) return -1;
    int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (a->ai_family == AF_INET6) {
      int v = v6only ? 1 : 0;
      ::setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &v, sizeof v);
    }
    if (::bind(s, a->ai_addr, a->ai_addrlen) != 0 || ::listen(s, 1024) != 0) {
      const int e = errno;
      ::close(s);
      errno = e;
      return -1;
    }
    set_nonblocking(s);
    return s;
  }

  void listen_on(std::uint16_t requested) {
    const bool any = opt.bind == "any";
    std::vector<std::string> hosts;
    if (any)
      hosts = {""};
    else if (opt.bind == "loopback" || opt.bind.empty() || is_loopback_host(opt.bind))
      hosts = {"127.0.0.1", "::1"};
    else
      hosts = {opt.bind};
    int last_errno = EAFNOSUPPORT;
    std::string resolve_error;
    for (const auto& host : hosts) {
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      hints.ai_flags = AI_NUMERICSERV | (any ? AI_PASSIVE : 0);
      addrinfo* list = nullptr;
      const std::string service = std::to_string(listeners.empty() ? requested : port);
      if (const int rc =
              ::getaddrinfo(any ? nullptr : host.c_str(), service.c_str(), &hints, &list);
          rc != 0) {
        resolve_error = "cannot resolve '" + host + "': " + ::gai_strerror(rc);
        continue;
      }
      // Every interface: a dual-stack IPv6 socket serves both families, else an IPv4 one.
      std::vector<addrinfo*> order;
      for (addrinfo* a = list; a != nullptr; a = a->ai_next)
        if (a->ai_family == AF_INET6) order.push_back(a);
      for (addrinfo* a = list; a != nullptr; a = a->ai_next)
        if (a->ai_family == AF_INET) order.push_back(a);
      for (addrinfo* a : order) {
        const int s = listen_one(a, !any);
        if (s < 0) {
          last_errno = errno;
          if (last_errno == EADDRINUSE) break;
          continue;
        }
        listeners.push_back(s);
        if (listeners.size() == 1) port = local_port(s);
        if (any) break;
      }
      ::freeaddrinfo(list);
      // Loopback: ::1 is a courtesy once 127.0.0.1 listens (IPv6 may be off, or its port taken).
      if (host == "::1" && !listeners.empty()) last_errno = 0;
      if (last_errno == EADDRINUSE) break;
    }
    if (last_errno == EADDRINUSE || listeners.empty())
      fail_to_listen(requested, last_errno, resolve_error);
  }

  static std::uint16_t local_port(int s) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(s, reinterpret_cast<sockaddr*>(&ss), &len);
    return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  }

  [[noreturn]] void fail_to_listen(std::uint16_t requested, int e, const std::string& resolve) {
    for (int fd : listeners) ::close(fd);
    listeners.clear();
    const std::string where =
        opt.bind == "any" ? "" : " of " + (opt.bind.empty() ? std::string("loopback") : opt.bind);
    std::string why = "cannot listen on port " + std::to_string(requested) + where + ": " +
                      (listeners.empty() && !resolve.empty() ? resolve : errno_text(e));
    if (e == EADDRINUSE)
      why +=
          " (another process holds it: torchrun's agent hosts its store there when "
          "TORCHELASTIC_USE_AGENT_STORE=True, or another job uses this MASTER_PORT; choose "
          "a free MASTER_PORT)";
    else if (e == EADDRNOTAVAIL)
      why += " ('" + opt.bind +
             "' is not an address of this host, and rank 0 serves the store: set MASTER_ADDR to "
             "rank 0's host, or backend.store_bind to an address of this host, or to 'any' for "
             "every interface)";
    config_error(who, why);
  }

  // ---- naming a client that is closed ----

  void notice(const Conn& c, const std::string& why) {
    ++n_closed_bad;
    if (noticed.size() >= 256 || !noticed.insert(c.peer_host).second) return;
    const std::string line = who + "the TCP store (port " + std::to_string(port) +
                             ") closed the connection from " + c.peer + ": " + why +
                             " (named once per peer address)\n";
    std::fputs(line.c_str(), stderr);
  }

  void drop(std::unordered_map<int, Conn>::iterator it) {
    ::close(it->first);
    conns.erase(it);
  }

  // Closes the unauthenticated connection idle the longest (of `peer_host` when not empty) now:
  // a client in the middle of its authentication has just sent something.
  bool evict_oldest(const std::string& peer_host, const std::string& why) {
    auto oldest = conns.end();
    for (auto it = conns.begin(); it != conns.end(); ++it) {
      const Conn& c = it->second;
      if (c.authenticated || (!peer_host.empty() && c.peer_host != peer_host)) continue;
      if (oldest == conns.end() || c.last_active < oldest->second.last_active) oldest = it;
    }
    if (oldest == conns.end()) return false;
    notice(oldest->second, why);
    drop(oldest);
    return true;
  }

  // ---- accepting ----

  static std::pair<std::string, std::string> peer_of(const sockaddr_storage& ss, socklen_t len) {
    char host[INET6_ADDRSTRLEN] = {}, serv[16] = {};
    if (::getnameinfo(reinterpret_cast<const sockaddr*>(&ss), len, host, sizeof host, serv,
                      sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
      return {"an unknown peer", "?"};
    const std::string h = host;
    return {h.find(':') != std::string::npos ? "[" + h + "]:" + serv : h + ":" + serv, h};
  }

  void accept_from(int listener) {
    const auto& lim = opt.limits;
    for (int i = 0; i < 64; ++i) {  // a bounded number per turn: the others are served too
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      const int s =
          ::accept4(listener, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (s < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: free the oldest unauthenticated connection's, and stop polling
          // the listeners for a moment (never spin on a listener that cannot accept).
          const std::string why = errno_text(errno);
          if (evict_oldest({}, "the process ran out of file descriptors (" + why +
                                   ") and this connection was the longest idle not authenticated"))
            continue;
          accept_paused_until = Clock::now() + std::chrono::milliseconds(100);
        }
        return;
      }
      ++n_accepted;
      set_nodelay(s);
      Conn c;
      c.fd = s;
      std::tie(c.peer, c.peer_host) = peer_of(ss, len);
      c.since = c.last_active = Clock::now();
      c.nonce = "tally-store-auth-1:" + random_hex(16);
      if (conns.size() >= lim.max_connections &&
          !evict_oldest({},
                        "the store holds its bound of " + std::to_string(lim.max_connections) +
                            " connections and this one was the longest idle not authenticated")) {
        notice(c, "the store holds its bound of " + std::to_string(lim.max_connections) +
                      " connections");
        ::close(s);
        continue;
      }
      std::size_t unauth = 0, from_peer = 0;
      for (const auto& [fd, o] : conns) {
        if (o.authenticated) continue;
        ++unauth;
        if (o.peer_host == c.peer_host) ++from_peer;
      }
      if (from_peer >= lim.max_unauthenticated_per_peer)
        evict_oldest(c.peer_host, "more than " + std::to_string(lim.max_unauthenticated_per_peer) +
                                      " connections from this address are not authenticated");
      else if (unauth >= lim.max_unauthenticated)
        evict_oldest({}, "more than " + std::to_string(lim.max_unauthenticated) +
                             " connections are not authenticated");
      conns.emplace(s, std::move(c));
    }
  }

  // ---- request parsing: a cursor over a connection's input, checking every size first ----
  struct Cursor {
    const std::vector<std::uint8_t>& in;
    const StoreLimits& lim;
    std::size_t at = 0;
    template <class T>
    bool value(T& v) {
      if (in.size() - at < sizeof v) return false;
      std::memcpy(&v, in.data() + at, sizeof v);
      at += sizeof v;
      return true;
    }
    bool length(std::uint64_t& n, std::uint64_t bound, const char* what) {
      if (!value(n)) return false;
      if (n > bound)
        throw Refusal(std::string(what) + " of " + std::to_string(n) + " bytes (the bound is " +
                      std::to_string(bound) + ")");
      return in.size() - at >= n;
    }
    bool bytes(std::vector<std::uint8_t>& out) {
      std::uint64_t n = 0;
      if (!length(n, lim.max_value_bytes, "a value")) return false;
      out.assign(in.begin() + static_cast<std::ptrdiff_t>(at),
                 in.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
      return true;
    }
    bool string(std::string& out) {
      std::uint64_t n = 0;
      if (!length(n, lim.max_key_bytes, "a key")) return false;
      out.assign(reinterpret_cast<const char*>(in.data()) + at, n);
      at += n;
      return true;
    }
    bool count(std::uint64_t& n) {
      if (!value(n)) return false;
      if (n > lim.max_request_keys)
        throw Refusal("a request of " + std::to_string(n) + " keys (the bound is " +
                      std::to_string(lim.max_request_keys) + ")");
      return in.size() - at >= n * sizeof(std::uint64_t);  // every key has its length at least
    }
    bool strings(std::vector<std::string>& keys) {
      std::uint64_t n = 0;
      if (!count(n)) return false;
      keys.resize(n);
      for (auto& key : keys)
        if (!string(key)) return false;
      return true;
    }
  };

  template <class T>
  static void put(Conn& c, T v) {
    if (c.mute) return;
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    c.out.insert(c.out.end(), p, p + sizeof v);
  }
  static void put_bytes(Conn& c, const std::vector<std::uint8_t>& b) {
    if (c.mute) return;
    put<std::uint64_t>(c, b.size());
    c.out.insert(c.out.end(), b.begin(), b.end());
  }
  static void put_text(Conn& c, const std::string& s) {
    if (c.mute) return;
    put<std::uint64_t>(c, s.size());
    c.out.insert(c.out.end(), s.begin(), s.end());
  }

  bool has(const Conn& c, const std::string& k) const {
    return k == kNonceKey ? true : data.count(k) != 0 && c.authenticated;
  }

  // ---- the stored data, within its bounds ----

  void store(const std::string& key, std::vector<std::uint8_t> v) {
    const auto& lim = opt.limits;
    if (v.size() > lim.max_value_bytes)
      throw Refusal("a value of " + std::to_string(v.size()) + " bytes (the bound is " +
                    std::to_string(lim.max_value_bytes) + ")");
    auto it = data.find(key);
    const std::uint64_t before = it == data.end() ? 0 : key.size() + it->second.size();
    const std::uint64_t after = key.size() + v.size();
    if (it == data.end() && data.size() >= lim.max_keys)
      throw Refusal("a key past the store's bound of " + std::to_string(lim.max_keys) + " keys");
    if (stored_bytes - before + after > lim.max_stored_bytes)
      throw Refusal("a value past the store's bound of " + std::to_string(lim.max_stored_bytes) +
                    " bytes stored");
    stored_bytes = stored_bytes - before + after;
    if (it == data.end())
      data.emplace(key, std::move(v));
    else
      it->second = std::move(v);
    n_stored = stored_bytes;
    n_keys = data.size();
    for (auto& [fd, c] : conns) {
      if (c.waiting.empty()) continue;
      std::erase_if(c.waiting, [&](const std::string& w) { return has(c, w); });
      if (c.waiting.empty()) put<std::uint8_t>(c, kStopWaiting);
    }
  }

  std::int64_t erase(const std::string& key) {
    auto it = data.find(key);
    if (it == data.end()) return 0;
    stored_bytes -= key.size() + it->second.size();
    data.erase(it);
    n_stored = stored_bytes;
    n_keys = data.size();
    return 1;
  }

  static const char* query_name(std::uint8_t q) {
    static constexpr const char* kNames[] = {"VALIDATE",    "SET",    "COMPARE_SET", "GET",
                                             "ADD",         "CHECK",  "WAIT",        "GET_NUM_KEYS",
                                             "DELETE_KEY",  "APPEND", "MULTI_GET",   "MULTI_SET",
                                             "CANCEL_WAIT", "PING"};
    return q < std::size(kNames) ? kNames[q] : "an unknown query";
  }

  // Only the steps of the authentication come before it: anything else closes the connection.
  static void need_auth(const Conn& c, std::uint8_t q) {
    if (!c.authenticated)
      throw Refusal(std::string("a ") + query_name(q) +
                    " before the client proved the job's secret");
  }

  void prove(Conn& c, const std::vector<std::uint8_t>& proof) {
    if (opt.secret.empty()) return;  // nothing to prove to a store without a secret
    const std::string want = proof_of(opt.secret, c.nonce);
    if (proof.size() != want.size() || CRYPTO_memcmp(proof.data(), want.data(), want.size()) != 0)
      throw Refusal("a wrong proof of the job's secret");
    c.authenticated = true;
  }

  // Handles one complete request at the head of c.in; returns false when more input is needed.
  // Throws on a malformed request or a broken bound (the connection is then closed and named).
  bool handle(Conn& c) {
    StoreLimits lim = opt.limits;
    if (!c.authenticated) {  // the steps of the authentication are small
      lim.max_value_bytes = 256;
      lim.max_key_bytes = 256;
      lim.max_request_keys = 1;
    }
    Cursor k{c.in, lim};
    std::uint8_t q = 0;
    if (!k.value(q)) return false;
    if (!c.validated && q != static_cast<std::uint8_t>(Query::Validate))
      throw Refusal("no VALIDATE first (not a TCP store client)");
    // Before authentication only its steps may come: anything else is refused at its first byte.
    static constexpr std::uint8_t kSteps[] = {0, 1, 3,
                                              5, 6, 13};  // VALIDATE SET GET CHECK WAIT PING
    if (!c.authenticated && std::find(std::begin(kSteps), std::end(kSteps), q) == std::end(kSteps))
      need_auth(c, q);
    switch (static_cast<Query>(q)) {
      case Query::Validate: {
        std::uint32_t magic = 0;
        if (!k.value(magic)) return false;
        if (magic != kMagic) throw Refusal("a wrong magic number (not a TCP store client)");
        c.validated = true;
        if (opt.secret.empty()) c.authenticated = true;
        break;
      }
      case Query::Set: {
        std::string key;
        std::vector<std::uint8_t> v;
        if (!k.string(key) || !k.bytes(v)) return false;
        if (key == kProofKey) {
          prove(c, v);
          break;
        }
        need_auth(c, q);
        if (key == kNonceKey) throw Refusal("a SET of the reserved key " + kNonceKey);
        store(key, std::move(v));
        break;
      }
      case Query::Get: {
        std::string key;
        if (!k.string(key)) return false;
        if (key == kNonceKey) {
          put_text(c, c.nonce);
          break;
        }
        need_auth(c, q);
        auto it = data.find(key);
        if (it == data.end()) throw Refusal("a GET of a key not set");
        put_bytes(c, it->second);
        break;
      }
      case Query::Check:
      case Query::Wait: {
        std::vector<std::string> keys;
        if (!k.strings(keys)) return false;
        if (!(keys.size() == 1 && keys[0] == kNonceKey)) need_auth(c, q);
        if (static_cast<Query>(q) == Query::Check) {
          put<std::uint8_t>(c, std::all_of(keys.begin(), keys.end(),
                                           [&](const std::string& s) { return has(c, s); })
                                   ? kReady
                                   : kNotReady);
          break;
        }
        std::erase_if(keys, [&](const std::string& s) { return has(c, s); });
        if (keys.empty())
          put<std::uint8_t>(c, kStopWaiting);
        else
          c.waiting = std::move(keys);
        break;
      }
      case Query::Ping: {
        std::uint32_t nonce = 0;
        if (!k.value(nonce)) return false;
        put<std::uint32_t>(c, nonce);
        break;
      }
      default:
        need_auth(c, q);
        if (!handle_more(c, k, q)) return false;
    }
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(k.at));
    return true;
  }

  // The queries only an authenticated connection may make, but the commonest.
  bool handle_more(Conn& c, Cursor& k, std::uint8_t q) {
    switch (static_cast<Query>(q)) {
      case Query::CompareSet: {
        std::string key;
        std::vector<std::uint8_t> expected, desired;
        if (!k.string(key) || !k.bytes(expected) || !k.bytes(desired)) return false;
        auto it = data.find(key);
        if (it == data.end() ? expected.empty() : it->second == expected) {
          put_bytes(c, desired);
          store(key, std::move(desired));
        } else {
          put_bytes(c, it == data.end() ? expected : it->second);
        }
        return true;
      }
      case Query::Add: {
        std::string key;
        std::int64_t delta = 0;
        if (!k.string(key) || !k.value(delta)) return false;
        std::int64_t v = 0;
        if (auto it = data.find(key); it != data.end()) {
          const auto* b = reinterpret_cast<const char*>(it->second.data());
          const auto [end, ec] = std::from_chars(b, b + it->second.size(), v);
          if (ec != std::errc() || end != b + it->second.size())
            throw Refusal("an ADD to a value that is not an integer");
        }
        v = static_cast<std::int64_t>(static_cast<std::uint64_t>(v) +
                                      static_cast<std::uint64_t>(delta));
        const std::string text = std::to_string(v);
        store(key, std::vector<std::uint8_t>(text.begin(), text.end()));
        put<std::int64_t>(c, v);
        return true;
      }
      case Query::MultiGet: {
        std::vector<std::string> keys;
        if (!k.strings(keys)) return false;
        std::uint64_t total = 0;
        for (const auto& key : keys) {
          auto it = data.find(key);
          if (it == data.end()) throw Refusal("a MULTI_GET of a key not set");
          total += it->second.size();
        }
        if (total > opt.limits.max_value_bytes)
          throw Refusal("a MULTI_GET of " + std::to_string(total) + " bytes (the bound is " +
                        std::to_string(opt.limits.max_value_bytes) + ")");
        for (const auto& key : keys) put_bytes(c, data.find(key)->second);
        return true;
      }
      case Query::GetNumKeys:
        put<std::int64_t>(c, static_cast<std::int64_t>(data.size()));
        return true;
      case Query::DeleteKey: {
        std::string key;
        if (!k.string(key)) return false;
        put<std::int64_t>(c, erase(key));
        return true;
      }
      case Query::Append: {
        std::string key;
        std::vector<std::uint8_t> v;
        if (!k.string(key) || !k.bytes(v)) return false;
        std::vector<std::uint8_t> d;
        if (auto it = data.find(key); it != data.end()) d = it->second;
        if (d.size() + v.size() > opt.limits.max_value_bytes)
          throw Refusal("an APPEND past the bound of " +
                        std::to_string(opt.limits.max_value_bytes) + " bytes of a value");
        d.insert(d.end(), v.begin(), v.end());
        store(key, std::move(d));
        return true;
      }
      case Query::MultiSet: {
        std::uint64_t n = 0;
        if (!k.count(n)) return false;
        std::vector<std::pair<std::string, std::vector<std::uint8_t>>> kv(n);
        for (auto& [key, v] : kv)
          if (!k.string(key) || !k.bytes(v)) return false;
        for (auto& [key, v] : kv) store(key, std::move(v));
        return true;
      }
      case Query::CancelWait:
        c.waiting.clear();
        put<std::uint8_t>(c, kWaitCanceled);
        return true;
      default:
        throw Refusal("an unknown query (" + std::to_string(q) + ")");
    }
  }

  // ---- serving ----

  // Whether a complete request of c may be handled now: not behind a pending WAIT (but for a
  // CANCEL_WAIT), and the connection's unsent answers under their bound.
  bool ready(const Conn& c) const {
    return !c.closing && !c.in.empty() && !c.need_more &&
           c.unsent() <= opt.limits.max_unsent_bytes &&
           (c.waiting.empty() || c.in[0] == static_cast<std::uint8_t>(Query::CancelWait));
  }

  // Whether to read c's input this turn: its answers are going out, and its unhandled input is
  // small (or the one request it holds is incomplete and under the bound of a request).
  bool wants_input(const Conn& c) const {
    return !c.closing && c.unsent() <= opt.limits.max_unsent_bytes &&
           (c.in.size() < kSmallInput || (c.need_more && c.in.size() <= request_bound(c)));
  }

  // Handles c's complete requests, at most `budget` of them (fair service), stopping while its
  // unsent answers are past their bound. `last`: the peer has closed; what it sent before still
  // counts (a SET has no answer, so a client may set a key and close at once).
  void process(Conn& c, int budget, bool last = false) {
    if (last) c.mute = true;  // answers nobody reads are not even made (a GET copies nothing)
    try {
      for (int n = 0; n < budget && !c.in.empty(); ++n) {
        if (!last && !ready(c)) break;
        if (last && !c.waiting.empty()) break;
        c.need_more = !handle(c);
        if (c.need_more) break;
      }
    } catch (const std::exception& e) {
      if (!last) notice(c, e.what());
      c.closing = true;
    }
  }

  void read_from(Conn& c) {
    // At most one byte past the bound of a request: enough to tell it is past it.
    const std::size_t room = std::min(read_buf.size(), request_bound(c) + 1 - c.in.size());
    if (room == 0) return;
    const ssize_t got = ::recv(c.fd, read_buf.data(), room, 0);
    if (got > 0) {
      c.in.insert(c.in.end(), read_buf.begin(), read_buf.begin() + got);
      c.last_active = Clock::now();
      c.need_more = false;  // the head request may be complete now
      return;
    }
    if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
    process(c, std::numeric_limits<int>::max(), true);
    c.closing = true;
  }

  void write_to(Conn& c) {
    while (c.out_at < c.out.size()) {
      const ssize_t w =
          ::send(c.fd, c.out.data() + c.out_at, c.out.size() - c.out_at, MSG_NOSIGNAL);
      if (w > 0) {
        c.out_at += static_cast<std::size_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      c.closing = true;
      return;
    }
    if (c.out_at == c.out.size()) {
      c.out.clear();
      c.out_at = 0;
    } else if (c.out_at > (std::size_t{1} << 20)) {
      c.out.erase(c.out.begin(), c.out.begin() + static_cast<std::ptrdiff_t>(c.out_at));
      c.out_at = 0;
    }
  }

  // After a turn: what can be handled and written now, the connections that are done, the
  // unauthenticated ones past their time. Returns whether work is left for the next turn at once.
  bool tidy() {
    const auto now = Clock::now();
    bool backlog = false;
    for (auto it = conns.begin(); it != conns.end();) {
      Conn& c = it->second;
      if (ready(c)) process(c, opt.limits.requests_per_turn);
      if (c.need_more && c.in.size() > request_bound(c)) {
        notice(c, "a request of more than " + std::to_string(request_bound(c)) + " bytes (the " +
                      (c.authenticated ? "bound of a request)" : "bound before authentication)"));
        c.closing = true;
      }
      if (!c.closing && c.unsent() > 0) write_to(c);
      if (!c.closing && !c.authenticated && now - c.since > opt.limits.auth_timeout) {
        notice(c, "not authenticated within " + seconds_text(opt.limits.auth_timeout));
        c.closing = true;
      }
      if (c.closing) {
        auto next = std::next(it);
        drop(it);
        it = next;
        continue;
      }
      backlog = backlog || ready(c);
      ++it;
    }
    n_conns = conns.size();
    return backlog;
  }

  void serve() {
    std::vector<pollfd> fds;
    bool backlog = false;
    while (!stop.load()) {
      ++n_turns;
      fds.clear();
      fds.push_back({wake[0], POLLIN, 0});
      const auto now = Clock::now();
      const bool accepting = now >= accept_paused_until;
      for (int l : listeners) fds.push_back({l, static_cast<short>(accepting ? POLLIN : 0), 0});
      for (auto& [fd, c] : conns)
        fds.push_back(
            {fd, static_cast<short>((wants_input(c) ? POLLIN : 0) | (c.unsent() > 0 ? POLLOUT : 0)),
             0});
      int wait_ms = backlog ? 0 : 1000;
      if (!accepting) wait_ms = std::min(wait_ms, std::max(1, ms_left(accept_paused_until)));
      const int r = ::poll(fds.data(), fds.size(), wait_ms);
      if (r < 0 && errno != EINTR) return;
      if (r > 0 && fds[0].revents != 0) return;
      for (std::size_t i = 1; r > 0 && i < fds.size(); ++i) {
        const pollfd& p = fds[i];
        if (p.revents == 0) continue;
        if (i <= listeners.size()) {
          accept_from(p.fd);
          continue;
        }
        auto it = conns.find(p.fd);
        if (it == conns.end()) continue;
        Conn& c = it->second;
        if ((p.revents & (POLLIN | POLLHUP | POLLERR)) && wants_input(c)) {
          read_from(c);
        } else if (p.revents & (POLLHUP | POLLERR)) {
          process(c, std::numeric_limits<int>::max(), true);
          c.closing = true;
        }
        if (!c.closing && c.unsent() > 0) write_to(c);
      }
      backlog = tidy();
    }
  }
};

TcpStoreServer::TcpStoreServer(std::uint16_t port, std::string_view who, ServerOptions options)
    : impl_(std::make_unique<Impl>()) {
  init_openssl();
  impl_->who = who;
  impl_->opt = std::move(options);
  impl_->listen_on(port);
  if (::pipe2(impl_->wake, O_CLOEXEC) != 0)
    throw tally::RuntimeError(std::string(who) + "pipe: " + errno_text(errno));
  // The secret's file once the port is this job's (a job that finds the port taken never
  // replaces another job's file), before the first client is served.
  if (!impl_->opt.secret_file.empty()) {
    write_secret(impl_->opt.secret_file, impl_->opt.secret, who);
    impl_->wrote_secret_file = true;
  }
  impl_->thread = std::thread([impl = impl_.get()] {
    impl->serve();
    OPENSSL_thread_stop();  // this thread's OpenSSL state (HMAC's error queue) goes with it
  });
}

TcpStoreServer::~TcpStoreServer() {
  impl_->stop = true;
  const char b = 1;
  (void)!::write(impl_->wake[1], &b, 1);
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::uint16_t TcpStoreServer::port() const noexcept { return impl_->port; }
const std::string& TcpStoreServer::secret() const noexcept { return impl_->opt.secret; }

ServerStats TcpStoreServer::stats() const {
  ServerStats s;
  s.turns = impl_->n_turns;
  s.accepted = impl_->n_accepted;
  s.closed_bad = impl_->n_closed_bad;
  s.stored_bytes = impl_->n_stored;
  s.keys = impl_->n_keys;
  s.connections = impl_->n_conns;
  return s;
}

// ---- the client ---------------------------------------------------------------------------

struct TcpStoreClient::Impl {
  StoreAddress address;
  int rank = 0;
  std::chrono::milliseconds timeout{0};
  std::string who;
  std::string secret;
  int fd = -1;
  std::mutex mu;  // one request at a time (gloo's store calls come from one thread, but be safe)

  ~Impl() { disconnect(); }

  void disconnect() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }

  std::string where() const {
    return who + "rank " + std::to_string(rank) + ": the TCP store at " +
           host_port(address.host, address.port) +
           (address.source.empty() ? std::string() : " (" + address.source + ")");
  }

  [[noreturn]] void fail(const std::string& op, const std::string& what) {
    disconnect();
    throw tally::RuntimeError(where() + ": " + op + ": " + what);
  }

  // Connects (again, after a failure) before `deadline`, retrying while the server is not up.
  void ensure(Clock::time_point deadline) {
    if (fd >= 0) return;
    // A store may close a connection not yet authenticated to make room (a flood of idle
    // connections): a few attempts before that counts as a refusal.
    constexpr int kAttempts = 5;
    for (int attempt = 1;; ++attempt) {
      connect_until(deadline);
      std::string stage, what;
      if (greet(deadline, stage, what)) return;
      disconnect();
      if (attempt == kAttempts || Clock::now() + std::chrono::milliseconds(100) >= deadline) {
        if (stage == "connecting")
          fail("connecting", what + " (is the peer at this port a TCP store?)");
        throw tally::ConfigError(
            where() + ": the store refused this rank's proof of the job's secret (" + what + ", " +
            std::to_string(attempt) +
            " times): every rank needs the same secret (TALLY_STORE_SECRET, "
            "TALLY_STORE_SECRET_FILE or backend.store_secret_file; on one host, the file rank 0 "
            "writes)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20) * attempt);
    }
  }

  // Connects before `deadline`, retrying while the server is not up.
  void connect_until(Clock::time_point deadline) {
    std::string why;
    auto pause = std::chrono::milliseconds(20);
    for (;;) {
      fd = connect_once(address.host, address.port, deadline, why);
      if (fd >= 0) return;
      if (Clock::now() + pause >= deadline)
        fail("connecting", "no connection within " + seconds_text(timeout) + ": " + why +
                               (address.host_here ? ""
                                                  : " (is rank 0, or the launcher's store, "
                                                    "up, and MASTER_ADDR right?)"));
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(500));
    }
  }

  // VALIDATE, a PING (a wrong service at the port would never answer it), and the proof of the
  // job's secret. False, with the stage and what happened, when the store closed the connection.
  bool greet(Clock::time_point deadline, std::string& stage, std::string& what) {
    stage = "connecting";
    try {
      Request v(Query::Validate);
      v.value<std::uint32_t>(kMagic);
      send_all(fd, v.data().data(), v.data().size(), deadline);
      std::uint32_t nonce = static_cast<std::uint32_t>(std::random_device{}());
      Request p(Query::Ping);
      p.value<std::uint32_t>(nonce);
      send_all(fd, p.data().data(), p.data().size(), deadline);
      std::uint32_t back = 0;
      recv_all(fd, reinterpret_cast<std::uint8_t*>(&back), sizeof back, deadline);
      if (back != nonce) fail("connecting", "the peer is not a TCP store (a wrong PING answer)");
      stage = "authenticating";
      authenticate(deadline);
      return true;
    } catch (const IoFailure& f) {
      if (f.timed_out)
        fail(stage, std::string(f.what()) + " within " + seconds_text(timeout) +
                        (stage == "connecting" ? " (is the peer at this port a TCP store?)" : ""));
      what = f.what();
      return false;
    }
  }

  // Proves the job's secret: GET the connection's nonce (after a WAIT, as torch's get() does),
  // SET the proof, and a PING that a store refusing the proof never answers. The secret file of
  // a one-host job is read here, after the connection: rank 0 writes it before it serves.
  void authenticate(Clock::time_point deadline) {
    if (secret.empty() && !address.secret_file.empty())
      secret = read_secret_file(address.secret_file, "the secret file of rank 0's store", who);
    if (secret.empty()) return;
    wait_keys(std::span<const std::string>(&kNonceKey, 1), deadline, false);
    Request g(Query::Get);
    g.string(kNonceKey);
    send(g, deadline);
    const auto nonce = recv_bytes(deadline);
    if (nonce.size() > 256)
      io_fail("the store sent a nonce of " + std::to_string(nonce.size()) + " bytes");
    Request p(Query::Set);
    p.string(kProofKey);
    const std::string proof = proof_of(
        secret, std::string_view(reinterpret_cast<const char*>(nonce.data()), nonce.size()));
    p.bytes(proof.data(), proof.size());
    send(p, deadline);
    Request ping(Query::Ping);
    ping.value<std::uint32_t>(1);
    send(ping, deadline);
    (void)recv_value<std::uint32_t>(deadline);
  }

  template <class F>
  auto exchange(const std::string& op, const std::string& waiting_for, F&& f) {
    std::lock_guard lock(mu);
    const auto deadline = Clock::now() + timeout;
    ensure(deadline);
    try {
      return f(deadline);
    } catch (const IoFailure& e) {
      if (e.timed_out)
        fail(op, "no answer within " + seconds_text(timeout) +
                     (waiting_for.empty() ? std::string() : " waiting for " + waiting_for));
      fail(op, e.what());
    }
  }

  void send(const Request& r, Clock::time_point deadline) {
    send_all(fd, r.data().data(), r.data().size(), deadline);
  }
  template <class T>
  T recv_value(Clock::time_point deadline) {
    T v{};
    recv_all(fd, reinterpret_cast<std::uint8_t*>(&v), sizeof v, deadline);
    return v;
  }
  std::vector<std::byte> recv_bytes(Clock::time_point deadline) {
    const auto n = recv_value<std::uint64_t>(deadline);
    if (n > Impl::kMaxValueBytes)
      io_fail("the store sent a value of " + std::to_string(n) + " bytes (more than 16 MiB)");
    std::vector<std::byte> out(n);
    recv_all(fd, reinterpret_cast<std::uint8_t*>(out.data()), n, deadline);
    return out;
  }

  void wait_keys(std::span<const std::string> keys, Clock::time_point deadline,
                 bool prefix = true) {
    Request r(Query::Wait);
    r.value<std::uint64_t>(keys.size());
    for (const auto& k : keys) r.string(prefix ? "/" + k : k);
    send(r, deadline);
    const auto answer = recv_value<std::uint8_t>(deadline);
    if (answer != kStopWaiting) io_fail("the store answered WAIT with " + std::to_string(answer));
  }

  static constexpr std::uint64_t kMaxValueBytes = StoreLimits{}.max_value_bytes;
};

namespace {

std::string keys_text(std::span<const std::string> keys) {
  std::string out;
  for (std::size_t i = 0; i < keys.size() && i < 4; ++i) out += (i ? ", '" : "'") + keys[i] + "'";
  if (keys.size() > 4) out += ", ...";
  return out;
}

std::string waiting_text(std::string_view what, const std::string& keys) {
  return what.empty()
             ? "the key" + std::string(keys.find(',') != std::string::npos ? "s " : " ") + keys
             : std::string(what) + " (" + keys + ")";
}

}  // namespace

TcpStoreClient::TcpStoreClient(const StoreAddress& address, int rank,
                               std::chrono::milliseconds timeout, std::string_view who)
    : impl_(std::make_unique<Impl>()) {
  impl_->address = address;
  impl_->rank = rank;
  impl_->timeout = timeout;
  impl_->who = who;
  impl_->secret = address.secret;
  std::lock_guard lock(impl_->mu);
  impl_->ensure(Clock::now() + timeout);
}

TcpStoreClient::~TcpStoreClient() = default;
TcpStoreClient::TcpStoreClient(TcpStoreClient&&) noexcept = default;
TcpStoreClient& TcpStoreClient::operator=(TcpStoreClient&&) noexcept = default;

void TcpStoreClient::set(std::string_view key, std::span<const std::byte> value) {
  if (value.size() > Impl::kMaxValueBytes)
    impl_->fail("setting '" + std::string(key) + "'",
                "a value of " + std::to_string(value.size()) + " bytes (more than 16 MiB)");
  impl_->exchange("setting '" + std::string(key) + "'", {}, [&](Clock::time_point d) {
    Request r(Query::Set);
    r.string("/" + std::string(key));
    r.bytes(value.data(), value.size());
    impl_->send(r, d);
    return 0;
  });
}

std::vector<std::byte> TcpStoreClient::get(std::string_view key, std::string_view waiting_for) {
  const std::string k(key);
  return impl_->exchange("getting '" + k + "'", waiting_text(waiting_for, "'" + k + "'"),
                         [&](Clock::time_point d) {
                           impl_->wait_keys(std::span<const std::string>(&k, 1), d);
                           Request r(Query::Get);
                           r.string("/" + k);
                           impl_->send(r, d);
                           return impl_->recv_bytes(d);
                         });
}

void TcpStoreClient::wait(std::span<const std::string> keys, std::string_view waiting_for) {
  if (keys.empty()) return;
  const std::string names = keys_text(keys);
  impl_->exchange("waiting for " + names, waiting_text(waiting_for, names),
                  [&](Clock::time_point d) {
                    impl_->wait_keys(keys, d);
                    return 0;
                  });
}

std::int64_t TcpStoreClient::add(std::string_view key, std::int64_t delta) {
  return impl_->exchange("adding to '" + std::string(key) + "'", {}, [&](Clock::time_point d) {
    Request r(Query::Add);
    r.string("/" + std::string(key));
    r.value<std::int64_t>(delta);
    impl_->send(r, d);
    return impl_->recv_value<std::int64_t>(d);
  });
}

bool TcpStoreClient::check(std::span<const std::string> keys) {
  return impl_->exchange("checking " + keys_text(keys), {}, [&](Clock::time_point d) {
    Request r(Query::Check);
    r.value<std::uint64_t>(keys.size());
    for (const auto& k : keys) r.string("/" + k);
    impl_->send(r, d);
    const auto answer = impl_->recv_value<std::uint8_t>(d);
    if (answer != kReady && answer != kNotReady)
      io_fail("the store answered CHECK with " + std::to_string(answer));
    return answer == kReady;
  });
}

std::chrono::milliseconds TcpStoreClient::timeout() const noexcept { return impl_->timeout; }
const std::string& TcpStoreClient::secret() const noexcept { return impl_->secret; }
void TcpStoreClient::set_timeout(std::chrono::milliseconds timeout) noexcept {
  impl_->timeout = timeout;
}

// ---- the job's store ------------------------------------------------------------------------

JobStore::JobStore(const StoreAddress& address, int rank, std::chrono::milliseconds timeout,
                   std::string_view who)
    : address_(address) {
  if (address.host_here) {
    // One server per port and process, shared by the job stores that use it, and serving until
    // the process exits: a backend that is done with the store (nccl, once the id is out) must
    // not take it from ranks still reading, and the next backend of the job finds it there.
    static std::mutex mu;
    static std::map<std::uint16_t, std::shared_ptr<TcpStoreServer>> servers;
    std::lock_guard lock(mu);
    auto& server = servers[address.port];
    if (!server) {
      ServerOptions options;
      options.bind = address.bind.empty() ? address.host : address.bind;
      options.secret = address.secret;
      if (address.write_secret_file) options.secret_file = address.secret_file;
      server = std::make_shared<TcpStoreServer>(address.port, who, std::move(options));
    } else if (address.write_secret_file) {
      address_.secret = server->secret();  // the secret the first backend's server wrote
    }
    server_ = server;
  }
  client_ = std::make_unique<TcpStoreClient>(address_, rank, timeout, who);
  // The secret read from rank 0's file: later clients of this job (heartbeats) need not read it.
  address_.secret = client_->secret();
  const std::int64_t n = client_->add("tally/" + std::to_string(rank) + "/backends", 1);
  prefix_ = "tally/" + std::to_string(n) + "/";
}

JobStore::~JobStore() {
  client_.reset();
  server_.reset();
}

TcpStoreClient& JobStore::client() noexcept { return *client_; }
const std::string& JobStore::prefix() const noexcept { return prefix_; }
const StoreAddress& JobStore::address() const noexcept { return address_; }

}  // namespace tally_store
