// The plugin registry against real .so files: the built-in plugins, test plugins built for the
// purpose (tests/plugins), and files corrupted on the spot.
#include <dlfcn.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "config.hpp"
#include "registry.hpp"
#include "support/npy.hpp"
#include "support/process.hpp"
#include "tally/error.hpp"

namespace fs = std::filesystem;
using tally::ComponentKind;
using tally::ConfigError;
using tally::Registry;

namespace {

const fs::path kTestPlugins = TALLY_TEST_PLUGIN_DIR;

std::string load_error(const std::vector<fs::path>& paths) {
  try {
    Registry::load(paths);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

bool is_loaded(const fs::path& so) {
  void* h = ::dlopen(so.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return false;
  ::dlclose(h);
  return true;
}

}  // namespace

TEST(Registry, FindsBuiltInPluginsWithNoEnvironment) {
  ::unsetenv("TALLY_PLUGIN_PATH");
  const auto reg = Registry::load();
  EXPECT_EQ(fs::weakly_canonical(Registry::builtin_dir()),
            fs::weakly_canonical(fs::path(TALLY_PLUGIN_DIR)));
  const auto* nondist = reg.find(ComponentKind::Backend, "nondist");
  ASSERT_NE(nondist, nullptr);
  EXPECT_EQ(nondist->file.filename(), "libtally_nondist.so");
  EXPECT_NE(reg.find(ComponentKind::Metric, "Accuracy"), nullptr);
  EXPECT_NE(reg.find(ComponentKind::Reader, "npy"), nullptr);
  // mmeval's class name is an alias of SingleLabelMetric.
  EXPECT_EQ(reg.find(ComponentKind::Metric, "SingleLabelPrecisionRecallF1score"),
            reg.find(ComponentKind::Metric, "SingleLabelMetric"));
}

TEST(Registry, ConfigPathsComeFirstThenEnvironmentThenBuiltIn) {
  const fs::path testkit = kTestPlugins / "testkit";
  ::setenv("TALLY_PLUGIN_PATH", (kTestPlugins / "no_such_env_dir_is_not_used").c_str(), 1);
  ::unsetenv("TALLY_PLUGIN_PATH");
  ::setenv("TALLY_PLUGIN_PATH", testkit.c_str(), 1);
  const auto from_env = Registry::load();
  ASSERT_NE(from_env.find(ComponentKind::Metric, "SequenceProbe"), nullptr);
  ASSERT_GE(from_env.search_path().size(), 2u);
  EXPECT_EQ(from_env.search_path().front(), testkit);
  EXPECT_EQ(from_env.search_path().back(), Registry::builtin_dir());
  ::unsetenv("TALLY_PLUGIN_PATH");

  const fs::path other = "/tmp";
  ::setenv("TALLY_PLUGIN_PATH", other.c_str(), 1);
  const auto both = Registry::load({testkit});
  EXPECT_EQ(both.search_path()[0], testkit);
  EXPECT_EQ(both.search_path()[1], other);
  ::unsetenv("TALLY_PLUGIN_PATH");
}

TEST(Registry, SameFileNamedTwiceLoadsOnce) {
  const fs::path testkit = kTestPlugins / "testkit";
  const auto reg =
      Registry::load({testkit, testkit / "libtally_testkit.so", Registry::builtin_dir()});
  EXPECT_NE(reg.find(ComponentKind::Metric, "SequenceProbe"), nullptr);
}

TEST(Registry, UnknownComponentListsTheKnownOnes) {
  const auto reg = Registry::load();
  try {
    reg.get(ComponentKind::Metric, "Acuracy");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("unknown metric 'Acuracy'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Accuracy"), std::string::npos) << msg;
  }
}

TEST(Registry, MissingPathIsAnError) {
  const auto msg = load_error({"/nonexistent/plugins"});
  EXPECT_NE(msg.find("plugins.paths: plugin path '/nonexistent/plugins' does not exist"),
            std::string::npos)
      << msg;
  ::setenv("TALLY_PLUGIN_PATH", "/nonexistent/env", 1);
  const auto env_msg = load_error({});
  ::unsetenv("TALLY_PLUGIN_PATH");
  EXPECT_NE(env_msg.find("TALLY_PLUGIN_PATH: plugin path '/nonexistent/env' does not exist"),
            std::string::npos)
      << env_msg;
}

TEST(Registry, CorruptLibraryIsAnErrorNamingTheFile) {
  tally::test::TempDir dir;
  tally::test::write_text(dir / "libtally_corrupt.so", "this is not an ELF file\n");
  const auto msg = load_error({dir.path});
  EXPECT_NE(msg.find("libtally_corrupt.so' cannot be loaded"), std::string::npos) << msg;
  // A copy of a real plugin cut inside its ELF headers.
  tally::test::TempDir dir2;
  const auto real = tally::test::read_file(kTestPlugins / "testkit" / "libtally_testkit.so");
  tally::test::write_text(dir2 / "libtally_truncated.so", real.substr(0, 200));
  const auto msg2 = load_error({dir2.path});
  EXPECT_NE(msg2.find("libtally_truncated.so' cannot be loaded"), std::string::npos) << msg2;
}

TEST(Registry, LibraryWithoutEntryIsRefused) {
  const auto msg = load_error({kTestPlugins / "no_entry"});
  EXPECT_NE(
      msg.find("libtally_no_entry.so' is not a tally plugin: it exports no 'tally_plugin' entry"),
      std::string::npos)
      << msg;
}

TEST(Registry, AbiMismatchNamesTheFileAndBothVersions) {
  const auto msg = load_error({kTestPlugins / "bad_abi"});
  // tests/plugins/bad_abi.cpp declares kAbiVersion + 41.
  EXPECT_NE(msg.find(fmt::format("libtally_bad_abi.so' was built for plugin ABI version {}",
                                 tally::kAbiVersion + 41)),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(fmt::format("uses ABI version {}", tally::kAbiVersion)), std::string::npos)
      << msg;
}

TEST(Registry, ManifestThatFailsIsRefused) {
  const auto msg = load_error({kTestPlugins / "failing_manifest"});
  EXPECT_NE(msg.find("libtally_failing_manifest.so' failed while building its manifest"),
            std::string::npos)
      << msg;
}

TEST(Registry, DuplicateNamesNameBothFiles) {
  const auto msg = load_error({kTestPlugins / "dup"});
  EXPECT_NE(msg.find("two plugins define the metric 'Accuracy'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("libtally_dup_accuracy.so"), std::string::npos) << msg;
  EXPECT_NE(msg.find("libtally_classification.so"), std::string::npos) << msg;
}

TEST(Registry, ObjectsKeepTheirLibraryLoaded) {
  const fs::path so = kTestPlugins / "testkit" / "libtally_testkit.so";
  ASSERT_FALSE(is_loaded(so));
  std::shared_ptr<tally::Metric> metric;
  {
    const auto reg = Registry::load({so.parent_path()});
    const auto& c = reg.get(ComponentKind::Metric, "SequenceProbe");
    metric = Registry::make_metric(c, tally::make_params(*c.info, tally::Value::Map{}, "metric"));
  }
  // The registry is gone; the metric still runs code from the library.
  ASSERT_TRUE(is_loaded(so));
  tally::Batch b;
  b.set("x", tally::Tensor::from_vector(std::vector<std::int64_t>{1, 2, 3}));
  metric->add(b);
  msgpack::sbuffer buf;
  tally::Packer pk(buf);
  metric->pack(pk);
  auto h = msgpack::unpack(buf.data(), buf.size());
  std::vector<msgpack::object> states{h.get()};
  const auto v = metric->compute_packed(states);
  EXPECT_EQ(v.at("count").as_int(), 3);
  EXPECT_EQ(v.at("sum").as_int(), 6);
  metric.reset();
  EXPECT_FALSE(is_loaded(so)) << "the library must be unloaded once its last object is gone";
}

TEST(Registry, BatchesKeepTheirReaderLibraryLoaded) {
  tally::test::TempDir dir;
  tally::test::write_npy(dir / "x.npy", std::vector<std::int64_t>{4, 5, 6});
  const fs::path so = Registry::builtin_dir() / "libtally_npy.so";
  std::optional<tally::Batch> batch;
  {
    const auto reg = Registry::load();
    const auto& c = reg.get(ComponentKind::Reader, "npy");
    tally::Value::Map fields{{"x", (dir / "x.npy").string()}};
    auto reader = Registry::make_reader(
        c, tally::make_params(*c.info, tally::Value::Map{{"fields", tally::Value(fields)}}, "data"),
        tally::ShardInfo{0, 1});
    batch = reader->next();
  }
  // The reader and the registry are gone; the batch's memory map is freed by the npy plugin's
  // code, so the plugin must still be loaded.
  ASSERT_TRUE(batch.has_value());
  ASSERT_TRUE(is_loaded(so));
  EXPECT_EQ(batch->tensor("x").data_as<std::int64_t>()[2], 6);
  batch.reset();
  EXPECT_FALSE(is_loaded(so));
}
