// The rank statistics of SpearmanCorrCoef and KendallRankCorrCoef (ranks.hpp): stable LSD radix
// sorts of the doubles' bits (a fixed number of linear passes, where a comparison sort of 10 M
// values makes ~23 passes with unpredictable branches), the sums of average ranks, and a
// branchless merge-sort inversion count. The samples are sorted by value with their index (or, for
// Kendall's second sort, their y rank) as payload, so that no pass gathers or scatters the doubles
// at random but one.
#include "ranks.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

namespace tally::regression {

void* big_alloc(std::size_t bytes, std::size_t& mapped_bytes, void*& aligned) {
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  if (bytes < 2 * kHuge) {
    void* p = ::operator new(bytes == 0 ? 1 : bytes);
    mapped_bytes = 0;  // from operator new
    aligned = p;
    return p;
  }
  // One huge page more than needed, so that the array can start on a huge-page boundary.
  const std::size_t len = (bytes + kHuge - 1) / kHuge * kHuge + kHuge;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t start = (at + kHuge - 1) & ~(std::uintptr_t{kHuge} - 1);
  aligned = reinterpret_cast<void*>(start);
  // Advice only: without huge pages (THP off) the array works the same, slower.
  madvise(aligned, len - (start - at), MADV_HUGEPAGE);
  mapped_bytes = len;
  return p;
}

void big_free(void* base, std::size_t mapped_bytes) {
  if (mapped_bytes == 0)
    ::operator delete(base);
  else
    munmap(base, mapped_bytes);
}

namespace {

constexpr unsigned kBits = 11, kPasses = 6;
constexpr std::size_t kBuckets = std::size_t{1} << kBits;
constexpr std::uint64_t kMask = kBuckets - 1;
/// The digit counts of every pass (n <= 2^31 fits 32 bits).
using Hist = std::vector<std::uint32_t>;

/// The bits of x as an unsigned integer that sorts as x does (-0.0 as 0.0; no NaN).
inline std::uint64_t sortable(double x) {
  if (x == 0.0) x = 0.0;
  const auto b = std::bit_cast<std::uint64_t>(x);
  return (b >> 63) != 0 ? ~b : b | (std::uint64_t{1} << 63);
}

inline void count(std::uint32_t* h, std::uint64_t key) {
  for (unsigned pass = 0; pass < kPasses; ++pass)
    ++h[pass * kBuckets + ((key >> (pass * kBits)) & kMask)];
}

/// Sorts s.key[cur][0..n) stably, s.pay[cur] moving along; h: the digit counts of the keys (every
/// pass). Passes whose digit is the same for every key are skipped. Returns which of the two
/// arrays holds the result.
unsigned radix_sort(RankScratch& s, unsigned cur, std::size_t n, Hist& h) {
  if (n == 0) return cur;
  for (unsigned pass = 0; pass < kPasses; ++pass) {
    std::uint64_t* k = s.key[cur].data();
    std::uint32_t* p = s.pay[cur].data();
    std::uint32_t* hp = h.data() + pass * kBuckets;
    const unsigned shift = pass * kBits;
    if (hp[(k[0] >> shift) & kMask] == n) continue;
    std::uint32_t at = 0;
    for (std::size_t b = 0; b < kBuckets; ++b) {
      const std::uint32_t c = hp[b];
      hp[b] = at;
      at += c;
    }
    std::uint64_t* ko = s.key[cur ^ 1].data();
    std::uint32_t* po = s.pay[cur ^ 1].data();
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t key = k[i];
      const std::uint32_t to = hp[(key >> shift) & kMask]++;
      ko[to] = key;
      po[to] = p[i];
    }
    cur ^= 1;
  }
  return cur;
}

/// Sorts v[i * stride] (i < n) with i as payload: returns which of s.key / s.pay hold the sorted
/// keys and their indices.
unsigned sort_doubles(const double* v, std::size_t n, std::size_t stride, RankScratch& s, Hist& h) {
  std::fill(h.begin(), h.end(), 0);
  std::uint64_t* k = s.key[0].data();
  std::uint32_t* p = s.pay[0].data();
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t key = sortable(v[i * stride]);
    k[i] = key;
    p[i] = static_cast<std::uint32_t>(i);
    count(h.data(), key);
  }
  return radix_sort(s, 0, n, h);
}

/// The end of the run of keys equal to k[i] from i.
inline std::size_t run_end(const std::uint64_t* k, std::size_t i, std::size_t n) {
  std::size_t j = i + 1;
  while (j < n && k[j] == k[i]) ++j;
  return j;
}

/// 1 when b < a, else 0, computed (g++ turns a comparison into a branch, mispredicted half the
/// time in a merge).
inline std::size_t below(std::uint32_t b, std::uint32_t a) {
  return static_cast<std::size_t>((std::uint64_t{b} - std::uint64_t{a}) >> 63);
}
/// pick ? b : a, computed.
inline std::uint32_t pick(std::uint32_t a, std::uint32_t b, std::size_t pick) {
  return a ^ ((a ^ b) & (0U - static_cast<std::uint32_t>(pick)));
}

/// The number of pairs i < j with v[i] > v[j] (bottom-up merge sort, buf as large as v; v and
/// buf are overwritten).
std::int64_t count_inversions(std::uint32_t* v, std::uint32_t* buf, std::size_t n) {
  constexpr std::size_t kRun = 16;
  std::int64_t inv = 0;
  // Insertion sort of short runs: each shift is one inversion.
  for (std::size_t b = 0; b < n; b += kRun) {
    const std::size_t e = std::min(n, b + kRun);
    for (std::size_t i = b + 1; i < e; ++i) {
      const std::uint32_t x = v[i];
      std::size_t j = i;
      while (j > b && v[j - 1] > x) {
        v[j] = v[j - 1];
        --j;
      }
      inv += static_cast<std::int64_t>(i - j);
      v[j] = x;
    }
  }
  for (std::size_t width = kRun; width < n; width *= 2) {
    for (std::size_t lo = 0; lo < n; lo += 2 * width) {
      const std::size_t mid = std::min(n, lo + width), hi = std::min(n, lo + 2 * width);
      if (mid == hi || v[mid - 1] <= v[mid]) {  // in order already: no inversion
        std::memcpy(buf + lo, v + lo, (hi - lo) * sizeof(std::uint32_t));
        continue;
      }
      // Merged from both ends at once (two independent chains of loads and compares), each
      // step branchless. Front: the smaller head goes out (the left one of equal heads); taking
      // the right one b jumps over the (mid - i) left values greater than b. Back: the greater
      // tail goes out (the right one of equal tails); taking the right one b, the (mid - pe) left
      // values the back took are the greater than b. [i, pe) and [j, qe) are what is left of the
      // halves; a round runs as many steps as neither chain can run out in.
      std::size_t i = lo, j = mid, o = lo, pe = mid, qe = hi, e = hi;
      std::int64_t front = 0, back = 0;
      for (std::size_t steps; (steps = std::min(pe - i, qe - j) / 2) != 0;) {
        for (; steps != 0; --steps) {
          const std::uint32_t a = v[i], b = v[j];
          const std::size_t right = below(b, a);
          buf[o++] = pick(a, b, right);
          front += static_cast<std::int64_t>((mid - i) & (std::size_t{0} - right));
          i += 1 - right;
          j += right;
          const std::uint32_t c = v[pe - 1], d = v[qe - 1];
          const std::size_t left = below(d, c);
          buf[--e] = pick(d, c, left);
          back += static_cast<std::int64_t>((mid - pe) & (left - 1));
          pe -= left;
          qe -= 1 - left;
        }
      }
      inv += front + back;
      // What is left, merged from the front.
      for (std::size_t steps; (steps = std::min(pe - i, qe - j)) != 0;) {
        for (; steps != 0; --steps) {
          const std::uint32_t a = v[i], b = v[j];
          const std::size_t right = below(b, a);
          buf[o++] = pick(a, b, right);
          inv += static_cast<std::int64_t>((mid - i) & (std::size_t{0} - right));
          i += 1 - right;
          j += right;
        }
      }
      // One half is used up: a rest of the right half comes after every left value left.
      inv += static_cast<std::int64_t>((qe - j) * (mid - i));
      std::memcpy(buf + o, v + i, (pe - i) * sizeof(std::uint32_t));
      o += pe - i;
      std::memcpy(buf + o, v + j, (qe - j) * sizeof(std::uint32_t));
    }
    std::swap(v, buf);
  }
  return inv;
}

}  // namespace

SpearmanSums spearman_sums(const double* x, const double* y, std::size_t n, std::size_t stride,
                           RankScratch& s) {
  SpearmanSums r;
  if (n == 0) return r;
  s.reserve(n);
  Hist h(kPasses * kBuckets);
  // Twice the average rank of the run i..j-1 (1-based ranks i + 1 .. j) is i + 1 + j; each
  // sample's x rank is kept as i + j (< 2^32 for n <= 2^31), in sample order, in the payload
  // array the sort by x left free.
  unsigned c = sort_doubles(x, n, stride, s, h);
  {
    const std::uint64_t* k = s.key[c].data();
    const std::uint32_t* p = s.pay[c].data();
    std::uint32_t* rx = s.pay[c ^ 1].data();
    for (std::size_t i = 0; i < n;) {
      const std::size_t j = run_end(k, i, n);
      const auto rank = static_cast<std::uint32_t>(i + j);
      for (std::size_t t = i; t < j; ++t) rx[p[t]] = rank;
      const auto twice = static_cast<Int128>(i + j + 1);
      r.sxx += static_cast<Int128>(j - i) * twice * twice;
      i = j;
    }
  }
  // Then the y keys beside the x ranks, sorted: each run of equal y has its x ranks at hand.
  c ^= 1;
  std::fill(h.begin(), h.end(), 0);
  std::uint64_t* ky = s.key[c].data();
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t key = sortable(y[i * stride]);
    ky[i] = key;
    count(h.data(), key);
  }
  c = radix_sort(s, c, n, h);
  const std::uint64_t* k = s.key[c].data();
  const std::uint32_t* rx = s.pay[c].data();
  for (std::size_t i = 0; i < n;) {
    const std::size_t j = run_end(k, i, n);
    // The sum of the run's twice x ranks: < 2^31 * 2^32.
    std::uint64_t sum = j - i;
    for (std::size_t t = i; t < j; ++t) sum += rx[t];
    const auto twice = static_cast<Int128>(i + j + 1);
    r.syy += static_cast<Int128>(j - i) * twice * twice;
    r.sxy += twice * static_cast<Int128>(sum);
    i = j;
  }
  // The ranks 1..n, doubled: n (n + 1), tied or not.
  r.sx = r.sy = static_cast<Int128>(n) * static_cast<Int128>(n + 1);
  return r;
}

KendallCounts kendall_counts(const double* x, const double* y, std::size_t n, std::size_t stride,
                             RankScratch& s) {
  KendallCounts c;
  if (n == 0) return c;
  s.reserve(n);
  Hist h(kPasses * kBuckets);
  // Sort by y: the ties of y, and each sample's dense y rank, in y order, beside its x key.
  const unsigned cy = sort_doubles(y, n, stride, s, h);
  {
    // The x keys in sample order first (a sequential read of x, and its digit counts), so that
    // the gather into y order reads an array on huge pages (the samples' are not).
    std::uint64_t* xs = s.key[cy ^ 1].data();
    std::fill(h.begin(), h.end(), 0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t key = sortable(x[i * stride]);
      xs[i] = key;
      count(h.data(), key);
    }
    // The y keys are replaced by the x keys in place, once their run is known.
    std::uint64_t* k = s.key[cy].data();
    const std::uint32_t* iy = s.pay[cy].data();
    std::uint32_t* ry = s.pay[cy ^ 1].data();
    for (std::size_t i = 0; i < n;) {
      const std::size_t j = run_end(k, i, n);
      const auto rank = static_cast<std::uint32_t>(c.y.distinct);
      for (std::size_t t = i; t < j; ++t) {
        k[t] = xs[iy[t]];
        ry[t] = rank;
      }
      c.y.add(static_cast<std::int64_t>(j - i));
      i = j;
    }
    s.pay[0].swap(s.pay[1]);  // the y ranks beside the x keys (s.pay[cy])
  }
  // Then (stably) by x: the order of (x, y), the y ranks in it.
  const unsigned cx = radix_sort(s, cy, n, h);
  const std::uint64_t* k = s.key[cx].data();
  std::uint32_t* seq = s.pay[cx].data();
  for (std::size_t i = 0; i < n;) {
    const std::size_t j = run_end(k, i, n);
    c.x.add(static_cast<std::int64_t>(j - i));
    for (std::size_t a = i; a < j;) {
      std::size_t b = a + 1;
      while (b < j && seq[b] == seq[a]) ++b;
      const auto t = static_cast<std::int64_t>(b - a);
      c.joint += t * (t - 1) / 2;
      a = b;
    }
    i = j;
  }
  // The inversions of the y ranks in (x, y) order are the discordant pairs.
  c.discordant = count_inversions(seq, s.pay[cx ^ 1].data(), n);
  return c;
}

}  // namespace tally::regression
