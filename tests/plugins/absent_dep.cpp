// The library missing_dependency.cpp's plugin links, kept off every search path of the plugin.
int tally_test_absent_dependency() { return 0; }
