// DistBackend holds no data and no algorithms (those are tally::Collectives'): its key function
// and the default of the one optional hook.
#include "tally/sdk/dist_backend.hpp"

namespace tally {

DistBackend::~DistBackend() = default;

void* DistBackend::find_primitive(std::string_view) { return nullptr; }

}  // namespace tally
