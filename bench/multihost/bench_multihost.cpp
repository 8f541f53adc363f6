// Multi-host sync benchmark: what a sync costs when the ranks are on separate hosts and talk over
// TCP, against the raw calls of the transports it runs on, in the same processes, calls
// interleaved. Run under mpirun, one rank per host (bench/multihost/run.sh makes the hosts as
// network namespaces on one machine and starts it there):
//
//   mpirun ... build-rel/bin/tally_bench_multihost --store DIR --iface eth0
//              [--master-addr ADDR --master-port PORT] [--min 1024] [--max 268435456] [--reps 3]
//              [--memory-cap-gib 6] [--json FILE]
//
// For each size S (bytes per rank, --min .. --max, x4 steps), the best of max(--reps,
// min(50, 16 MiB / S)) calls of the slowest rank's time (every rank times the call between two
// barriers; the maximum over ranks by MPI_Allreduce), in ms:
//   MPI_Gatherv   MPI_Allgather of the sizes + MPI_Gatherv of S bytes a rank to rank 0 (reused
//                 buffer): the raw rooted gather a sync needs;
//   tally gather  tally::Collectives::gather_object(S bytes, 0) over the mpi backend plugin (as
//                 `tally run` loads it): what a sync does with the states;
//   MPI_Reduce    MPI_Reduce(MPI_SUM) of S / 8 int64 to rank 0, in place (reused buffer);
//   tally reduce  tally::Collectives::reduce(S / 8 int64, sum, 0) over the mpi backend: what a
//                 sync does with states of counts;
//   gloo::gather  Gloo's own gather of S bytes a rank to rank 0 (equal sizes: no size exchange);
//   gloo::allgatherv  Gloo's allgatherv of S bytes a rank (every rank receives all);
//   gloo::reduce  Gloo's reduce (sum) of S / 8 int64 to rank 0;
//   tally gather/reduce over gloo  the same two tally calls over the gloo backend plugin, when it
//                 is built (it rendezvouses through MASTER_ADDR / MASTER_PORT: --master-addr).
// Gloo's own context is made from a FileStore in --store DIR (a folder every rank sees) on the
// TCP device bound to --iface. Sizes whose receive buffers on the machine (world * S * (world +
// 4)) exceed --memory-cap-gib are skipped. --json FILE: rank 0 also writes the rows as JSON.
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gloo/allgatherv.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include "config.hpp"
#include "registry.hpp"
#include "tally/collectives.hpp"
#include "tally/sdk/dist_backend.hpp"

namespace {

struct Options {
  std::size_t min_bytes = 1024;
  std::size_t max_bytes = std::size_t{256} << 20;
  int reps = 3;
  double memory_cap_gib = 6.0;
  std::string store, iface, master_addr, master_port = "29511", json;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--min")
      o.min_bytes = std::strtoull(v, nullptr, 10);
    else if (k == "--max")
      o.max_bytes = std::strtoull(v, nullptr, 10);
    else if (k == "--reps")
      o.reps = std::atoi(v);
    else if (k == "--memory-cap-gib")
      o.memory_cap_gib = std::atof(v);
    else if (k == "--store")
      o.store = v;
    else if (k == "--iface")
      o.iface = v;
    else if (k == "--master-addr")
      o.master_addr = v;
    else if (k == "--master-port")
      o.master_port = v;
    else if (k == "--json")
      o.json = v;
    else {
      fmt::print(stderr, "tally_bench_multihost: unknown option {}\n", k);
      std::exit(2);
    }
  }
  if (o.min_bytes < 8 || o.max_bytes < o.min_bytes || o.reps < 1 || o.store.empty()) {
    fmt::print(stderr,
               "tally_bench_multihost: need --store DIR, 8 <= --min <= --max, --reps >= 1\n");
    std::exit(2);
  }
  return o;
}

template <class Fn>
double slowest(Fn&& fn) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  fn();
  double t = MPI_Wtime() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}

/// The best time of each of `fns` over `reps` rounds, calls interleaved (one of each per round).
template <std::size_t N>
std::array<double, N> best_of(int reps, const std::array<std::function<void()>, N>& fns) {
  for (const auto& f : fns)
    if (f) f();  // warm-up: connections, first touch of reused buffers
  std::array<double, N> best;
  best.fill(1e300);
  for (int r = 0; r < reps; ++r)
    for (std::size_t i = 0; i < N; ++i)
      if (fns[i]) best[i] = std::min(best[i], slowest(fns[i]));
  return best;
}

void raw_gatherv(const std::vector<std::byte>& send, std::vector<std::byte>& recv,
                 std::vector<int>& counts, std::vector<int>& displs, int world, int rank) {
  const int n = static_cast<int>(send.size());
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::size_t total = 0;
  for (int r = 0; r < world; ++r) {
    displs[static_cast<std::size_t>(r)] = static_cast<int>(total);
    total += static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]);
  }
  if (rank == 0 && recv.size() < total) recv.resize(total);
  MPI_Gatherv(send.data(), n, MPI_BYTE, rank == 0 ? recv.data() : nullptr, counts.data(),
              displs.data(), MPI_BYTE, 0, MPI_COMM_WORLD);
}

std::shared_ptr<tally::DistBackend> make_backend(const std::string& type) {
  static const tally::Registry registry = tally::Registry::load();
  const auto* c = registry.find(tally::ComponentKind::Backend, type);
  if (c == nullptr) return nullptr;
  return tally::Registry::make_backend(*c, tally::make_params(*c->info, {}, "backend"));
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

std::string size_name(std::size_t b) {
  if (b >= (1u << 20)) return fmt::format("{} MiB", b >> 20);
  if (b >= (1u << 10)) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

std::string ms(double s) { return s < 1e299 ? fmt::format("{:.3f}", s * 1e3) : "-"; }
std::string ratio(double a, double b) {
  return a < 1e299 && b < 1e299 ? fmt::format("{:.2f}", a / b) : "-";
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  const Options opt = parse(argc, argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int host_len = 0;
  MPI_Get_processor_name(host, &host_len);

  // Gloo's own context over TCP, its rendezvous through a file store every rank sees.
  gloo::transport::tcp::attr attr;
  if (!opt.iface.empty()) attr.iface = opt.iface;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore file_store(opt.store);
  gloo::rendezvous::PrefixStore store("bench", file_store);
  auto gctx = std::make_shared<gloo::rendezvous::Context>(rank, world);
  gctx->setTimeout(std::chrono::seconds(300));
  gctx->connectFullMesh(store, dev);

  // tally's object collectives over the mpi backend plugin; and over the gloo one where it is
  // built, its rendezvous from torchrun's variables (set here from Open MPI's).
  auto mpi_transport = make_backend("mpi");
  auto mpi_coll = std::make_unique<tally::Collectives>(*mpi_transport);
  std::shared_ptr<tally::DistBackend> gloo_transport;
  std::unique_ptr<tally::Collectives> gloo_coll;
  if (!opt.master_addr.empty()) {
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    ::setenv("LOCAL_RANK", local != nullptr ? local : "0", 1);
    ::setenv("MASTER_ADDR", opt.master_addr.c_str(), 1);
    ::setenv("MASTER_PORT", opt.master_port.c_str(), 1);
    gloo_transport = make_backend("gloo");
    if (gloo_transport) gloo_coll = std::make_unique<tally::Collectives>(*gloo_transport);
  }
  int have_gloo = gloo_coll ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &have_gloo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!have_gloo) gloo_coll.reset();

  {
    std::vector<char> hosts(static_cast<std::size_t>(world) * MPI_MAX_PROCESSOR_NAME);
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts.data(), MPI_MAX_PROCESSOR_NAME,
               MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      std::vector<std::string> names;
      for (int r = 0; r < world; ++r)
        names.emplace_back(&hosts[static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
      fmt::print("tally_bench_multihost: {} ranks on hosts [{}]; tally over gloo: {}\n", world,
                 fmt::join(names, ", "), have_gloo ? "yes" : "no (gloo backend not built)");
      fmt::print(
          "times in ms (slowest rank, best of the calls); gather GB/s = bytes rank 0 receives / s\n"
          "| bytes per rank | MPI_Gatherv | tally gather (mpi) | tally / MPI | gather GB/s "
          "(tally, mpi) | gloo::gather | gloo::allgatherv | tally gather (gloo) | tally (gloo) / "
          "gloo::gather | MPI_Reduce | tally reduce (mpi) | tally / MPI | gloo::reduce | tally "
          "reduce (gloo) | tally (gloo) / gloo::reduce |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    }
  }

  std::vector<int> counts(static_cast<std::size_t>(world)), displs(counts.size());
  std::vector<std::string> json_rows;
  const double cap = opt.memory_cap_gib * double(1 << 30);
  for (std::size_t s = opt.min_bytes; s <= opt.max_bytes; s *= 4) {
    if (double(world) * double(s) * double(world + 4) > cap) {
      if (rank == 0) fmt::print("| {} | skipped: over --memory-cap-gib |\n", size_name(s));
      continue;
    }
    std::vector<std::byte> send(s), grecv, gloo_gather_out, gloo_allgv_out;
    for (std::size_t i = 0; i < s; ++i) send[i] = static_cast<std::byte>((i * 31 + rank) & 0xff);
    if (rank == 0) gloo_gather_out.resize(s * static_cast<std::size_t>(world));
    gloo_allgv_out.resize(s * static_cast<std::size_t>(world));
    const std::size_t n = s / sizeof(std::int64_t);
    std::vector<std::int64_t> mine(n), work(n), gloo_out(n);
    for (std::size_t i = 0; i < n; ++i)
      mine[i] = static_cast<std::int64_t>((i * 31 + static_cast<std::size_t>(rank)) & 0xff);
    std::size_t check = 0;
    const int reps =
        std::max(opt.reps, static_cast<int>(std::min<std::size_t>(50, (16u << 20) / s)));
    std::array<std::function<void()>, 9> fns = {
        [&] { raw_gatherv(send, grecv, counts, displs, world, rank); },
        [&] { check += mpi_coll->gather_object(send, 0).size(); },
        [&] {
          gloo::GatherOptions o(gctx);
          o.setInput(send.data(), s);
          if (rank == 0) o.setOutput(gloo_gather_out.data(), gloo_gather_out.size());
          o.setRoot(0);
          gloo::gather(o);
        },
        [&] {
          gloo::AllgathervOptions o(gctx);
          o.setInput(send.data(), s);
          o.setOutput(gloo_allgv_out.data(), std::vector<std::size_t>(counts.size(), s));
          gloo::allgatherv(o);
        },
        gloo_coll
            ? std::function<void()>([&] { check += gloo_coll->gather_object(send, 0).size(); })
            : std::function<void()>(),
        [&] {
          std::copy(mine.begin(), mine.end(), work.begin());
          MPI_Reduce(rank == 0 ? MPI_IN_PLACE : work.data(), work.data(), static_cast<int>(n),
                     MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
        },
        [&] {
          std::copy(mine.begin(), mine.end(), work.begin());
          mpi_coll->reduce(work, tally::ReduceOp::sum, 0);
        },
        [&] {
          std::copy(mine.begin(), mine.end(), work.begin());
          gloo::ReduceOptions o(gctx);
          o.setInput(work.data(), n);
          o.setOutput(gloo_out.data(), n);
          o.setRoot(0);
          o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, std::size_t)>(
              &gloo::sum<std::int64_t>));
          gloo::reduce(o);
        },
        gloo_coll ? std::function<void()>([&] {
          std::copy(mine.begin(), mine.end(), work.begin());
          gloo_coll->reduce(work, tally::ReduceOp::sum, 0);
        })
                  : std::function<void()>()};
    const auto t = best_of(reps, fns);
    if (rank == 0 && check == 0) std::abort();  // only rank 0 receives the objects
    // The sums agree: MPI_Reduce, tally's reduce and gloo::reduce.
    {
      std::vector<std::int64_t> a = mine, b(n);
      MPI_Reduce(rank == 0 ? MPI_IN_PLACE : a.data(), a.data(), static_cast<int>(n), MPI_INT64_T,
                 MPI_SUM, 0, MPI_COMM_WORLD);
      std::copy(mine.begin(), mine.end(), b.begin());
      mpi_coll->reduce(b, tally::ReduceOp::sum, 0);
      if (rank == 0 && (a != b || a != gloo_out)) {
        fmt::print(stderr, "tally_bench_multihost: the reduced sums differ at {} bytes\n", s);
        std::abort();
      }
    }
    const double bytes = double(world) * double(s);
    if (rank == 0)
      fmt::print(
          "| {} | {} | {} | {} | {:.2f} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
          size_name(s), ms(t[0]), ms(t[1]), ratio(t[1], t[0]), bytes / t[1] / 1e9, ms(t[2]),
          ms(t[3]), ms(t[4]), ratio(t[4], t[2]), ms(t[5]), ms(t[6]), ratio(t[6], t[5]), ms(t[7]),
          ms(t[8]), ratio(t[8], t[7]));
    auto js = [](double v) { return v < 1e299 ? fmt::format("{:.9g}", v) : std::string("null"); };
    json_rows.push_back(
        fmt::format(R"({{"bytes": {}, "world": {}, "mpi_gatherv_s": {}, "tally_mpi_gather_s": {}, )"
                    R"("gloo_gather_s": {}, "gloo_allgatherv_s": {}, "tally_gloo_gather_s": {}, )"
                    R"("mpi_reduce_s": {}, "tally_mpi_reduce_s": {}, "gloo_reduce_s": {}, )"
                    R"("tally_gloo_reduce_s": {}}})",
                    s, world, js(t[0]), js(t[1]), js(t[2]), js(t[3]), js(t[4]), js(t[5]), js(t[6]),
                    js(t[7]), js(t[8])));
    std::fflush(stdout);
  }
  double rss = peak_rss_mib();
  MPI_Allreduce(MPI_IN_PLACE, &rss, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    fmt::print("peak RSS per rank (max over ranks): {:.0f} MiB\n", rss);
    if (!opt.json.empty()) {
      std::FILE* f = std::fopen(opt.json.c_str(), "w");
      if (f == nullptr) {
        fmt::print(stderr, "tally_bench_multihost: cannot write {}\n", opt.json);
      } else {
        fmt::print(f, "{{\"rows\": [{}], \"peak_rss_mib\": {:.1f}}}\n", fmt::join(json_rows, ", "),
                   rss);
        std::fclose(f);
      }
    }
  }
  gloo_coll.reset();
  gloo_transport.reset();
  mpi_coll.reset();
  mpi_transport.reset();
  gctx.reset();
  MPI_Finalize();
  return 0;
}
