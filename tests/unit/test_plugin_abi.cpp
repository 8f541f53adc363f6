// The plugin ABI version rule (docs/abi.md), against real plugin files built for the purpose
// (tests/plugins/abi_minor*.cpp): a plugin of this tally's major version loads when it was built
// for a minor up to this tally's; a newer minor, or another major, is refused from the file alone,
// before any of the plugin's code runs, with a message naming the file and both versions.
#include <dlfcn.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "plugin_abi.hpp"
#include "registry.hpp"
#include "support/process.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/version.hpp"

namespace fs = std::filesystem;
using tally::AbiLevel;
using tally::ConfigError;
using tally::kAbiMinor;
using tally::kAbiVersion;

namespace {

const fs::path kTestPlugins = TALLY_TEST_PLUGIN_DIR;

fs::path plugin(const std::string& name) {
  return kTestPlugins / name / fmt::format("libtally_{}.so", name);
}

// The check's message, or "" when the plugin passes for an engine of ABI `engine`.
std::string abi_error(const fs::path& so, AbiLevel engine) {
  try {
    tally::check_plugin_abi(so, engine);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string load_error(const fs::path& folder) {
  try {
    tally::Registry::load({folder});
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

bool is_loaded(const fs::path& so) {
  void* h = ::dlopen(so.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return false;
  ::dlclose(h);
  return true;
}

}  // namespace

TEST(PluginAbi, TallyPluginExportsBothMarkersOfThisTally) {
  // Every built-in plugin and the testkit carry tally_abi_v<major> and tally_abi_minor_<minor>:
  // they load, and the markers are there to read.
  const auto reg = tally::Registry::load({kTestPlugins / "testkit"});
  const fs::path testkit = kTestPlugins / "testkit" / "libtally_testkit.so";
  void* h = ::dlopen(testkit.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr) << "the registry holds the library loaded";
  EXPECT_NE(::dlsym(h, fmt::format("tally_abi_v{}", kAbiVersion).c_str()), nullptr);
  EXPECT_NE(::dlsym(h, fmt::format("tally_abi_minor_{}", kAbiMinor).c_str()), nullptr);
  ::dlclose(h);
  EXPECT_EQ(abi_error(testkit, {}), "");
}

// The same major and an older or equal minor: the plugin loads, whatever minor is newer here.
TEST(PluginAbi, SameMajorOlderOrEqualMinorLoads) {
  for (const std::uint32_t engine_minor : {3u, 4u, 17u, 999u}) {
    SCOPED_TRACE(engine_minor);
    EXPECT_EQ(abi_error(plugin("abi_minor_3"), {kAbiVersion, engine_minor}), "");
    EXPECT_EQ(abi_error(plugin("abi_no_minor"), {kAbiVersion, engine_minor}), "");
  }
  // No minor marker counts as minor 0: it loads into this tally, for real.
  EXPECT_EQ(abi_error(plugin("abi_no_minor"), {kAbiVersion, 0}), "");
  // Loaded for real: its static constructor ran (it writes TALLY_TEST_LOAD_MARKER).
  tally::test::TempDir dir;
  const fs::path marker = dir / "constructor-ran";
  ::setenv("TALLY_TEST_LOAD_MARKER", marker.c_str(), 1);
  EXPECT_EQ(load_error(kTestPlugins / "abi_no_minor"), "");
  ::unsetenv("TALLY_TEST_LOAD_MARKER");
  EXPECT_TRUE(fs::exists(marker)) << "the plugin was not loaded";
}

// A newer minor may use what this tally lacks: refused, naming the file and both versions.
TEST(PluginAbi, NewerMinorIsRefusedNamingBothVersions) {
  for (const std::uint32_t engine_minor : {0u, 1u, 2u}) {
    SCOPED_TRACE(engine_minor);
    const auto msg = abi_error(plugin("abi_minor_3"), {kAbiVersion, engine_minor});
    EXPECT_NE(msg.find("libtally_abi_minor_3.so' was built for plugin ABI " +
                       fmt::format("{}.3, newer than this tally {}'s ABI {}.{}", kAbiVersion,
                                   tally::kVersion, kAbiVersion, engine_minor)),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("rebuild the plugin against this tally"), std::string::npos) << msg;
  }
  // Through the registry, with this tally's own ABI: refused before the library is loaded (its
  // static constructor, which writes TALLY_TEST_LOAD_MARKER, never runs).
  tally::test::TempDir dir;
  const fs::path marker = dir / "constructor-ran";
  ::setenv("TALLY_TEST_LOAD_MARKER", marker.c_str(), 1);
  const auto msg = load_error(kTestPlugins / "abi_minor_999");
  ::unsetenv("TALLY_TEST_LOAD_MARKER");
  EXPECT_NE(msg.find(fmt::format("libtally_abi_minor_999.so' was built for plugin ABI {}.999, "
                                 "newer than this tally {}'s ABI {}.{}",
                                 kAbiVersion, tally::kVersion, kAbiVersion, kAbiMinor)),
            std::string::npos)
      << msg;
  EXPECT_FALSE(fs::exists(marker)) << "the plugin's static constructor ran";
  EXPECT_FALSE(is_loaded(plugin("abi_minor_999")));
}

// Another major is refused whatever the minors say: older or newer, with or without a minor.
TEST(PluginAbi, OtherMajorIsRefused) {
  for (const std::uint32_t engine_major : {kAbiVersion - 1, kAbiVersion + 1, kAbiVersion + 7}) {
    SCOPED_TRACE(engine_major);
    for (const char* name : {"abi_minor_3", "abi_no_minor"}) {
      const auto msg = abi_error(plugin(name), {engine_major, 999});
      EXPECT_NE(msg.find(fmt::format("libtally_{}.so' was built for plugin ABI version {}, this "
                                     "tally {} uses ABI version {}",
                                     name, kAbiVersion, tally::kVersion, engine_major)),
                std::string::npos)
          << msg;
    }
  }
  // bad_abi exports tally_abi_v999: refused by this tally's own registry.
  const auto msg = load_error(kTestPlugins / "bad_abi");
  EXPECT_NE(msg.find(fmt::format("was built for plugin ABI version 999, this tally {} uses ABI "
                                 "version {}",
                                 tally::kVersion, kAbiVersion)),
            std::string::npos)
      << msg;
}
