// Errors that cross the plugin boundary. The engine maps them to exit codes:
//   ConfigError, InputError -> 2 (usage, config or input error)
//   RuntimeError            -> 1 (the evaluation failed at run time)
// Messages are one line: what, where (file:line:column, field, rank), what was expected.
#pragma once

#include <stdexcept>
#include <string>

#include "tally/export.hpp"

namespace tally {

class TALLY_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what);
  ~Error() override;
  /// The process exit code this error maps to.
  virtual int exit_code() const noexcept;
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

}  // namespace tally
