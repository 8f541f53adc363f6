// MPI ownership for backend plugins (mpi, and nccl's MPI bootstrap): initialise MPI only if the
// host program has not (MPI_THREAD_SERIALIZED: the mpi backend's heartbeat thread sends while the
// main thread computes, never at the same time as it), and finalise it only if a backend of this
// plugin initialised it, when the last backend holding it goes. Header-only: each plugin compiles
// its own copy (plugins hide their symbols), so the count is per plugin.
#pragma once

#include <dlfcn.h>
#include <mpi.h>

#include <mutex>
#include <string>

#include "tally/sdk/error.hpp"

namespace tally::mpi_session {

inline std::string error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    return "MPI error code " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}

// Plugins are dlopen'ed with RTLD_LOCAL, so libmpi (their dependency) is not in the global
// symbol scope. Several Open MPI components (mca_pml_ob1, mca_btl_tcp, mca_coll_han, ...) are not
// linked against libmpi / libopen-pal and resolve those symbols from the global scope; they load
// only because earlier components happen to drag libmpi into it. Promoting libmpi (and with it
// libopen-rte and libopen-pal) before MPI_Init removes that dependence on load order. The handle
// is never closed: libmpi must stay loaded after MPI_Finalize.
inline void make_libmpi_global() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&MPI_Init), &info) == 0 || info.dli_fname == nullptr) return;
  dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

/// Holds MPI initialised while its owner lives.
class Hold {
 public:
  Hold() = default;
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;
  ~Hold() { release(); }

  /// Initialises MPI if nobody has. `who` prefixes messages ("mpi backend"); `hint` says what to
  /// do when MPI was already finalised in this process.
  void acquire(const std::string& who, const std::string& hint) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized != 0)
      throw RuntimeError(who + ": MPI has already been finalised in this process and cannot be " +
                         "initialised again (" + hint + ")");
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized == 0) {
      make_libmpi_global();
      int provided = 0;
      const int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      if (code != MPI_SUCCESS)
        throw RuntimeError(who + ": MPI_Init_thread failed: " + error_string(code));
      s.initialised_here = true;
    }
    ++s.live;
    held_ = true;
  }

  /// Finalises MPI when this was the last hold and a hold initialised it. Never throws.
  void release() noexcept {
    if (!held_) return;
    held_ = false;
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (--s.live == 0 && s.initialised_here) {
      s.initialised_here = false;
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (finalized == 0) MPI_Finalize();
    }
  }

 private:
  struct State {
    std::mutex mutex;
    int live = 0;
    bool initialised_here = false;
  };
  static State& state() {
    static State s;
    return s;
  }
  bool held_ = false;
};

}  // namespace tally::mpi_session
