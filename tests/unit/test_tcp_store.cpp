// The TCP store (backends/common/tcp_store.hpp): PyTorch's c10d TCPStore protocol, client and
// server, over real sockets: set/get/add/wait/check across threads and processes, a client
// started before its server, timeouts naming the key and the rank, a server that dies, garbage
// from the network; the store's address from torchrun's and Slurm's variables; and, with the
// venv's torch (.venv-torch), tally's client against torch's server and torch's client against
// tally's server.
#include "tcp_store.hpp"

#include "store_wait.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
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
#include "tally/error.hpp"

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

TEST(TorchInterop, TorchClientOfTallysServer) {
  if (const auto why = torch_missing(); !why.empty()) GTEST_SKIP() << why;
  TcpStoreServer server(0, "test: ");
  TcpStoreClient c(local(server.port()), 0, 60s, "test: ");
  c.set("tally/key", bytes_of("from tally"));
  c.add("counter", 7);
  const std::string cmd = kVenvPython.string() + " -W ignore " + kPeer + " client 127.0.0.1 " +
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
