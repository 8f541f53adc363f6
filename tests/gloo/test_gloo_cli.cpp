// `tally run` with `backend: {type: gloo}` on ranks started as torchrun starts them
// (tests/support/launch_ranks.sh: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1,
// MASTER_PORT=a free port): results on 1, 2, 3, 4 and 7 ranks (uneven shards, empty ranks) equal
// the single-process results bit for bit, through the TCP store and through Gloo's file store;
// and the faults: a rank that exits or is killed, a wrong WORLD_SIZE, a taken or unreachable
// store, all failing with a message naming the rank (never a hang).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "integration/cli_fixture.hpp"

namespace fs = std::filesystem;
using namespace tally::test;

namespace {

const std::string kLaunch = TALLY_LAUNCH_RANKS;
const std::string kBackendTest = TALLY_GLOO_BACKEND_TEST;
const std::string kTestkit = std::string(TALLY_TEST_PLUGIN_DIR) + "/testkit";

std::string launch(int np, const std::string& options = "") {
  return kLaunch + " " + std::to_string(np) + " --bound 240 " + options + " -- ";
}

// A socket listening on a free port of 127.0.0.1 that never answers: a "taken" port.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
};

// The first line of `text` that contains `part` (empty when none).
std::string line_with(const std::string& text, const std::string& part) {
  const auto at = text.find(part);
  if (at == std::string::npos) return {};
  const auto begin = text.rfind('\n', at);
  const auto b = begin == std::string::npos ? 0 : begin + 1;
  return text.substr(b, text.find('\n', at) - b);
}

class GlooCli : public CliTest {
 protected:
  nlohmann::json run_ranks(int np, const fs::path& cfg, const std::string& extra = "",
                           const std::string& options = "") {
    const auto out = dir / ("np" + std::to_string(np) + ".json");
    const auto r = run_command(launch(np, options) + kTally + " run -q " + cfg.string() +
                               " --set backend.type=gloo " + extra + " -o " + out.string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code != 0) return {};
    return read_json(out);
  }
};

}  // namespace

TEST_F(GlooCli, AnyWorldSizeGivesTheSingleProcessResults) {
  const auto cfg = config();
  const auto single = run_single(cfg);
  for (int np : {1, 2, 3, 4, 7}) {
    SCOPED_TRACE(np);
    const auto j = run_ranks(np, cfg);
    if (j.is_null()) continue;
    EXPECT_EQ(j["results"], single["results"]);  // exact: every double bit for bit
    EXPECT_EQ(j["run"]["world_size"], np);
    EXPECT_EQ(j["run"]["samples"], 50);
    EXPECT_EQ(j["run"]["backend"], "gloo");
  }
}

TEST_F(GlooCli, AWorldOfOneNeedsNoLauncher) {
  const auto cfg = config();
  const auto out = dir / "alone.json";
  const auto r = tally("run -q " + cfg.string() + " --set backend.type=gloo -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_json(out)["results"], run_single(cfg)["results"]);
}

TEST_F(GlooCli, RanksWithNoSamplesTakePart) {
  write_data(make_dataset(5, 5));  // 7 ranks, 5 samples: two ranks read nothing
  const auto cfg = config();
  const auto single = run_single(cfg);
  EXPECT_EQ(run_ranks(7, cfg)["results"], single["results"]);
  EXPECT_EQ(run_ranks(4, cfg, "--set data.batch_size=1")["results"], single["results"]);
}

TEST_F(GlooCli, ChunkedCollectivesGiveTheSameResults) {
  const auto cfg = config();
  const auto single = run_single(cfg);
  EXPECT_EQ(run_ranks(3, cfg, "--set backend.chunk_bytes=64")["results"], single["results"]);
  // Gloo's pairs on a named interface.
  EXPECT_EQ(run_ranks(2, cfg, "--set backend.interface=lo")["results"], single["results"]);
}

TEST_F(GlooCli, AnUnknownInterfaceIsAConfigErrorOnEveryRank) {
  const auto r = run_command(launch(2, "--grace 20") + kTally + " run " + config().string() +
                             " --set backend.type=gloo --set backend.interface=nosuch0");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  for (const std::string rank : {"0", "1"})
    EXPECT_NE(r.err.find("gloo backend: rank " + rank +
                         " of 2: cannot open Gloo's TCP device on interface 'nosuch0' "
                         "(backend.interface)"),
              std::string::npos)
        << r.err;
  EXPECT_EQ(r.err.find("still running"), std::string::npos) << r.err;
}

TEST_F(GlooCli, FileStoreRendezvous) {
  const auto cfg = config();
  const auto single = run_single(cfg);
  const auto store = dir / "store";
  fs::create_directories(store);
  for (int np : {2, 4}) {
    SCOPED_TRACE(np);
    EXPECT_EQ(run_ranks(np, cfg, "--set backend.rendezvous=" + store.string())["results"],
              single["results"]);
  }
  // The ranks remove their key files once every rank has read them: the next job starts clean.
  EXPECT_TRUE(fs::is_empty(store)) << "files left in " << store;
  // Not a folder: a config error naming the parameter.
  const auto r =
      run_command(launch(2) + kTally + " run " + cfg.string() +
                  " --set backend.type=gloo --set backend.rendezvous=" + (dir / "absent").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("rendezvous"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is not a folder"), std::string::npos) << r.err;
}

// States of counts go through gloo::reduce; SequenceProbe's state is still gathered per rank.
TEST_F(GlooCli, CountStatesAreReducedNotGathered) {
  const auto cfg = config(R"(metrics:
  - type: CountProbe
    bins: 3
    inputs: {x: gt_labels}
  - type: SequenceProbe
    inputs: {x: gt_labels}
  - type: ConfusionMatrix
    num_classes: 5
)",
                          "plugins:\n  paths: [" + kTestkit + "]\n");
  const auto single = run_single(cfg);
  for (int np : {3, 7}) {
    SCOPED_TRACE(np);
    for (const std::string extra : {"", "--set backend.chunk_bytes=64"}) {
      const auto j = run_ranks(np, cfg, extra);
      if (j.is_null()) continue;
      EXPECT_EQ(j["results"]["CountProbe"], single["results"]["CountProbe"]) << extra;
      EXPECT_EQ(j["results"]["SequenceProbe"]["per_rank"].size(), static_cast<std::size_t>(np));
      EXPECT_EQ(j["results"]["ConfusionMatrix"], single["results"]["ConfusionMatrix"]) << extra;
    }
  }
}

TEST_F(GlooCli, BadDataOnOneRankFailsEveryRankWithOneMessage) {
  auto d = make_dataset(50, 5);
  d.labels[45] = 17;  // in the last rank's shard of 3
  write_npy(dir / "labels.npy", d.labels);
  const auto r =
      run_command(launch(3) + kTally + " run " + config().string() + " --set backend.type=gloo");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tally: error: rank 2: metric 'Accuracy'"), std::string::npos) << r.err;
  // The sample's index in the dataset, not its index in rank 2's shard [33, 50) (12).
  EXPECT_NE(r.err.find("sample 45: class id 17"), std::string::npos) << r.err;
  EXPECT_EQ(count_of(r.err, "tally: error:"), 1) << r.err;
}

// A rank that exits, or is killed, after the rendezvous: every other rank's next collective
// fails within its deadline (3 s) with a message naming that rank and the call.
TEST_F(GlooCli, ARankThatGoesFailsEveryOtherRank) {
  for (const std::string kind : {"exit", "kill"}) {
    SCOPED_TRACE(kind);
    const int np = 4;
    const int victim = 2;
    const auto r = run_command(launch(np) + "env GLOO_TEST_FAULT=" + kind + ":" +
                               std::to_string(victim) + " " + kBackendTest);
    EXPECT_EQ(r.exit_code, kind == "kill" ? 128 + 9 : 0) << r.err;
    EXPECT_EQ(count_of(r.err, "FAULT-OK"), np - 1) << r.err;
    EXPECT_EQ(count_of(r.err, "FAULT-MISSED"), 0) << r.err;
    for (int rank = 0; rank < np; ++rank) {
      if (rank == victim) continue;
      const auto line =
          line_with(r.err, "FAULT-OK gloo backend: rank " + std::to_string(rank) + " of 4: ");
      EXPECT_NE(line, "") << rank << ": " << r.err;
      // Every other rank names the one that went, whatever Gloo's own error says (a peer's
      // address, or a timeout): by its address or by its call counter in the store.
      EXPECT_NE(line.find("rank 2 "), std::string::npos) << line;
      EXPECT_NE(line.find("rank 2 has not reached this call (its last call: #"), std::string::npos)
          << line;
    }
    EXPECT_NE(r.err.find("(fault: after)"), std::string::npos) << r.err;
  }
}

// The same through Gloo's file store (backend.rendezvous): the counters live in its files.
TEST_F(GlooCli, ARankThatGoesIsNamedThroughTheFileStoreToo) {
  const auto store = dir / "store";
  fs::create_directories(store);
  const auto r =
      run_command(launch(3) + "env GLOO_TEST_FAULT=kill:1 GLOO_TEST_RENDEZVOUS=" + store.string() +
                  " " + kBackendTest);
  EXPECT_EQ(r.exit_code, 128 + 9) << r.err;
  for (const std::string rank : {"0", "2"}) {
    const auto line = line_with(r.err, "FAULT-OK gloo backend: rank " + rank + " of 3: ");
    EXPECT_NE(line, "") << r.err;
    EXPECT_NE(line.find("rank 1 has not reached this call (its last call: #"), std::string::npos)
        << line;
  }
}

// `tally run` with a rank killed mid-run (testkit's kill_on, in rank 2's shard): every other
// rank's error names rank 2.
TEST_F(GlooCli, AKilledRankIsNamedByEveryOtherRank) {
  std::vector<std::int64_t> x(90);
  std::iota(x.begin(), x.end(), 0);
  write_npy(dir / "x.npy", x);
  const auto cfg = dir / "kill.yaml";
  write_text(cfg,
             "data:\n  type: npy\n  batch_size: 3\n  fields: {x: x.npy}\nmetrics:\n"
             "  - type: SequenceProbe\n    kill_on: 75\nplugins:\n  paths: [" +
                 kTestkit + "]\nbackend:\n  type: gloo\n  timeout: 5\n");
  const auto r = run_command(launch(3, "--grace 30") + kTally + " run -q " + cfg.string());
  EXPECT_NE(r.exit_code, 0) << r.err;
  for (const std::string rank : {"0", "1"}) {
    const auto line = line_with(r.err, "gloo backend: rank " + rank + " of 3: ");
    EXPECT_NE(line, "") << r.err;
    // Killed while the ranks read: its heartbeats stop, and the others name it once silent.
    EXPECT_NE(line.find("rank 2 showed no sign of life for 5 s (backend.timeout) while reading"),
              std::string::npos)
        << line;
  }
}

// A rank that stops reading (its reader sleeps past backend.timeout inside one batch).
TEST_F(GlooCli, ARankStuckInOneBatchIsNamedAsSilent) {
  std::vector<std::int64_t> x(90);
  std::iota(x.begin(), x.end(), 0);
  write_npy(dir / "x.npy", x);
  const auto cfg = dir / "slow.yaml";
  // Rank 2 of 3 reads samples 60..89, each batch 6 s; the deadline is 2 s. While the ranks read,
  // each sends heartbeats through the store only when it has read a batch since the last one: rank
  // 2 falls silent, and the others, done with their shards, name it.
  write_text(cfg,
             "data:\n  type: npy\n  batch_size: 3\n  fields: {x: x.npy}\nmetrics:\n"
             "  - type: SequenceProbe\n    batch_sleep: 6\n    slow_from: 60\n"
             "plugins:\n  paths: [" +
                 kTestkit + "]\nbackend:\n  type: gloo\n  timeout: 2\n");
  const auto r = run_command(launch(3, "--grace 5") + kTally + " run -q " + cfg.string());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  for (const std::string rank : {"0", "1"}) {
    const auto line = line_with(r.err, "gloo backend: rank " + rank + " of 3: ");
    EXPECT_NE(line, "") << r.err;
    EXPECT_NE(line.find("rank 2 showed no sign of life for 2 s (backend.timeout) while reading its "
                        "shard"),
              std::string::npos)
        << line;
    EXPECT_EQ(line.find("rank 1 showed"), std::string::npos) << line;
  }
}

// Reading longer than the deadline is not a failure while every rank shows progress: 3 ranks read
// for about 3 times backend.timeout (a batch every 0.4 s, the deadline 1 s), rank 2 for longest,
// and the results equal the single-process run's.
TEST_F(GlooCli, LongReadsShowingProgressOutliveTheTimeout) {
  std::vector<std::int64_t> x(24);
  std::iota(x.begin(), x.end(), 0);
  write_npy(dir / "x.npy", x);
  const auto cfg = dir / "long.yaml";
  write_text(cfg,
             "data:\n  type: npy\n  batch_size: 1\n  fields: {x: x.npy}\nmetrics:\n"
             "  - type: SequenceProbe\n    batch_sleep: 0.4\n    slow_from: 8\n"
             "  - type: CountProbe\n    bins: 4\n"
             "plugins:\n  paths: [" +
                 kTestkit + "]\n");
  const auto single = run_single(cfg);
  const auto j = run_ranks(3, cfg, "--set backend.timeout=1");
  if (j.is_null()) return;
  EXPECT_EQ(j["results"]["CountProbe"], single["results"]["CountProbe"]);
  EXPECT_EQ(j["results"]["SequenceProbe"]["per_rank"].size(), 3u);
  EXPECT_EQ(j["run"]["samples"], 24);
}

// A rank killed while `tally run` runs: the others fail (exit 1), never hang. The victim is
// killed before it starts (it never joins): the others give up after the start-up deadline
// (start_timeout: 30 s by default, 4 s here).
TEST_F(GlooCli, ARankThatNeverComesIsNamed) {
  const auto r = run_command(
      launch(3, "--env 2 TALLY_NEVER=1 --grace 120") +
      "sh -c 'if [ -n \"$TALLY_NEVER\" ]; then exit 0; fi; exec " + kTally + " run " +
      config().string() +
      " --set backend.type=gloo --set backend.timeout=2 --set backend.start_timeout=4'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("the address rank 2 publishes"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gloo backend: rank 0: the TCP store at 127.0.0.1:"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("gloo backend: rank 1: the TCP store at 127.0.0.1:"), std::string::npos)
      << r.err;
}

TEST_F(GlooCli, AWrongWorldSizeIsAConfigErrorOnThatRank) {
  const auto r = run_command(launch(3, "--env 2 WORLD_SIZE=4 --grace 3") + kTally + " run " +
                             config().string() + " --set backend.type=gloo");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(
      r.err.find("tally: error: rank 2: gloo backend: rank 2 of 4: rank 0 was started with a world "
                 "size of 3, this rank with 4"),
      std::string::npos)
      << r.err;
}

TEST_F(GlooCli, ATakenStorePortIsNamed) {
  Listener taken;
  const std::string port = std::to_string(taken.port);
  const auto r = run_command(launch(2, "--port " + port + " --grace 3") + kTally + " run " +
                             config().string() + " --set backend.type=gloo");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("cannot listen on port " + port), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("MASTER_ADDR=127.0.0.1, MASTER_PORT=" + port), std::string::npos) << r.err;
}

TEST_F(GlooCli, AnUnreachableStoreIsNamed) {
  // Rank 1 of 2 alone: nobody hosts the store. It gives up after the start-up deadline
  // (backend.start_timeout, 30 s by default; 3 s here).
  int port = 0;
  {
    Listener l;
    port = l.port;
  }
  const auto r = run_command(
      "env RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 "
      "MASTER_PORT=" +
      std::to_string(port) + " " + kTally + " run " + config().string() +
      " --set backend.type=gloo --set backend.timeout=1 --set backend.start_timeout=3");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("gloo backend: rank 1: the TCP store at 127.0.0.1:" + std::to_string(port) +
                       " (MASTER_ADDR=127.0.0.1, MASTER_PORT=" + std::to_string(port) + ")"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("no connection within 3 s"), std::string::npos) << r.err;
}

TEST_F(GlooCli, SeveralRanksWithoutAStoreIsAConfigError) {
  const auto r = run_command("env RANK=0 WORLD_SIZE=2 " + kTally + " run " + config().string() +
                             " --set backend.type=gloo");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("gloo backend: RANK=0, WORLD_SIZE=2 (torchrun) says 2 processes, but no "
                       "store to meet at: set MASTER_ADDR and MASTER_PORT"),
            std::string::npos)
      << r.err;
  const auto bad = run_command("env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=99999 " +
                               kTally + " run " + config().string() + " --set backend.type=gloo");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("MASTER_PORT='99999' is not a port number"), std::string::npos) << bad.err;
}

// Under torchrun (from the venv's torch): torchrun's agent hosts the store at MASTER_ADDR:
// MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), tally's ranks are its clients.
TEST_F(GlooCli, UnderTorchrunTheRanksAreClientsOfTheAgentsStore) {
  const fs::path torchrun = fs::path(TALLY_SOURCE_DIR) / ".venv-torch" / "bin" / "torchrun";
  if (!fs::exists(torchrun))
    GTEST_SKIP() << "no torchrun at " << torchrun.string()
                 << " (a venv with PyPI's torch: python3 -m venv .venv-torch && "
                    ".venv-torch/bin/pip install torch)";
  const auto cfg = config();
  const auto single = run_single(cfg);
  for (int np : {1, 3}) {
    SCOPED_TRACE(np);
    const auto out = dir / ("torchrun" + std::to_string(np) + ".json");
    const auto r = run_command(torchrun.string() + " --nproc-per-node " + std::to_string(np) +
                               " --no-python " + kTally + " run -q " + cfg.string() +
                               " --set backend.type=gloo -o " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = read_json(out);
    EXPECT_EQ(j["results"], single["results"]);
    EXPECT_EQ(j["run"]["world_size"], np);
  }
}

// ---- across hosts: one rank per network namespace (tests/multihost/netns.sh) ----------------

namespace {

const std::string kNetns = std::string(TALLY_SOURCE_DIR) + "/tests/multihost/netns.sh";

// A bed of `n` namespace hosts for this test process, removed when the object goes; `why` says
// why there is none (not root, no `ip`, an unprivileged container).
struct Bed {
  std::string name, first_host, why;
  explicit Bed(int n) {
    if (!fs::exists(kNetns)) {
      why = kNetns + " is absent";
      return;
    }
    const auto check = run_command("bash " + kNetns + " check");
    if (check.exit_code != 0) {
      why = "network namespaces cannot be made here: " + check.out + check.err;
      return;
    }
    const auto up = run_command("bash " + kNetns + " up " + std::to_string(n) + " " +
                                std::to_string(::getpid()));
    if (up.exit_code != 0) {
      why = "netns.sh up failed: " + up.err;
      return;
    }
    const auto value = [&](const std::string& key) {
      const auto at = up.out.find(key + "=");
      if (at == std::string::npos) return std::string();
      const auto end = up.out.find('\n', at);
      return up.out.substr(at + key.size() + 1, end - at - key.size() - 1);
    };
    name = value("NAME");
    const std::string hosts = value("HOSTS");
    first_host = hosts.substr(0, hosts.find(','));
    if (name.empty() || first_host.empty()) why = "netns.sh up printed no bed: " + up.out;
  }
  ~Bed() {
    if (!name.empty()) run_command("bash " + kNetns + " down " + name + " >/dev/null 2>&1");
  }
  // launch_ranks.sh with rank r run as host r, the store on host 0.
  // The store's address is not a loopback one: every rank proves one secret (docs/gloo.md).
  std::string launch(int np) const {
    return "env TALLY_STORE_SECRET=bed-" + std::to_string(::getpid()) + "-" + name + " " + kLaunch +
           " " + std::to_string(np) + " --bound 240 --addr " + first_host + " -- bash " + kNetns +
           " exec " + name + " {rank} ";
  }
};

}  // namespace

TEST_F(GlooCli, AcrossNamespaceHostsTheResultsAreTheSingleProcessOnes) {
  Bed bed(3);
  if (!bed.why.empty()) GTEST_SKIP() << bed.why;
  const auto cfg = config();
  const auto single = run_single(cfg);
  const auto out = dir / "hosts.json";
  const auto r =
      run_command(bed.launch(3) + kTally + " run -q " + cfg.string() +
                  " --set backend.type=gloo --set backend.chunk_bytes=256 -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_json(out)["results"], single["results"]);
  EXPECT_EQ(read_json(out)["run"]["world_size"], 3);
}

TEST_F(GlooCli, AcrossNamespaceHostsAKilledRankFailsTheOthers) {
  Bed bed(3);
  if (!bed.why.empty()) GTEST_SKIP() << bed.why;
  const auto r = run_command(bed.launch(3) + "env GLOO_TEST_FAULT=kill:1 " + kBackendTest);
  EXPECT_EQ(r.exit_code, 128 + 9) << r.err;
  EXPECT_NE(r.err.find("FAULT-OK gloo backend: rank 0 of 3: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("FAULT-OK gloo backend: rank 2 of 3: "), std::string::npos) << r.err;
  EXPECT_EQ(count_of(r.err, "FAULT-MISSED"), 0) << r.err;
}

namespace {

// `cmd` (a `tally` command line, {rank} replaced by each rank's number) on `np` gloo ranks, each
// rank's exit code printed after it; the result, and those codes in rank order.
std::pair<ProcessResult, std::vector<int>> run_with_codes(int np, const std::string& cmd) {
  auto r = run_command(launch(np) + "sh -c '" + cmd + "; echo rank {rank} exit $?'");
  std::vector<int> codes(static_cast<std::size_t>(np), -1);
  for (int rank = 0; rank < np; ++rank) {
    const auto line = line_with(r.out, "rank " + std::to_string(rank) + " exit ");
    if (!line.empty())
      codes[static_cast<std::size_t>(rank)] = std::stoi(line.substr(line.rfind(' ')));
  }
  return {std::move(r), codes};
}

}  // namespace

// Issue 32, item 11, under gloo: a setting that differs on one rank (its own config, or a --set
// that differs from rank to rank) fails every rank at start with exit 2, the same code on every
// rank, one message naming the rank and the setting, nothing written.
TEST_F(GlooCli, ASettingThatDiffersOnARankFailsEveryRankAtStartWithOneExitCode) {
  const std::string gloo = "backend:\n  type: gloo\n  timeout: 120\n";
  const auto rec = (dir / "r.rec").string();
  config(kMetricsYaml, gloo, "cfg0.yaml");
  config(kMetricsYaml, gloo + "output:\n  records: " + rec + "\n", "cfg1.yaml");
  config(kMetricsYaml, gloo, "cfg2.yaml");
  const auto plain = config(kMetricsYaml, gloo);
  const auto base = dir / "base.json";
  const auto single =
      tally("run -q " + config(kMetricsYaml, "", "single.yaml").string() + " -o " + base.string());
  ASSERT_EQ(single.exit_code, 0) << single.err;
  const auto regression =
      config(kMetricsYaml, gloo + "regression:\n  baseline: " + base.string() + "\n", "reg.yaml");
  const auto out = (dir / "out.json").string();
  struct Case {
    std::string args;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {(dir / "cfg{rank}.yaml").string(),
       {"start failed: rank 1's output.records is '" + rec + "', rank 0's is not set"}},
      {plain.string() + " --set intervals.resamples=5{rank}",
       {"start failed: rank 1's intervals is 'confidence 0.95, resamples 51, seed 0, method "
        "percentile', rank 0's is 'confidence 0.95, resamples 50,",
        "(ranks 1, 2 differ from rank 0)"}},
      {regression.string() + " --set regression.rtol=0.{rank}",
       {"start failed: rank 1's regression.rtol is '0.1', rank 0's is '0'"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const auto t0 = std::chrono::steady_clock::now();
    const auto [r, codes] = run_with_codes(3, kTally + " run -q " + c.args + " -o " + out);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(codes, std::vector<int>({2, 2, 2})) << r.out << r.err;
    EXPECT_LT(seconds, 60.0) << r.err;
    for (const auto& e : c.expect)
      EXPECT_NE(r.err.find(e), std::string::npos) << e << "\n" << r.err;
    EXPECT_EQ(count_of(r.err, "tally: error:"), 1) << r.err;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(fs::exists(rec));
  }
}

// What rank 0 alone decides after the last collective (an output it cannot write) is every
// rank's exit code: the code of the first rank that failed, the same on every rank (before, the
// ranks left with 2, 0, 0). One message, rank 0's.
TEST_F(GlooCli, AnOutputRankZeroCannotWriteIsEveryRanksExitCode) {
  const auto cfg = config();
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  struct Case {
    std::string args, expect;
    int code;
  };
  const std::vector<Case> cases = {
      {"--junit " + fifo.string(), "is a FIFO and no process is reading the FIFO", 2},
      {"-o /dev/full", "cannot write --output '/dev/full'", 1},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const auto [r, codes] = run_with_codes(
        3, kTally + " run -q " + cfg.string() + " --set backend.type=gloo " + c.args);
    EXPECT_EQ(codes, std::vector<int>(3, c.code)) << r.out << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(count_of(r.err, "tally: error:"), 1) << r.err;
  }
}
