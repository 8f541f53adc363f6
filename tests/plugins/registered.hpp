// The metric every component of the test plugin 'registered' makes: it counts samples.
#pragma once

#include "tally/sdk.hpp"

struct RegisteredState {
  std::int64_t n = 0;
  TALLY_STATE(sum(n))
};

class RegisteredProbe : public tally::TypedMetric<RegisteredState> {
 public:
  explicit RegisteredProbe(const tally::Params&) {}

 protected:
  void update(RegisteredState& s, const tally::Batch& b) override {
    s.n += static_cast<std::int64_t>(b.size());
  }
  tally::Value compute(const RegisteredState& s) const override {
    tally::Value out = tally::Value::map();
    out.set("n", s.n);
    return out;
  }
};
