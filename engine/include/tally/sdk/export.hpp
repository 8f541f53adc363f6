// Symbol visibility for libtally. Plugins are built with -fvisibility=hidden; every type whose
// identity must be shared across shared libraries (exceptions caught by the engine, polymorphic
// bases) is exported from libtally so that its type_info is unique in the process.
#pragma once

#if defined(_WIN32)
#define TALLY_API __declspec(dllexport)
#else
#define TALLY_API __attribute__((visibility("default")))
#endif
