// For host programs that use MPI themselves: an evaluator on the host's own communicator.
// Header-only and included by no other tally header (it includes <mpi.h>: only a program that
// links MPI includes it); part of libtally's public API, not of the plugin SDK.
//
//   MPI_Comm half;                                   // the host's communicator
//   MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
//   tally::EvaluatorOptions options;
//   options.backend = tally::mpi_backend(half);      // ranks and world size are half's
//   auto ev = tally::Evaluator::from_yaml(yaml, std::move(options));
#pragma once

#include <mpi.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

#include "tally/evaluator.hpp"
#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/value.hpp"

namespace tally {

/// An mpi backend (the built-in plugin, found as make_backend() finds it) on a duplicate of
/// `comm`, for EvaluatorOptions::backend. MPI must be initialised, by the host program (with
/// MPI_THREAD_SERIALIZED or more for the heartbeats that keep long work from reading as a hang;
/// with less, every wait has the plain backend.timeout). The backend's traffic never mixes with
/// the host's on `comm`; it never frees `comm` and never finalises the host's MPI, and the host
/// may free `comm` once this returns. Collective over `comm` (MPI_Comm_dup). `params`: the mpi
/// backend's other parameters (timeout, chunk_bytes). ConfigError for a communicator MPI does not
/// know or an intercommunicator.
inline std::shared_ptr<DistBackend> mpi_backend(
    MPI_Comm comm, Value::Map params = {},
    const std::vector<std::filesystem::path>& plugin_paths = {}) {
  std::erase_if(params, [](const auto& kv) { return kv.first == "communicator"; });
  params.emplace_back("communicator", Value(static_cast<std::int64_t>(MPI_Comm_c2f(comm))));
  return make_backend("mpi", params, plugin_paths);
}

}  // namespace tally
