// A plugin that needs a shared library this machine does not have (as the mpi backend needs
// libmpi where Open MPI is not installed): it links libtally_test_absent_dep.so.1, built into a
// folder that is on no search path of the plugin's (tests/plugins/CMakeLists.txt). The registry
// lists it in unloaded() with the library's name; every other plugin loads.
#include "tally/sdk.hpp"

int tally_test_absent_dependency();

TALLY_PLUGIN("missing_dependency", "0.0.1", []() -> std::vector<tally::ComponentInfo> {
  return tally_test_absent_dependency() == 0 ? std::vector<tally::ComponentInfo>{}
                                             : std::vector<tally::ComponentInfo>{};
})
