// A test plugin of this ABI major with no minor marker (counts as minor 0): see abi_minor.inc.
#include "abi_minor.inc"
