#include "tally/sdk/metric.hpp"
#include "tally/sdk/reader.hpp"

namespace tally {

// Key functions: the vtables and type_info of the plugin interfaces live in libtally.
Metric::~Metric() = default;
Reader::~Reader() = default;
std::string Reader::layout() const { return {}; }
StableBatchReader::~StableBatchReader() = default;

}  // namespace tally
