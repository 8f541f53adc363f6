// A test plugin of ABI {this major}.999: see abi_minor.inc.
#define TALLY_TEST_ABI_MINOR 999
#include "abi_minor.inc"
