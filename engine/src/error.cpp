#include "tally/error.hpp"

namespace tally {

// Out-of-line destructors are the key functions: the type_info of each error lives in libtally
// alone, so an error thrown in a plugin is caught by the engine's handlers.
Error::Error(const std::string& what) : std::runtime_error(what) {}
Error::~Error() = default;
int Error::exit_code() const noexcept { return 1; }

ConfigError::~ConfigError() = default;
int ConfigError::exit_code() const noexcept { return 2; }

InputError::~InputError() = default;
int InputError::exit_code() const noexcept { return 2; }

RuntimeError::~RuntimeError() = default;
int RuntimeError::exit_code() const noexcept { return 1; }

}  // namespace tally
