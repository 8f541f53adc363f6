#include "tally/sdk/error.hpp"

#include <utility>

#include "error_codes.hpp"
#include "tally/sdk/bytes.hpp"

namespace tally {

namespace {
const ErrorContext kNoContext{};
}  // namespace

// Out-of-line destructors are the key functions: the type_info of each error lives in libtally
// alone, so an error thrown in a plugin is caught by the engine's handlers.
Error::Error(const std::string& what) : std::runtime_error(what) {}
Error::Error(const std::string& what, ErrorContext context)
    : std::runtime_error(what),
      context_(std::make_shared<const ErrorContext>(std::move(context))) {}
const ErrorContext& Error::context() const noexcept { return context_ ? *context_ : kNoContext; }
Error::~Error() = default;
int Error::exit_code() const noexcept { return 1; }

ConfigError::~ConfigError() = default;
int ConfigError::exit_code() const noexcept { return 2; }

InputError::~InputError() = default;
int InputError::exit_code() const noexcept { return 2; }

RuntimeError::~RuntimeError() = default;
int RuntimeError::exit_code() const noexcept { return 1; }

void throw_error(int exit_code, const std::string& message, ErrorContext context) {
  if (exit_code == 2) throw InputError(message, std::move(context));
  throw RuntimeError(message, std::move(context));
}

Failure Failure::of(const std::exception& e, std::string_view prefix) {
  Failure f;
  f.message = std::string(prefix) + e.what();
  if (const auto* err = dynamic_cast<const Error*>(&e)) {
    f.exit_code = err->exit_code() == 0 ? 1 : err->exit_code();
    f.context = err->context();
  }
  return f;
}

void rethrow_with(const Error& e, const ErrorContext& more, const std::string& what) {
  ErrorContext c = e.context();
  const auto fill = [](std::string& mine, const std::string& theirs) {
    if (mine.empty()) mine = theirs;
  };
  fill(c.owner, more.owner);
  fill(c.metric, more.metric);
  fill(c.field, more.field);
  fill(c.file, more.file);
  fill(c.backend, more.backend);
  if (c.rank < 0) c.rank = more.rank;
  if (dynamic_cast<const StateFormatError*>(&e)) throw StateFormatError(what, std::move(c));
  if (dynamic_cast<const ConfigError*>(&e)) throw ConfigError(what, std::move(c));
  if (dynamic_cast<const InputError*>(&e)) throw InputError(what, std::move(c));
  if (dynamic_cast<const RuntimeError*>(&e)) throw RuntimeError(what, std::move(c));
  throw Error(what, std::move(c));
}

}  // namespace tally
