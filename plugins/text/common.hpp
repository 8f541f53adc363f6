// Pieces the text metrics share: the text inputs and their checks, Python's string semantics
// (whitespace, split, lower/upper, as the references are Python), mmeval's and sacrebleu's
// tokenizers, n-gram ids, difflib's SequenceMatcher and a bit-parallel Levenshtein distance.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tally/sdk/batch.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"

namespace tally::text {

inline constexpr const char* kPred = "pred";
inline constexpr const char* kRefs = "refs";
inline constexpr const char* kGt = "gt";

// ---- inputs ---------------------------------------------------------------------------------

/// The text field `field`: InputError (naming the metric, the field and the sample) when it is
/// missing, not text, holds invalid UTF-8, or a sample holds fewer than `min_strings` or (when
/// `exactly`) another count than `min_strings` strings. `first_sample` numbers the samples.
const Text& text_input(const Batch& batch, const char* field, const InputChecker& check,
                       std::int64_t first_sample, std::size_t min_strings, bool exactly);

/// A prediction / ground truth: exactly one string per sample.
inline const Text& single_text(const Batch& batch, const char* field, const InputChecker& check,
                               std::int64_t first_sample) {
  return text_input(batch, field, check, first_sample, 1, true);
}
/// References: one or more strings per sample.
inline const Text& reference_lists(const Batch& batch, const char* field, const InputChecker& check,
                                   std::int64_t first_sample) {
  return text_input(batch, field, check, first_sample, 1, false);
}
/// InputError unless the two fields have the same number of samples.
void same_size(const Text& a, const char* field_a, const Text& b, const char* field_b,
               const InputChecker& check);

// ---- Python string semantics ----------------------------------------------------------------

/// The code points of valid UTF-8 `s` (checked by text_input), appended to `out`.
void decode_utf8(std::string_view s, std::u32string& out);
void append_utf8(char32_t c, std::string& out);
/// Python's str.isspace() (also what `\s` matches in re and what str.split()/strip() use).
bool py_isspace(char32_t c) noexcept;
/// Python's str.lower() / str.upper() (full Unicode case mapping, final sigma), through ICU.
std::string py_lower(std::string_view s);
std::string py_upper(std::string_view s);
/// Python's str.split() (no argument): views into `s`, split on py_isspace runs.
void py_split(std::string_view s, std::vector<std::string_view>& out);
/// `s` stripped of Python whitespace at both ends (str.strip()) / at the end (str.rstrip()).
std::string_view py_strip(std::string_view s);
std::string_view py_rstrip(std::string_view s);
/// Python's list(s): one view per code point.
void code_points(std::string_view s, std::vector<std::string_view>& out);
/// Whether `s` holds a code point in [U+4E00, U+9FA5] (mmeval's infer_language: 'cn').
bool has_cjk(std::string_view s);

/// mmeval's invalid_symbol: a regular expression whose matches are removed. The default
/// ('[^A-Za-z0-9\u4e00-\u9fa5]') is applied without the regex engine.
class SymbolFilter {
 public:
  explicit SymbolFilter(const std::string& pattern);
  ~SymbolFilter();
  SymbolFilter(const SymbolFilter&) = delete;
  SymbolFilter& operator=(const SymbolFilter&) = delete;
  /// `s` with every match of the pattern removed (Python's re.sub(pattern, '', s)).
  std::string remove(std::string_view s) const;

 private:
  struct Impl;
  Impl* impl_ = nullptr;
};
inline constexpr const char* kDefaultInvalidSymbol = "[^A-Za-z0-9\\u4e00-\\u9fa5]";

/// The filter of the parameter invalid_symbol; ConfigError naming the parameter when the pattern
/// does not compile.
inline std::unique_ptr<SymbolFilter> symbol_filter(const Params& p) {
  try {
    return std::make_unique<SymbolFilter>(p.get_string("invalid_symbol"));
  } catch (const ConfigError& e) {
    p.fail("invalid_symbol", e.what());
  }
}

// ---- sacrebleu tokenizers -------------------------------------------------------------------

enum class SacreTokenizer { T13a, None, Intl, Char };
/// sacrebleu's tokenizer `t` applied to `line` (a space-joined string, split by the caller).
std::string sacrebleu_tokenize(SacreTokenizer t, std::string_view line);

/// sacrebleu's TercomTokenizer (TER): lowercase unless case_sensitive, then the optional
/// normalisation (general, and the CJK ranges split to characters with asian_support) and
/// punctuation removal; returns the space-joined words.
struct TercomOptions {
  bool normalized = false, no_punct = false, asian_support = false, case_sensitive = false;
};
std::string tercom_tokenize(const TercomOptions& o, std::string_view sent);

// ---- sequences ------------------------------------------------------------------------------

/// Dense ids for strings (tokens), valid until clear().
class Interner {
 public:
  std::int32_t id(std::string_view s) {
    const auto [it, added] = ids_.try_emplace(s, static_cast<std::int32_t>(ids_.size()));
    (void)added;
    return it->second;
  }
  /// `ids` = the ids of `tokens`, in order.
  void ids_of(const std::vector<std::string_view>& tokens, std::vector<std::int32_t>& ids) {
    ids.clear();
    for (const auto t : tokens) ids.push_back(id(t));
  }
  std::int32_t size() const { return static_cast<std::int32_t>(ids_.size()); }
  void clear() { ids_.clear(); }

 private:
  std::unordered_map<std::string_view, std::int32_t> ids_;
};

/// Dense ids for n-grams, one order at a time: the id of the n-gram at i is that of the pair
/// (id of the (n-1)-gram at i, id of the token at i + n - 1), exact (no hashing collisions).
class NgramIds {
 public:
  /// Starts order n (> 1): ids of earlier orders are forgotten.
  void next_order() { table_.clear(); }
  /// `prev`: the (n-1)-gram ids of a sequence (length L - n + 2); `tokens`: its token ids
  /// (length L). Writes the n-gram ids (length L - n + 1, or 0) to `out`.
  void extend(const std::vector<std::int32_t>& prev, const std::vector<std::int32_t>& tokens, int n,
              std::vector<std::int32_t>& out);
  std::int32_t size() const { return static_cast<std::int32_t>(table_.size()); }

 private:
  std::unordered_map<std::uint64_t, std::int32_t> table_;
};

/// The token sequences of one sample, the hypothesis in slot 0 and its references after it, as
/// dense ids, and their n-grams one order at a time (BLEU, ROUGE-N). Scratch memory is kept
/// between samples.
class SampleNgrams {
 public:
  /// Starts a sample of `count` sequences. The caller then writes the tokens of each slot
  /// (tokens(s); buffer(s) can hold the text they view) and calls intern().
  void start(std::size_t count) {
    count_ = count;
    if (tokens_.size() < count) {
      tokens_.resize(count);
      buffers_.resize(count);
      ids_.resize(count);
      level_.resize(count);
    }
  }
  std::vector<std::string_view>& tokens(std::size_t s) { return tokens_[s]; }
  std::string& buffer(std::size_t s) { return buffers_[s]; }

  /// Token ids for every slot (one id space for the sample); level(s) becomes the unigrams.
  void intern() {
    interner_.clear();
    for (std::size_t s = 0; s < count_; ++s) {
      interner_.ids_of(tokens_[s], ids_[s]);
      level_[s] = ids_[s];
    }
  }
  const std::vector<std::int32_t>& ids(std::size_t s) const { return ids_[s]; }
  std::int32_t token_alphabet() const { return interner_.size(); }

  /// Moves every level(s) to the n-grams of order n: called for n = 1, 2, 3, ... in turn after
  /// intern() (n = 1 keeps the unigrams). Returns the number of distinct ids of order n (the ids
  /// of the levels are below it).
  std::int32_t order(int n) {
    if (n == 1) return interner_.size();
    ngrams_.next_order();
    for (std::size_t s = 0; s < count_; ++s) {
      ngrams_.extend(level_[s], ids_[s], n, scratch_);
      level_[s].swap(scratch_);
    }
    return ngrams_.size();
  }
  const std::vector<std::int32_t>& level(std::size_t s) const { return level_[s]; }

 private:
  std::size_t count_ = 0;
  std::vector<std::vector<std::string_view>> tokens_;
  std::vector<std::string> buffers_;
  std::vector<std::vector<std::int32_t>> ids_, level_;
  std::vector<std::int32_t> scratch_;
  Interner interner_;
  NgramIds ngrams_;
};

/// difflib.SequenceMatcher(None, a, b) (autojunk on): the total size of its matching blocks
/// (the sum over get_matching_blocks(), equally over the 'equal' opcodes). Ids are >= 0 and
/// < `alphabet`. Scratch memory is kept between calls.
class SequenceMatcher {
 public:
  std::int64_t matched(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b,
                       std::int32_t alphabet);

 private:
  struct Match {
    std::int64_t i, j, k;
  };
  Match longest(std::int64_t alo, std::int64_t ahi, std::int64_t blo, std::int64_t bhi);

  const std::vector<std::int32_t>* a_ = nullptr;
  const std::vector<std::int32_t>* b_ = nullptr;
  std::vector<std::int64_t> start_, pos_, cursor_;  // b2j as CSR: positions of id x in b
  std::vector<std::int64_t> len_[2], stamp_[2];
  std::int64_t row_ = 0;
  struct Span {
    std::int64_t alo, ahi, blo, bhi;
  };
  std::vector<Span> queue_;
};

/// Levenshtein distance between two id sequences (unit costs): Hyyrö's bit-parallel algorithm,
/// 64 cells a step, block-wise for long patterns. Scratch memory is kept between calls.
class Levenshtein {
 public:
  std::int64_t distance(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b,
                        std::int32_t alphabet);

 private:
  std::vector<std::uint64_t> peq_, vp_, vn_;
};

}  // namespace tally::text
