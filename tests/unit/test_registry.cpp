// The plugin registry against real .so files: the built-in plugins, test plugins built for the
// purpose (tests/plugins), and files corrupted on the spot.
#include <dlfcn.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <elf.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <set>

#include <sys/stat.h>
#include <unistd.h>

#include "config.hpp"
#include "registry.hpp"
#include "support/expect_error.hpp"
#include "support/npy.hpp"
#include "support/process.hpp"
#include "tally/sdk/error.hpp"

namespace fs = std::filesystem;
using tally::ComponentKind;
using tally::ConfigError;
using tally::Registry;
using tally::test::error_of;

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

  tally::test::TempDir other_dir;  // an empty folder only this user can write
  const fs::path other = other_dir.path;
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
  const std::string msg = error_of<ConfigError>([&] { reg.get(ComponentKind::Metric, "Acuracy"); });
  EXPECT_HAS(msg, "unknown metric 'Acuracy'");
  EXPECT_HAS(msg, "Accuracy,");
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
  // tests/plugins/bad_abi.cpp exports the marker of ABI 999.
  EXPECT_NE(msg.find("libtally_bad_abi.so' was built for plugin ABI version 999"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(fmt::format("uses ABI version {}", tally::kAbiVersion)), std::string::npos)
      << msg;
}

// The ABI version is read from the file (the exported tally_abi_vN symbol) before the library is
// loaded: a plugin built for another ABI, or without the marker, is refused and not one of its
// static constructors runs (each writes TALLY_TEST_LOAD_MARKER when it does).
TEST(Registry, AbiIsCheckedBeforeAnyPluginCodeRuns) {
  for (const char* name : {"bad_abi", "no_abi_marker"}) {
    SCOPED_TRACE(name);
    tally::test::TempDir dir;
    const fs::path marker = dir / "constructor-ran";
    ::setenv("TALLY_TEST_LOAD_MARKER", marker.c_str(), 1);
    const fs::path so = kTestPlugins / name / fmt::format("libtally_{}.so", name);
    const auto msg = load_error({so.parent_path()});
    EXPECT_NE(msg.find(fmt::format("libtally_{}.so'", name)), std::string::npos) << msg;
    EXPECT_NE(msg.find(fmt::format("ABI version {}", tally::kAbiVersion)), std::string::npos)
        << msg;
    EXPECT_FALSE(fs::exists(marker)) << "the plugin's static constructor ran: " << msg;
    EXPECT_FALSE(is_loaded(so)) << "the library was loaded";
    // The control: loading the library does run the constructor, so the check above means
    // something.
    void* h = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << ::dlerror();
    EXPECT_TRUE(fs::exists(marker));
    ::dlclose(h);
    ::unsetenv("TALLY_TEST_LOAD_MARKER");
  }
  const auto msg = load_error({kTestPlugins / "no_abi_marker"});
  EXPECT_NE(msg.find("carries no plugin ABI version marker"), std::string::npos) << msg;
}

TEST(Registry, PluginsBuiltWithTallyPluginPassTheAbiMarkerCheck) {
  // TALLY_PLUGIN exports it; every built-in plugin loads, so each one passed the check.
  const auto reg = Registry::load({kTestPlugins / "testkit"});
  std::set<fs::path> files;
  for (const auto& c : reg.components()) files.insert(c.file);
  EXPECT_GE(files.size(), 5u);
}

// TALLY_COMPONENT: each file registers its own components; the entry lists those of TALLY_PLUGIN's
// own list first, then the registered ones in source order, each with its result specs.
TEST(Registry, ComponentsRegisteredInTheirFilesAreListedInSourceOrder) {
  const auto reg = Registry::load({kTestPlugins / "registered"});
  std::vector<std::string> names;
  for (const auto& c : reg.components())
    if (c.plugin_name == "registered") names.push_back(c.info->name);
  EXPECT_EQ(names, (std::vector<std::string>{"RegListed", "RegA", "RegB2", "RegB1"}));
  const auto& b2 = reg.get(tally::ComponentKind::Metric, "RegB2");
  ASSERT_EQ(b2.info->results.size(), 1u);
  EXPECT_EQ(b2.info->results[0].better, tally::Better::Lower);
  EXPECT_TRUE(reg.get(tally::ComponentKind::Metric, "RegA").info->results.empty());
}

namespace {
// A copy of a real plugin with some bytes of its ELF headers overwritten.
template <class Patch>
fs::path patched_copy(const tally::test::TempDir& dir, const std::string& name, Patch patch) {
  auto bytes = tally::test::read_file(kTestPlugins / "testkit" / "libtally_testkit.so");
  patch(bytes);
  const fs::path folder = dir / name;
  fs::create_directory(folder);
  tally::test::write_text(folder / "libtally_patched.so", bytes);
  return folder;
}
template <class T>
T get_at(const std::string& b, std::size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}
template <class T>
void set_at(std::string& b, std::size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}
}  // namespace

// The file is read before it is loaded, so the reader must hold against any bytes: truncations,
// and headers whose offsets, counts and sizes point outside the file (no crash, no allocation of
// what a header claims, one ConfigError naming the file).
TEST(Registry, HostileElfHeadersAreRefusedNamingTheFile) {
  tally::test::TempDir dir;
  const auto real = tally::test::read_file(kTestPlugins / "testkit" / "libtally_testkit.so");
  ASSERT_GT(real.size(), 4096u);
  std::vector<fs::path> folders;
  for (std::size_t cut : {std::size_t{0}, std::size_t{3}, std::size_t{16}, std::size_t{63},
                          std::size_t{64}, std::size_t{1000}, real.size() / 2, real.size() - 1})
    folders.push_back(
        patched_copy(dir, fmt::format("cut{}", cut), [&](std::string& b) { b.resize(cut); }));
  // e_shoff far out; e_shnum huge; e_shentsize wrong; an ELF class that is neither.
  folders.push_back(patched_copy(dir, "shoff", [](std::string& b) {
    set_at<std::uint64_t>(b, offsetof(Elf64_Ehdr, e_shoff), ~std::uint64_t{0} - 8);
  }));
  folders.push_back(patched_copy(dir, "shnum", [](std::string& b) {
    set_at<std::uint16_t>(b, offsetof(Elf64_Ehdr, e_shnum), 0xffff);
  }));
  folders.push_back(patched_copy(dir, "shentsize", [](std::string& b) {
    set_at<std::uint16_t>(b, offsetof(Elf64_Ehdr, e_shentsize), 12);
  }));
  folders.push_back(patched_copy(dir, "class", [](std::string& b) { b[EI_CLASS] = 7; }));
  // The dynamic symbol table's size, offset and string-table link pointing anywhere.
  const auto patch_dynsym = [&](const std::string& name, auto change) {
    folders.push_back(patched_copy(dir, name, [&](std::string& b) {
      const auto shoff = get_at<std::uint64_t>(b, offsetof(Elf64_Ehdr, e_shoff));
      const auto shnum = get_at<std::uint16_t>(b, offsetof(Elf64_Ehdr, e_shnum));
      for (std::size_t i = 0; i < shnum; ++i) {
        const std::size_t at = shoff + i * sizeof(Elf64_Shdr);
        auto sh = get_at<Elf64_Shdr>(b, at);
        if (sh.sh_type != SHT_DYNSYM) continue;
        change(sh);
        set_at(b, at, sh);
      }
    }));
  };
  patch_dynsym("dynsym_size", [](Elf64_Shdr& sh) { sh.sh_size = std::uint64_t{1} << 62; });
  patch_dynsym("dynsym_offset", [](Elf64_Shdr& sh) { sh.sh_offset = ~std::uint64_t{0}; });
  patch_dynsym("dynsym_link", [](Elf64_Shdr& sh) { sh.sh_link = 60000; });
  for (const auto& folder : folders) {
    SCOPED_TRACE(folder.filename().string());
    const auto msg = load_error({folder});
    EXPECT_NE(msg.find("libtally_patched.so' cannot be loaded"), std::string::npos) << msg;
  }
}

TEST(Registry, ManifestTextThatIsNotUtf8IsRefused) {
  const auto msg = load_error({kTestPlugins / "bad_text"});
  EXPECT_NE(msg.find("libtally_bad_text.so': the plugin name is not valid UTF-8: byte 0xe9 at "
                     "offset 12 (\"bad_text_caf\\xe9\")"),
            std::string::npos)
      << msg;
}

TEST(Registry, ManifestThatFailsIsRefused) {
  const auto msg = load_error({kTestPlugins / "failing_manifest"});
  EXPECT_NE(msg.find("libtally_failing_manifest.so' failed while building its manifest"),
            std::string::npos)
      << msg;
}

// Loaded with RTLD_NOW: an unresolved symbol is a load error naming the file and the symbol (exit
// 2), not a "symbol lookup error" that kills the process at the first call into the plugin.
TEST(Registry, UndefinedSymbolIsALoadError) {
  const auto msg = load_error({kTestPlugins / "undefined_symbol"});
  EXPECT_NE(msg.find("libtally_undefined_symbol.so' cannot be loaded"), std::string::npos) << msg;
  EXPECT_NE(msg.find("undefined symbol"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tally_test_components_nobody_defines"), std::string::npos) << msg;
}

// A plugin that needs a library this machine lacks (the mpi backend without Open MPI) is not
// loaded and not an error: every other plugin works, and asking for a component that is missing
// names the plugin file and the library.
TEST(Registry, APluginWhoseLibraryIsMissingIsListedAndTheRestLoad) {
  const auto reg = Registry::load({kTestPlugins / "missing_dependency"});
  ASSERT_EQ(reg.unloaded().size(), 1u);
  EXPECT_EQ(reg.unloaded()[0].file.filename(), "libtally_missing_dependency.so");
  EXPECT_EQ(reg.unloaded()[0].missing_library, "libtally_test_absent_dep.so.1");
  EXPECT_NE(reg.find(ComponentKind::Metric, "Accuracy"), nullptr);  // the built-in plugins
  const std::string msg =
      error_of<ConfigError>([&] { reg.get(ComponentKind::Backend, "missing_dependency"); });
  EXPECT_HAS(msg,
             "the backend 'missing_dependency' is not available on this machine: its plugin '");
  EXPECT_HAS(msg,
             "libtally_missing_dependency.so' needs libtally_test_absent_dep.so.1, which is "
             "not installed (available: auto, ");
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  // Another missing name lists the unloaded plugin after the known names.
  const std::string other =
      error_of<ConfigError>([&] { reg.get(ComponentKind::Metric, "Acuracy"); });
  EXPECT_HAS(other, "unknown metric 'Acuracy'");
  EXPECT_HAS(other, "; plugin '");
  EXPECT_HAS(other,
             "libtally_missing_dependency.so' is not loaded: it needs "
             "libtally_test_absent_dep.so.1, which this machine does not have");
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
  tally::internal::StringSink sink;
  metric->pack_gathered(sink);
  const std::vector<tally::Bytes> states{std::as_bytes(std::span(sink.bytes))};
  const auto v = metric->compute_synced(states, {});
  EXPECT_EQ(v.at("count").as_int(), 3);
  EXPECT_EQ(v.at("sum").as_int(), 6);
  metric.reset();
  EXPECT_FALSE(is_loaded(so)) << "the library must be unloaded once its last object is gone";
}

// Expected: a plugin file loaded by a live Registry is not loaded again by the next (the same
// library, the same ComponentInfo); once every Registry and object is gone it is unloaded as
// before; a copy of the file under another name is another library.
TEST(Registry, ALoadedPluginIsSharedWhileARegistryHoldsIt) {
  const fs::path so = kTestPlugins / "testkit" / "libtally_testkit.so";
  ASSERT_FALSE(is_loaded(so));
  {
    const auto first = Registry::load({so.parent_path()});
    const auto second = Registry::load({so.parent_path()});
    const auto& a = first.get(ComponentKind::Metric, "SequenceProbe");
    const auto& b = second.get(ComponentKind::Metric, "SequenceProbe");
    EXPECT_EQ(a.library, b.library);
    EXPECT_EQ(a.info, b.info);
  }
  EXPECT_FALSE(is_loaded(so)) << "the library must be unloaded once the last Registry is gone";
  tally::test::TempDir dir;
  fs::copy_file(so, dir / "libtally_testkit.so");
  const auto original = Registry::load({so.parent_path()});
  const auto copy = Registry::load({dir / "libtally_testkit.so"});
  EXPECT_NE(original.get(ComponentKind::Metric, "SequenceProbe").library,
            copy.get(ComponentKind::Metric, "SequenceProbe").library);
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

// ---- Who may have written a plugin -------------------------------------------------------------

namespace {

// A copy of a real plugin in a folder of its own (0755, owned by the caller).
struct PluginCopy {
  tally::test::TempDir dir;
  fs::path folder, file;
  explicit PluginCopy(const fs::path& so = kTestPlugins / "testkit" / "libtally_testkit.so") {
    folder = dir / "plugins";
    fs::create_directory(folder);
    fs::permissions(folder, fs::perms(0755));
    file = folder / so.filename();
    fs::copy_file(so, file);
    fs::permissions(file, fs::perms(0755));
  }
};

void chmod_or_fail(const fs::path& p, mode_t mode) {
  ASSERT_EQ(::chmod(p.c_str(), mode), 0) << p << ": " << std::strerror(errno);
}

// The real plugins the checks are tried on: a test plugin and built-in ones.
std::vector<fs::path> sample_plugins() {
  return {kTestPlugins / "testkit" / "libtally_testkit.so",
          Registry::builtin_dir() / "libtally_classification.so",
          Registry::builtin_dir() / "libtally_npy.so",
          Registry::builtin_dir() / "libtally_nondist.so"};
}

void expect_refused(const std::vector<fs::path>& paths, const std::string& expected) {
  const auto msg = load_error(paths);
  EXPECT_NE(msg.find(expected), std::string::npos) << msg;
  EXPECT_NE(msg.find("TALLY_ALLOW_UNSAFE_PLUGINS=1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("allow_unsafe: true"), std::string::npos) << msg;
}

}  // namespace

TEST(PluginSafety, WorldWritableFolderOrFileIsRefused) {
  ::unsetenv("TALLY_ALLOW_UNSAFE_PLUGINS");
  for (const auto& so : sample_plugins()) {
    SCOPED_TRACE(so.filename().string());
    PluginCopy c(so);
    for (mode_t mode : {0777, 01777, 0757, 0703}) {  // sticky or not: anyone may add a file
      chmod_or_fail(c.folder, mode);
      expect_refused({c.folder}, fmt::format("plugins.paths: plugin folder '{}' is world-writable "
                                             "(mode {:04o}",
                                             c.folder.string(), mode));
    }
    chmod_or_fail(c.folder, 0755);
    for (mode_t mode : {0666, 0777, 0757}) {
      chmod_or_fail(c.file, mode);
      expect_refused({c.folder}, fmt::format("plugins.paths: plugin file '{}' is world-writable "
                                             "(mode {:04o}",
                                             c.file.string(), mode));
      // Named as a file on the search path, too.
      expect_refused({c.file}, fmt::format("plugin file '{}' is world-writable", c.file.string()));
    }
    // A folder holding the file named directly is checked as well.
    chmod_or_fail(c.file, 0755);
    chmod_or_fail(c.folder, 0777);
    expect_refused({c.file},
                   fmt::format("plugin folder '{}' is world-writable", c.folder.string()));
  }
}

TEST(PluginSafety, TallyPluginPathIsCheckedToo) {
  PluginCopy c;
  chmod_or_fail(c.folder, 0777);
  ::setenv("TALLY_PLUGIN_PATH", c.folder.c_str(), 1);
  const auto msg = load_error({});
  ::unsetenv("TALLY_PLUGIN_PATH");
  EXPECT_NE(msg.find(fmt::format("TALLY_PLUGIN_PATH: plugin folder '{}' is world-writable",
                                 c.folder.string())),
            std::string::npos)
      << msg;
}

TEST(PluginSafety, SafeCopiesLoad) {
  PluginCopy c;
  for (mode_t mode : {0755, 0700, 0750, 0555}) {
    chmod_or_fail(c.folder, mode);
    const auto reg = Registry::load({c.folder});
    EXPECT_NE(reg.find(ComponentKind::Metric, "SequenceProbe"), nullptr);
  }
  chmod_or_fail(c.folder, 0755);
  // Group-writable by the caller's own group (or root's) is the caller's business.
  ASSERT_EQ(::chown(c.folder.c_str(), static_cast<uid_t>(-1), ::getegid()), 0);
  chmod_or_fail(c.folder, 0775);
  chmod_or_fail(c.file, 0775);
  EXPECT_NE(Registry::load({c.folder}).find(ComponentKind::Metric, "SequenceProbe"), nullptr);
}

// Tests run as root (CI does); owner and group checks need chown to another user or group, and
// fail, not skip, elsewhere: the suite is meant to run as root.
#define REQUIRE_ROOT()                                                                            \
  if (::geteuid() != 0)                                                                           \
  GTEST_FAIL() << "needs root: the test gives a plugin to another user (chown), which only root " \
                  "may do"

TEST(PluginSafety, GroupWritableByAnotherGroupIsRefused) {
  REQUIRE_ROOT();
  const gid_t other = 65534;  // nogroup
  for (const auto& so : sample_plugins()) {
    SCOPED_TRACE(so.filename().string());
    PluginCopy c(so);
    ASSERT_EQ(::chown(c.folder.c_str(), static_cast<uid_t>(-1), other), 0);
    chmod_or_fail(c.folder, 0775);
    expect_refused({c.folder},
                   fmt::format("plugin folder '{}' is writable by group 65534", c.folder.string()));
    chmod_or_fail(c.folder, 0755);  // the group may read, not write: fine
    ASSERT_EQ(::chown(c.file.c_str(), static_cast<uid_t>(-1), other), 0);
    chmod_or_fail(c.file, 0775);
    expect_refused({c.folder},
                   fmt::format("plugin file '{}' is writable by group 65534", c.file.string()));
  }
}

TEST(PluginSafety, OwnedByAnotherUserIsRefused) {
  REQUIRE_ROOT();
  const uid_t other = 65534;  // nobody
  for (const auto& so : sample_plugins()) {
    SCOPED_TRACE(so.filename().string());
    PluginCopy c(so);
    ASSERT_EQ(::chown(c.file.c_str(), other, static_cast<gid_t>(-1)), 0);
    expect_refused({c.folder},
                   fmt::format("plugin file '{}' is owned by uid 65534", c.file.string()));
    ASSERT_EQ(::chown(c.file.c_str(), 0, static_cast<gid_t>(-1)), 0);
    ASSERT_EQ(::chown(c.folder.c_str(), other, static_cast<gid_t>(-1)), 0);
    expect_refused({c.folder},
                   fmt::format("plugin folder '{}' is owned by uid 65534", c.folder.string()));
  }
}

TEST(PluginSafety, TheTargetOfASymbolicLinkIsChecked) {
  PluginCopy unsafe;
  chmod_or_fail(unsafe.folder, 0777);
  tally::test::TempDir dir;
  const fs::path folder = dir / "links";
  fs::create_directory(folder);
  fs::permissions(folder, fs::perms(0755));
  // A link in a safe folder to a plugin in a world-writable one: the target's folder is named.
  fs::create_symlink(unsafe.file, folder / "libtally_testkit.so");
  expect_refused({folder},
                 fmt::format("plugin folder '{}' is world-writable", unsafe.folder.string()));
  // A link to a world-writable file: refused, naming the link as found on the search path.
  chmod_or_fail(unsafe.folder, 0755);
  chmod_or_fail(unsafe.file, 0666);
  expect_refused({folder}, fmt::format("plugin file '{}' is world-writable",
                                       (folder / "libtally_testkit.so").string()));
  // A search-path entry that is a link to a world-writable folder.
  chmod_or_fail(unsafe.file, 0755);
  chmod_or_fail(unsafe.folder, 0777);
  fs::create_directory_symlink(unsafe.folder, dir / "folder_link");
  expect_refused({dir / "folder_link"}, fmt::format("plugin folder '{}' is world-writable",
                                                    (dir / "folder_link").string()));
}

// Every folder a plugin path is looked up through, up to '/', as sshd's StrictModes: one that
// another user may write (and is not sticky) or that another user owns is refused, naming it.
namespace {

// <tmp>/a/b/plugins/libtally_testkit.so, every folder 0755 and the caller's.
struct NestedCopy {
  tally::test::TempDir dir;
  fs::path a, b, folder, file;
  NestedCopy() {
    a = dir / "a";
    b = a / "b";
    folder = b / "plugins";
    fs::create_directories(folder);
    for (const auto& p : {a, b, folder}) fs::permissions(p, fs::perms(0755));
    file = folder / "libtally_testkit.so";
    fs::copy_file(kTestPlugins / "testkit" / "libtally_testkit.so", file);
    fs::permissions(file, fs::perms(0755));
  }
};

std::string on_the_way(const char* what, const fs::path& path, const fs::path& ancestor,
                       const std::string& why) {
  return fmt::format("{} '{}' lies in folder '{}', which {}", what, path.string(),
                     ancestor.string(), why);
}

bool loads(const std::vector<fs::path>& paths) {
  return Registry::load(paths).find(ComponentKind::Metric, "SequenceProbe") != nullptr;
}

}  // namespace

TEST(PluginSafety, AWritableFolderOnTheWayIsRefused) {
  ::unsetenv("TALLY_ALLOW_UNSAFE_PLUGINS");
  NestedCopy c;
  ASSERT_TRUE(loads({c.folder}));
  for (const fs::path& up : {c.a, c.b}) {
    for (mode_t mode : {0777, 0757, 0703, 0722}) {
      chmod_or_fail(up, mode);
      expect_refused({c.folder}, "plugins.paths: " +
                                     on_the_way("plugin folder", c.folder, up,
                                                "is world-writable and not sticky") +
                                     fmt::format(" (mode {:04o}", mode));
      // A plugin file named directly: the same folders.
      expect_refused({c.file},
                     on_the_way("plugin file", c.file, up, "is world-writable and not sticky"));
    }
    // Sticky (as /tmp): only an entry's owner may replace it, and the entry is checked in turn.
    for (mode_t mode : {01777, 01757, 01703}) {
      chmod_or_fail(up, mode);
      // The folder named, or its file: one load each suffices for a mode.
      EXPECT_TRUE(loads({mode == 01757 ? c.file : c.folder})) << fmt::format("{:04o}", mode);
    }
    chmod_or_fail(up, 0755);
  }
  // The folders of this test lie under /tmp, itself sticky: the check passed through it.
  struct stat st {};
  ASSERT_EQ(::stat("/tmp", &st), 0);
  EXPECT_NE(st.st_mode & S_ISVTX, 0u);
  // A relative path is looked up from the working folder.
  const fs::path here = fs::current_path();
  fs::current_path(c.b);
  chmod_or_fail(c.a, 0777);
  expect_refused({"plugins"},
                 on_the_way("plugin folder", "plugins", c.a, "is world-writable and not sticky"));
  expect_refused({"../b/./plugins"}, on_the_way("plugin folder", "../b/./plugins", c.a,
                                                "is world-writable and not sticky"));
  chmod_or_fail(c.a, 0755);
  EXPECT_TRUE(loads({"plugins"}));
  EXPECT_TRUE(loads({"../b/./plugins"}));
  fs::current_path(here);
}

TEST(PluginSafety, AFolderOnTheWayOfAnotherUserOrGroupIsRefused) {
  REQUIRE_ROOT();
  NestedCopy c;
  // Group-writable by another group (nogroup), not sticky; by root's group it is the caller's.
  ASSERT_EQ(::chown(c.a.c_str(), static_cast<uid_t>(-1), 65534), 0);
  chmod_or_fail(c.a, 0775);
  expect_refused({c.folder}, on_the_way("plugin folder", c.folder, c.a,
                                        "is writable by group 65534, neither root's group nor "
                                        "yours and not sticky"));
  chmod_or_fail(c.a, 01775);
  EXPECT_TRUE(loads({c.folder}));
  ASSERT_EQ(::chown(c.a.c_str(), static_cast<uid_t>(-1), ::getegid()), 0);
  chmod_or_fail(c.a, 0775);
  EXPECT_TRUE(loads({c.folder}));
  chmod_or_fail(c.a, 0755);
  // Owned by another user (nobody): refused whatever its mode, sticky too (its owner may
  // rename what it holds).
  for (const fs::path& up : {c.a, c.b}) {
    ASSERT_EQ(::chown(up.c_str(), 65534, static_cast<gid_t>(-1)), 0);
    for (mode_t mode : {0755, 0700, 01777}) {
      chmod_or_fail(up, mode);
      expect_refused({c.folder},
                     on_the_way("plugin folder", c.folder, up, "is owned by uid 65534"));
    }
    ASSERT_EQ(::chown(up.c_str(), 0, static_cast<gid_t>(-1)), 0);
    chmod_or_fail(up, 0755);
  }
  EXPECT_TRUE(loads({c.folder}));
}

TEST(PluginSafety, TheFoldersOnTheWayOfALinkAndOfItsTargetAreChecked) {
  ::unsetenv("TALLY_ALLOW_UNSAFE_PLUGINS");
  NestedCopy target;
  tally::test::TempDir dir;
  const fs::path safe = dir / "safe";
  const fs::path open = dir / "open";
  fs::create_directory(safe);
  fs::create_directory(open);
  fs::permissions(safe, fs::perms(0755));
  fs::permissions(open, fs::perms(0755));
  // A search-path entry that is a link to a folder whose parent another user may write.
  fs::create_directory_symlink(target.folder, safe / "absolute");
  fs::create_directory_symlink(
      fs::path("../..") / target.folder.lexically_relative(dir.path.parent_path()),
      safe / "relative");
  ASSERT_TRUE(fs::equivalent(safe / "relative", target.folder));
  // A link to a link: the folder of the second link is on the way as well.
  fs::create_directory_symlink(safe / "absolute", open / "second");
  fs::create_directory_symlink(open / "second", safe / "chain");
  for (const char* link : {"absolute", "relative", "chain"}) {
    SCOPED_TRACE(link);
    EXPECT_TRUE(loads({safe / link}));
    chmod_or_fail(target.b, 0777);
    expect_refused({safe / link}, on_the_way("plugin folder", safe / link, target.b,
                                             "is world-writable and not sticky"));
    chmod_or_fail(target.b, 0755);
  }
  // The folder holding the link: whoever may write it may point the link elsewhere.
  chmod_or_fail(open, 0777);
  expect_refused({safe / "chain"}, on_the_way("plugin folder", safe / "chain", open,
                                              "is world-writable and not sticky"));
  chmod_or_fail(open, 0755);
  // A plugin file that is a link, in a safe folder, to a file below a writable folder.
  const fs::path links = dir / "links";
  fs::create_directory(links);
  fs::permissions(links, fs::perms(0755));
  fs::create_symlink(target.file, links / "libtally_testkit.so");
  EXPECT_TRUE(loads({links}));
  chmod_or_fail(target.a, 0757);
  expect_refused({links}, on_the_way("plugin file", links / "libtally_testkit.so", target.a,
                                     "is world-writable and not sticky"));
  chmod_or_fail(target.a, 0755);
  // A link loop on the way is one line, not a hang.
  fs::create_directory_symlink(dir / "loop2", dir / "loop1");
  fs::create_directory_symlink(dir / "loop1", dir / "loop2");
  EXPECT_NE(load_error({dir / "loop1" / "plugins"}).find("plugin path"), std::string::npos);
}

TEST(PluginSafety, TheOptInLoadsThem) {
  PluginCopy c;
  chmod_or_fail(c.folder, 0777);
  chmod_or_fail(c.file, 0666);
  // plugins.allow_unsafe
  EXPECT_NE(Registry::load({c.folder}, true).find(ComponentKind::Metric, "SequenceProbe"), nullptr);
  // TALLY_ALLOW_UNSAFE_PLUGINS=1; any other value is no opt-in.
  ::setenv("TALLY_ALLOW_UNSAFE_PLUGINS", "1", 1);
  EXPECT_NE(Registry::load({c.folder}).find(ComponentKind::Metric, "SequenceProbe"), nullptr);
  for (const char* v : {"0", "", "yes", "true"}) {
    ::setenv("TALLY_ALLOW_UNSAFE_PLUGINS", v, 1);
    EXPECT_NE(load_error({c.folder}).find("is world-writable"), std::string::npos) << v;
  }
  ::unsetenv("TALLY_ALLOW_UNSAFE_PLUGINS");
}

// ---- Errors of the folder walk
// -------------------------------------------------------------------

TEST(Registry, SymbolicLinkLoopsAndBrokenLinksAreOneClearLine) {
  tally::test::TempDir dir;
  const fs::path folder = dir / "plugins";
  fs::create_directory(folder);
  fs::permissions(folder, fs::perms(0755));
  // A loop that is not named like a plugin is not looked at.
  fs::create_symlink(folder / "other.so", folder / "other.so");
  EXPECT_NO_THROW(Registry::load({folder}));
  // A plugin name that loops, or that points nowhere.
  fs::create_symlink(folder / "libtally_loop.so", folder / "libtally_loop.so");
  auto msg = load_error({folder});
  EXPECT_NE(msg.find(fmt::format("plugins.paths: plugin '{}' cannot be read: it is a symbolic link "
                                 "loop",
                                 (folder / "libtally_loop.so").string())),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("filesystem error"), std::string::npos) << msg;
  fs::remove(folder / "libtally_loop.so");
  fs::create_symlink(dir / "gone.so", folder / "libtally_gone.so");
  msg = load_error({folder});
  EXPECT_NE(msg.find(fmt::format("plugin '{}' cannot be read: No such file or directory",
                                 (folder / "libtally_gone.so").string())),
            std::string::npos)
      << msg;
  // A search-path entry that is itself a loop, or lies under a file.
  fs::create_symlink(dir / "looping", dir / "looping");
  msg = load_error({dir / "looping"});
  EXPECT_NE(msg.find(fmt::format("plugin path '{}' cannot be read: it is a symbolic link loop",
                                 (dir / "looping").string())),
            std::string::npos)
      << msg;
  tally::test::write_text(dir / "a_file", "x");
  msg = load_error({dir / "a_file" / "plugins"});
  EXPECT_NE(msg.find("cannot be read: Not a directory"), std::string::npos) << msg;
  // A FIFO named like a plugin: refused at once (opening it must not wait for a writer).
  fs::remove(folder / "libtally_gone.so");
  ASSERT_EQ(::mkfifo((folder / "libtally_fifo.so").c_str(), 0644), 0);
  msg = load_error({folder});
  EXPECT_NE(msg.find(fmt::format("plugin '{}' cannot be loaded: not a regular file",
                                 (folder / "libtally_fifo.so").string())),
            std::string::npos)
      << msg;
}
