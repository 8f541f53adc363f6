// Errors that cross the plugin boundary. The engine maps them to exit codes:
//   ConfigError, InputError -> 2 (usage, config or input error)
//   RuntimeError            -> 1 (the evaluation failed at run time)
// Messages are one line: what, where (file:line:column, field, rank), what was expected. Where it
// happened is also in the error's context (ErrorContext), for code: the engine and the Python
// module decide from it, never from the message's text.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "tally/sdk/export.hpp"

namespace tally {

/// Where an error happened, as far as the code that raised it or passed it on knew (an empty
/// string, or rank -1: not known).
struct ErrorContext {
  /// The component whose words the message starts with, as they name it: "metric 'top5'
  /// (Accuracy)" (Params::owner()). Set: the message names its component already.
  std::string owner{};
  /// The metric's label in the config ("top5").
  std::string metric{};
  /// A batch field, a parameter or a config key ("pred_scores", "num_classes", "data.path").
  std::string field{};
  /// A file, or a place in one: a config's "eval.yaml:7:5" (or "--set metrics.0.topk"), a data
  /// file, a checkpoint shard.
  std::string file{};
  /// The dist backend whose transport failed on this rank ("mpi"): not an error of the data or
  /// of a metric, and not one every rank agreed on.
  std::string backend{};
  /// The rank the error is about (its own failure, or the rank that sent a bad state).
  int rank = -1;
};

class TALLY_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what);
  Error(const std::string& what, ErrorContext context);
  ~Error() override;
  /// The process exit code this error maps to.
  virtual int exit_code() const noexcept;
  /// Where it happened (every entry empty when the thrower did not say).
  const ErrorContext& context() const noexcept;

 private:
  std::shared_ptr<const ErrorContext> context_;  // shared: copying an exception cannot throw
};

/// The configuration, the command line or a plugin library is wrong.
class TALLY_API ConfigError : public Error {
 public:
  using Error::Error;
  ~ConfigError() override;
  int exit_code() const noexcept override;
};

/// The data is wrong: a bad file, an out-of-range label, a NaN score, a shape mismatch.
class TALLY_API InputError : public Error {
 public:
  using Error::Error;
  ~InputError() override;
  int exit_code() const noexcept override;
};

/// The evaluation failed for a reason that is not the user's input (a collective failed, ...).
class TALLY_API RuntimeError : public Error {
 public:
  using Error::Error;
  ~RuntimeError() override;
  int exit_code() const noexcept override;
};

/// Throws `e` again as an error of its class (StateFormatError, ConfigError, InputError,
/// RuntimeError, Error) with the message `what` and the entries of its context that it left
/// empty taken from `more`: how the engine adds the metric, file or rank it knows.
[[noreturn]] TALLY_API void rethrow_with(const Error& e, const ErrorContext& more,
                                         const std::string& what);

}  // namespace tally
