// Test-only metrics that probe the engine rather than compute anything useful.
//
// SequenceProbe reads an integer field `x` [N] and reports the count, the sum, and an
// order-sensitive hash of the values (h = h * 1000003 + x, mod 2^64) folded across ranks in rank
// order. Equal hashes on any world size prove that rank order is dataset order and that no sample
// was lost, duplicated or reordered. With `fail_on: V`, a sample equal to V is an InputError, so
// tests can make exactly one rank fail; `kill_on: V` makes the rank kill itself with SIGKILL,
// `exit_on: V` makes it exit at once with code 7 (a crash that skips every cleanup), and
// `hang_on: V` makes it sleep for an hour (a hung rank); `compute_sleep: S` makes compute() (rank
// 0, at the sync) sleep S seconds first (a long but live computation). With `once_file: PATH`,
// kill_on and exit_on fire only while PATH does not exist, and create it first: a run resumed from
// a checkpoint with the same config (the same fingerprint) goes past the sample that stopped it.
//
// CountProbe counts the values of `x` by x mod `bins`: a state of counts (sum fields), so at sync
// it is summed to rank 0, not gathered. `corrupt: V` overwrites its first count with V after each
// batch (a corrupt state: negative, or too large to sum exactly); `bins_by_rank: true` adds the MPI
// rank to the number of bins (a plugin whose reduced size depends on more than its parameters).
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "tally/sdk.hpp"

namespace {

constexpr std::uint64_t kMul = 1000003;

std::uint64_t pow_mod(std::uint64_t b, std::int64_t e) {
  std::uint64_t r = 1;
  for (; e > 0; e >>= 1, b *= b)
    if (e & 1) r *= b;
  return r;
}

/// The values of a run of samples folded into an order-sensitive summary; two runs fold into
/// the summary of the first followed by the second (merge, in rank order).
struct Fold {
  std::int64_t count = 0;
  std::int64_t sum = 0;
  std::uint64_t hash = 0;
  std::int64_t first = -1;
  std::int64_t last = -1;
  void merge(const Fold& s) {
    if (s.count == 0) return;
    if (count == 0) first = s.first;
    last = s.last;
    hash = hash * pow_mod(kMul, s.count) + s.hash;
    count += s.count;
    sum += s.sum;
  }
  TALLY_FIELDS(count, sum, hash, first, last)
};

struct ProbeState {
  Fold fold;
  tally::PackedVector<std::int64_t> per_rank{0};  // this rank's count; concatenated: every rank's
  TALLY_STATE(merge(fold), concat(per_rank))
};

class SequenceProbe : public tally::TypedMetric<ProbeState> {
 public:
  explicit SequenceProbe(const tally::Params& p)
      : fail_on_(opt(p, "fail_on")),
        kill_on_(opt(p, "kill_on")),
        exit_on_(opt(p, "exit_on")),
        hang_on_(opt(p, "hang_on")),
        compute_sleep_(p.has("compute_sleep") ? p.get_double("compute_sleep") : 0.0),
        batch_sleep_(p.has("batch_sleep") ? p.get_double("batch_sleep") : 0.0),
        slow_from_(opt(p, "slow_from")),
        once_file_(p.has("once_file") ? p.get_string("once_file") : std::string()) {}

 protected:
  void update(ProbeState& s, const tally::Batch& b) override {
    const tally::Tensor& x = b.tensor("x");
    if (x.dtype() != tally::DType::I64 || x.dim() != 1)
      throw tally::InputError("field 'x' must be i64[N], found " + x.describe());
    const auto* v = x.data_as<std::int64_t>();
    if (batch_sleep_ > 0 && std::any_of(v, v + x.size(0), [&](auto e) { return e >= slow_from_; }))
      std::this_thread::sleep_for(std::chrono::duration<double>(batch_sleep_));
    for (std::int64_t i = 0; i < x.size(0); ++i) {
      if (v[i] == kill_on_ && fire()) ::kill(::getpid(), SIGKILL);
      if (v[i] == exit_on_ && fire()) ::_exit(7);
      if (v[i] == hang_on_) std::this_thread::sleep_for(std::chrono::hours(1));
      if (v[i] == fail_on_)
        throw tally::InputError("field 'x' holds the value " + std::to_string(v[i]) +
                                " that fail_on rejects");
      Fold& f = s.fold;
      if (f.count == 0) f.first = v[i];
      f.last = v[i];
      ++f.count;
      f.sum += v[i];
      f.hash = f.hash * kMul + static_cast<std::uint64_t>(v[i]);
    }
    s.per_rank.assign(1, s.fold.count);
  }

  tally::Value compute(const ProbeState& merged) const override {
    if (compute_sleep_ > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(compute_sleep_));
    const Fold& all = merged.fold;
    tally::Value out = tally::Value::map();
    out.set("count", all.count);
    out.set("sum", all.sum);
    out.set("hash", static_cast<std::int64_t>(all.hash >> 1));  // fits a JSON integer
    out.set("first", all.first);
    out.set("last", all.last);
    tally::Value per_rank = tally::Value::array();
    for (const auto c : merged.per_rank) per_rank.push_back(c);
    out.set("per_rank", per_rank);
    return out;
  }

 private:
  static std::int64_t opt(const tally::Params& p, const char* name) {
    return p.has(name) ? p.get_int(name) : INT64_MIN;
  }
  // Whether a kill_on / exit_on fault fires: always, or with once_file only the first time.
  bool fire() const {
    if (once_file_.empty()) return true;
    std::error_code ec;
    if (std::filesystem::exists(once_file_, ec)) return false;
    std::ofstream(once_file_) << "fired\n";
    return true;
  }
  std::int64_t fail_on_, kill_on_, exit_on_, hang_on_;
  double compute_sleep_;
  double batch_sleep_;
  std::int64_t slow_from_;
  std::string once_file_;
};

// HostileState packs a state that lies about its size, as a corrupt or malicious rank would: an
// array header claiming 2^32 - 1 entries followed by nothing (`lie: count`), or a bin header
// claiming 1 GiB followed by 3 bytes (`lie: length`); `lie: restore` saves a state for a
// checkpoint that its restore() refuses. The engine must reject the payload without
// allocating what it claims.
class HostileState : public tally::Metric {
 public:
  explicit HostileState(const tally::Params& p) : lie_(p.get_string("lie")) {}
  void add(const tally::Batch&) override {}
  void reset() override {}
  std::size_t summed_size() const override { return 0; }
  void write_sums(std::span<std::int64_t>) const override {}
  bool gathers() const override { return true; }
  void pack_gathered(tally::ByteSink& out) const override {
    if (lie_ == "count") {
      out.write("\xdd\xff\xff\xff\xff", 5);  // an array header of 2^32 - 1 entries
    } else if (lie_ == "length") {
      out.write(
          "\xc6\x40\x00\x00\x00"
          "abc",
          8);  // a bin header of 1 GiB, 3 bytes
    } else {
      out.write("\xc0", 1);  // nil
    }
  }
  tally::Value compute_synced(std::span<const tally::Bytes>,
                              std::span<const std::int64_t>) const override {
    return tally::Value::map();
  }
  tally::Value compute_local() override { return tally::Value::map(); }
  void save(tally::ByteSink& out) const override {
    if (lie_ == "restore")
      out.write("\x07", 1);  // the integer 7
    else
      pack_gathered(out);
  }
  /// `lie: restore`: a state that saves but cannot be read back (a plugin whose restore() does
  /// not match its save()).
  void restore(tally::Bytes) override {
    if (lie_ == "restore") tally::StateReader::fail("not the state save() wrote");
  }
  void merge_saved(tally::Bytes saved) override { restore(saved); }

 private:
  std::string lie_;
};

struct CountState {
  tally::PackedVector<std::int64_t> bins;
  std::int64_t n = 0;
  TALLY_STATE(sum(bins), sum(n))
};

class CountProbe : public tally::TypedMetric<CountState> {
 public:
  explicit CountProbe(const tally::Params& p)
      : bins_(p.get_size("bins")),
        corrupt_(p.has("corrupt") ? std::optional(p.get_int("corrupt")) : std::nullopt) {
    if (bins_ < 1) p.fail("bins", "must be >= 1");
    if (p.get_bool("bins_by_rank"))
      if (const char* r = std::getenv("OMPI_COMM_WORLD_RANK")) bins_ += std::atoi(r);
  }

 protected:
  CountState initial_state() const override {
    CountState s;
    s.bins.assign(static_cast<std::size_t>(bins_), 0);
    return s;
  }
  void update(CountState& s, const tally::Batch& b) override {
    const tally::Tensor& x = b.tensor("x");
    if (x.dtype() != tally::DType::I64 || x.dim() != 1)
      throw tally::InputError("field 'x' must be i64[N], found " + x.describe());
    const auto* v = x.data_as<std::int64_t>();
    for (std::int64_t i = 0; i < x.size(0); ++i) ++s.bins[static_cast<std::size_t>(v[i] % bins_)];
    s.n += x.size(0);
    if (corrupt_) s.bins[0] = *corrupt_;
  }
  tally::Value compute(const CountState& all) const override {
    tally::Value out = tally::Value::map();
    tally::Value arr = tally::Value::array();
    for (const auto c : all.bins) arr.push_back(c);
    out.set("bins", arr);
    out.set("n", all.n);
    return out;
  }

 private:
  std::int64_t bins_;
  std::optional<std::int64_t> corrupt_;
};

}  // namespace

TALLY_PLUGIN("testkit", "0.0.1", [] {
  return std::vector<tally::ComponentInfo>{
      tally::metric<HostileState>("HostileState",
                                  "Test probe: packs a state whose declared size is a lie",
                                  {tally::param("lie", tally::ParamType::String,
                                                "which size lies, or restore: a saved state "
                                                "restore() refuses")
                                       .choices({"count", "length", "restore"})},
                                  {{"x", "anything", false}}),
      tally::metric<SequenceProbe>(
          "SequenceProbe", "Test probe: count, sum and an order-sensitive hash of an integer field",
          {tally::param("fail_on", tally::ParamType::Int,
                        "a value that makes add() throw an InputError")
               .optional(),
           tally::param("kill_on", tally::ParamType::Int,
                        "a value that makes the rank SIGKILL itself")
               .optional(),
           tally::param("exit_on", tally::ParamType::Int, "a value that makes the rank _exit(7)")
               .optional(),
           tally::param("hang_on", tally::ParamType::Int,
                        "a value that makes the rank sleep for an hour")
               .optional(),
           tally::param("compute_sleep", tally::ParamType::Float,
                        "seconds compute() sleeps before computing (a long, live computation)")
               .optional(),
           tally::param("batch_sleep", tally::ParamType::Float,
                        "seconds each batch holding a value >= slow_from sleeps (a slow reader)")
               .optional(),
           tally::param("slow_from", tally::ParamType::Int, "see batch_sleep (default: any value)")
               .optional(),
           tally::param("once_file", tally::ParamType::Path,
                        "kill_on and exit_on fire only while this file does not exist, and "
                        "create it")
               .optional()},
          {{"x", "i64[N] values", true}}),
      tally::metric<CountProbe>(
          "CountProbe", "Test probe: counts of x mod bins, a state reduced rather than gathered",
          {tally::param("bins", tally::ParamType::Int, "how many counts").def(4),
           tally::param("corrupt", tally::ParamType::Int,
                        "a value that overwrites the first count after each batch")
               .optional(),
           tally::param("bins_by_rank", tally::ParamType::Bool,
                        "adds the MPI rank to bins (a reduced size that differs by rank)")
               .def(false)},
          {{"x", "i64[N] values (>= 0)", true}})};
})
