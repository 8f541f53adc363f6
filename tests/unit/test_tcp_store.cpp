// The TCP store (backends/common/tcp_store.hpp): PyTorch's c10d TCPStore protocol, client and
// server, over real sockets: set/get/add/wait/check across threads and processes, a client
// started before its server, timeouts naming the key and the rank, a server that dies, garbage
// from the network; the store's address from torchrun's and Slurm's variables; and, with the
// venv's torch (.venv-torch), tally's client against torch's server and torch's client against
// tally's server.
#include "tcp_store.hpp"

#include "store_wait.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/expect_error.hpp"
#include "tally/sdk/error.hpp"

using namespace std::chrono_literals;
using tally_store::JobStore;
using tally_store::StoreAddress;
using tally_store::TcpStoreClient;
using tally_store::TcpStoreServer;

namespace {

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}
std::string text_of(const std::vector<std::byte>& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

StoreAddress local(std::uint16_t port, const std::string& host = "127.0.0.1") {
  StoreAddress a;
  a.host = host;
  a.port = port;
  a.source = "test";
  return a;
}

template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception";
  return {};
}

tally_store::GetEnv env_of(std::map<std::string, std::string> vars) {
  auto owned = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [owned](const char* name) -> const char* {
    auto it = owned->find(name);
    return it == owned->end() ? nullptr : it->second.c_str();
  };
}

// A port nothing listens on (a server's, closed again).
std::uint16_t closed_port() {
  TcpStoreServer s(0, "test: ");
  return s.port();
}

}  // namespace

TEST(TcpStore, SetGetAddWaitCheckAcrossThreads) {
  TcpStoreServer server(0, "test: ");
  ASSERT_GT(server.port(), 0);
  constexpr int kThreads = 6;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        TcpStoreClient c(local(server.port()), t, 20s, "test: ");
        // Thread t waits for its predecessor's key before it sets its own: a chain of waits.
        if (t > 0) c.wait(std::vector<std::string>{"key/" + std::to_string(t - 1)});
        c.set("key/" + std::to_string(t), bytes_of("value " + std::to_string(t)));
        c.add("counter", t + 1);
        std::vector<std::string> all;
        for (int i = 0; i < kThreads; ++i) all.push_back("key/" + std::to_string(i));
        c.wait(all);
        EXPECT_TRUE(c.check(all));
        for (int i = 0; i < kThreads; ++i)
          EXPECT_EQ(text_of(c.get("key/" + std::to_string(i))), "value " + std::to_string(i));
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << t << ": " << e.what();
        ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  TcpStoreClient c(local(server.port()), 0, 5s, "test: ");
  EXPECT_EQ(c.add("counter", 0), kThreads * (kThreads + 1) / 2);
  EXPECT_FALSE(c.check(std::vector<std::string>{"key/0", "absent"}));
  // Empty and binary values, and a value of 1 MiB.
  c.set("empty", {});
  EXPECT_TRUE(c.get("empty").empty());
  std::string binary(1 << 20, '\0');
  for (std::size_t i = 0; i < binary.size(); ++i) binary[i] = static_cast<char>(i * 31);
  c.set("binary", bytes_of(binary));
  EXPECT_EQ(text_of(c.get("binary")), binary);
  // ADD returns the new value, negative deltas too.
  EXPECT_EQ(c.add("n", -7), -7);
  EXPECT_EQ(c.add("n", 10), 3);
}

TEST(TcpStore, ProcessesMeetThroughTheStore) {
  TcpStoreServer server(0, "test: ");
  constexpr int kProcs = 4;
  std::vector<pid_t> pids;
  for (int p = 1; p <= kProcs; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        TcpStoreClient c(local(server.port()), p, 20s, "child: ");
        c.set("proc/" + std::to_string(p), bytes_of(std::to_string(p * p)));
        c.add("joined", 1);
        // Every child reads the next one's key (a wait across processes).
        const int next = p % kProcs + 1;
        if (text_of(c.get("proc/" + std::to_string(next))) != std::to_string(next * next)) code = 3;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", p, e.what());
        code = 4;
      }
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  TcpStoreClient c(local(server.port()), 0, 5s, "test: ");
  EXPECT_EQ(c.add("joined", 0), kProcs);
}

TEST(TcpStore, AClientStartedBeforeTheServerConnectsWhenItComes) {
  const std::uint16_t port = closed_port();
  std::string got;
  std::thread client([&] {
    try {
      TcpStoreClient c(local(port), 1, 20s, "test: ");
      got = text_of(c.get("hello"));
    } catch (const std::exception& e) {
      got = std::string("error: ") + e.what();
    }
  });
  std::this_thread::sleep_for(300ms);
  TcpStoreServer server(port, "test: ");
  TcpStoreClient c(local(port), 0, 20s, "test: ");
  c.set("hello", bytes_of("world"));
  client.join();
  EXPECT_EQ(got, "world");
}

TEST(TcpStore, IPv6Loopback) {
  TcpStoreServer server(0, "test: ");
  try {
    TcpStoreClient c6(local(server.port(), "::1"), 0, 2s, "test: ");
    c6.set("v6", bytes_of("yes"));
    TcpStoreClient c4(local(server.port(), "127.0.0.1"), 1, 2s, "test: ");
    EXPECT_EQ(text_of(c4.get("v6")), "yes");
  } catch (const tally::RuntimeError& e) {
    if (std::string(e.what()).find("::1") != std::string::npos &&
        std::string(e.what()).find("connect") != std::string::npos)
      GTEST_SKIP() << "no IPv6 loopback on this machine: " << e.what();
    throw;
  }
}

TEST(TcpStore, ATimeoutNamesTheKeyTheRankAndTheStore) {
  TcpStoreServer server(0, "test: ");
  TcpStoreClient c(local(server.port()), 5, 300ms, "gloo backend: ");
  const auto m = message_of<tally::RuntimeError>(
      [&] { c.get("tally/1/gloo/rank_3", "the address rank 3 publishes"); });
  EXPECT_NE(m.find("gloo backend: rank 5: the TCP store at 127.0.0.1:"), std::string::npos) << m;
  EXPECT_NE(m.find("'tally/1/gloo/rank_3'"), std::string::npos) << m;
  EXPECT_NE(m.find("the address rank 3 publishes"), std::string::npos) << m;
  EXPECT_NE(m.find("no answer within 0.3 s"), std::string::npos) << m;
  // The client connects again after a timeout.
  c.set("after", bytes_of("x"));
  EXPECT_EQ(text_of(c.get("after")), "x");
  // wait() on several keys names them.
  const auto w = message_of<tally::RuntimeError>([&] {
    c.wait(std::vector<std::string>{"after", "never/1"});
  });
  EXPECT_NE(w.find("'never/1'"), std::string::npos) << w;
}

TEST(TcpStore, NoServerIsAnErrorAfterTheTimeoutNamingTheAddress) {
  const std::uint16_t port = closed_port();
  auto a = local(port);
  a.source = "MASTER_ADDR=127.0.0.1, MASTER_PORT=" + std::to_string(port);
  const auto m = message_of<tally::RuntimeError>([&] { TcpStoreClient c(a, 2, 400ms, "x: "); });
  EXPECT_NE(m.find("x: rank 2: the TCP store at 127.0.0.1:" + std::to_string(port) +
                   " (MASTER_ADDR=127.0.0.1, MASTER_PORT=" + std::to_string(port) + ")"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("no connection within 0.4 s"), std::string::npos) << m;
  const auto bad = message_of<tally::RuntimeError>(
      [&] { TcpStoreClient c(local(port, "no-such-host.invalid"), 0, 200ms, "x: "); });
  EXPECT_NE(bad.find("cannot resolve 'no-such-host.invalid'"), std::string::npos) << bad;
}

TEST(TcpStore, AServerThatDiesFailsItsClientsNeverHangsThem) {
  auto server = std::make_unique<TcpStoreServer>(0, "test: ");
  TcpStoreClient c(local(server->port()), 1, 2s, "test: ");
  c.set("a", bytes_of("1"));
  std::string m;
  std::thread waiter([&] { m = message_of<tally::RuntimeError>([&] { c.get("never"); }); });
  std::this_thread::sleep_for(200ms);
  server.reset();  // the waiting client's connection closes
  waiter.join();
  EXPECT_NE(m.find("closed the connection"), std::string::npos) << m;
}

TEST(TcpStore, PortTakenIsAConfigErrorNamingIt) {
  TcpStoreServer first(0, "test: ");
  const auto m = message_of<tally::ConfigError>(
      [&] { TcpStoreServer second(first.port(), "gloo backend: "); });
  EXPECT_NE(m.find("gloo backend: cannot listen on port " + std::to_string(first.port())),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("MASTER_PORT"), std::string::npos) << m;
}

namespace {

// A raw connection to the server, for bytes no client would send.
int raw_connect(std::uint16_t port) {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(s);
    return -1;
  }
  timeval tv{5, 0};
  ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return s;
}

// Sends `bytes` and reports whether the server then closed the connection (read returns 0).
bool server_closes_after(std::uint16_t port, const std::vector<std::uint8_t>& bytes) {
  const int s = raw_connect(port);
  if (s < 0) return false;
  (void)!::send(s, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  char buf[64];
  const ssize_t got = ::recv(s, buf, sizeof buf, 0);
  ::close(s);
  return got == 0;
}

template <class T>
void append(std::vector<std::uint8_t>& v, T x) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(&x);
  v.insert(v.end(), p, p + sizeof x);
}

}  // namespace

TEST(TcpStore, GarbageFromTheNetworkDropsThatConnectionOnly) {
  TcpStoreServer server(0, "test: ");
  TcpStoreClient good(local(server.port()), 0, 5s, "test: ");
  good.set("kept", bytes_of("yes"));
  // Not validated first.
  EXPECT_TRUE(server_closes_after(server.port(), {3, 0, 0, 0, 0, 0, 0, 0, 0}));
  // A wrong magic number.
  EXPECT_TRUE(server_closes_after(server.port(), {0, 1, 2, 3, 4}));
  // Validated, then an unknown query.
  std::vector<std::uint8_t> v{0};
  append<std::uint32_t>(v, 0x3C85F7CE);
  auto unknown = v;
  unknown.push_back(200);
  EXPECT_TRUE(server_closes_after(server.port(), unknown));
  // Validated, then a SET whose key claims 2^40 bytes (over the 64 MiB bound).
  auto huge = v;
  huge.push_back(1);
  append<std::uint64_t>(huge, std::uint64_t{1} << 40);
  EXPECT_TRUE(server_closes_after(server.port(), huge));
  // A WAIT for 2^40 keys.
  auto many = v;
  many.push_back(6);
  append<std::uint64_t>(many, std::uint64_t{1} << 40);
  EXPECT_TRUE(server_closes_after(server.port(), many));
  // GET of a key that is not set (torch's clients always WAIT first).
  auto get = v;
  get.push_back(3);
  append<std::uint64_t>(get, 4);
  for (char ch : std::string("/abs")) get.push_back(static_cast<std::uint8_t>(ch));
  EXPECT_TRUE(server_closes_after(server.port(), get));
  // The good client was never disturbed.
  EXPECT_EQ(text_of(good.get("kept")), "yes");
}

TEST(TcpStore, AClientOfSomethingElseFailsNamingIt) {
  // A listener that answers every connection with junk and closes: not a store.
  const int l = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(l, 4), 0);
  socklen_t len = sizeof a;
  ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
  std::thread junk([l] {
    const int s = ::accept(l, nullptr, nullptr);
    if (s < 0) return;
    char buf[64];
    (void)!::recv(s, buf, sizeof buf, 0);
    (void)!::send(s, "HTTP/1.1 400\r\n\r\n", 16, MSG_NOSIGNAL);
    ::close(s);
  });
  const auto m = message_of<tally::RuntimeError>(
      [&] { TcpStoreClient c(local(ntohs(a.sin_port)), 0, 3s, "test: "); });
  junk.join();
  ::close(l);
  EXPECT_NE(m.find("not a TCP store"), std::string::npos) << m;
}

TEST(TcpStore, JobStorePrefixesCountBackends) {
  auto a = local(closed_port());
  a.host_here = true;
  JobStore rank0(a, 0, 10s, "test: ");
  a.host_here = false;
  JobStore rank1(a, 1, 10s, "test: ");
  EXPECT_EQ(rank0.prefix(), "tally/1/");
  EXPECT_EQ(rank1.prefix(), "tally/1/");
  JobStore rank1_again(a, 1, 10s, "test: ");
  EXPECT_EQ(rank1_again.prefix(), "tally/2/");
  rank0.client().set(rank0.prefix() + "x", bytes_of("from 0"));
  EXPECT_EQ(text_of(rank1.client().get(rank1.prefix() + "x")), "from 0");
}

TEST(FirstSlurmHost, HostLists) {
  EXPECT_EQ(tally_store::first_slurm_host("node[03-05,7],gpu1", "x: "), "node03");
  EXPECT_EQ(tally_store::first_slurm_host("a,b", "x: "), "a");
  EXPECT_EQ(tally_store::first_slurm_host("x[1-2]y", "x: "), "x1y");
  EXPECT_EQ(tally_store::first_slurm_host("solo", "x: "), "solo");
  EXPECT_EQ(tally_store::first_slurm_host("rack[2-3]-node[08-09]", "x: "), "rack2-node08");
  EXPECT_EQ(tally_store::first_slurm_host("gpu[7]", "x: "), "gpu7");
  for (const char* bad : {"", "node[", "node[]", "node[a-b]", "]x", ",a", "a b"}) {
    const auto m = message_of<tally::ConfigError>(
        [&] { tally_store::first_slurm_host(bad, "gloo backend: "); });
    EXPECT_NE(m.find("gloo backend: SLURM_STEP_NODELIST='" + std::string(bad) +
                     "' is not a Slurm host list"),
              std::string::npos)
        << m;
  }
}

TEST(StoreAddressFromEnv, Cases) {
  using tally_store::store_address_from_env;
  EXPECT_FALSE(store_address_from_env(env_of({}), 0, "x: "));
  // torchrun: rank 0 hosts unless the agent does.
  auto a = store_address_from_env(env_of({{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}}),
                                  0, "x: ");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "10.0.0.1");
  EXPECT_EQ(a->port, 29500);
  EXPECT_TRUE(a->host_here);
  EXPECT_EQ(a->source, "MASTER_ADDR=10.0.0.1, MASTER_PORT=29500");
  EXPECT_FALSE(
      store_address_from_env(env_of({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}}), 1, "x: ")
          ->host_here);
  auto agent = store_address_from_env(env_of({{"MASTER_ADDR", "h"},
                                              {"MASTER_PORT", "29500"},
                                              {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                              {"TORCHELASTIC_RUN_ID", "abc"}}),
                                      0, "x: ");
  EXPECT_FALSE(agent->host_here);
  EXPECT_NE(agent->source.find("TORCHELASTIC_USE_AGENT_STORE=True"), std::string::npos);
  EXPECT_NE(agent->source.find("(torchrun)"), std::string::npos);
  // Slurm: the first host of the step, port from the job id unless MASTER_PORT says.
  auto s = store_address_from_env(
      env_of({{"SLURM_STEP_NODELIST", "node[03-05,7],gpu1"}, {"SLURM_JOB_ID", "123456"}}), 0,
      "x: ");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->host, "node03");
  EXPECT_EQ(s->port, 20000 + 123456 % 10000);
  EXPECT_TRUE(s->host_here);
  auto sp = store_address_from_env(
      env_of({{"SLURM_STEP_NODELIST", "n1"}, {"SLURM_JOB_ID", "7"}, {"MASTER_PORT", "31000"}}), 2,
      "x: ");
  EXPECT_EQ(sp->port, 31000);
  EXPECT_FALSE(sp->host_here);
  // MASTER_ADDR wins over Slurm's list.
  EXPECT_EQ(store_address_from_env(env_of({{"SLURM_STEP_NODELIST", "n1"},
                                           {"SLURM_JOB_ID", "7"},
                                           {"MASTER_ADDR", "m"},
                                           {"MASTER_PORT", "31000"}}),
                                   0, "x: ")
                ->host,
            "m");
  // Malformed: half a pair, a bad port.
  const auto err = [](std::map<std::string, std::string> vars) {
    return message_of<tally::ConfigError>(
        [&] { store_address_from_env(env_of(std::move(vars)), 0, "gloo backend: "); });
  };
  EXPECT_NE(
      err({{"MASTER_ADDR", "h"}}).find("gloo backend: MASTER_ADDR is set but MASTER_PORT is not"),
      std::string::npos);
  EXPECT_NE(err({{"MASTER_PORT", "1"}}).find("MASTER_PORT is set but MASTER_ADDR is not"),
            std::string::npos);
  for (const char* port : {"0", "65536", "x", "", "-1", "12a"})
    EXPECT_NE(err({{"MASTER_ADDR", "h"}, {"MASTER_PORT", port}})
                  .find("MASTER_PORT='" + std::string(port) + "' is not a port number"),
              std::string::npos)
        << port;
  EXPECT_NE(
      err({{"SLURM_STEP_NODELIST", "n[1"}, {"SLURM_JOB_ID", "1"}}).find("SLURM_STEP_NODELIST"),
      std::string::npos);
}

// ---- against PyTorch's own TCPStore (the venv's torch) --------------------------------------

namespace {

const std::filesystem::path kVenvPython =
    std::filesystem::path(TALLY_SOURCE_DIR) / ".venv-torch" / "bin" / "python";
const std::string kPeer = std::string(TALLY_SOURCE_DIR) + "/tests/support/torch_store_peer.py";

// Whether the venv's python imports torch; the reason when not.
std::string torch_missing() {
  static const std::string why = [] {
    if (!std::filesystem::exists(kVenvPython))
      return "no venv with torch at " + kVenvPython.string() +
             " (create it: python3 -m venv .venv-torch && .venv-torch/bin/pip install torch)";
    const std::string cmd = kVenvPython.string() + " -c 'import torch.distributed' 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[256];
    while (p != nullptr && std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    const int rc = p != nullptr ? ::pclose(p) : -1;
    return rc == 0 ? std::string() : "the venv's python cannot import torch.distributed: " + out;
  }();
  return why;
}

}  // namespace

TEST(TorchInterop, TallyClientOfTorchsServer) {
  if (const auto why = torch_missing(); !why.empty()) GTEST_SKIP() << why;
  const std::string cmd = kVenvPython.string() + " -W ignore " + kPeer + " server 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  // The port on a line of its own (a warning of torch's may come first).
  char line[512] = {};
  int port = 0;
  std::string before;
  while (port == 0 && std::fgets(line, sizeof line, p) != nullptr) {
    if (line[0] >= '1' && line[0] <= '9')
      port = std::atoi(line);
    else
      before += line;
  }
  ASSERT_GT(port, 0) << before;
  std::string verdict;
  try {
    TcpStoreClient c(local(static_cast<std::uint16_t>(port)), 1, 60s, "test: ");
    EXPECT_EQ(text_of(c.get("py/key")), "from python");
    c.set("tally/key", bytes_of("from tally"));
    EXPECT_EQ(c.add("counter", 5), 12);  // python added 7 first
    EXPECT_TRUE(c.check(std::vector<std::string>{"py/key", "counter"}));
    c.wait(std::vector<std::string>{"py/done"});
    EXPECT_EQ(text_of(c.get("py/done")), "yes");
    c.set("tally/bye", bytes_of("1"));
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  std::string rest;
  while (std::fgets(line, sizeof line, p) != nullptr) rest += line;
  EXPECT_EQ(::pclose(p), 0) << rest;
  EXPECT_NE(rest.find("python server ok"), std::string::npos) << rest;
}

// torch's client proves the job's secret with TCPStore's own get and set (tcp_store.hpp).
TEST(TorchInterop, TorchClientOfTallysServer) {
  if (const auto why = torch_missing(); !why.empty()) GTEST_SKIP() << why;
  const std::string secret = "torch-interop-secret";
  tally_store::ServerOptions o;
  o.secret = secret;
  TcpStoreServer server(0, "test: ", o);
  auto a = local(server.port());
  a.secret = secret;
  TcpStoreClient c(a, 0, 60s, "test: ");
  c.set("tally/key", bytes_of("from tally"));
  c.add("counter", 7);
  const std::string cmd = "TALLY_STORE_SECRET=" + secret + " " + kVenvPython.string() +
                          " -W ignore " + kPeer + " client 127.0.0.1 " +
                          std::to_string(server.port()) + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  // Python sets py/key after it read tally/key; then waits for tally/late.
  EXPECT_EQ(text_of(c.get("py/key")), "from python");
  EXPECT_EQ(c.add("counter", 0), 12);  // python added 5
  c.set("tally/late", bytes_of("late"));
  std::string out;
  char line[256];
  while (std::fgets(line, sizeof line, p) != nullptr) out += line;
  EXPECT_EQ(::pclose(p), 0) << out;
  EXPECT_NE(out.find("python client ok"), std::string::npos) << out;
}

// A SET has no answer: a client may set a key and close its connection at once (rank 0 publishing
// an id and moving on). The server must apply a request that arrives together with the close.
TEST(TcpStore, ASetFollowedAtOnceByACloseIsKept) {
  TcpStoreServer server(0, "test: ");
  for (int i = 0; i < 50; ++i) {
    const std::string key = "left/" + std::to_string(i);
    {
      TcpStoreClient writer(local(server.port()), 0, 5s, "test: ");
      writer.set(key, bytes_of("v" + std::to_string(i)));
    }  // closed right after the SET
    TcpStoreClient reader(local(server.port()), 1, 5s, "test: ");
    EXPECT_EQ(text_of(reader.get(key)), "v" + std::to_string(i)) << key;
  }
}

// ---- work_and_wait over the store (store_wait.hpp) ---------------------------------------------

namespace {

// Runs `world` ranks as threads over one store; rank r runs body(r, call) and returns its error.
std::vector<std::string> wait_world(
    int world, std::chrono::milliseconds timeout,
    const std::function<void(int, const tally_store::WaitCall&)>& body) {
  TcpStoreServer server(0, "test: ");
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      tally_store::WaitCall call;
      call.address = local(server.port());
      call.prefix = "tally/1/";
      call.rank = r;
      call.world_size = world;
      call.seq = 1;
      call.timeout = timeout;
      call.who = "test backend: rank " + std::to_string(r) + ": ";
      call.what = "run_on_every_rank (test)";
      try {
        body(r, call);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  return errors;
}

// Work of `total` that shows progress every `tick`.
void busy(std::atomic<std::uint64_t>& progress, std::chrono::milliseconds total,
          std::chrono::milliseconds tick) {
  for (auto spent = 0ms; spent < total; spent += tick) {
    std::this_thread::sleep_for(tick);
    ++progress;
  }
}

}  // namespace

// Ranks that read for four times the timeout, showing progress, all finish: the timeout bounds
// silence, not work. So does rank 0 computing for four times the timeout while the others wait.
TEST(StoreWait, LongLiveWorkNeverTimesOut) {
  const auto errors = wait_world(3, 300ms, [](int r, const tally_store::WaitCall& call) {
    std::atomic<std::uint64_t> progress{0};
    tally_store::work_and_wait(
        call, -1, [&] { busy(progress, r == 1 ? 1200ms : 100ms, 20ms); }, &progress);
    tally_store::WaitCall second = call;
    second.seq = 2;
    tally_store::work_and_wait(
        second, 0, [] { std::this_thread::sleep_for(1200ms); }, nullptr);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

// A rank stuck inside one batch (no progress) is named by every other rank once it has been
// silent for the timeout; it returns itself once its work ends (the others said they were done).
TEST(StoreWait, ASilentRankIsNamedByTheOthers) {
  const auto errors = wait_world(4, 300ms, [](int r, const tally_store::WaitCall& call) {
    std::atomic<std::uint64_t> progress{0};
    tally_store::work_and_wait(
        call, -1,
        [&] {
          if (r == 2) std::this_thread::sleep_for(1500ms);
        },
        &progress);
  });
  for (int r : {0, 1, 3}) {
    EXPECT_NE(errors[static_cast<std::size_t>(r)].find(
                  "rank " + std::to_string(r) +
                  ": run_on_every_rank (test): rank 2 showed no "
                  "sign of life for 0.3 s (backend.timeout) while reading its shard"),
              std::string::npos)
        << errors[static_cast<std::size_t>(r)];
  }
  EXPECT_EQ(errors[2], "");
}

// A root that falls silent (here: never comes, so it sends no heartbeat and never says it is done)
// is named by the waiting ranks once the timeout has passed.
TEST(StoreWait, ARootThatNeverComesIsNamed) {
  const auto errors = wait_world(3, 300ms, [](int r, const tally_store::WaitCall& call) {
    if (r == 0) return;  // never joins: no heartbeat, never done
    tally_store::work_and_wait(
        call, 0, [] {}, nullptr);
  });
  for (int r : {1, 2})
    EXPECT_NE(errors[static_cast<std::size_t>(r)].find(
                  "rank 0 showed no sign of life for 0.3 s (backend.timeout) while computing "
                  "the results"),
              std::string::npos)
        << errors[static_cast<std::size_t>(r)];
}

// An exception from the work is rethrown on its rank after the others are released.
TEST(StoreWait, AnErrorInTheWorkIsRethrownOnItsRankOnly) {
  const auto errors = wait_world(3, 2000ms, [](int r, const tally_store::WaitCall& call) {
    std::atomic<std::uint64_t> progress{0};
    tally_store::work_and_wait(
        call, -1,
        [&] {
          if (r == 1) throw std::runtime_error("bad shard");
        },
        &progress);
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "bad shard");
  EXPECT_EQ(errors[2], "");
}

// ---- trust: where the server listens, the job's secret (issue 32) ----------------------------

namespace {

// A raw connection to 127.0.0.1:port (or `ip`), validated (VALIDATE and the magic number).
int raw_validated(std::uint16_t port) {
  const int s = raw_connect(port);
  if (s < 0) return -1;
  std::vector<std::uint8_t> v{0};
  append<std::uint32_t>(v, 0x3C85F7CE);
  (void)!::send(s, v.data(), v.size(), MSG_NOSIGNAL);
  return s;
}

void append_key(std::vector<std::uint8_t>& v, const std::string& k) {
  append<std::uint64_t>(v, k.size());
  v.insert(v.end(), k.begin(), k.end());
}

// Whether the server closes `s` (recv gives 0, or the connection is reset) within its 5 s
// receive timeout, reading and dropping whatever it answers first.
bool closed_by_server(int s) {
  char buf[4096];
  for (int i = 0; i < 100000; ++i) {
    const ssize_t got = ::recv(s, buf, sizeof buf, 0);
    if (got == 0) return true;
    if (got < 0) return errno == ECONNRESET;
  }
  return false;
}

// A non-loopback IPv4 address of this host (the one that routes outwards), or "".
std::string outward_address() {
  // An IPv4 address of an interface that is up and not loopback, from the interface list:
  // nothing is sent anywhere to find it.
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  std::string out;
  for (const ifaddrs* i = list; i != nullptr && out.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if (::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text) != nullptr) out = text;
  }
  ::freeifaddrs(list);
  return out;
}

// Whether a TCP connection to ip:port is accepted.
bool reaches(const std::string& ip, std::uint16_t port) {
  const int s = ::socket(ip.find(':') != std::string::npos ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  int r = -1;
  if (ip.find(':') != std::string::npos) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    ::inet_pton(AF_INET6, ip.c_str(), &a.sin6_addr);
    r = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
    r = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  ::close(s);
  return r == 0;
}

tally_store::ServerOptions with_secret(const std::string& secret) {
  tally_store::ServerOptions o;
  o.secret = secret;
  return o;
}

StoreAddress local_with(std::uint16_t port, const std::string& secret) {
  auto a = local(port);
  a.secret = secret;
  return a;
}

int count_lines(const std::string& text, const std::string& part) {
  int n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

std::string stderr_of(const std::function<void()>& f) {
  testing::internal::CaptureStderr();
  f();
  return testing::internal::GetCapturedStderr();
}

}  // namespace

TEST(TcpStoreTrust, TheServerListensOnlyWhereItIsTold) {
  // Every machine of this project has one (its veth or its NIC): the test needs an address the
  // store must not listen on.
  const std::string outward = outward_address();
  ASSERT_FALSE(outward.empty()) << "no interface of this host has a non-loopback IPv4 address";
  {
    // The default, and every loopback name: loopback only.
    for (const char* bind : {"loopback", "127.0.0.1", "localhost", "::1"}) {
      tally_store::ServerOptions o;
      o.bind = bind;
      TcpStoreServer server(0, "test: ", o);
      EXPECT_TRUE(reaches("127.0.0.1", server.port())) << bind;
      EXPECT_FALSE(reaches(outward, server.port())) << bind;
    }
  }
  {
    tally_store::ServerOptions o;
    o.bind = outward;  // that address only
    TcpStoreServer server(0, "test: ", o);
    EXPECT_TRUE(reaches(outward, server.port()));
    EXPECT_FALSE(reaches("127.0.0.1", server.port()));
  }
  {
    tally_store::ServerOptions o;
    o.bind = "any";  // widened on purpose
    TcpStoreServer server(0, "test: ", o);
    EXPECT_TRUE(reaches(outward, server.port()));
    EXPECT_TRUE(reaches("127.0.0.1", server.port()));
  }
}

TEST(TcpStoreTrust, AnAddressNotOfThisHostIsAConfigErrorNamingIt) {
  for (const char* bind : {"192.0.2.1", "198.51.100.7", "2001:db8::1", "no-such-host.invalid"}) {
    tally_store::ServerOptions o;
    o.bind = bind;
    const auto m =
        message_of<tally::ConfigError>([&] { TcpStoreServer server(0, "gloo backend: ", o); });
    EXPECT_NE(m.find("gloo backend: cannot listen on port 0 of " + std::string(bind)),
              std::string::npos)
        << m;
    if (std::string(bind).find("invalid") == std::string::npos) {
      EXPECT_NE(m.find("backend.store_bind"), std::string::npos) << m;
    }
  }
}

TEST(TcpStoreTrust, OnlyClientsWithTheSecretAreServed) {
  const std::string secret = "the-job-secret-1f2e3d";
  TcpStoreServer server(0, "test: ", with_secret(secret));
  TcpStoreClient good(local_with(server.port(), secret), 0, 5s, "test: ");
  good.set("tally/1/gloo/0", bytes_of("rank 0's address"));
  good.set("victim", bytes_of("kept"));
  // Every query but the steps of the authentication closes an unauthenticated connection.
  std::vector<std::vector<std::uint8_t>> requests;
  const auto req = [&](std::uint8_t q, const std::function<void(std::vector<std::uint8_t>&)>& f) {
    std::vector<std::uint8_t> v{q};
    f(v);
    requests.push_back(v);
  };
  req(1, [](auto& v) {  // SET (the one that ended a rendezvous)
    append_key(v, "/tally/1/gloo/0");
    append_key(v, "evil");
  });
  req(3, [](auto& v) { append_key(v, "/victim"); });  // GET
  req(4, [](auto& v) {                                // ADD
    append_key(v, "/tally/1/backends");
    append<std::int64_t>(v, 5);
  });
  req(8, [](auto& v) { append_key(v, "/victim"); });  // DELETE_KEY
  req(7, [](auto&) {});                               // GET_NUM_KEYS
  req(5, [](auto& v) {                                // CHECK
    append<std::uint64_t>(v, 1);
    append_key(v, "/victim");
  });
  req(6, [](auto& v) {  // WAIT
    append<std::uint64_t>(v, 1);
    append_key(v, "/victim");
  });
  req(2, [](auto& v) {  // COMPARE_SET
    append_key(v, "/victim");
    append_key(v, "kept");
    append_key(v, "evil");
  });
  req(9, [](auto& v) {  // APPEND
    append_key(v, "/victim");
    append_key(v, "evil");
  });
  req(10, [](auto& v) {  // MULTI_GET
    append<std::uint64_t>(v, 1);
    append_key(v, "/victim");
  });
  req(11, [](auto& v) {  // MULTI_SET
    append<std::uint64_t>(v, 1);
    append_key(v, "/victim");
    append_key(v, "evil");
  });
  // The first byte of a query that is no step of the authentication is enough to be refused
  // (the rest never comes: the connection is closed at once, not at the time to authenticate).
  for (std::uint8_t q : {2, 4, 7, 8, 9, 10, 11, 12}) req(q, [](auto&) {});
  req(1, [](auto& v) {  // a wrong proof
    append_key(v, "/tally/auth/proof");
    append_key(v, std::string(64, 'a'));
  });
  const std::string err = stderr_of([&] {
    for (const auto& r : requests) {
      const int s = raw_validated(server.port());
      ASSERT_GE(s, 0);
      (void)!::send(s, r.data(), r.size(), MSG_NOSIGNAL);
      EXPECT_TRUE(closed_by_server(s)) << "query " << int(r[0]);
      ::close(s);
    }
  });
  EXPECT_EQ(text_of(good.get("victim")), "kept");
  EXPECT_EQ(text_of(good.get("tally/1/gloo/0")), "rank 0's address");
  EXPECT_EQ(good.add("tally/1/backends", 0), 0);
  EXPECT_GE(server.stats().closed_bad, requests.size());
  // Named once per peer, never with the secret.
  EXPECT_EQ(count_lines(err, "closed the connection from 127.0.0.1:"), 1) << err;
  EXPECT_NE(err.find("a SET before the client proved the job's secret"), std::string::npos) << err;
  EXPECT_EQ(err.find(secret), std::string::npos) << err;
  // The nonce is a fresh one per connection, and a PING is answered before authentication.
  std::vector<std::string> nonces;
  for (int i = 0; i < 3; ++i) {
    const int s = raw_validated(server.port());
    std::vector<std::uint8_t> g{3};
    append_key(g, "/tally/auth/nonce");
    (void)!::send(s, g.data(), g.size(), MSG_NOSIGNAL);
    std::uint64_t n = 0;
    ASSERT_EQ(::recv(s, &n, sizeof n, MSG_WAITALL), 8);
    ASSERT_LE(n, 256u);
    std::string nonce(n, '\0');
    ASSERT_EQ(::recv(s, nonce.data(), n, MSG_WAITALL), static_cast<ssize_t>(n));
    nonces.push_back(nonce);
    ::close(s);
  }
  EXPECT_NE(nonces[0], nonces[1]);
  EXPECT_NE(nonces[1], nonces[2]);
}

TEST(TcpStoreTrust, AClientWithAWrongOrNoSecretFailsNamingTheSettingNotTheSecret) {
  const std::string secret = "right-secret-98765";
  TcpStoreServer server(0, "test: ", with_secret(secret));
  for (const std::string wrong :
       {"wrong-secret", "right-secret-9876", "right-secret-987650", "x"}) {
    std::string m;
    stderr_of([&] {
      m = message_of<tally::ConfigError>(
          [&] { TcpStoreClient c(local_with(server.port(), wrong), 3, 5s, "gloo backend: "); });
    });
    EXPECT_NE(m.find("gloo backend: rank 3: the TCP store at 127.0.0.1:"), std::string::npos) << m;
    EXPECT_NE(m.find("refused this rank's proof of the job's secret"), std::string::npos) << m;
    EXPECT_NE(m.find("TALLY_STORE_SECRET"), std::string::npos) << m;
    EXPECT_EQ(m.find(wrong), std::string::npos) << m;
    EXPECT_EQ(m.find(secret), std::string::npos) << m;
  }
  // No secret at all: connected, but the first request closes the connection.
  TcpStoreClient none(local(server.port()), 4, 2s, "test: ");
  stderr_of([&] {
    const auto m = message_of<tally::RuntimeError>([&] { none.add("k", 1); });
    EXPECT_NE(m.find("closed the connection"), std::string::npos) << m;
  });
}

TEST(TcpStoreTrust, SecretFilesMustBePrivateAndHoldASecret) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tally-secret-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& name, const std::string& text, mode_t mode) {
    const auto p = (dir / name).string();
    FILE* f = std::fopen(p.c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
    ::chmod(p.c_str(), mode);
    return p;
  };
  EXPECT_EQ(tally_store::read_secret_file(write("ok", "abc\n", 0600), "X", "t: "), "abc");
  EXPECT_EQ(tally_store::read_secret_file(write("ok2", "s e c r e t", 0400), "X", "t: "),
            "s e c r e t");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {write("group", "abc", 0640), "may be read or written by others (mode 0640)"},
      {write("world", "abc", 0604), "mode 0604"},
      {write("groupw", "abc", 0620), "mode 0620"},
      {write("empty", "\n", 0600), "is empty"},
      {write("huge", std::string(5000, 'k'), 0600), "holds 5000 bytes"},
      {dir.string(), "is not a regular file"},
      {(dir / "absent").string(), "cannot open the secret file"},
  };
  for (const auto& [path, part] : bad) {
    const auto m = message_of<tally::ConfigError>(
        [&] { tally_store::read_secret_file(path, "TALLY_STORE_SECRET_FILE", "gloo backend: "); });
    EXPECT_NE(m.find("gloo backend: TALLY_STORE_SECRET_FILE='" + path + "'"), std::string::npos)
        << m;
    EXPECT_NE(m.find(part), std::string::npos) << m;
    EXPECT_EQ(m.find("kkkk"), std::string::npos) << m;  // never the content
  }
  std::filesystem::remove_all(dir);
}

TEST(TcpStoreTrust, TheJobsSecretComesFromTheEnvironmentAFileOrRankZero) {
  using tally_store::secure_store_address;
  const auto dir =
      std::filesystem::temp_directory_path() / ("tally-secure-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  const std::string file = (dir / "s").string();
  {
    FILE* f = std::fopen(file.c_str(), "w");
    std::fputs("from-file\n", f);
    std::fclose(f);
    ::chmod(file.c_str(), 0600);
  }
  const auto at = [](const std::string& host, bool here) {
    StoreAddress a;
    a.host = host;
    a.port = 29999;
    a.host_here = here;
    a.source = "MASTER_ADDR=" + host + ", MASTER_PORT=29999";
    return a;
  };
  // A non-loopback store without a secret: a config error saying how to set one.
  for (const std::string host : {"10.1.2.3", "node7.example", "192.0.2.10"}) {
    for (bool here : {true, false}) {
      auto a = at(host, here);
      const auto m = message_of<tally::ConfigError>(
          [&] { secure_store_address(a, env_of({}), "", "", "gloo backend: "); });
      EXPECT_NE(m.find("gloo backend: the TCP store at " + host + ":29999"), std::string::npos)
          << m;
      EXPECT_NE(m.find("TALLY_STORE_SECRET_FILE"), std::string::npos) << m;
    }
  }
  // A loopback store bound to every interface needs one too.
  auto wide = at("127.0.0.1", true);
  EXPECT_NE(message_of<tally::ConfigError>([&] {
              secure_store_address(wide, env_of({}), "any", "", "x: ");
            }).find("backend.store_bind=any"),
            std::string::npos);
  // The sources, first match wins: the parameter, TALLY_STORE_SECRET_FILE, TALLY_STORE_SECRET.
  auto a = at("10.1.2.3", false);
  secure_store_address(a, env_of({{"TALLY_STORE_SECRET", "from-env"}}), "", "", "x: ");
  EXPECT_EQ(a.secret, "from-env");
  secure_store_address(a, env_of({{"TALLY_STORE_SECRET", "e"}, {"TALLY_STORE_SECRET_FILE", file}}),
                       "", "", "x: ");
  EXPECT_EQ(a.secret, "from-file");
  secure_store_address(a, env_of({{"TALLY_STORE_SECRET", "e"}}), "", file, "x: ");
  EXPECT_EQ(a.secret, "from-file");
  EXPECT_NE(message_of<tally::ConfigError>([&] {
              secure_store_address(a, env_of({{"TALLY_STORE_SECRET", ""}}), "", "", "x: ");
            }).find("TALLY_STORE_SECRET is set but empty"),
            std::string::npos);
  // Loopback without a configured secret: rank 0 makes one in a private per-user file.
  auto r0 = at("127.0.0.1", true);
  auto r1 = at("localhost", false);
  const auto xdg = env_of({{"XDG_RUNTIME_DIR", dir.string()}});
  secure_store_address(r0, xdg, "", "", "x: ");
  secure_store_address(r1, xdg, "", "", "x: ");
  EXPECT_EQ(r0.secret.size(), 64u);
  EXPECT_TRUE(r0.write_secret_file);
  EXPECT_TRUE(r1.secret.empty());
  EXPECT_EQ(r0.secret_file, (dir / "tally" / "store-29999.secret").string());
  EXPECT_EQ(r1.secret_file, r0.secret_file);
  EXPECT_EQ(std::filesystem::status(dir / "tally").permissions(),
            std::filesystem::perms::owner_all);
  // torchrun's agent store: no secret (torch's store has none).
  auto agent = at("10.1.2.3", false);
  agent.agent_store = true;
  secure_store_address(agent, env_of({}), "", "", "x: ");
  EXPECT_TRUE(agent.secret.empty() && agent.secret_file.empty());
  // A folder for the secret that is not private is refused.
  std::filesystem::permissions(dir / "tally", std::filesystem::perms::owner_all |
                                                  std::filesystem::perms::group_read |
                                                  std::filesystem::perms::group_exec);
  auto r2 = at("127.0.0.1", true);
  EXPECT_NE(message_of<tally::ConfigError>([&] {
              secure_store_address(r2, xdg, "", "", "x: ");
            }).find("is not this user's private folder"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(TcpStoreTrust, OneHostJobsMeetThroughRankZerosSecretFile) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tally-onehost-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  const auto env = env_of({{"XDG_RUNTIME_DIR", dir.string()}});
  auto a = local(closed_port());
  a.host_here = true;
  tally_store::secure_store_address(a, env, "", "", "test: ");
  std::string file;
  {
    JobStore rank0(a, 0, 10s, "test: ");
    file = a.secret_file;
    EXPECT_EQ(std::filesystem::status(file).permissions(),
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    auto b = local(a.port);
    tally_store::secure_store_address(b, env, "", "", "test: ");
    EXPECT_TRUE(b.secret.empty());
    JobStore rank1(b, 1, 10s, "test: ");
    EXPECT_EQ(rank1.address().secret, a.secret);  // read after it connected
    rank0.client().set(rank0.prefix() + "x", bytes_of("from 0"));
    EXPECT_EQ(text_of(rank1.client().get(rank1.prefix() + "x")), "from 0");
    // A second backend of the job on rank 0 reuses the first one's server and secret.
    auto again = local(a.port);
    again.host_here = true;
    tally_store::secure_store_address(again, env, "", "", "test: ");
    JobStore rank0_again(again, 0, 10s, "test: ");
    EXPECT_EQ(rank0_again.prefix(), "tally/2/");
  }
  std::filesystem::remove_all(dir);
}

// ---- bounds: memory, fair service, connections (issue 32) ------------------------------------

namespace {

// This process's resident set size in KiB (VmRSS).
long rss_kib() {
  FILE* f = std::fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f != nullptr && std::fgets(line, sizeof line, f) != nullptr)
    if (std::strncmp(line, "VmRSS:", 6) == 0) kib = std::atol(line + 6);
  if (f != nullptr) std::fclose(f);
  return kib;
}

std::vector<std::uint8_t> get_request(const std::string& key) {
  std::vector<std::uint8_t> v{3};
  append_key(v, key);
  return v;
}

}  // namespace

// One client pipelining GETs of a large key and never reading: its unsent answers stay under
// their bound (its requests wait), rank 0's memory stays flat, and the other clients are served.
TEST(TcpStoreBounds, APipeliningClientNeitherGrowsTheServerNorStarvesTheOthers) {
  tally_store::ServerOptions o;
  o.limits.max_unsent_bytes = std::size_t{1} << 20;
  TcpStoreServer server(0, "test: ", o);
  TcpStoreClient good(local(server.port()), 0, 10s, "test: ");
  const std::string big(std::size_t{4} << 20, 'v');
  good.set("big", bytes_of(big));
  const long before = rss_kib();
  std::vector<int> hostile;
  for (int h = 0; h < 3; ++h) {
    const int s = raw_validated(server.port());
    ASSERT_GE(s, 0);
    int small = 4096;
    ::setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    std::vector<std::uint8_t> burst;
    for (int i = 0; i < 200; ++i) {  // 200 x 4 MiB of answers asked for: 800 MiB unbounded
      const auto g = get_request("/big");
      burst.insert(burst.end(), g.begin(), g.end());
    }
    (void)!::send(s, burst.data(), burst.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    hostile.push_back(s);
  }
  // The job's own clients keep being served, with correct answers.
  for (int i = 0; i < 50; ++i) {
    good.set("k" + std::to_string(i), bytes_of("v" + std::to_string(i)));
    EXPECT_EQ(text_of(good.get("k" + std::to_string(i))), "v" + std::to_string(i));
    EXPECT_EQ(good.add("n", 1), i + 1);
  }
  EXPECT_EQ(text_of(good.get("big")), big);
  const long after = rss_kib();
  EXPECT_LT(after - before, 200 * 1024) << before << " KiB before, " << after << " KiB after";
  for (int s : hostile) ::close(s);
  EXPECT_EQ(text_of(good.get("k3")), "v3");
}

TEST(TcpStoreBounds, EveryStoredSizeIsBoundedAndTheClientBreakingItIsNamed) {
  tally_store::ServerOptions o;
  o.limits.max_value_bytes = 1 << 16;
  o.limits.max_key_bytes = 64;
  o.limits.max_stored_bytes = 1 << 18;
  o.limits.max_keys = 32;
  o.limits.max_request_keys = 8;
  TcpStoreServer server(0, "test: ", o);
  TcpStoreClient good(local(server.port()), 0, 5s, "test: ");
  good.set("kept", bytes_of("yes"));
  const auto set_req = [](const std::string& key, std::size_t n) {
    std::vector<std::uint8_t> v{1};
    append_key(v, key);
    append_key(v, std::string(n, 'x'));
    return v;
  };
  const auto keys_req = [](std::uint8_t q, int n) {
    std::vector<std::uint8_t> v{q};
    append<std::uint64_t>(v, static_cast<std::uint64_t>(n));
    for (int i = 0; i < n; ++i) append_key(v, "/kept");
    return v;
  };
  struct Case {
    std::vector<std::uint8_t> bytes;
    std::string named;
  };
  std::vector<Case> cases = {
      {set_req("/a", (1 << 16) + 1), "a value of 65537 bytes (the bound is 65536)"},
      {set_req(std::string(65, 'k'), 1), "a key of 65 bytes (the bound is 64)"},
      {keys_req(6, 9), "a request of 9 keys (the bound is 8)"},  // WAIT
      {keys_req(5, 9), "a request of 9 keys"},                   // CHECK
      {keys_req(10, 9), "a request of 9 keys"},                  // MULTI_GET
  };
  for (auto& c : cases) {
    const int s = raw_validated(server.port());
    ASSERT_GE(s, 0);
    (void)!::send(s, c.bytes.data(), c.bytes.size(), MSG_NOSIGNAL);
    EXPECT_TRUE(closed_by_server(s)) << c.named;
    ::close(s);
  }
  // Total stored bytes: five values of 60 KiB fit 256 KiB... four do; the fifth is refused.
  {
    const int s = raw_validated(server.port());
    for (int i = 0; i < 5; ++i) {
      const auto r = set_req("/fill" + std::to_string(i), 60 << 10);
      (void)!::send(s, r.data(), r.size(), MSG_NOSIGNAL);
    }
    EXPECT_TRUE(closed_by_server(s));
    ::close(s);
  }
  // Keys: 32 in all.
  {
    const int s = raw_validated(server.port());
    for (int i = 0; i < 40; ++i) {
      const auto r = set_req("/key" + std::to_string(i), 1);
      (void)!::send(s, r.data(), r.size(), MSG_NOSIGNAL);
    }
    EXPECT_TRUE(closed_by_server(s));
    ::close(s);
  }
  const auto st = server.stats();
  EXPECT_LE(st.keys, 32u);
  EXPECT_LE(st.stored_bytes, std::uint64_t{1} << 18);
  EXPECT_GE(st.closed_bad, cases.size() + 2);
  EXPECT_EQ(text_of(good.get("kept")), "yes");
  // The job's client is refused too when it breaks a bound, with a message naming it.
  const auto m = message_of<tally::RuntimeError>([&] {
    for (int i = 0; i < 40; ++i) good.set("many/" + std::to_string(i), bytes_of("1"));
    good.get("kept");
  });
  EXPECT_NE(m.find("closed the connection"), std::string::npos) << m;
}

TEST(TcpStoreBounds, RequestsPastTheirBoundAreClosedBeforeTheyAreBuffered) {
  tally_store::ServerOptions o = with_secret("s");
  o.limits.max_value_bytes = 1 << 16;
  TcpStoreServer server(0, "test: ", o);
  // Before authentication a request may hold 64 KiB at most: a proof "of 200 bytes" is refused
  // at once, and so is a flood of bytes that never makes a request.
  for (const std::size_t flood : {std::size_t{300}, std::size_t{70} << 10, std::size_t{1} << 20}) {
    const int s = raw_validated(server.port());
    std::vector<std::uint8_t> v{1};
    append_key(v, "/tally/auth/proof");
    append<std::uint64_t>(v, flood);
    v.resize(v.size() + std::min<std::size_t>(flood, 100 << 10), 'p');
    (void)!::send(s, v.data(), v.size(), MSG_NOSIGNAL);
    EXPECT_TRUE(closed_by_server(s)) << flood;
    ::close(s);
  }
  const auto st = server.stats();
  EXPECT_EQ(st.keys, 0u);
  EXPECT_GE(st.closed_bad, 3u);
}

TEST(TcpStoreConnections, IdleUnauthenticatedClientsNeverLockOutTheJob) {
  tally_store::ServerOptions o = with_secret("job-secret");
  o.limits.max_unauthenticated_per_peer = 8;
  o.limits.max_unauthenticated = 16;
  o.limits.auth_timeout = 400ms;
  TcpStoreServer server(0, "test: ", o);
  std::vector<int> idle;
  for (int i = 0; i < 100; ++i) idle.push_back(raw_connect(server.port()));
  // Ranks still connect (the oldest idle ones make room), and are served.
  std::vector<std::unique_ptr<TcpStoreClient>> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(std::make_unique<TcpStoreClient>(local_with(server.port(), "job-secret"), r,
                                                     10s, "test: "));
    ranks.back()->set("r" + std::to_string(r), bytes_of("up"));
  }
  for (int r = 0; r < 4; ++r) EXPECT_EQ(text_of(ranks[0]->get("r" + std::to_string(r))), "up");
  // Every idle connection was closed: evicted, or past the time to authenticate.
  int closed = 0;
  for (int s : idle) {
    if (s >= 0 && closed_by_server(s)) ++closed;
    if (s >= 0) ::close(s);
  }
  EXPECT_EQ(closed, 100);
  EXPECT_LE(server.stats().connections, 4u + 16u);
  // The authenticated ranks are never evicted, and still served.
  EXPECT_EQ(ranks[3]->add("n", 2), 2);
}

// With its descriptors used up by idle clients, the server frees the oldest unauthenticated
// one and pauses its listener; it never spins on accept(), and a rank still gets in. The server
// runs in a child with a small RLIMIT_NOFILE; the idle clients and the rank are this process.
// The server of the test below, in a process of its own (this executable again, started with
// TALLY_TEST_FD_PIPES="<read fd> <write fd>"): a small RLIMIT_NOFILE, the port to the parent, the
// turns of its loop while the parent's idle clients fill its descriptors.
TEST(TcpStoreConnections, DISABLED_AServerWithFewDescriptors) {
  const char* pipes = std::getenv("TALLY_TEST_FD_PIPES");
  if (pipes == nullptr) GTEST_SKIP() << "run by OutOfDescriptorsTheServerNeverSpinsAndStillServes";
  int in = -1, out = -1;
  ASSERT_EQ(std::sscanf(pipes, "%d %d", &in, &out), 2);
  int open_fds = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++open_fds;
  }
  {
    // UBSan's vptr check reads an object's memory through a pipe() of its own the first time it
    // sees its type: with every descriptor taken, the end of a server thread (its std::thread
    // state deleted) would be reported as an "invalid vptr" it is not. A server whose threads
    // all ended once, before the limit, leaves their types in the check's cache.
    TcpStoreServer warm(0, "child warm-up: ", with_secret("fd-secret"));
    TcpStoreClient c(local_with(warm.port(), "fd-secret"), 1, 20s, "child warm-up: ");
    c.set("warm", bytes_of("1"));
  }
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = static_cast<rlim_t>(open_fds + 24);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lim), 0);
  TcpStoreServer server(0, "child: ", with_secret("fd-secret"));
  const std::uint16_t port = server.port();
  ASSERT_EQ(::write(out, &port, sizeof port), static_cast<ssize_t>(sizeof port));
  char go = 0;
  (void)!::read(in, &go, 1);  // the parent's clients are connected
  const auto turns_before = server.stats().turns;
  (void)!::read(in, &go, 1);  // a second later, the rank has been served
  const std::uint64_t turns = server.stats().turns - turns_before;
  ASSERT_EQ(::write(out, &turns, sizeof turns), static_cast<ssize_t>(sizeof turns));
}

TEST(TcpStoreConnections, OutOfDescriptorsTheServerNeverSpinsAndStillServes) {
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string fds = std::to_string(to_child[0]) + " " + std::to_string(from_child[1]);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // exec at once: a forked copy of a threaded process runs nothing else
    ::close(to_child[1]);
    ::close(from_child[0]);
    ::setenv("TALLY_TEST_FD_PIPES", fds.c_str(), 1);
    ::execl(exe.c_str(), exe.c_str(), "--gtest_also_run_disabled_tests",
            "--gtest_filter=TcpStoreConnections.DISABLED_AServerWithFewDescriptors",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  std::uint16_t port = 0;
  ASSERT_EQ(::read(from_child[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  std::vector<int> idle;
  for (int i = 0; i < 60; ++i) idle.push_back(raw_connect(port));
  const char go = 1;
  (void)!::write(to_child[1], &go, 1);
  std::string got;
  try {
    TcpStoreClient rank(local_with(port, "fd-secret"), 1, 20s, "test: ");
    rank.set("in", bytes_of("yes"));
    got = text_of(rank.get("in"));
    std::this_thread::sleep_for(1s);  // the server idles with its listener full of clients
  } catch (const std::exception& e) {
    got = e.what();
  }
  (void)!::write(to_child[1], &go, 1);
  std::uint64_t turns = 0;
  EXPECT_EQ(::read(from_child[0], &turns, sizeof turns), static_cast<ssize_t>(sizeof turns));
  for (int s : idle)
    if (s >= 0) ::close(s);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(got, "yes");
  // A spinning loop turns hundreds of thousands of times a second; a waiting one a few dozen.
  EXPECT_LT(turns, 2000u) << turns;
}

TEST(TcpStoreWorld, AWorldThisMachineCannotServeIsAConfigErrorNamingIt) {
  using tally_store::check_world_fits;
  for (int world : {16385, 20000, 1 << 20}) {
    const auto m = message_of<tally::ConfigError>([&] {
      check_world_fits(world, 1, true, "RANK=0, WORLD_SIZE=" + std::to_string(world),
                       "gloo backend: rank 0 of " + std::to_string(world) + ": ");
    });
    EXPECT_NE(m.find("a world of " + std::to_string(world) +
                     " ranks (RANK=0, WORLD_SIZE=" + std::to_string(world) + ")"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("more than the largest a job over the TCP store may have (16384)"),
              std::string::npos)
        << m;
  }
  // Descriptors: in a child whose hard limit is 256, a world of 200 fits a client rank (64 + 199)
  // only when raised to the hard limit; rank 0 serving the store (64 + 199 + 400) does not fit.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    rlimit lim{128, 256};
    ::setrlimit(RLIMIT_NOFILE, &lim);
    int code = 0;
    try {
      check_world_fits(150, 1, false, "w", "x: ");  // raised to 256
      rlimit now{};
      ::getrlimit(RLIMIT_NOFILE, &now);
      if (now.rlim_cur < 213) code = 4;
    } catch (const std::exception&) {
      code = 5;
    }
    try {
      check_world_fits(200, 1, true, "RANK=0, WORLD_SIZE=200", "gloo backend: ");
      code = 6;
    } catch (const tally::ConfigError& e) {
      const std::string m = e.what();
      if (m.find("needs about 663 file descriptors") == std::string::npos ||
          m.find("its limit is 256 (ulimit -n; hard limit 256)") == std::string::npos)
        code = 7;
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << WEXITSTATUS(status);
}
