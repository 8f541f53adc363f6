// The engine's one way back from an exit code to an error: what a rank, the sync protocol or a
// checkpoint decision reported as (code, message) is thrown again on the ranks that learn of it.
#pragma once

#include <string>
#include <string_view>

#include "tally/sdk/error.hpp"

namespace tally {

/// Throws the error class exit code `exit_code` maps to (2: InputError, else RuntimeError) with
/// `message` and `context` (the rank that reported it, where known).
[[noreturn]] void throw_error(int exit_code, const std::string& message, ErrorContext context = {});

/// A failure kept to be reported later (by compute(), on every rank): its exit code (never 0),
/// message and where it happened, so that the error thrown then is the one caught, context and
/// all, not only its text.
struct Failure {
  int exit_code = 1;
  std::string message;
  ErrorContext context{};

  /// `e` as a failure: an Error's code and context, 1 and none for another exception;
  /// `prefix` before its message.
  static Failure of(const std::exception& e, std::string_view prefix = {});
  /// Throws it again (throw_error).
  [[noreturn]] void raise() const { throw_error(exit_code, message, context); }
};

}  // namespace tally
