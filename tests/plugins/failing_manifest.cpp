// A plugin whose manifest construction throws: the entry returns null and the registry says so.
#include <stdexcept>

#include "tally/sdk.hpp"

TALLY_PLUGIN("failing_manifest", "0.0.1", []() -> std::vector<tally::ComponentInfo> {
  throw std::runtime_error("cannot build components");
})
