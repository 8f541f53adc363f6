// Bounded whole-file reads and all-or-none outputs are public API: tally/file_io.hpp. This name
// stays for the engine's and the tests' includes.
#pragma once

#include "tally/file_io.hpp"
