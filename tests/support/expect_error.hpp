// The message of the exception a piece of code throws, for tests that check what an error says:
// error_of<E>(f) runs f and returns what() of the E it throws. No exception, or one of another
// type, is a test failure (and returns ""). EXPECT_HAS(message, part) expects `part` in it.
#pragma once

#include <exception>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "tally/sdk/error.hpp"

namespace tally::test {

template <class E = InputError>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no exception";
  return {};
}

}  // namespace tally::test

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << "message: " << (msg)
