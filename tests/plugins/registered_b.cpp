// The second file of the plugin 'registered' (registered_a.cpp): two components, registered in
// the order B2, B1.
#include "registered.hpp"

namespace {

tally::ComponentInfo reg_b1() { return tally::metric<RegisteredProbe>("RegB1", "file b", {}, {}); }
tally::ComponentInfo reg_b2() {
  return tally::with_results(tally::metric<RegisteredProbe>("RegB2", "file b", {}, {}),
                             {{"n", tally::Better::Lower, tally::Plot::None, "samples"}});
}
TALLY_COMPONENT(reg_b2)
TALLY_COMPONENT(reg_b1)

}  // namespace
