// A plugin that calls a function no library defines (a plugin built against a newer tally or a
// half-built library, as when its source list misses a file): the registry refuses it at load
// time, naming the file and the symbol, instead of the process dying at the first call.
#include "tally/sdk.hpp"

std::vector<tally::ComponentInfo> tally_test_components_nobody_defines();

TALLY_PLUGIN("undefined_symbol", "0.0.1", []() -> std::vector<tally::ComponentInfo> {
  return tally_test_components_nobody_defines();
})
