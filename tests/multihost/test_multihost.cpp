// tally across hosts: ranks one per "host" (a Linux network namespace with its own address on a
// bridge, made by tests/multihost/netns.sh) that talk only over TCP through their veth links.
//   - mpi: real `mpirun` (in host 0) starts its daemons in the other hosts through
//     tests/multihost/ns_agent.sh (its launch agent, in place of ssh), `--mca btl tcp,self` (no
//     shared memory), TCP restricted to the bed's subnet;
//   - gloo: every rank started by hand in its host with torchrun's variables (RANK, WORLD_SIZE,
//     LOCAL_RANK, MASTER_ADDR = host 0's address, MASTER_PORT), as torchrun or srun would on
//     separate machines; skipped while the gloo backend plugin is not built.
// Results equal the single-process run bit for bit on 3 and 4 hosts and 7 ranks over 4 hosts; a
// rank killed (SIGKILL) or a host's link cut (`ip link set ... down`) mid-run fails every other
// rank, without a hang, with a message naming the rank. Every test prints which ranks ran on which
// hosts. Needs root (network namespaces); skips with the reason where they cannot be made.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "integration/cli_fixture.hpp"

namespace fs = std::filesystem;
using namespace tally::test;

namespace {

const std::string kBed = std::string(TALLY_MULTIHOST_DIR) + "/netns.sh";
const std::string kAgent = std::string(TALLY_MULTIHOST_DIR) + "/ns_agent.sh";
const std::string kTestkit = std::string(TALLY_TEST_PLUGIN_DIR) + "/testkit";
const fs::path kGlooPlugin = fs::path(TALLY_PLUGIN_DIR) / "libtally_gloo.so";
// Every run is bounded: a hang fails the test (exit 124 of `timeout`) instead of blocking ctest.
constexpr int kHardLimitS = 90;

std::string env_prefix() {
  std::string env =
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "OMPI_MCA_rmaps_base_oversubscribe=1 ";
#if defined(__SANITIZE_ADDRESS__)
  // As tests/support/process.hpp: MPI_Finalize unloads Open MPI's components, whose allocations
  // LeakSanitizer would report from "<unknown module>".
  env += "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 ";
#endif
  return env;
}

/// One test bed: `hosts` network namespaces, removed when the object goes.
struct Bed {
  std::string name, subnet, bridge;
  std::vector<std::string> addrs;
  std::string skip;  // why there is no bed, when there is none

  explicit Bed(int hosts) {
    const auto r =
        run_command(kBed + " up " + std::to_string(hosts) + " " + std::to_string(::getpid()));
    if (r.exit_code == 77) {
      skip = r.err.empty() ? r.out : r.err;
      while (!skip.empty() && skip.back() == '\n') skip.pop_back();
      return;
    }
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      const auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      const auto k = line.substr(0, eq), v = line.substr(eq + 1);
      if (k == "NAME") name = v;
      if (k == "SUBNET") subnet = v;
      if (k == "BRIDGE_ADDR") bridge = v;
      if (k == "HOSTS") {
        std::istringstream hs(v);
        for (std::string h; std::getline(hs, h, ',');) addrs.push_back(h);
      }
    }
  }
  ~Bed() {
    if (!name.empty()) run_command(kBed + " down " + name);
  }
  Bed(const Bed&) = delete;
  Bed& operator=(const Bed&) = delete;

  /// Bytes through host k's link so far (both directions, counted at the root end of its veth).
  std::uint64_t link_bytes(int k) const {
    std::uint64_t total = 0;
    for (const char* dir : {"rx_bytes", "tx_bytes"}) {
      const auto s = read_file(fmt::format("/sys/class/net/{}-v{}/statistics/{}", name, k, dir));
      total += s.empty() ? 0 : std::stoull(s);
    }
    return total;
  }
  std::string exec(int k) const { return fmt::format("{} exec {} {} ", kBed, name, k); }
  /// `mpirun` in host 0, its daemons started in the other hosts by the namespace agent; TCP
  /// only, on the bed's subnet. `slots[k]` ranks on host k.
  std::string mpirun(const std::vector<int>& slots) const {
    std::string hosts;
    int np = 0;
    for (std::size_t k = 0; k < slots.size(); ++k) {
      hosts += fmt::format("{}{}:{}", k ? "," : "", addrs[k], slots[k]);
      np += slots[k];
    }
    return fmt::format(
        "{}timeout -k 5 {} {}mpirun --allow-run-as-root --mca plm_rsh_agent {} "
        "--mca plm_rsh_no_tree_spawn 1 --mca btl tcp,self --mca btl_tcp_if_include {} "
        "--mca oob_tcp_if_include {} --host {} -np {} ",
        env_prefix(), kHardLimitS, exec(0), kAgent, subnet, subnet, hosts, np);
  }
};

/// "rank 0 on host 0 (10.218.S.1), ranks 1 and 2 on ..." for the test's log.
std::string placement(const Bed& bed, const std::vector<int>& slots) {
  std::string s;
  int r = 0;
  for (std::size_t k = 0; k < slots.size(); ++k) {
    std::vector<int> ranks(static_cast<std::size_t>(slots[k]));
    std::iota(ranks.begin(), ranks.end(), r);
    r += slots[k];
    s += fmt::format("{}{} {} on {}-h{} ({})", k ? ", " : "", ranks.size() == 1 ? "rank" : "ranks",
                     fmt::join(ranks, ","), bed.name, k, bed.addrs[k]);
  }
  return s;
}

/// The results without SequenceProbe's per_rank (the one key that depends on the world size; its
/// length must be the world size): the rest must equal the single-process results bit for bit.
std::string comparable(nlohmann::json results, int world) {
  if (results.contains("SequenceProbe")) {
    EXPECT_EQ(results["SequenceProbe"]["per_rank"].size(), static_cast<std::size_t>(world));
    results["SequenceProbe"].erase("per_rank");
  }
  return results.dump();
}

class MultihostTest : public CliTest {
 protected:
  /// `tally run` under mpirun over the bed, `slots[k]` ranks on host k; checks that every host's
  /// link carried the run's traffic.
  nlohmann::json run_mpi(const Bed& bed, const std::vector<int>& slots, const fs::path& cfg,
                         const std::string& extra = "") {
    std::vector<std::uint64_t> before;
    for (std::size_t k = 0; k < slots.size(); ++k) before.push_back(bed.link_bytes(int(k)));
    const auto out = dir / "mpi.json";
    fs::remove(out);
    std::printf("mpi: %s\n", placement(bed, slots).c_str());
    const auto r = run_command(bed.mpirun(slots) + kTally + " run -q " + cfg.string() +
                               " --set backend.type=mpi " + extra + " -o " + out.string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // Rank 0's host sends and receives the sync; every other host sends its state over its link.
    for (std::size_t k = 0; k < slots.size(); ++k)
      EXPECT_GT(bed.link_bytes(int(k)), before[k] + 1000) << "host " << k << " link unused";
    return fs::exists(out) ? read_json(out) : nlohmann::json{};
  }

  /// A shell script in the test folder (the gloo launches: several processes, their files).
  ProcessResult run_script(const std::string& body) {
    const auto p = dir / "launch.sh";
    write_text(p, "set -u\n" + body);
    return run_command("bash " + p.string());
  }

  /// `tally run` on `slots[k]` gloo ranks in host k, started as torchrun would start them
  /// (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR = host 0, MASTER_PORT), each with its own
  /// stderr file err<rank>; `during` runs in the background beside them (a fault to inject).
  /// Returns every rank's exit code, in rank order, as "0 0 0".
  ProcessResult run_gloo(const Bed& bed, const std::vector<int>& slots, const fs::path& cfg,
                         const fs::path& out, const std::string& extra = "",
                         const std::string& during = "") {
    int world = 0;
    for (int s : slots) world += s;
    // A new port for every run: nothing of the last run's store (TIME_WAIT) is in the way.
    const int port = 29500 + next_port_++;
    std::printf("gloo: %s\n", placement(bed, slots).c_str());
    // The store on host 0's address guards itself with a secret every rank has (docs/gloo.md):
    // a private file in the test folder.
    std::string s = "export " + env_prefix() + "\n" +
                    fmt::format(
                        "(umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' "
                        ">{0}/store.secret)\nexport TALLY_STORE_SECRET_FILE={0}/store.secret\n",
                        dir.path.string());
    int rank = 0;
    for (std::size_t k = 0; k < slots.size(); ++k)
      for (int local = 0; local < slots[k]; ++local, ++rank)
        s += fmt::format(
            "timeout -k 5 {} {}env RANK={} WORLD_SIZE={} LOCAL_RANK={} MASTER_ADDR={} "
            "MASTER_PORT={} {} run -q {} --set backend.type=gloo {} -o {} >{}/out{} 2>{}/err{} "
            "&\npid{}=$!\n",
            kHardLimitS, bed.exec(int(k)), rank, world, local, bed.addrs[0], port, kTally,
            cfg.string(), extra, out.string(), dir.path.string(), rank, dir.path.string(), rank,
            rank);
    s += during + "\ncodes=\n";
    for (int r = 0; r < world; ++r) s += fmt::format("wait $pid{}; codes=\"$codes $?\"\n", r);
    s += "echo $codes\n";
    return run_script(s);
  }

  int next_port_ = 0;

  std::string rank_err(int r) { return read_file(dir / ("err" + std::to_string(r))); }

  /// 90 samples x = 0..89 in batches of 3 for testkit's SequenceProbe; samples >= slow_from take
  /// `batch_sleep` s a batch (a run long enough to hurt it mid-way).
  fs::path slow_config(const std::string& backend, double batch_sleep, int slow_from,
                       double timeout) {
    std::vector<std::int64_t> x(90);
    std::iota(x.begin(), x.end(), 0);
    write_npy(dir / "x.npy", x);
    const auto p = dir / "slow.yaml";
    write_text(p, fmt::format("data:\n  type: npy\n  batch_size: 3\n  fields: {{x: x.npy}}\n"
                              "metrics:\n  - type: SequenceProbe\n    batch_sleep: {}\n"
                              "    slow_from: {}\nplugins:\n  paths: [{}]\n"
                              "backend:\n  type: {}\n  timeout: {}\n",
                              batch_sleep, slow_from, kTestkit, backend, timeout));
    return p;
  }

  /// A background script line: wait until host k runs a `tally` process, `delay` s more, then
  /// `action` (with $p the process's pid).
  static std::string when_running(const Bed& bed, int k, double delay, const std::string& action) {
    return fmt::format(
        "( for i in $(seq 1 300); do p=$({} pids {} {} tally | head -1); [ -n \"$p\" ] && break; "
        "sleep 0.1; done; sleep {}; {} ) &\n",
        kBed, bed.name, k, delay, action);
  }

  /// A background script line: wait until host k's `tally` process has a TCP connection to host
  /// `peer` open (its transport is connected: the start is over and the run under way), `delay` s
  /// more, then `action` (with $p the process's pid).
  static std::string when_connected(const Bed& bed, int k, int peer, double delay,
                                    const std::string& action) {
    return fmt::format(
        "( for i in $(seq 1 600); do n=$(ip netns exec {}-h{} ss -Htnp state established dst {} | "
        "grep -c '\"tally\"'); [ \"$n\" -gt 0 ] && break; sleep 0.1; done; sleep {}; "
        "p=$({} pids {} {} tally | head -1); {} ) &\n",
        bed.name, k, bed.addrs[static_cast<std::size_t>(peer)], delay, kBed, bed.name, k, action);
  }

  /// The configs whose distributed results must equal the single-process ones.
  std::vector<std::pair<std::string, fs::path>> configs() {
    std::vector<std::pair<std::string, fs::path>> c;
    c.emplace_back("classification (Accuracy, SingleLabelMetric, ConfusionMatrix)", config());
    c.emplace_back("counts reduced and a sequence gathered (testkit)",
                   config(R"(metrics:
  - type: CountProbe
    bins: 3
    inputs: {x: gt_labels}
  - type: SequenceProbe
    inputs: {x: gt_labels}
  - type: ConfusionMatrix
    num_classes: 5
)",
                          "plugins:\n  paths: [" + kTestkit + "]\n", "counts.yaml"));
    c.emplace_back("configs/examples/classification.yaml",
                   fs::path(TALLY_SOURCE_DIR) / "configs/examples/classification.yaml");
    return c;
  }
};

#define TALLY_NEED_BED(bed)                                                          \
  if (!(bed).skip.empty()) GTEST_SKIP() << "no multi-host test bed: " << (bed).skip; \
  ASSERT_FALSE((bed).name.empty()) << "netns.sh up printed no bed name"

#define TALLY_NEED_GLOO()       \
  if (!fs::exists(kGlooPlugin)) \
  GTEST_SKIP() << "gloo backend not built (no " << kGlooPlugin.string() << ")"

// ---- mpi ----------------------------------------------------------------------------------------

TEST_F(MultihostTest, MpiOnThreeAndFourHostsAndSevenRanksEqualsOneProcess) {
  Bed bed(4);
  TALLY_NEED_BED(bed);
  for (const auto& [what, cfg] : configs()) {
    SCOPED_TRACE(what);
    const auto single = run_single(cfg);
    for (const std::vector<int>& slots :
         std::vector<std::vector<int>>{{1, 1, 1}, {1, 1, 1, 1}, {2, 2, 2, 1}}) {
      const int np = std::accumulate(slots.begin(), slots.end(), 0);
      SCOPED_TRACE(placement(bed, slots));
      const auto j = run_mpi(bed, slots, cfg);
      // Every double bit for bit (the JSON holds them exactly).
      EXPECT_EQ(comparable(j["results"], np), comparable(single["results"], 1));
      EXPECT_EQ(j["run"]["world_size"], np);
      EXPECT_EQ(j["run"]["backend"], "mpi");
    }
  }
}

TEST_F(MultihostTest, MpiEmptyRanksAndChunkedRoundsAcrossHosts) {
  Bed bed(4);
  TALLY_NEED_BED(bed);
  write_data(make_dataset(5, 5));  // 7 ranks, 5 samples: two ranks read nothing
  const auto cfg = config();
  const auto single = run_single(cfg);
  EXPECT_EQ(run_mpi(bed, {2, 2, 2, 1}, cfg)["results"].dump(), single["results"].dump());
  // 64-byte rounds: every state and the results broadcast cross the links in many pieces.
  EXPECT_EQ(run_mpi(bed, {1, 1, 1}, cfg, "--set backend.chunk_bytes=64")["results"].dump(),
            single["results"].dump());
}

TEST_F(MultihostTest, MpiKilledRankFailsEveryRankNamingIt) {
  Bed bed(3);
  TALLY_NEED_BED(bed);
  // Every rank reads 10 batches of 0.5 s; rank 1's process (host 1) is killed 1.5 s in.
  const auto cfg = slow_config("mpi", 0.5, 0, 10);
  const auto out = dir / "never.json";
  std::printf("mpi: %s; rank 1 (host 1) killed with SIGKILL mid-run\n",
              placement(bed, {1, 1, 1}).c_str());
  const auto r = run_script(when_running(bed, 1, 1.5, "kill -9 $p") + bed.mpirun({1, 1, 1}) +
                            kTally + " run -q " + cfg.string() + " -o " + out.string());
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.exit_code, 124) << "the run did not end by itself within " << kHardLimitS << " s";
  EXPECT_NE(r.err.find("rank 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("signal 9"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(run_command(kBed + " pids " + bed.name + " " + std::to_string(k) + " tally").out, "")
        << "a tally process is left on host " << k;
}

TEST_F(MultihostTest, MpiCutLinkFailsTheOtherRanksWithinTheTimeoutNamingTheRank) {
  Bed bed(3);
  TALLY_NEED_BED(bed);
  // Ranks 0 and 1 read their shards at once; rank 2 (host 2: samples 60..89) takes 0.5 s a
  // batch, so the others wait for its heartbeats. Host 2's link is cut 1 s after its rank connected
  // to rank 0: rank 0 gives up after backend.timeout (2 s) without a heartbeat and names rank 2;
  // mpirun then ends the job (it loses host 2's daemon too: tcp_retries2=3 in the bed's hosts).
  const auto cfg = slow_config("mpi", 0.5, 60, 2);
  const auto out = dir / "never.json";
  std::printf("mpi: %s; host 2's link cut mid-run\n", placement(bed, {1, 1, 1}).c_str());
  const auto r = run_script(when_connected(bed, 2, 0, 1.0, kBed + " cut " + bed.name + " 2") +
                            bed.mpirun({1, 1, 1}) + kTally + " run -q " + cfg.string() + " -o " +
                            out.string());
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.exit_code, 124) << "the run did not end by itself within " << kHardLimitS << " s";
  EXPECT_NE(r.err.find("MPI_Recv of a heartbeat from rank 2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did not complete within 2 s (backend.timeout)"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out));
}

// ---- gloo ---------------------------------------------------------------------------------------

TEST_F(MultihostTest, GlooOnThreeAndFourHostsAndSevenRanksEqualsOneProcess) {
  TALLY_NEED_GLOO();
  Bed bed(4);
  TALLY_NEED_BED(bed);
  for (const auto& [what, cfg] : configs()) {
    SCOPED_TRACE(what);
    const auto single = run_single(cfg);
    for (const std::vector<int>& slots :
         std::vector<std::vector<int>>{{1, 1, 1}, {1, 1, 1, 1}, {2, 2, 2, 1}}) {
      const int np = std::accumulate(slots.begin(), slots.end(), 0);
      SCOPED_TRACE(placement(bed, slots));
      std::vector<std::uint64_t> before;
      for (std::size_t k = 0; k < slots.size(); ++k) before.push_back(bed.link_bytes(int(k)));
      const auto out = dir / "gloo.json";
      fs::remove(out);
      const auto r = run_gloo(bed, slots, cfg, out);
      std::string zeros;
      for (int i = 0; i < np; ++i) zeros += i ? " 0" : "0";
      EXPECT_EQ(r.out, zeros + "\n") << rank_err(0) << rank_err(1) << r.err;
      for (std::size_t k = 0; k < slots.size(); ++k)
        EXPECT_GT(bed.link_bytes(int(k)), before[k] + 1000) << "host " << k << " link unused";
      ASSERT_TRUE(fs::exists(out)) << rank_err(0);
      const auto j = read_json(out);
      EXPECT_EQ(comparable(j["results"], np), comparable(single["results"], 1));
      EXPECT_EQ(j["run"]["world_size"], np);
      EXPECT_EQ(j["run"]["backend"], "gloo");
    }
  }
}

TEST_F(MultihostTest, GlooKilledRankFailsEveryOtherRankNamingIt) {
  TALLY_NEED_GLOO();
  Bed bed(3);
  TALLY_NEED_BED(bed);
  const auto cfg = slow_config("gloo", 0.5, 60, 2);
  const auto out = dir / "never.json";
  std::printf("gloo: rank 2 (host 2) killed with SIGKILL mid-run\n");
  const auto r =
      run_gloo(bed, {1, 1, 1}, cfg, out, "", when_connected(bed, 2, 1, 1.0, "kill -9 $p"));
  std::istringstream codes(r.out);
  int c0 = -1, c1 = -1, c2 = -1;
  codes >> c0 >> c1 >> c2;
  EXPECT_EQ(c2, 137) << r.out;  // the killed one
  for (int c : {c0, c1}) {
    EXPECT_NE(c, 0) << r.out;
    EXPECT_NE(c, 124) << "a rank did not end by itself within " << kHardLimitS << " s";
  }
  EXPECT_NE(rank_err(0).find("rank 2"), std::string::npos) << rank_err(0);
  EXPECT_NE(rank_err(1).find("rank 2"), std::string::npos) << rank_err(1);
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(MultihostTest, GlooCutLinkFailsTheOtherRanksNamingTheRank) {
  TALLY_NEED_GLOO();
  Bed bed(3);
  TALLY_NEED_BED(bed);
  const auto cfg = slow_config("gloo", 0.5, 60, 2);
  const auto out = dir / "never.json";
  std::printf("gloo: host 2's link cut mid-run\n");
  const auto r = run_gloo(bed, {1, 1, 1}, cfg, out, "",
                          when_connected(bed, 2, 1, 1.0, kBed + " cut " + bed.name + " 2"));
  std::istringstream codes(r.out);
  int c0 = -1, c1 = -1, c2 = -1;
  codes >> c0 >> c1 >> c2;
  for (int c : {c0, c1, c2}) {
    EXPECT_NE(c, 0) << r.out;
    EXPECT_NE(c, 124) << "a rank did not end by itself within " << kHardLimitS << " s";
  }
  EXPECT_NE(rank_err(0).find("rank 2"), std::string::npos) << rank_err(0);
  EXPECT_NE(rank_err(1).find("rank 2"), std::string::npos) << rank_err(1);
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
