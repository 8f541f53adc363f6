// What the edit-based text metrics share: jiwer's word transform, rapidfuzz's Levenshtein
// alignment (the hits, substitutions, deletions and insertions jiwer counts), the beam-limited
// Levenshtein table of sacrebleu's TER and torchmetrics' EditDistance, and the inputs and checks
// of the torchmetrics-named metrics (preds / target).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common.hpp"
#include "tally/sdk/exact_sum.hpp"

namespace tally::text {

inline constexpr const char* kPreds = "preds";
inline constexpr const char* kTarget = "target";

/// Exact float sums merged across ranks (the regression plugin's header-only accumulator).

/// jiwer's wer_default transform: RemoveMultipleSpaces (a run of two or more whitespace
/// characters becomes one space; a single tab stays), Strip, then s.split(' ') with empty words
/// dropped. The words are views into `buf`.
struct JiwerWords {
  void operator()(std::string_view s, std::string& buf, std::vector<std::string_view>& out) const;
};

/// The edit operations of rapidfuzz.distance.Levenshtein.editops(a, b) (rapidfuzz 3.14): the
/// common prefix and suffix removed, Hyyrö's bit-parallel table of the rest, and the back-trace
/// from the end that prefers a deletion, then an insertion, then a diagonal step. Which of the
/// optimal alignments it picks decides jiwer's hits. Scratch memory is kept between calls.
struct EditCounts {
  std::int64_t substitutions = 0, deletions = 0, insertions = 0;
};
class RapidfuzzAlignment {
 public:
  /// `a`: the reference ids, `b`: the hypothesis ids, each < `alphabet`.
  EditCounts count(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b,
                   std::int32_t alphabet);

 private:
  std::vector<std::uint64_t> peq_, vp_, vn_, rows_vp_, rows_vn_;
};

/// The beam-limited Levenshtein table of sacrebleu's lib_ter.BeamEditDistance and torchmetrics'
/// _LevenshteinEditDistance: the hypothesis `h` (rows) against the reference `r` (columns), only
/// the cells within a beam of 25 (wider when the length ratio is above 50) around the
/// pseudo-diagonal floor(i * len(r) / len(h)) computed, the others infinite, except the whole
/// last row. Ties prefer the diagonal, then a deletion (a row step), then an insertion.
class BeamEditDistance {
 public:
  enum Op : std::uint8_t { kNop, kSub, kDel, kIns, kUndef };

  explicit BeamEditDistance(std::int64_t substitution_cost = 1) : sub_(substitution_cost) {}

  /// The distance only, in O(len(r)) memory.
  std::int64_t distance(const std::vector<std::int32_t>& h, const std::vector<std::int32_t>& r);
  /// The distance and the trace (the ops from (0, 0) to the end), with the whole table: rows
  /// of the previous call's hypothesis that `h` shares as a prefix (same `r`) are reused, as
  /// sacrebleu's row cache does.
  std::int64_t traced(const std::vector<std::int32_t>& h, const std::vector<std::int32_t>& r,
                      std::vector<Op>& trace);
  /// Forgets the rows of the previous call (a new reference).
  void reset() { last_h_.clear(); }

 private:
  struct Band {
    std::int64_t lo, hi;
  };
  Band band(std::int64_t i, std::int64_t n_h, std::int64_t n_r) const;

  std::int64_t sub_;
  std::vector<std::int64_t> prev_, cur_;
  std::vector<std::int64_t> cost_;
  std::vector<Op> op_;
  std::vector<std::int32_t> last_h_;
};

}  // namespace tally::text
