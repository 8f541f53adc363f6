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
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "tally/error.hpp"

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
    io_fail(got == 0 ? "the store closed the connection"
                     : "the connection failed: " + errno_text(errno));
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

// ---- the server ---------------------------------------------------------------------------

struct TcpStoreServer::Impl {
  struct Conn {
    int fd = -1;
    bool validated = false;
    std::vector<std::uint8_t> in;
    std::vector<std::uint8_t> out;
    std::size_t out_at = 0;
    std::vector<std::string> waiting;  // keys of a pending WAIT not yet set
    bool closing = false;
  };

  std::vector<int> listeners;
  int wake[2] = {-1, -1};
  std::uint16_t port = 0;
  std::thread thread;
  std::atomic<bool> stop{false};
  std::map<std::string, std::vector<std::uint8_t>> data;
  std::unordered_map<int, Conn> conns;

  ~Impl() {
    for (int fd : listeners) ::close(fd);
    for (auto& [fd, c] : conns) ::close(fd);
    if (wake[0] >= 0) ::close(wake[0]);
    if (wake[1] >= 0) ::close(wake[1]);
  }

  void listen_on(std::uint16_t requested, std::string_view who) {
    // A dual-stack IPv6 socket takes IPv4 and IPv6 clients; where IPv6 is off, an IPv4 one.
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* list = nullptr;
    const std::string service = std::to_string(requested);
    if (const int rc = ::getaddrinfo(nullptr, service.c_str(), &hints, &list); rc != 0)
      config_error(who, "cannot listen on port " + service + ": " + ::gai_strerror(rc));
    std::vector<addrinfo*> order;
    for (addrinfo* a = list; a != nullptr; a = a->ai_next)
      if (a->ai_family == AF_INET6) order.push_back(a);
    for (addrinfo* a = list; a != nullptr; a = a->ai_next)
      if (a->ai_family == AF_INET) order.push_back(a);
    int last_errno = EAFNOSUPPORT;
    for (addrinfo* a : order) {
      const int s = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (s < 0) {
        last_errno = errno;
        continue;
      }
      int one = 1;
      ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (a->ai_family == AF_INET6) {
        int zero = 0;
        ::setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      }
      if (::bind(s, a->ai_addr, a->ai_addrlen) != 0 || ::listen(s, 1024) != 0) {
        last_errno = errno;
        ::close(s);
        if (last_errno == EADDRINUSE) break;
        continue;
      }
      set_nonblocking(s);
      listeners.push_back(s);
      break;  // the dual-stack socket serves both families
    }
    ::freeaddrinfo(list);
    if (listeners.empty()) {
      std::string why = "cannot listen on port " + service + ": " + errno_text(last_errno);
      if (last_errno == EADDRINUSE)
        why +=
            " (another process holds it: torchrun's agent hosts its store there when "
            "TORCHELASTIC_USE_AGENT_STORE=True, or another job uses this MASTER_PORT; choose "
            "a free MASTER_PORT)";
      config_error(who, why);
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(listeners[0], reinterpret_cast<sockaddr*>(&ss), &len);
    port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  }

  // ---- request parsing: a cursor over a connection's input ----
  struct Cursor {
    const std::vector<std::uint8_t>& in;
    std::size_t at;
    bool short_input = false;
    template <class T>
    bool value(T& v) {
      if (in.size() - at < sizeof v) return short_input = true, false;
      std::memcpy(&v, in.data() + at, sizeof v);
      at += sizeof v;
      return true;
    }
    bool bytes(std::vector<std::uint8_t>& out) {
      std::uint64_t n = 0;
      if (!value(n)) return false;
      if (n > kMaxValueBytes) throw std::length_error("a value of " + std::to_string(n) + " bytes");
      if (in.size() - at < n) return short_input = true, false;
      out.assign(in.begin() + static_cast<std::ptrdiff_t>(at),
                 in.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
      return true;
    }
    bool string(std::string& out) {
      std::uint64_t n = 0;
      if (!value(n)) return false;
      if (n > kMaxValueBytes) throw std::length_error("a key of " + std::to_string(n) + " bytes");
      if (in.size() - at < n) return short_input = true, false;
      out.assign(reinterpret_cast<const char*>(in.data()) + at, n);
      at += n;
      return true;
    }
    bool count(std::uint64_t& n) {
      if (!value(n)) return false;
      if (n > kMaxKeys) throw std::length_error(std::to_string(n) + " keys");
      return true;
    }
  };

  template <class T>
  static void put(Conn& c, T v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    c.out.insert(c.out.end(), p, p + sizeof v);
  }
  static void put_bytes(Conn& c, const std::vector<std::uint8_t>& b) {
    put<std::uint64_t>(c, b.size());
    c.out.insert(c.out.end(), b.begin(), b.end());
  }

  bool has(const std::string& k) const { return data.count(k) != 0; }

  void stored(const std::string&) {
    for (auto& [fd, c] : conns) {
      if (c.waiting.empty()) continue;
      std::erase_if(c.waiting, [&](const std::string& w) { return has(w); });
      if (c.waiting.empty()) put<std::uint8_t>(c, kStopWaiting);
    }
  }

  // Handles one complete request at the head of c.in; returns false when more input is needed.
  // Throws on a malformed request (the connection is then closed).
  bool handle(Conn& c) {
    Cursor k{c.in, 0};
    std::uint8_t q = 0;
    if (!k.value(q)) return false;
    if (!c.validated && q != static_cast<std::uint8_t>(Query::Validate))
      throw std::runtime_error("no VALIDATE first");
    switch (static_cast<Query>(q)) {
      case Query::Validate: {
        std::uint32_t magic = 0;
        if (!k.value(magic)) return false;
        if (magic != kMagic) throw std::runtime_error("a wrong magic number");
        c.validated = true;
        break;
      }
      case Query::Set: {
        std::string key;
        std::vector<std::uint8_t> v;
        if (!k.string(key) || !k.bytes(v)) return false;
        data[key] = std::move(v);
        stored(key);
        break;
      }
      case Query::CompareSet: {
        std::string key;
        std::vector<std::uint8_t> expected, desired;
        if (!k.string(key) || !k.bytes(expected) || !k.bytes(desired)) return false;
        auto it = data.find(key);
        if (it == data.end()) {
          if (expected.empty()) {
            data[key] = desired;
            put_bytes(c, desired);
            stored(key);
          } else {
            put_bytes(c, expected);
          }
        } else if (it->second == expected) {
          it->second = desired;
          put_bytes(c, desired);
          stored(key);
        } else {
          put_bytes(c, it->second);
        }
        break;
      }
      case Query::Get: {
        std::string key;
        if (!k.string(key)) return false;
        auto it = data.find(key);
        if (it == data.end()) throw std::runtime_error("GET of a key not set");
        put_bytes(c, it->second);
        break;
      }
      case Query::Add: {
        std::string key;
        std::int64_t delta = 0;
        if (!k.string(key) || !k.value(delta)) return false;
        std::int64_t v = 0;
        auto it = data.find(key);
        if (it != data.end()) {
          const auto* b = reinterpret_cast<const char*>(it->second.data());
          const auto [end, ec] = std::from_chars(b, b + it->second.size(), v);
          if (ec != std::errc() || end != b + it->second.size())
            throw std::runtime_error("ADD to a value that is not an integer");
        }
        v = static_cast<std::int64_t>(static_cast<std::uint64_t>(v) +
                                      static_cast<std::uint64_t>(delta));
        const std::string text = std::to_string(v);
        data[key].assign(text.begin(), text.end());
        put<std::int64_t>(c, v);
        stored(key);
        break;
      }
      case Query::Check:
      case Query::Wait:
      case Query::MultiGet: {
        std::uint64_t n = 0;
        if (!k.count(n)) return false;
        std::vector<std::string> keys(n);
        for (auto& key : keys)
          if (!k.string(key)) return false;
        if (static_cast<Query>(q) == Query::Check) {
          put<std::uint8_t>(
              c, std::all_of(keys.begin(), keys.end(), [&](const std::string& s) { return has(s); })
                     ? kReady
                     : kNotReady);
        } else if (static_cast<Query>(q) == Query::Wait) {
          std::erase_if(keys, [&](const std::string& s) { return has(s); });
          if (keys.empty())
            put<std::uint8_t>(c, kStopWaiting);
          else
            c.waiting = std::move(keys);
        } else {
          for (const auto& key : keys) {
            auto it = data.find(key);
            if (it == data.end()) throw std::runtime_error("MULTI_GET of a key not set");
            put_bytes(c, it->second);
          }
        }
        break;
      }
      case Query::GetNumKeys:
        put<std::int64_t>(c, static_cast<std::int64_t>(data.size()));
        break;
      case Query::DeleteKey: {
        std::string key;
        if (!k.string(key)) return false;
        put<std::int64_t>(c, static_cast<std::int64_t>(data.erase(key)));
        break;
      }
      case Query::Append: {
        std::string key;
        std::vector<std::uint8_t> v;
        if (!k.string(key) || !k.bytes(v)) return false;
        auto& d = data[key];
        if (d.size() + v.size() > kMaxValueBytes)
          throw std::length_error("an APPEND past the bound");
        d.insert(d.end(), v.begin(), v.end());
        stored(key);
        break;
      }
      case Query::MultiSet: {
        std::uint64_t n = 0;
        if (!k.count(n)) return false;
        std::vector<std::pair<std::string, std::vector<std::uint8_t>>> kv(n);
        for (auto& [key, v] : kv)
          if (!k.string(key) || !k.bytes(v)) return false;
        for (auto& [key, v] : kv) data[key] = std::move(v);
        for (auto& [key, v] : kv) stored(key);
        break;
      }
      case Query::CancelWait:
        c.waiting.clear();
        put<std::uint8_t>(c, kWaitCanceled);
        break;
      case Query::Ping: {
        std::uint32_t nonce = 0;
        if (!k.value(nonce)) return false;
        put<std::uint32_t>(c, nonce);
        break;
      }
      default:
        throw std::runtime_error("unknown query " + std::to_string(q));
    }
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(k.at));
    return true;
  }

  void read_from(Conn& c) {
    std::uint8_t buf[65536];
    for (;;) {
      const ssize_t got = ::recv(c.fd, buf, sizeof buf, 0);
      if (got > 0) {
        c.in.insert(c.in.end(), buf, buf + got);
        if (c.in.size() > kMaxRequestBytes) {
          c.closing = true;
          return;
        }
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      // Closed by the peer, or failed: requests that came with the close still count (a SET has
      // no answer, so a client may send one and close at once).
      process(c);
      c.closing = true;
      return;
    }
    process(c);
  }

  // Handles the complete requests in c.in. A request after a pending WAIT waits its turn
  // (torch's clients send none meanwhile, except CANCEL_WAIT, which is handled at once).
  void process(Conn& c) {
    try {
      while (!c.in.empty()) {
        if (!c.waiting.empty() && c.in[0] != static_cast<std::uint8_t>(Query::CancelWait)) break;
        if (!handle(c)) break;
      }
    } catch (const std::exception&) {
      c.closing = true;  // garbage, a bound exceeded, a protocol error: drop the connection
    }
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
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      c.closing = true;
      return;
    }
    c.out.clear();
    c.out_at = 0;
  }

  void serve() {
    std::vector<pollfd> fds;
    while (!stop.load()) {
      fds.clear();
      fds.push_back({wake[0], POLLIN, 0});
      for (int l : listeners) fds.push_back({l, POLLIN, 0});
      for (auto& [fd, c] : conns)
        fds.push_back(
            {fd, static_cast<short>(POLLIN | (c.out_at < c.out.size() ? POLLOUT : 0)), 0});
      const int r = ::poll(fds.data(), fds.size(), 1000);
      if (r < 0 && errno != EINTR) return;
      if (r <= 0) continue;
      if (fds[0].revents != 0) return;
      for (std::size_t i = 1; i < fds.size(); ++i) {
        const pollfd& p = fds[i];
        if (p.revents == 0) continue;
        if (i <= listeners.size()) {
          for (;;) {
            const int s = ::accept4(p.fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (s < 0) break;
            set_nodelay(s);
            conns[s].fd = s;
          }
          continue;
        }
        auto it = conns.find(p.fd);
        if (it == conns.end()) continue;
        Conn& c = it->second;
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) read_from(c);
        if (!c.closing) write_to(c);
      }
      // Answers queued by another connection's SET (a released WAIT) go out on the next turn;
      // write what can go now, and drop the connections that are done.
      for (auto it = conns.begin(); it != conns.end();) {
        Conn& c = it->second;
        if (!c.closing && c.waiting.empty() && !c.in.empty()) process(c);
        if (!c.closing && c.out_at < c.out.size()) write_to(c);
        if (c.closing) {
          ::close(it->first);
          it = conns.erase(it);
        } else {
          ++it;
        }
      }
    }
  }

  static constexpr std::uint64_t kMaxValueBytes = std::uint64_t{64} << 20;
  static constexpr std::uint64_t kMaxKeys = std::uint64_t{1} << 20;
  static constexpr std::size_t kMaxRequestBytes = std::size_t{256} << 20;
};

TcpStoreServer::TcpStoreServer(std::uint16_t port, std::string_view who)
    : impl_(std::make_unique<Impl>()) {
  impl_->listen_on(port, who);
  if (::pipe2(impl_->wake, O_CLOEXEC) != 0)
    throw tally::RuntimeError(std::string(who) + "pipe: " + errno_text(errno));
  impl_->thread = std::thread([impl = impl_.get()] { impl->serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  impl_->stop = true;
  const char b = 1;
  (void)!::write(impl_->wake[1], &b, 1);
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::uint16_t TcpStoreServer::port() const noexcept { return impl_->port; }

// ---- the client ---------------------------------------------------------------------------

struct TcpStoreClient::Impl {
  StoreAddress address;
  int rank = 0;
  std::chrono::milliseconds timeout{0};
  std::string who;
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
    std::string why;
    auto pause = std::chrono::milliseconds(20);
    for (;;) {
      fd = connect_once(address.host, address.port, deadline, why);
      if (fd >= 0) break;
      if (Clock::now() + pause >= deadline)
        fail("connecting", "no connection within " + seconds_text(timeout) + ": " + why +
                               (address.host_here ? ""
                                                  : " (is rank 0, or the launcher's store, "
                                                    "up, and MASTER_ADDR right?)"));
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(500));
    }
    try {
      Request v(Query::Validate);
      v.value<std::uint32_t>(kMagic);
      send_all(fd, v.data().data(), v.data().size(), deadline);
      // A PING proves the peer is a store (a wrong service at the port would never answer).
      std::uint32_t nonce = static_cast<std::uint32_t>(std::random_device{}());
      Request p(Query::Ping);
      p.value<std::uint32_t>(nonce);
      send_all(fd, p.data().data(), p.data().size(), deadline);
      std::uint32_t back = 0;
      recv_all(fd, reinterpret_cast<std::uint8_t*>(&back), sizeof back, deadline);
      if (back != nonce) fail("connecting", "the peer is not a TCP store (a wrong PING answer)");
    } catch (const IoFailure& f) {
      fail("connecting", std::string(f.what()) + " (is the peer at this port a TCP store?)");
    }
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
      io_fail("the store sent a value of " + std::to_string(n) + " bytes (more than 64 MiB)");
    std::vector<std::byte> out(n);
    recv_all(fd, reinterpret_cast<std::uint8_t*>(out.data()), n, deadline);
    return out;
  }

  void wait_keys(std::span<const std::string> keys, Clock::time_point deadline) {
    Request r(Query::Wait);
    r.value<std::uint64_t>(keys.size());
    for (const auto& k : keys) r.string("/" + k);
    send(r, deadline);
    const auto answer = recv_value<std::uint8_t>(deadline);
    if (answer != kStopWaiting) io_fail("the store answered WAIT with " + std::to_string(answer));
  }

  static constexpr std::uint64_t kMaxValueBytes = std::uint64_t{64} << 20;
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
  std::lock_guard lock(impl_->mu);
  impl_->ensure(Clock::now() + timeout);
}

TcpStoreClient::~TcpStoreClient() = default;
TcpStoreClient::TcpStoreClient(TcpStoreClient&&) noexcept = default;
TcpStoreClient& TcpStoreClient::operator=(TcpStoreClient&&) noexcept = default;

void TcpStoreClient::set(std::string_view key, std::span<const std::byte> value) {
  if (value.size() > Impl::kMaxValueBytes)
    impl_->fail("setting '" + std::string(key) + "'",
                "a value of " + std::to_string(value.size()) + " bytes (more than 64 MiB)");
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
    if (!server) server = std::make_shared<TcpStoreServer>(address.port, who);
    server_ = server;
  }
  client_ = std::make_unique<TcpStoreClient>(address, rank, timeout, who);
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
