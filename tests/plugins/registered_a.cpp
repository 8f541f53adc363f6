// A plugin of two files whose components register themselves (TALLY_COMPONENT) next to their
// classes, and whose TALLY_PLUGIN line also lists one by hand: the entry gives the listed one
// first, then the registered ones in the order of the sources (this file, then registered_b.cpp)
// and, within a file, of its TALLY_COMPONENT lines.
#include "registered.hpp"

namespace {

tally::ComponentInfo reg_a() { return tally::metric<RegisteredProbe>("RegA", "file a", {}, {}); }
TALLY_COMPONENT(reg_a)

}  // namespace

TALLY_PLUGIN("registered", "0.0.1", [] {
  return std::vector<tally::ComponentInfo>{
      tally::metric<RegisteredProbe>("RegListed", "listed by hand", {}, {})};
})
