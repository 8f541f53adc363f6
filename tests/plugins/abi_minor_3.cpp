// A test plugin of ABI {this major}.3: see abi_minor.inc.
#define TALLY_TEST_ABI_MINOR 3
#include "abi_minor.inc"
