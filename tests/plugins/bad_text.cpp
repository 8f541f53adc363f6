// A plugin whose manifest text is not UTF-8 (a Latin-1 plugin name): the registry refuses it,
// naming the file and the text, instead of a JSON writer failing after a run.
#include "tally/sdk.hpp"

TALLY_PLUGIN("bad_text_caf\xe9", "0.0.1", [] { return std::vector<tally::ComponentInfo>{}; })
