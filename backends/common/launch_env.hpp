// The launcher's environment for the gloo and nccl backends: libtally's one table and precedence
// (tally/launch.hpp), under the names these backends have used since before it existed.
#pragma once

#include <string_view>

#include "tally/launch.hpp"

namespace tally_launch {

using tally::launch::GetEnv;
using tally::launch::LaunchEnv;
using tally::launch::process_env;

/// tally::launch::read: ConfigError messages start with `who` ("gloo backend: ").
inline LaunchEnv read_launch_env(const GetEnv& env, std::string_view who) {
  return tally::launch::read(env, who);
}

}  // namespace tally_launch
