// A library named like a plugin that exports no entry.
extern "C" __attribute__((visibility("default"))) int tally_not_the_entry() { return 42; }
