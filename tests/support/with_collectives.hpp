// A dist backend with the engine's object collectives over it, used like a pointer to the
// collectives (`b->all_gather_object(...)`); `b.backend` is the plugin's transport itself.
#pragma once

#include <memory>
#include <utility>

#include "tally/collectives.hpp"
#include "tally/sdk/dist_backend.hpp"

namespace tally::test {

struct WithCollectives {
  WithCollectives() = default;
  explicit WithCollectives(std::shared_ptr<DistBackend> b)
      : backend(std::move(b)), coll(std::make_unique<Collectives>(*backend)) {}
  Collectives* operator->() const { return coll.get(); }
  Collectives& operator*() const { return *coll; }
  explicit operator bool() const { return backend != nullptr; }

  std::shared_ptr<DistBackend> backend;
  std::unique_ptr<Collectives> coll;  // declared after `backend`: destroyed first
};

}  // namespace tally::test
