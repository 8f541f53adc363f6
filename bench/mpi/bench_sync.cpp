// Sync benchmark: tally's object all-gather (the mpi backend plugin, loaded through the registry as
// `tally run` loads it) against the raw MPI calls it is built on, in the same processes.
//
//   mpirun -np 2 build/bin/tally_bench_sync [--min 1024] [--max 268435456] [--reps 5]
//                                            [--memory-cap-gib 8] [--json FILE]
//
// For each object size S (bytes per rank, 1 KiB .. --max, x4 steps) rank 0 prints one row (the
// best of max(--reps, min(100, 16 MiB / S)) calls: small calls are repeated more):
//   raw       MPI_Allgather of the sizes + MPI_Allgatherv of S bytes a rank into a receive buffer
//             allocated once and reused (the fastest a varying all-gather can be);
//   raw-fresh the same into a buffer allocated for every call (what a naive sync pays: the
//             first touch of every page);
//   tally     Collectives::all_gather_object(S bytes): size exchange, Allgatherv, views into the
//             engine's pooled receive buffer;
//   raw gather MPI_Allgather of the sizes + MPI_Gatherv of S bytes a rank to rank 0 (reused
//             buffer); tally gather: Collectives::gather_object(S bytes, 0), what a sync uses;
//   raw reduce MPI_Reduce(MPI_SUM) of S / 8 int64 counts a rank to rank 0, in place (reused
//             buffer); tally reduce: Collectives::reduce, what a sync uses for states of counts;
//   gather+sum Collectives::gather_object(S bytes, 0) and rank 0 summing the world's int64 counts:
//             what a sync of the same counts cost before they were reduced;
// each the minimum over those calls of the slowest rank's time (every rank times the call between
// two barriers; the maximum over ranks is taken with an MPI_Allreduce), as GB/s of data received
// per rank (world * S / t; for the gathers, received by rank 0), and tally / raw. Sizes where
// world^2 * S exceeds --memory-cap-gib (the receive buffers of all ranks on this one machine) are
// skipped. Peak RSS per rank at the end.
//
// The host initialises MPI (MPI_Init_thread) before the backend is made; the backend then leaves
// MPI to the host (as it does inside a user's MPI program), and both use MPI_COMM_WORLD's ranks.
// --json FILE: rank 0 also writes the rows as JSON (bench/mpi/run.sh puts them beside mmeval's).
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config.hpp"
#include "registry.hpp"
#include "tally/collectives.hpp"
#include "tally/sdk/dist_backend.hpp"

namespace {

struct Options {
  std::size_t min_bytes = 1024;
  std::size_t max_bytes = std::size_t{256} << 20;
  int reps = 5;
  double memory_cap_gib = 8.0;
  std::string json;
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
    else if (k == "--json")
      o.json = v;
    else {
      fmt::print(stderr, "tally_bench_sync: unknown option {}\n", k);
      std::exit(2);
    }
  }
  if (o.min_bytes == 0 || o.max_bytes < o.min_bytes || o.reps < 1) {
    fmt::print(stderr, "tally_bench_sync: need 0 < --min <= --max and --reps >= 1\n");
    std::exit(2);
  }
  return o;
}

/// Seconds of the slowest rank for one call of `fn`, all ranks starting together.
template <class Fn>
double slowest(Fn&& fn) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  fn();
  double t = MPI_Wtime() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}

/// The best (minimum) time of each of `fns` over `reps` rounds, the calls interleaved (one of each
/// per round) so that a burst of load on this shared machine hits them alike.
template <class... Fns>
std::array<double, sizeof...(Fns)> best_of(int reps, Fns&&... fns) {
  (fns(), ...);  // warm-up: connections, first touch of reused buffers
  std::array<double, sizeof...(Fns)> best;
  best.fill(1e300);
  for (int r = 0; r < reps; ++r) {
    std::size_t i = 0;
    ((best[i] = std::min(best[i], slowest(fns)), ++i), ...);
  }
  return best;
}

/// Every rank's count (an MPI_Allgather of the sizes) and the displacements; returns the total.
std::size_t exchange_counts(int n, std::vector<int>& counts, std::vector<int>& displs, int world) {
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::size_t total = 0;
  for (int r = 0; r < world; ++r) {
    displs[static_cast<std::size_t>(r)] = static_cast<int>(total);
    total += static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]);
  }
  return total;
}

/// MPI_Allgatherv of `send` into `recv` (resized as needed), after an MPI_Allgather of the sizes:
/// what any varying all-gather of objects must do.
void raw_allgatherv(const std::vector<std::byte>& send, std::vector<std::byte>& recv,
                    std::vector<int>& counts, std::vector<int>& displs, int world) {
  const int n = static_cast<int>(send.size());
  const std::size_t total = exchange_counts(n, counts, displs, world);
  if (recv.size() < total) recv.resize(total);
  MPI_Allgatherv(send.data(), n, MPI_BYTE, recv.data(), counts.data(), displs.data(), MPI_BYTE,
                 MPI_COMM_WORLD);
}

/// MPI_Gatherv of `send` to rank 0 into `recv` (reused), after an MPI_Allgather of the sizes:
/// the rooted gather a sync needs when one rank computes.
void raw_gatherv(const std::vector<std::byte>& send, std::vector<std::byte>& recv,
                 std::vector<int>& counts, std::vector<int>& displs, int world, int rank) {
  const int n = static_cast<int>(send.size());
  const std::size_t total = exchange_counts(n, counts, displs, world);
  if (rank == 0 && recv.size() < total) recv.resize(total);
  MPI_Gatherv(send.data(), n, MPI_BYTE, rank == 0 ? recv.data() : nullptr, counts.data(),
              displs.data(), MPI_BYTE, 0, MPI_COMM_WORLD);
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  const Options opt = parse(argc, argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);

  std::shared_ptr<tally::DistBackend> transport;
  {
    static const tally::Registry registry = tally::Registry::load();
    const auto& c = registry.get(tally::ComponentKind::Backend, "mpi");
    transport = tally::Registry::make_backend(c, tally::make_params(*c.info, {}, "backend"));
  }
  // The engine's object collectives over the plugin's transport, as a sync uses them.
  auto backend = std::make_unique<tally::Collectives>(*transport);

  if (rank == 0) {
    fmt::print("tally_bench_sync: {} ranks, best of {} calls, GB/s = bytes received per rank / s\n",
               world, opt.reps);
    fmt::print(
        "| bytes per rank | raw Allgatherv (reused) GB/s | raw (fresh buffer) GB/s | "
        "tally all_gather_object GB/s | tally / raw time | raw Gatherv to rank 0 GB/s | "
        "tally gather_object GB/s | tally / raw time (gather) | raw MPI_Reduce us | tally reduce "
        "us | gather + sum us | gather + sum / reduce |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  }
  std::vector<int> counts(static_cast<std::size_t>(world)), displs(counts.size());
  std::vector<std::byte> recv, grecv;
  std::vector<std::string> json_rows;
  const double cap = opt.memory_cap_gib * double(1 << 30);
  for (std::size_t s = opt.min_bytes; s <= opt.max_bytes; s *= 4) {
    if (double(world) * double(world) * double(s) * 2.0 > cap) {
      if (rank == 0) fmt::print("| {} | skipped: over --memory-cap-gib | | | |\n", s);
      continue;
    }
    std::vector<std::byte> send(s);
    for (std::size_t i = 0; i < s; ++i) send[i] = static_cast<std::byte>((i * 31 + rank) & 0xff);

    // Small calls take microseconds and vary with scheduling: more calls for them (at most 100).
    const int reps =
        std::max(opt.reps, static_cast<int>(std::min<std::size_t>(100, (16u << 20) / s)));
    std::size_t check = 0;
    // The same bytes as int64 counts, summed to rank 0.
    const std::size_t n_counts = s / sizeof(std::int64_t);
    std::vector<std::int64_t> counts_mine(n_counts), counts_work(n_counts), sums(n_counts);
    for (std::size_t i = 0; i < n_counts; ++i)
      counts_mine[i] = static_cast<std::int64_t>((i * 31 + static_cast<std::size_t>(rank)) & 0xff);
    const auto [t_raw, t_fresh, t_tally, t_graw, t_gtally, t_rraw, t_rtally, t_gsum] = best_of(
        reps, [&] { raw_allgatherv(send, recv, counts, displs, world); },
        [&] {
          std::vector<std::byte> fresh;
          raw_allgatherv(send, fresh, counts, displs, world);
        },
        [&] {
          const auto got = backend->all_gather_object(send);
          check += got.size();
        },
        [&] { raw_gatherv(send, grecv, counts, displs, world, rank); },
        [&] {
          const auto got = backend->gather_object(send, 0);
          check += got.size();
        },
        [&] {
          std::copy(counts_mine.begin(), counts_mine.end(), counts_work.begin());
          MPI_Reduce(rank == 0 ? MPI_IN_PLACE : counts_work.data(), counts_work.data(),
                     static_cast<int>(n_counts), MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
        },
        [&] {
          std::copy(counts_mine.begin(), counts_mine.end(), counts_work.begin());
          backend->reduce(counts_work, tally::ReduceOp::sum, 0);
        },
        [&] {
          const auto got =
              backend->gather_object(std::as_bytes(std::span<const std::int64_t>(counts_mine)), 0);
          if (rank != 0) return;
          std::fill(sums.begin(), sums.end(), 0);
          for (const auto& o : got.objects) {
            const auto* c = reinterpret_cast<const std::int64_t*>(o.data());
            for (std::size_t i = 0; i < n_counts; ++i) sums[i] += c[i];
          }
          check += sums.empty() ? 0 : static_cast<std::size_t>(sums[0] & 1) + 1;
        });
    if (check == 0) std::abort();
    if (n_counts > 0) {  // the two sums agree
      std::vector<std::int64_t> reduced = counts_mine;
      backend->reduce(reduced, tally::ReduceOp::sum, 0);
      if (rank == 0 && reduced != sums) {
        fmt::print(stderr, "tally_bench_sync: reduce and gather+sum differ\n");
        std::abort();
      }
    }
    const double bytes = double(world) * double(s);
    if (rank == 0)
      fmt::print(
          "| {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.1f} | {:.1f} | "
          "{:.1f} | {:.2f} |\n",
          s, bytes / t_raw / 1e9, bytes / t_fresh / 1e9, bytes / t_tally / 1e9, t_tally / t_raw,
          bytes / t_graw / 1e9, bytes / t_gtally / 1e9, t_gtally / t_graw, t_rraw * 1e6,
          t_rtally * 1e6, t_gsum * 1e6, t_gsum / t_rtally);
    json_rows.push_back(fmt::format(
        R"({{"bytes": {}, "world": {}, "raw_s": {:.9g}, "raw_fresh_s": {:.9g}, "tally_s": {:.9g}, )"
        R"("raw_gather_s": {:.9g}, "tally_gather_s": {:.9g}, "raw_reduce_s": {:.9g}, )"
        R"("tally_reduce_s": {:.9g}, "gather_sum_s": {:.9g}}})",
        s, world, t_raw, t_fresh, t_tally, t_graw, t_gtally, t_rraw, t_rtally, t_gsum));
    std::vector<std::byte>().swap(recv);
    std::vector<std::byte>().swap(grecv);
  }
  double rss = peak_rss_mib();
  MPI_Allreduce(MPI_IN_PLACE, &rss, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    fmt::print("peak RSS per rank (max over ranks): {:.0f} MiB\n", rss);
    if (!opt.json.empty()) {
      std::FILE* f = std::fopen(opt.json.c_str(), "w");
      if (f == nullptr) {
        fmt::print(stderr, "tally_bench_sync: cannot write {}\n", opt.json);
      } else {
        fmt::print(f, "{{\"rows\": [{}], \"peak_rss_mib\": {:.1f}}}\n", fmt::join(json_rows, ", "),
                   rss);
        std::fclose(f);
      }
    }
  }
  backend.reset();
  transport.reset();
  MPI_Finalize();
  return 0;
}
