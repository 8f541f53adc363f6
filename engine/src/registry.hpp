// The registry is public API: tally/registry.hpp. This name stays for the engine's and the
// tests' includes.
#pragma once

#include "tally/registry.hpp"
