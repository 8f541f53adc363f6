#include "tally/registry.hpp"

#include <elf.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>

#include "plugin_abi.hpp"
#include "tally/text_safety.hpp"

namespace tally {

namespace fs = std::filesystem;

namespace {

bool is_plugin_file(const fs::path& p) {
  const auto name = p.filename().string();
  return name.starts_with("libtally_") && name.ends_with(".so");
}

struct Loaded {
  std::shared_ptr<boost::dll::shared_library> lib;
  const PluginManifest* manifest = nullptr;
  fs::path file;
  /// Set, and lib null, when the plugin needs a shared library this machine does not have.
  std::string missing_library;
};

// The loader's message for a library a plugin needs that is not on this machine (the plugin file
// itself was just read, so the missing object is one of its dependencies): "libmpi.so.40: cannot
// open shared object file: No such file or directory".
std::optional<std::string> missing_dependency(std::string_view dlerror_text) {
  static constexpr std::string_view kMarker = ": cannot open shared object file";
  const auto at = dlerror_text.find(kMarker);
  if (at == std::string_view::npos) return std::nullopt;
  // The library's name: the text after the last '(' or ' ' before the marker (npos + 1 is 0).
  const auto from = dlerror_text.find_last_of("( ", at) + 1;
  return std::string(dlerror_text.substr(from, at - from));
}

// A path for messages: control characters and bytes that are not UTF-8 escaped (\xNN).
std::string shown(const fs::path& p) { return escape_for_terminal(p.native()); }

// ---- Reading a plugin's exports without loading it --------------------------------------------
// dlopen runs a library's static constructors (and whatever else its initialisers do) before the
// registry could ask the library anything. So the ABI marker (TALLY_PLUGIN_ABI_MARKER: an exported
// symbol named tally_abi_vN) and the entry are looked up in the file's dynamic symbol table, read
// with plain reads, before any dlopen. Boost.DLL's library_info is not used for this: in Boost
// 1.74 it reads .symtab (which strip removes; exports live in .dynsym), pairs it with whichever
// string table comes last, and trusts every size and offset in the file (a truncated or hostile
// file makes it allocate what the header claims and read out of bounds).

struct Exports {
  bool has_entry = false;                  // "tally_plugin"
  std::vector<std::uint32_t> abi_marks;    // N of each exported tally_abi_vN
  std::vector<std::uint32_t> minor_marks;  // M of each exported tally_abi_minor_M
};

// N of a symbol named `prefix`N (1 to 9 decimal digits), or nothing.
std::optional<std::uint32_t> number_after(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix) || name.size() <= prefix.size() ||
      name.size() > prefix.size() + 9 ||
      name.substr(prefix.size()).find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  return static_cast<std::uint32_t>(std::stoul(std::string(name.substr(prefix.size()))));
}

class ElfFile {
 public:
  ElfFile(const fs::path& file, int fd, std::uint64_t size) : file_(file), fd_(fd), size_(size) {}

  // Reads `n` bytes at `offset`, which must lie inside the file.
  // Sizes and offsets come from the file: each is checked against the file's size before memory
  // is set aside for it, so a hostile header cannot make the registry allocate what it claims.
  void check_range(std::uint64_t offset, std::uint64_t n, const char* what) const {
    if (offset > size_ || n > size_ - offset)
      fail(
          fmt::format("its {} ({} bytes at offset {}) would lie beyond the end of the file ({} "
                      "bytes)",
                      what, n, offset, size_));
  }
  void read(std::uint64_t offset, void* out, std::uint64_t n, const char* what) const {
    check_range(offset, n, what);
    auto* p = static_cast<char*>(out);
    while (n > 0) {
      const auto got = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0)
        fail(fmt::format("reading its {}: {}", what,
                         got < 0 ? std::strerror(errno) : "unexpected end of file"));
      p += got;
      offset += static_cast<std::uint64_t>(got);
      n -= static_cast<std::uint64_t>(got);
    }
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw ConfigError(fmt::format(
        "plugin '{}' cannot be loaded: not a valid ELF shared library: {}", shown(file_), why));
  }

  template <class Ehdr, class Shdr, class Sym>
  Exports exports() const {
    Ehdr eh{};
    read(0, &eh, sizeof eh, "ELF header");
    if (eh.e_type != ET_DYN) fail("it is not a shared library (ELF type is not ET_DYN)");
    if (eh.e_shnum == 0 || eh.e_shentsize != sizeof(Shdr))
      fail("it has no section headers, so no dynamic symbol table to read");
    check_range(eh.e_shoff, std::uint64_t{eh.e_shnum} * sizeof(Shdr), "section headers");
    std::vector<Shdr> sections(eh.e_shnum);
    read(eh.e_shoff, sections.data(), std::uint64_t{eh.e_shnum} * sizeof(Shdr), "section headers");
    Exports out;
    for (const auto& sh : sections) {
      if (sh.sh_type != SHT_DYNSYM) continue;
      if (sh.sh_entsize != sizeof(Sym) || sh.sh_link >= sections.size() ||
          sections[sh.sh_link].sh_type != SHT_STRTAB)
        fail("its dynamic symbol table is malformed");
      const auto& strtab = sections[sh.sh_link];
      check_range(sh.sh_offset, sh.sh_size, "dynamic symbol table");
      check_range(strtab.sh_offset, strtab.sh_size, "dynamic string table");
      // Both tables lie inside the file (read() checks): memory is bounded by the file's size.
      std::vector<Sym> syms(static_cast<std::size_t>(sh.sh_size / sizeof(Sym)));
      read(sh.sh_offset, syms.data(), syms.size() * sizeof(Sym), "dynamic symbol table");
      std::string names(static_cast<std::size_t>(strtab.sh_size), '\0');
      read(strtab.sh_offset, names.data(), names.size(), "dynamic string table");
      for (const auto& sym : syms) {
        const unsigned bind = sym.st_info >> 4;
        const unsigned visibility = sym.st_other & 0x3;
        if (sym.st_shndx == SHN_UNDEF || sym.st_name >= names.size()) continue;
        if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE) continue;
        if (visibility != STV_DEFAULT && visibility != STV_PROTECTED) continue;
        const std::string_view name(
            names.data() + sym.st_name,
            ::strnlen(names.data() + sym.st_name, names.size() - sym.st_name));
        if (name == "tally_plugin") out.has_entry = true;
        if (const auto major = number_after(name, "tally_abi_v")) out.abi_marks.push_back(*major);
        if (const auto minor = number_after(name, "tally_abi_minor_"))
          out.minor_marks.push_back(*minor);
      }
    }
    return out;
  }

 private:
  const fs::path& file_;
  int fd_;
  std::uint64_t size_;
};

Exports read_exports(const fs::path& file) {
  // O_NONBLOCK: a FIFO named like a plugin must not make the open wait for a writer.
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw ConfigError(
        fmt::format("plugin '{}' cannot be loaded: {}", shown(file), std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw ConfigError(fmt::format("plugin '{}' cannot be loaded: not a regular file", shown(file)));
  const ElfFile elf(file, fd, static_cast<std::uint64_t>(st.st_size));
  unsigned char ident[EI_NIDENT] = {};
  elf.read(0, ident, sizeof ident, "ELF identification");
  if (std::memcmp(ident, ELFMAG, SELFMAG) != 0) elf.fail("it does not start with the ELF magic");
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  constexpr unsigned char native = ELFDATA2LSB;
#else
  constexpr unsigned char native = ELFDATA2MSB;
#endif
  if (ident[EI_DATA] != native) elf.fail("it was built for a machine of the other byte order");
  if (ident[EI_CLASS] == ELFCLASS64) return elf.exports<Elf64_Ehdr, Elf64_Shdr, Elf64_Sym>();
  if (ident[EI_CLASS] == ELFCLASS32) return elf.exports<Elf32_Ehdr, Elf32_Shdr, Elf32_Sym>();
  elf.fail("its ELF class is neither 32 nor 64 bits");
}

}  // namespace

// The ABI version check, from the file alone (docs/abi.md): a library built for another major
// ABI (or before the ABI marker existed), or for a newer minor than `engine`'s, is refused before
// any of its code runs.
void check_plugin_abi(const fs::path& file, AbiLevel engine) {
  const Exports ex = read_exports(file);
  if (!ex.has_entry)
    throw ConfigError(fmt::format(
        "plugin '{}' is not a tally plugin: it exports no 'tally_plugin' entry", shown(file)));
  if (ex.abi_marks.empty())
    throw ConfigError(fmt::format(
        "plugin '{}' carries no plugin ABI version marker (an exported 'tally_abi_vN' symbol, "
        "which TALLY_PLUGIN defines): it was built against an older tally or without "
        "TALLY_PLUGIN; this tally {} uses ABI version {}: rebuild the plugin against this tally",
        shown(file), kVersion, engine.major));
  if (std::find(ex.abi_marks.begin(), ex.abi_marks.end(), engine.major) == ex.abi_marks.end())
    throw ConfigError(
        fmt::format("plugin '{}' was built for plugin ABI version {}, this tally {} uses ABI "
                    "version {}: rebuild the plugin against this tally",
                    shown(file), ex.abi_marks.front(), kVersion, engine.major));
  // The same major: additions up to the plugin's minor must all be in this tally. A plugin with no
  // minor marker (hand-written exports) counts as minor 0.
  const std::uint32_t minor =
      ex.minor_marks.empty() ? 0 : *std::max_element(ex.minor_marks.begin(), ex.minor_marks.end());
  if (minor > engine.minor)
    throw ConfigError(fmt::format(
        "plugin '{}' was built for plugin ABI {}.{}, newer than this tally {}'s ABI {}.{}: it may "
        "use additions this tally lacks; use a tally at least as new as the one it was built "
        "against, or rebuild the plugin against this tally",
        shown(file), engine.major, minor, kVersion, engine.major, engine.minor));
}

namespace {

// ---- Who may have written a plugin ------------------------------------------------------------
// tally runs the code of every plugin it loads, so a plugin file, and the folder it lies in, must
// be writable only by root or by the user running tally: not world-writable, not group-writable
// by a group other than root's (gid 0) or the caller's, owned by root or by the caller. So must
// every folder the path is looked up through, up to '/' (as sshd's StrictModes checks the folders
// of authorized_keys), symbolic links followed one by one: whoever may rename an entry of one of
// them may put another folder in its place. There a sticky folder (/tmp) is fine: only an entry's
// owner (or root) may rename or remove it there, and that entry is checked in turn. The opt-in
// (TALLY_ALLOW_UNSAFE_PLUGINS=1, or plugins: {allow_unsafe: true}) turns the checks off.

bool env_allows_unsafe() {
  const char* v = std::getenv("TALLY_ALLOW_UNSAFE_PLUGINS");
  return v != nullptr && std::string_view(v) == "1";
}

std::string user_text(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr)
    return fmt::format("uid {} ({})", uid, escape_for_terminal(found->pw_name));
  return fmt::format("uid {}", uid);
}

// Why another user could change what `st` is or holds; empty when no one but root and the caller
// can. `sticky_ok`: a folder on the way, where the sticky bit protects the entries of others.
std::string unsafe_reason(const struct stat& st, bool sticky_ok) {
  const uid_t me = ::geteuid();
  const gid_t my_group = ::getegid();
  const bool sticky = sticky_ok && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) != 0;
  const char* unless = sticky_ok ? " and not sticky" : "";
  if (st.st_uid != 0 && st.st_uid != me)
    return fmt::format("is owned by {}, neither root nor the user running tally ({})",
                       user_text(st.st_uid), user_text(me));
  if (sticky) return {};
  if ((st.st_mode & S_IWOTH) != 0) return fmt::format("is world-writable{}", unless);
  if ((st.st_mode & S_IWGRP) != 0 && st.st_gid != 0 && st.st_gid != my_group)
    return fmt::format("is writable by group {}, neither root's group nor yours{}", st.st_gid,
                       unless);
  return {};
}

[[noreturn]] void refuse_unsafe(const std::string& subject, const std::string& why,
                                const struct stat& st) {
  throw ConfigError(fmt::format(
      "{} {} (mode {:04o}, owner uid {}, group {}): another user could put code there that tally "
      "would run; fix its owner or mode (chmod go-w), or opt in with "
      "TALLY_ALLOW_UNSAFE_PLUGINS=1 or 'plugins: {{allow_unsafe: true}}' in the config",
      subject, why, st.st_mode & 07777, st.st_uid, st.st_gid));
}

// ConfigError unless `path` (followed through symlinks) may hold plugins or be one.
void check_trusted(const fs::path& path, const char* what, const std::string& origin) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw ConfigError(fmt::format("{}: {} '{}' cannot be read: {}", origin, what, shown(path),
                                  std::strerror(errno)));
  if (const auto why = unsafe_reason(st, false); !why.empty())
    refuse_unsafe(fmt::format("{}: {} '{}'", origin, what, shown(path)), why, st);
}

// ConfigError unless every folder `path` is looked up through is safe (see above): '/', then each
// folder on the way, a symbolic link's target walked in its place (at most 40 links, as the
// kernel). The last entry itself is check_trusted's.
void check_ancestors(const fs::path& path, const char* what, const std::string& origin) {
  const auto fail = [&](const std::string& problem) {
    throw ConfigError(fmt::format("{}: {} '{}' {}", origin, what, shown(path), problem));
  };
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  if (ec) fail(fmt::format("cannot be made absolute: {}", ec.message()));
  std::vector<fs::path> todo;  // the names left to look up, the next one last
  const auto push = [&](const fs::path& p) {
    std::vector<fs::path> names;
    for (const auto& name : p.relative_path()) names.push_back(name);
    todo.insert(todo.end(), names.rbegin(), names.rend());
  };
  const auto check_folder = [&](const fs::path& dir) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0)
      fail(fmt::format("lies in folder '{}', which cannot be read: {}", shown(dir),
                       std::strerror(errno)));
    if (const auto why = unsafe_reason(st, true); !why.empty())
      refuse_unsafe(fmt::format("{}: {} '{}' lies in folder '{}', which", origin, what, shown(path),
                                shown(dir)),
                    why, st);
  };
  fs::path at = "/";
  check_folder(at);
  push(absolute);
  int links = 0;
  while (!todo.empty()) {
    const fs::path name = todo.back();
    todo.pop_back();
    if (name.empty() || name == ".") continue;
    if (name == "..") {
      at = at.parent_path();  // `at` holds no links: its parent is the folder above it
      continue;
    }
    const fs::path next = at / name;
    struct stat st {};
    if (::lstat(next.c_str(), &st) != 0)
      fail(fmt::format("cannot be looked up ('{}': {})", shown(next), std::strerror(errno)));
    if (S_ISLNK(st.st_mode)) {
      if (++links > 40) fail("is reached through more than 40 symbolic links (a loop?)");
      const fs::path target = fs::read_symlink(next, ec);
      if (ec) fail(fmt::format("cannot be looked up ('{}': {})", shown(next), ec.message()));
      if (target.is_absolute()) at = "/";
      push(target);
      continue;
    }
    if (todo.empty()) break;  // the folder or file itself
    check_folder(next);
    at = next;
  }
}

// ---- The plugins loaded in this process ------------------------------------------------------
// A plugin file loaded and checked once is not read, dlopen'ed and checked again while a Registry
// still holds it (a Python program makes an Evaluator per metric): the loaded library is kept by
// its path and the file's identity (device, inode, size, modification time), weakly, so that it
// is unloaded as before when the last Registry holding it goes, and a file replaced or rewritten
// in place is loaded anew.

struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

std::optional<FileIdentity> identity_of(const fs::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return std::nullopt;
  return FileIdentity{st.st_dev, st.st_ino, st.st_size,
                      std::int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
}

struct CachedPlugin {
  FileIdentity identity;
  std::weak_ptr<boost::dll::shared_library> lib;
  const PluginManifest* manifest = nullptr;
};

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, CachedPlugin>& plugin_cache() {
  static std::map<std::string, CachedPlugin> cache;
  return cache;
}

Loaded load_plugin_uncached(const fs::path& file);

Loaded load_plugin(const fs::path& file) {
  const auto identity = identity_of(file);
  if (identity) {
    const std::lock_guard<std::mutex> lock(cache_mutex());
    const auto it = plugin_cache().find(file.native());
    if (it != plugin_cache().end() && it->second.identity == *identity) {
      if (auto lib = it->second.lib.lock())
        return Loaded{std::move(lib), it->second.manifest, file, {}};
    }
  }
  Loaded out = load_plugin_uncached(file);
  if (identity && out.lib) {
    const std::lock_guard<std::mutex> lock(cache_mutex());
    plugin_cache()[file.native()] = CachedPlugin{*identity, out.lib, out.manifest};
  }
  return out;
}

Loaded load_plugin_uncached(const fs::path& file) {
  Loaded out;
  out.file = file;
  check_plugin_abi(file);  // reads the file only: nothing of the plugin runs before this passes
  try {
    // RTLD_NOW: every symbol is bound here, so a plugin that needs one no library defines (built
    // against another tally, or with a source missing) is refused with the symbol's name, not
    // killed by the loader at its first call. RTLD_LOCAL: a plugin's symbols never leak into
    // another's.
    out.lib = std::make_shared<boost::dll::shared_library>(
        file, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::system_error& e) {
    // The plugin file itself unreadable is an error, not a missing dependency.
    if (auto missing = missing_dependency(e.what());
        missing && *missing != file.native() && *missing != file.filename().native()) {
      out.missing_library = escape_for_terminal(*missing);
      return out;
    }
    throw ConfigError(fmt::format("plugin '{}' cannot be loaded: {}", shown(file),
                                  escape_for_terminal(e.what())));
  }
  if (!out.lib->has("tally_plugin"))
    throw ConfigError(fmt::format(
        "plugin '{}' is not a tally plugin: it exports no 'tally_plugin' entry", shown(file)));
  auto& entry = out.lib->get<const PluginManifest*()>("tally_plugin");
  const PluginManifest* m = entry();
  if (m == nullptr)
    throw ConfigError(fmt::format("plugin '{}' failed while building its manifest", shown(file)));
  // The marker was checked before loading; the manifest must agree with it.
  if (m->abi_version != kAbiVersion)
    throw ConfigError(
        fmt::format("plugin '{}' was built for plugin ABI version {}, this tally {} uses ABI "
                    "version {}: rebuild the "
                    "plugin against this tally",
                    shown(file), m->abi_version, kVersion, kAbiVersion));
  // Every text of the manifest ends up in messages, tables and JSON (results, checkpoints,
  // `tally plugins --json`): it must be UTF-8, checked here once rather than failing there.
  const std::string where = fmt::format("plugin '{}'", shown(file));
  require_utf8(m->name, where, "the plugin name");
  require_utf8(m->version, where, "the plugin version");
  for (const auto& c : m->components) {
    const auto what = [&](const char* part) {
      return fmt::format("the {} of {} '{}'", part, component_kind_name(c.kind),
                         escape_for_terminal(c.name));
    };
    require_utf8(c.name, where, what("name"));
    require_utf8(c.doc, where, what("doc"));
    for (const auto& a : c.aliases) require_utf8(a, where, what("alias"));
    for (const auto& p : c.params) {
      require_utf8(p.name, where, what("parameter name"));
      require_utf8(p.doc, where, what("parameter doc"));
      for (const auto& choice : p.choices) require_utf8(choice, where, what("parameter choice"));
    }
    for (const auto& in : c.inputs) {
      require_utf8(in.name, where, what("input name"));
      require_utf8(in.doc, where, what("input doc"));
    }
    for (const auto& r : c.results) {
      require_utf8(r.key, where, what("result key"));
      require_utf8(r.doc, where, what("result doc"));
    }
  }
  for (const auto& c : m->components) {
    const bool has_factory = (c.kind == ComponentKind::Metric && c.make_metric) ||
                             (c.kind == ComponentKind::Reader && c.make_reader) ||
                             (c.kind == ComponentKind::Backend && c.make_backend);
    if (c.name.empty() || !has_factory)
      throw ConfigError(fmt::format("plugin '{}' declares a {} '{}' with no {}", shown(file),
                                    component_kind_name(c.kind), escape_for_terminal(c.name),
                                    c.name.empty() ? "name" : "factory"));
  }
  out.manifest = m;
  return out;
}

std::vector<fs::path> env_paths() {
  std::vector<fs::path> out;
  const char* env = std::getenv("TALLY_PLUGIN_PATH");
  if (env == nullptr) return out;
  std::string_view s(env);
  while (!s.empty()) {
    const auto colon = s.find(':');
    const auto part = s.substr(0, colon);
    if (!part.empty()) out.emplace_back(std::string(part));
    if (colon == std::string_view::npos) break;
    s.remove_prefix(colon + 1);
  }
  return out;
}

// The plugin files under one search-path entry (a folder, or a single .so), sorted by name. Every
// folder and file is checked for who may have written it, unless `allow_unsafe`.
std::vector<fs::path> plugin_files(const fs::path& entry, const std::string& origin,
                                   bool allow_unsafe) {
  std::error_code ec;
  const auto st = fs::status(entry, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw ConfigError(fmt::format("{}: plugin path '{}' cannot be read: {}", origin, shown(entry),
                                  ec == std::errc::too_many_symbolic_link_levels
                                      ? "it is a symbolic link loop"
                                      : ec.message()));
  if (ec || !fs::exists(st))
    throw ConfigError(fmt::format("{}: plugin path '{}' does not exist", origin, shown(entry)));
  if (fs::is_regular_file(st)) {
    if (!allow_unsafe) {
      const auto real = fs::canonical(entry, ec);
      const auto folder = (ec ? entry : real).parent_path();
      check_trusted(folder.empty() ? fs::path(".") : folder, "plugin folder", origin);
      check_trusted(entry, "plugin file", origin);
      check_ancestors(entry, "plugin file", origin);
    }
    return {entry};
  }
  if (!fs::is_directory(st))
    throw ConfigError(
        fmt::format("{}: plugin path '{}' is neither a folder nor a file", origin, shown(entry)));
  if (!allow_unsafe) {
    check_trusted(entry, "plugin folder", origin);
    check_ancestors(entry, "plugin folder", origin);
  }
  // The walk reports its errors through `ec` (never filesystem_error's raw text): a folder that
  // cannot be listed, an entry whose type cannot be read (a symbolic link loop, say).
  std::vector<fs::path> files;
  const auto cannot_list = [&](const std::error_code& e) {
    return ConfigError(
        fmt::format("{}: cannot list plugin folder '{}': {}", origin, shown(entry), e.message()));
  };
  fs::directory_iterator it(entry, ec);
  if (ec) throw cannot_list(ec);
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw cannot_list(ec);
    const fs::path p = it->path();
    if (!is_plugin_file(p)) continue;
    const auto type = it->status(ec);
    if (ec)
      throw ConfigError(fmt::format("{}: plugin '{}' cannot be read: {}", origin, shown(p),
                                    ec == std::errc::too_many_symbolic_link_levels
                                        ? "it is a symbolic link loop"
                                        : ec.message()));
    if (fs::is_directory(type)) continue;
    if (!allow_unsafe) {
      check_trusted(p, "plugin file", origin);
      // A symbolic link: the folder its target lies in is checked too, and every folder on the
      // way to it.
      const auto real = fs::canonical(p, ec);
      if (!ec && real.parent_path() != fs::canonical(entry, ec))
        check_trusted(real.parent_path(), "plugin folder", origin);
      ec.clear();
      if (fs::is_symlink(it->symlink_status(ec))) check_ancestors(p, "plugin file", origin);
      ec.clear();
    }
    files.push_back(p);
  }
  if (ec) throw cannot_list(ec);
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

fs::path Registry::builtin_dir() {
  // libtally lives in <prefix>/lib (installed) or <build>/lib (build tree); so do the plugins.
  // Without "..": libtally found through an RPATH of $ORIGIN/../lib (the CLI) and through one
  // of $ORIGIN/lib (Python's module) names one folder one way.
  const fs::path dir = boost::dll::this_line_location().parent_path() / "tally" / "plugins";
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(dir, ec);
  return ec ? dir : canonical;
}

Registry Registry::load(const std::vector<fs::path>& config_paths, bool allow_unsafe) {
  allow_unsafe = allow_unsafe || env_allows_unsafe();
  Registry reg;
  std::vector<std::pair<fs::path, std::string>> entries;  // path, where it was named
  for (const auto& p : config_paths) entries.emplace_back(p, "plugins.paths");
  for (const auto& p : env_paths()) entries.emplace_back(p, "TALLY_PLUGIN_PATH");
  const auto builtin = builtin_dir();
  std::error_code ec;
  if (fs::is_directory(builtin, ec)) entries.emplace_back(builtin, "built-in plugin folder");

  std::vector<fs::path> seen;  // canonical paths: one file named twice loads once
  std::map<std::pair<ComponentKind, std::string>, std::size_t> by_name;
  for (const auto& [entry, origin] : entries) {
    reg.search_path_.push_back(entry);
    for (const auto& file : plugin_files(entry, origin, allow_unsafe)) {
      const auto canonical = fs::weakly_canonical(file, ec);
      if (std::find(seen.begin(), seen.end(), canonical) != seen.end()) continue;
      seen.push_back(canonical);
      Loaded loaded = load_plugin(file);
      if (!loaded.lib) {
        reg.unloaded_.push_back({file, loaded.missing_library});
        continue;
      }
      for (const auto& info : loaded.manifest->components) {
        Component c{&info, file, loaded.manifest->name, loaded.manifest->version, loaded.lib};
        std::vector<std::string> names{info.name};
        names.insert(names.end(), info.aliases.begin(), info.aliases.end());
        for (const auto& n : names) {
          auto [it, inserted] = by_name.emplace(std::pair{info.kind, n}, reg.components_.size());
          if (!inserted) {
            const auto& other = reg.components_[it->second];
            throw ConfigError(fmt::format("two plugins define the {} '{}': '{}' and '{}'",
                                          component_kind_name(info.kind), escape_for_terminal(n),
                                          shown(other.file), shown(file)));
          }
        }
        reg.components_.push_back(std::move(c));
      }
    }
  }
  return reg;
}

const Component* Registry::find(ComponentKind kind, std::string_view name) const {
  for (const auto& c : components_) {
    if (c.info->kind != kind) continue;
    if (c.info->name == name) return &c;
    for (const auto& a : c.info->aliases)
      if (a == name) return &c;
  }
  return nullptr;
}

std::string Registry::search_text() const {
  std::string out;
  for (const auto& p : search_path_) out += (out.empty() ? "" : ":") + shown(p);
  return out.empty() ? "no plugin folders" : out;
}

const Component& Registry::get(ComponentKind kind, std::string_view name) const {
  if (const Component* c = find(kind, name)) return *c;
  std::vector<std::string> known;
  for (const auto& c : components_)
    if (c.info->kind == kind) known.push_back(c.info->name);
  // `auto` is no plugin: the engine resolves it to one of these (backend_auto.hpp).
  if (kind == ComponentKind::Backend) known.push_back("auto");
  std::sort(known.begin(), known.end());
  const std::string known_text = known.empty() ? "none" : fmt::format("{}", fmt::join(known, ", "));
  // The plugin that would have provided it (its file is libtally_NAME.so) needs a library this
  // machine lacks: that library is the whole story.
  for (const auto& u : unloaded_)
    if (u.file.filename() == fmt::format("libtally_{}.so", name))
      throw ConfigError(fmt::format(
          "the {} '{}' is not available on this machine: its plugin '{}' needs {}, which is not "
          "installed (available: {})",
          component_kind_name(kind), name, shown(u.file), u.missing_library, known_text));
  throw ConfigError(fmt::format("unknown {} '{}' (known: {}; searched {}){}",
                                component_kind_name(kind), name, known_text, search_text(),
                                unloaded_text()));
}

std::string Registry::unloaded_text() const {
  std::string out;
  for (const auto& u : unloaded_)
    out += fmt::format("{} '{}' is not loaded: it needs {}, which this machine does not have",
                       out.empty() ? "; plugin" : ", plugin", shown(u.file), u.missing_library);
  return out;
}

namespace {
// Wraps a plugin-made object so that it holds its library: the object is destroyed first, then
// the library reference is dropped (docs/architecture.md, "The flow of one run": a library is
// never unloaded under a live object).
template <class T>
std::shared_ptr<T> hold_library(std::unique_ptr<T> obj, const std::shared_ptr<void>& lib) {
  return std::shared_ptr<T>(obj.release(), [lib](T* p) { delete p; });
}
}  // namespace

std::shared_ptr<Metric> Registry::make_metric(const Component& c, const Params& p) {
  return hold_library(c.info->make_metric(p), c.library);
}
namespace {
// Batches are objects a reader plugin made too: their tensors may be views whose owner (a file
// mapping, say) is freed by code in the reader's library. This decorator re-wraps every tensor so
// that it also holds the library, which then outlives the last batch, not just the reader.
class LibraryPinningReader : public Reader {
 public:
  LibraryPinningReader(std::unique_ptr<Reader> inner, std::shared_ptr<void> lib)
      : lib_(std::move(lib)), inner_(std::move(inner)) {}
  std::vector<std::string> fields() const override { return inner_->fields(); }
  std::int64_t total_samples() const override { return inner_->total_samples(); }
  std::int64_t shard_samples() const override { return inner_->shard_samples(); }
  std::string layout() const override { return inner_->layout(); }
  std::optional<Batch> next() override {
    auto batch = inner_->next();
    if (!batch) return batch;
    Batch pinned;
    for (const auto& [name, field] : batch->fields()) {
      if (const auto* t = std::get_if<Tensor>(&field)) {
        pinned.set(name, pin(*t));
      } else if (const auto* text = std::get_if<Text>(&field)) {
        pinned.set_text(name, *text);  // its storage was made by libtally (Text's factories)
      } else {
        Batch::Ragged r;
        for (const auto& e : std::get<Batch::Ragged>(field)) r.push_back(pin(e));
        pinned.set_ragged(name, std::move(r));
      }
    }
    return pinned;
  }

 private:
  struct Pin {
    std::shared_ptr<void> lib;  // destroyed last: members go in reverse order
    Tensor tensor;
  };
  Tensor pin(const Tensor& t) const {
    auto holder = std::make_shared<const Pin>(Pin{lib_, t});
    return Tensor::view(t.data(), t.dtype(), t.shape(), t.device(), holder);
  }

  std::shared_ptr<void> lib_;  // declared first: released after the inner reader
  std::unique_ptr<Reader> inner_;
};

// The same for a reader whose batches are stable (StableBatchReader): the wrapper says so too.
class StableLibraryPinningReader final : public LibraryPinningReader, public StableBatchReader {
 public:
  using LibraryPinningReader::LibraryPinningReader;
};
}  // namespace

std::shared_ptr<Reader> Registry::make_reader(const Component& c, const Params& p,
                                              const ShardInfo& s) {
  auto inner = c.info->make_reader(p, s);
  if (dynamic_cast<StableBatchReader*>(inner.get()) != nullptr)
    return hold_library<Reader>(
        std::make_unique<StableLibraryPinningReader>(std::move(inner), c.library), c.library);
  return hold_library<Reader>(std::make_unique<LibraryPinningReader>(std::move(inner), c.library),
                              c.library);
}
std::shared_ptr<DistBackend> Registry::make_backend(const Component& c, const Params& p) {
  return hold_library(c.info->make_backend(p), c.library);
}

}  // namespace tally
