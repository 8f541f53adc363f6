// The job's TCP store under a real gloo job on 127.0.0.1 (issue 32): `tally run` on 3 ranks
// started as torchrun starts them (tests/support/launch_ranks.sh), with a hostile client started
// by the test beside them that floods the store's port with idle connections, pipelines GETs,
// SETs and DELETEs the job's keys without the job's secret: the job finishes with the
// single-process results, and rank 0 names the client once. The secret's settings (a wrong or
// missing secret, a file others may read, a store on an address other hosts reach), and worlds
// that cannot start (too large, too few file descriptors, a start-up deadline whatever the
// world size): exit 2 naming the setting, or the rank waited for, within the deadline.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "integration/cli_fixture.hpp"

namespace fs = std::filesystem;
using namespace tally::test;

namespace {

const std::string kLaunch = TALLY_LAUNCH_RANKS;

std::string launch(int np, const std::string& options = "") {
  return kLaunch + " " + std::to_string(np) + " --bound 240 " + options + " -- ";
}

// A port nothing listens on now.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

int connect_to(int port) {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(s);
    return -1;
  }
  return s;
}

template <class T>
void append(std::vector<std::uint8_t>& v, T x) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(&x);
  v.insert(v.end(), p, p + sizeof x);
}
void append_key(std::vector<std::uint8_t>& v, const std::string& k) {
  append<std::uint64_t>(v, k.size());
  v.insert(v.end(), k.begin(), k.end());
}

// What the hostile client sends on a connection, by round: VALIDATE, then a SET of the job's
// world size, a DELETE of rank 0's address, 200 pipelined GETs, an ADD to the backend counter,
// garbage; or nothing (an idle connection, kept open).
std::vector<std::uint8_t> attack(int round) {
  std::vector<std::uint8_t> v{0};
  append<std::uint32_t>(v, 0x3C85F7CE);
  switch (round % 6) {
    case 0:
      v.push_back(1);
      append_key(v, "/tally/1/gloo/world_size");
      append_key(v, "99");
      break;
    case 1:
      v.push_back(8);
      append_key(v, "/tally/1/gloo/0");
      break;
    case 2:
      for (int i = 0; i < 200; ++i) {
        v.push_back(3);
        append_key(v, "/tally/1/gloo/0");
      }
      break;
    case 3:
      v.push_back(4);
      append_key(v, "/tally/1/backends");
      append<std::int64_t>(v, 1000);
      break;
    case 4:
      v.assign(4096, 0xAB);
      break;
    default:
      v.clear();  // idle
  }
  return v;
}

class GlooStore : public CliTest {
 protected:
  // A private file holding `text` (mode `mode`).
  fs::path secret_file(const std::string& name, const std::string& text, mode_t mode) {
    const auto p = dir / name;
    FILE* f = std::fopen(p.c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
    ::chmod(p.c_str(), mode);
    return p;
  }
};

}  // namespace

TEST_F(GlooStore, AHostileClientNeitherStopsNorChangesTheJob) {
  const auto cfg = config();
  const auto single = run_single(cfg);
  const int port = free_port();
  std::atomic<bool> done{false};
  std::atomic<int> sent{0};
  std::thread hostile([&] {
    std::vector<int> idle;
    for (int round = 0; round < 20000 && !done.load(); ++round) {
      const int s = connect_to(port);
      if (s < 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      const auto bytes = attack(round);
      if (bytes.empty()) {
        if (idle.size() < 200)
          idle.push_back(s);
        else
          ::close(s);
      } else {
        (void)!::send(s, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ::close(s);
        ++sent;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    for (int s : idle) ::close(s);
  });
  // Rank 2 starts 3 s late: the store serves ranks 0 and 1 (and the hostile client) meanwhile.
  const auto out = dir / "np3.json";
  const auto r = run_command(launch(3, "--port " + std::to_string(port) + " --env 2 TALLY_LATE=3") +
                             "sh -c 'sleep ${TALLY_LATE:-0}; exec " + kTally + " run -q " +
                             cfg.string() + " --set backend.type=gloo -o " + out.string() + "'");
  done = true;
  hostile.join();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_json(out)["results"], single["results"]);  // bit for bit
  EXPECT_GT(sent.load(), 20);
  // Rank 0 named the client once (its address; never the secret).
  EXPECT_EQ(count_of(r.err, "the TCP store (port " + std::to_string(port) +
                                ") closed the connection from 127.0.0.1:"),
            1)
      << r.err;
  EXPECT_EQ(count_of(r.err, "tally: error"), 0) << r.err;
}

TEST_F(GlooStore, RanksWithoutTheJobsSecretAreRefusedNamingTheSetting) {
  const auto cfg = config();
  const auto good = secret_file("good.secret", "one-secret\n", 0600);
  const auto other = secret_file("other.secret", "another-secret\n", 0600);
  const auto open = secret_file("open.secret", "one-secret\n", 0644);
  const std::string run = kTally + " run -q " + cfg.string() + " --set backend.type=gloo " +
                          "--set backend.start_timeout=20 -o " + (dir / "out.json").string();
  // The same secret on every rank (a file, the environment, the parameter): the job runs.
  for (const std::string& how : {"env TALLY_STORE_SECRET_FILE=" + good.string() + " ",
                                 std::string("env TALLY_STORE_SECRET=one-secret ")}) {
    const auto r = run_command(how + launch(2) + run);
    EXPECT_EQ(r.exit_code, 0) << how << r.err;
  }
  {
    const auto r =
        run_command(launch(2) + run + " --set backend.store_secret_file=" + good.string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  // Rank 1 with another secret (a file, the environment): exit 2 on rank 1 naming the settings.
  const std::vector<std::pair<std::string, std::string>> wrong = {
      {"TALLY_STORE_SECRET_FILE=" + good.string(), "TALLY_STORE_SECRET_FILE=" + other.string()},
      {"TALLY_STORE_SECRET=one-secret", "TALLY_STORE_SECRET=one-secret2"}};
  for (const auto& [all, rank1] : wrong) {
    const auto r = run_command("env " + all + " " + launch(2, "--grace 1 --env 1 " + rank1) + run);
    EXPECT_EQ(r.exit_code, 2) << rank1 << r.err;
    EXPECT_NE(r.err.find("rank 1: the TCP store at 127.0.0.1:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("refused this rank's proof of the job's secret"), std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("one-secret"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("another-secret"), std::string::npos) << r.err;
  }
  // A secret file others may read: exit 2 before anything, naming the file and the fix.
  {
    const auto r = run_command(launch(2, "--grace 1") + run +
                               " --set backend.store_secret_file=" + open.string());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("backend.store_secret_file='" + open.string() +
                         "': the secret file may be read or written by others (mode 0644)"),
              std::string::npos)
        << r.err;
  }
  // A store every interface reaches needs a configured secret.
  {
    const auto r = run_command(launch(2, "--grace 1") + run + " --set backend.store_bind=any");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("is reachable from other hosts, and no secret guards it: set "
                         "TALLY_STORE_SECRET_FILE"),
              std::string::npos)
        << r.err;
  }
}

TEST_F(GlooStore, AWorldThatCannotStartIsAConfigErrorBeforeAnySocket) {
  const std::string run = kTally + " run " + config().string() +
                          " --set backend.type=gloo --set backend.start_timeout=5";
  const int port = free_port();
  const auto env = [&](int rank, int world) {
    return "env RANK=" + std::to_string(rank) + " WORLD_SIZE=" + std::to_string(world) +
           " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " ";
  };
  // Larger than any job over the store: rank 0 and any other rank, at once.
  for (const auto& [rank, world] :
       std::vector<std::pair<int, int>>{{0, 20000}, {3, 20000}, {0, 1 << 20}}) {
    const auto r = run_command(env(rank, world) + run);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("a world of " + std::to_string(world) + " ranks (RANK=" +
                         std::to_string(rank) + ", WORLD_SIZE=" + std::to_string(world)),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("(16384)"), std::string::npos) << r.err;
    EXPECT_EQ(count_of(r.err, "\n"), 1) << r.err;  // one line
  }
  // More descriptors than the process may have: named with the limit.
  for (const auto& [rank, world] : std::vector<std::pair<int, int>>{{0, 600}, {1, 1000}}) {
    const auto r = run_command("sh -c 'ulimit -n 512; exec " + env(rank, world) + run + "'");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("file descriptors in this process"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("its limit is 512 (ulimit -n; hard limit 512)"), std::string::npos)
        << r.err;
  }
}

// start_timeout bounds the start-up whatever the world size and backend.timeout: rank 0 of a
// world of 300 alone, with a collective timeout of 600 s, gives up after start_timeout naming
// the rank it waited for.
TEST_F(GlooStore, StartTimeoutBoundsTheStartUpWhateverTheWorldSize) {
  for (int world : {2, 300}) {
    const auto r = run_command(
        "timeout -k 5 60 env RANK=0 WORLD_SIZE=" + std::to_string(world) +
        " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()) + " " + kTally +
        " run " + config().string() +
        " --set backend.type=gloo --set backend.timeout=600 --set backend.start_timeout=3");
    EXPECT_EQ(r.exit_code, 1) << world << r.err;  // not 124: the timeout never had to act
    EXPECT_NE(r.err.find("the address rank 1 publishes"), std::string::npos) << r.err;
  }
}
