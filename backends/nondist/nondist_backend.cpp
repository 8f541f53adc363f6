// The `nondist` backend: one process, world size 1. Every collective is a copy (or nothing), so
// a run without MPI goes through exactly the same sync code as a distributed one.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"

namespace {

void move_bytes(const std::byte* send, std::size_t n, std::byte* recv) {
  if (n != 0 && send != recv) std::memmove(recv, send, n);
}

class NondistBackend final : public tally::DistBackend, public tally::VaryingAllGather {
 public:
  explicit NondistBackend(const tally::Params& params) {
    const std::int64_t chunk = params.get_int("chunk_bytes");
    if (chunk < 1) params.fail("chunk_bytes", "must be at least 1, got " + std::to_string(chunk));
    chunk_bytes_ = static_cast<std::size_t>(chunk);
  }

  std::string name() const override { return "nondist"; }
  bool is_initialized() const override { return true; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void barrier(const tally::CallOptions&) override {}
  std::size_t chunk_bytes() const override { return chunk_bytes_; }
  // One copy instead of the engine's pad-and-unpad fallback.
  void* find_primitive(std::string_view id) override {
    return tally::offer_primitives<tally::VaryingAllGather>(this, id);
  }

  void all_gather_equal(const std::byte* send, std::size_t n, std::byte* recv,
                        const tally::CallOptions&) override {
    move_bytes(send, n, recv);
  }
  void all_gather_varying(const std::byte* send, std::span<const std::size_t> counts,
                          std::byte* recv, const tally::CallOptions&) override {
    move_bytes(send, counts.empty() ? 0 : counts[0], recv);
  }
  void broadcast(std::byte*, std::size_t, int, const tally::CallOptions&) override {}

 private:
  std::size_t chunk_bytes_ = std::size_t{1} << 30;
};

std::vector<tally::ParamSpec> nondist_params() {
  return {tally::param("chunk_bytes", tally::ParamType::Int,
                       "bytes one transport call moves at most; larger objects go in rounds")
              .def(std::int64_t{1} << 30)};
}

}  // namespace

TALLY_PLUGIN("nondist", "0.1.0", [] {
  return std::vector<tally::ComponentInfo>{tally::backend<NondistBackend>(
      "nondist", "A single process (world size 1): collectives are local copies.",
      nondist_params())};
})
