// The shared pieces of the edit-based text metrics (see edit_ops.hpp).
#include "edit_ops.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace tally::text {

void JiwerWords::operator()(std::string_view s, std::string& buf,
                            std::vector<std::string_view>& out) const {
  std::u32string cps;
  decode_utf8(s, cps);
  buf.clear();
  for (std::size_t i = 0; i < cps.size();) {
    if (py_isspace(cps[i]) && i + 1 < cps.size() && py_isspace(cps[i + 1])) {
      while (i < cps.size() && py_isspace(cps[i])) ++i;
      buf += ' ';
    } else {
      append_utf8(cps[i++], buf);
    }
  }
  const std::string_view stripped = py_strip(buf);
  std::size_t start = 0;
  for (std::size_t i = 0; i <= stripped.size(); ++i) {
    if (i == stripped.size() || stripped[i] == ' ') {
      if (i > start) out.push_back(stripped.substr(start, i - start));
      start = i + 1;
    }
  }
}

EditCounts RapidfuzzAlignment::count(const std::vector<std::int32_t>& a,
                                     const std::vector<std::int32_t>& b, std::int32_t alphabet) {
  const auto la = static_cast<std::int64_t>(a.size());
  const auto lb = static_cast<std::int64_t>(b.size());
  std::int64_t prefix = 0, suffix = 0;
  while (prefix < la && prefix < lb &&
         a[static_cast<std::size_t>(prefix)] == b[static_cast<std::size_t>(prefix)])
    ++prefix;
  while (suffix < la - prefix && suffix < lb - prefix &&
         a[static_cast<std::size_t>(la - 1 - suffix)] ==
             b[static_cast<std::size_t>(lb - 1 - suffix)])
    ++suffix;
  const std::int64_t m = la - prefix - suffix, n = lb - prefix - suffix;
  EditCounts c;
  if (m == 0 || n == 0) {
    c.deletions = m;
    c.insertions = n;
    return c;
  }
  const auto s1 = [&](std::int64_t i) { return a[static_cast<std::size_t>(prefix + i)]; };
  const auto s2 = [&](std::int64_t j) { return b[static_cast<std::size_t>(prefix + j)]; };
  const auto words = static_cast<std::size_t>((m + 63) / 64);
  if (words * static_cast<std::size_t>(n) > (std::size_t{1} << 22))
    throw InputError(
        "a reference and hypothesis pair is too long to align (more than 2^28 word pairs "
        "after the common prefix and suffix)");
  const std::size_t need = static_cast<std::size_t>(alphabet) * words;
  if (peq_.size() < need) peq_.resize(need, 0);
  for (std::int64_t i = 0; i < m; ++i)
    peq_[static_cast<std::size_t>(s1(i)) * words + static_cast<std::size_t>(i / 64)] |=
        std::uint64_t{1} << (i % 64);
  vp_.assign(words, ~std::uint64_t{0});
  vn_.assign(words, 0);
  rows_vp_.resize(words * static_cast<std::size_t>(n));
  rows_vn_.resize(words * static_cast<std::size_t>(n));
  // Hyyrö's algorithm over blocks of 64 (as Levenshtein::distance); the rows of VP/VN are the
  // vertical deltas of the DP table, whatever the formulation.
  for (std::int64_t j = 0; j < n; ++j) {
    const std::uint64_t* pm = peq_.data() + static_cast<std::size_t>(s2(j)) * words;
    std::uint64_t hp_carry = 1, hn_carry = 0;
    for (std::size_t w = 0; w < words; ++w) {
      const std::uint64_t vn = vn_[w], vp = vp_[w];
      const std::uint64_t x = pm[w] | hn_carry;
      const std::uint64_t d0 = (((x & vp) + vp) ^ vp) | x | vn;
      std::uint64_t hp = vn | ~(d0 | vp);
      std::uint64_t hn = d0 & vp;
      const std::uint64_t hp_in = hp_carry, hn_in = hn_carry;
      hp_carry = hp >> 63;
      hn_carry = hn >> 63;
      hp = (hp << 1) | hp_in;
      hn = (hn << 1) | hn_in;
      vp_[w] = hn | ~(d0 | hp);
      vn_[w] = hp & d0;
    }
    std::copy(vp_.begin(), vp_.end(), rows_vp_.begin() + static_cast<std::ptrdiff_t>(j * words));
    std::copy(vn_.begin(), vn_.end(), rows_vn_.begin() + static_cast<std::ptrdiff_t>(j * words));
  }
  for (std::int64_t i = 0; i < m; ++i)
    peq_[static_cast<std::size_t>(s1(i)) * words + static_cast<std::size_t>(i / 64)] = 0;
  const auto bit = [&](const std::vector<std::uint64_t>& rows, std::int64_t row, std::int64_t col) {
    const std::uint64_t word =
        rows[static_cast<std::size_t>(row) * words + static_cast<std::size_t>(col / 64)];
    return ((word >> (col % 64)) & 1) != 0;
  };
  std::int64_t col = m, row = n;
  while (row != 0 && col != 0) {
    if (bit(rows_vp_, row - 1, col - 1)) {
      ++c.deletions;
      --col;
    } else {
      --row;
      if (row != 0 && bit(rows_vn_, row - 1, col - 1)) {
        ++c.insertions;
      } else {
        --col;
        if (s1(col) != s2(row)) ++c.substitutions;
      }
    }
  }
  c.deletions += col;
  c.insertions += row;
  return c;
}

namespace {
constexpr std::int64_t kInf = 10000000000000000;  // sacrebleu's _INT_INFINITY, int(1e16)
}

BeamEditDistance::Band BeamEditDistance::band(std::int64_t i, std::int64_t n_h,
                                              std::int64_t n_r) const {
  const double ratio = n_h > 0 ? static_cast<double>(n_r) / static_cast<double>(n_h) : 1.0;
  const auto beam = static_cast<std::int64_t>(ratio / 2 > 25 ? std::ceil(ratio / 2 + 25) : 25);
  const auto diag = static_cast<std::int64_t>(std::floor(static_cast<double>(i) * ratio));
  const std::int64_t lo = std::max<std::int64_t>(0, diag - beam);
  const std::int64_t hi = i == n_h ? n_r + 1 : std::min<std::int64_t>(n_r + 1, diag + beam);
  return {lo, hi};
}

std::int64_t BeamEditDistance::distance(const std::vector<std::int32_t>& h,
                                        const std::vector<std::int32_t>& r) {
  const auto n_h = static_cast<std::int64_t>(h.size());
  const auto n_r = static_cast<std::int64_t>(r.size());
  const auto w = static_cast<std::size_t>(n_r + 1);
  prev_.resize(w);
  cur_.resize(w);
  for (std::size_t j = 0; j < w; ++j) prev_[j] = static_cast<std::int64_t>(j);
  for (std::int64_t i = 1; i <= n_h; ++i) {
    std::fill(cur_.begin(), cur_.end(), kInf);
    const Band b = band(i, n_h, n_r);
    const std::int32_t hi_tok = h[static_cast<std::size_t>(i - 1)];
    for (std::int64_t j = b.lo; j < b.hi; ++j) {
      const auto ju = static_cast<std::size_t>(j);
      if (j == 0) {
        cur_[0] = prev_[0] + 1;
        continue;
      }
      std::int64_t best = kInf;
      const std::int64_t diag = prev_[ju - 1] + (hi_tok == r[ju - 1] ? 0 : sub_);
      if (best > diag) best = diag;
      if (best > prev_[ju] + 1) best = prev_[ju] + 1;
      if (best > cur_[ju - 1] + 1) best = cur_[ju - 1] + 1;
      cur_[ju] = best;
    }
    prev_.swap(cur_);
  }
  return prev_[static_cast<std::size_t>(n_r)];
}

std::int64_t BeamEditDistance::traced(const std::vector<std::int32_t>& h,
                                      const std::vector<std::int32_t>& r, std::vector<Op>& trace) {
  const auto n_h = static_cast<std::int64_t>(h.size());
  const auto n_r = static_cast<std::int64_t>(r.size());
  const auto w = static_cast<std::size_t>(n_r + 1);
  const std::size_t cells = static_cast<std::size_t>(n_h + 1) * w;
  if (cells > (std::size_t{1} << 24))
    throw InputError(
        "a hypothesis and reference pair is too long for TER's edit table (more "
        "than 2^24 word pairs)");
  // Rows of the previous hypothesis that this one shares as a prefix stay valid (same reference,
  // same length: the same beam).
  std::int64_t start = 0;
  if (last_h_.size() == h.size() && cost_.size() == cells)
    while (start < n_h &&
           last_h_[static_cast<std::size_t>(start)] == h[static_cast<std::size_t>(start)])
      ++start;
  if (start == 0) {
    cost_.assign(cells, kInf);
    op_.assign(cells, kUndef);
    for (std::size_t j = 0; j < w; ++j) cost_[j] = static_cast<std::int64_t>(j), op_[j] = kIns;
  } else {
    std::fill(cost_.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(start + 1) * w),
              cost_.end(), kInf);
    std::fill(op_.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(start + 1) * w),
              op_.end(), kUndef);
  }
  for (std::int64_t i = start + 1; i <= n_h; ++i) {
    const Band b = band(i, n_h, n_r);
    const std::int32_t hi_tok = h[static_cast<std::size_t>(i - 1)];
    std::int64_t* row = cost_.data() + static_cast<std::size_t>(i) * w;
    const std::int64_t* up = row - w;
    Op* ops = op_.data() + static_cast<std::size_t>(i) * w;
    for (std::int64_t j = b.lo; j < b.hi; ++j) {
      const auto ju = static_cast<std::size_t>(j);
      if (j == 0) {
        row[0] = up[0] + 1;
        ops[0] = kDel;
        continue;
      }
      const bool same = hi_tok == r[ju - 1];
      const std::int64_t diag = up[ju - 1] + (same ? 0 : sub_);
      if (row[ju] > diag) row[ju] = diag, ops[ju] = same ? kNop : kSub;
      if (row[ju] > up[ju] + 1) row[ju] = up[ju] + 1, ops[ju] = kDel;
      if (row[ju] > row[ju - 1] + 1) row[ju] = row[ju - 1] + 1, ops[ju] = kIns;
    }
  }
  last_h_ = h;
  trace.clear();
  std::int64_t i = n_h, j = n_r;
  while (i > 0 || j > 0) {
    const Op op = op_[static_cast<std::size_t>(i) * w + static_cast<std::size_t>(j)];
    trace.push_back(op);
    if (op == kNop || op == kSub) {
      --i, --j;
    } else if (op == kIns) {
      --j;
    } else if (op == kDel) {
      --i;
    } else {
      throw RuntimeError("TER: the edit table has no path (an undefined cell)");
    }
  }
  std::reverse(trace.begin(), trace.end());
  return cost_[cells - 1];
}

}  // namespace tally::text
