#include "npy_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>

#include "tally/sdk/error.hpp"
#include "tally_support/folder_fields.hpp"

namespace tally_npy {

namespace {

static_assert(std::endian::native == std::endian::little,
              "the npy reader hands out little-endian file data as it is");

constexpr std::string_view kMagic = "\x93NUMPY";
// Bounds on what a header may claim. NumPy writes headers of a few hundred bytes (and refuses
// over 10000 by default), shapes of at most 64 dimensions (NPY_MAXDIMS), and nests tuples and
// lists two or three deep.
constexpr std::size_t kMaxHeaderBytes = 65536;
constexpr std::size_t kMaxHeaderDepth = 16;
constexpr std::size_t kMaxDims = 64;

// printable ASCII as is, anything else as \xNN, at most `limit` bytes.
std::string escaped(std::string_view bytes, std::size_t limit = 80) {
  std::string out;
  for (std::size_t i = 0; i < bytes.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (bytes.size() > limit) out += "...";
  return out;
}

std::string bytes_text(std::size_t n) { return std::to_string(n) + (n == 1 ? " byte" : " bytes"); }

// ---- the header: a Python dict literal ----------------------------------------------------------

// The subset of Python literals that npy headers use.
struct PyValue {
  enum class Kind { Str, Int, Bool, None, Tuple, List };
  Kind kind = Kind::None;
  std::string str;
  std::int64_t integer = 0;
  bool boolean = false;
  std::vector<PyValue> items;
};

class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  // The dict, as (key, value) pairs in order; nullopt and error() on malformed text.
  std::optional<std::vector<std::pair<std::string, PyValue>>> parse_dict() {
    std::vector<std::pair<std::string, PyValue>> entries;
    skip_space();
    if (!eat('{')) return fail("expected '{'");
    skip_space();
    while (!eat('}')) {
      PyValue key;
      if (!parse_value(key)) return std::nullopt;
      if (key.kind != PyValue::Kind::Str) return fail("expected a string key");
      skip_space();
      if (!eat(':')) return fail("expected ':' after key '" + key.str + "'");
      PyValue value;
      if (!parse_value(value)) return std::nullopt;
      for (const auto& [k, v] : entries) {
        if (k == key.str) return fail("duplicate key '" + key.str + "'");
      }
      entries.emplace_back(std::move(key.str), std::move(value));
      skip_space();
      if (eat(',')) {
        skip_space();
        continue;
      }
      if (peek() != '}') return fail("expected ',' or '}'");
    }
    skip_space();
    if (pos_ != text_.size()) return fail("unexpected text after the closing '}'");
    return entries;
  }

  const std::string& error() const { return error_; }

 private:
  std::nullopt_t fail(std::string message) {
    if (error_.empty()) error_ = message + " at offset " + std::to_string(pos_);
    return std::nullopt;
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool eat(char c) {
    if (peek() != c || pos_ >= text_.size()) return false;
    ++pos_;
    return true;
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool starts_with(std::string_view word) const { return text_.substr(pos_).starts_with(word); }

  bool parse_value(PyValue& out) {
    skip_space();
    const char c = peek();
    if (c == '\'' || c == '"') return parse_string(out);
    if (c == '(' || c == '[') return parse_sequence(out);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_int(out);
    for (const auto& [word, kind, value] : {std::tuple{"True", PyValue::Kind::Bool, true},
                                            std::tuple{"False", PyValue::Kind::Bool, false},
                                            std::tuple{"None", PyValue::Kind::None, false}}) {
      if (starts_with(word)) {
        pos_ += std::string_view(word).size();
        out.kind = kind;
        out.boolean = value;
        return true;
      }
    }
    fail("expected a value");
    return false;
  }

  bool parse_string(PyValue& out) {
    const char quote = text_[pos_++];
    const std::size_t begin = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') {
        fail("escape sequences in strings are not supported");
        return false;
      }
      ++pos_;
    }
    if (pos_ == text_.size()) {
      fail("unterminated string");
      return false;
    }
    out.kind = PyValue::Kind::Str;
    out.str = std::string(text_.substr(begin, pos_ - begin));
    ++pos_;
    return true;
  }

  bool parse_int(PyValue& out) {
    const bool negative = eat('-');
    if (!(peek() >= '0' && peek() <= '9')) {
      fail("expected a digit");
      return false;
    }
    std::int64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      const int digit = text_[pos_++] - '0';
      if (__builtin_mul_overflow(value, 10, &value) ||
          __builtin_add_overflow(value, digit, &value)) {
        fail("integer out of range");
        return false;
      }
    }
    if (peek() == 'L' || peek() == 'l') ++pos_;  // Python 2 era files: (3L, 4L)
    out.kind = PyValue::Kind::Int;
    out.integer = negative ? -value : value;
    return true;
  }

  bool parse_sequence(PyValue& out) {
    // Recursion, bounded: a header of nested tuples must not overflow the stack.
    if (depth_ >= kMaxHeaderDepth) {
      fail("nested deeper than " + std::to_string(kMaxHeaderDepth) + " levels");
      return false;
    }
    ++depth_;
    const bool ok = parse_items(out);
    --depth_;
    return ok;
  }

  bool parse_items(PyValue& out) {
    const char close = text_[pos_++] == '(' ? ')' : ']';
    out.kind = close == ')' ? PyValue::Kind::Tuple : PyValue::Kind::List;
    skip_space();
    while (!eat(close)) {
      PyValue item;
      if (!parse_value(item)) return false;
      out.items.push_back(std::move(item));
      skip_space();
      if (eat(',')) {
        skip_space();
        continue;
      }
      if (peek() != close) {
        fail(std::string("expected ',' or '") + close + "'");
        return false;
      }
    }
    return true;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::size_t depth_ = 0;
  std::string error_;
};

// ---- dtypes -------------------------------------------------------------------------------------

struct DTypeCode {
  std::string_view code;  // kind and size, without the byte-order character
  tally::DType dtype;
};
constexpr DTypeCode kDTypes[] = {
    {"b1", tally::DType::Bool}, {"u1", tally::DType::U8},  {"i1", tally::DType::I8},
    {"i2", tally::DType::I16},  {"u2", tally::DType::U16}, {"i4", tally::DType::I32},
    {"u4", tally::DType::U32},  {"i8", tally::DType::I64}, {"f4", tally::DType::F32},
    {"f8", tally::DType::F64},
};
constexpr std::string_view kSupported = "|b1, |u1, |i1, <i2, <u2, <i4, <u4, <i8, <f4, <f8";

// The dtype of `descr`, or an error message.
std::pair<std::optional<tally::DType>, std::string> parse_descr(std::string_view descr) {
  char order = '=';
  std::string_view code = descr;
  if (!code.empty() && std::string_view("<>|=").find(code.front()) != std::string_view::npos) {
    order = code.front();
    code.remove_prefix(1);
  }
  for (const auto& known : kDTypes) {
    if (known.code != code) continue;
    const bool one_byte = tally::dtype_size(known.dtype) == 1;
    // '=' is native order, little-endian here (static_assert above); '|' means "not applicable"
    // and NumPy only writes it for one-byte types.
    if (one_byte || order == '<' || order == '=') return {known.dtype, {}};
    if (order == '>') {
      return {std::nullopt, "big-endian dtype '" + std::string(descr) +
                                "' is not supported: expected little-endian '<" +
                                std::string(code) + "' (convert with arr.astype('<" +
                                std::string(code) + "'))"};
    }
    break;
  }
  return {std::nullopt, "unsupported dtype '" + std::string(descr) + "': expected one of " +
                            std::string(kSupported)};
}

// ---- the mapping --------------------------------------------------------------------------------

// A mapped file that another process truncates raises SIGBUS at the next access of a page past
// its new end: without a handler the process dies with no message. Every live mapping is entered
// in a fixed table (address range and the message to print); a SIGBUS handler (installed while
// any mapping is live) that finds the faulting address in the table writes that one line and
// exits with 1, as a RuntimeError would. Any other SIGBUS goes to the handler that was there
// before (or the default action).
namespace sigbus {

constexpr std::size_t kSlots = 256;
constexpr std::size_t kMessageBytes = 1024;

struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being filled or emptied, 2 live
  std::uintptr_t begin = 0;
  std::size_t size = 0;
  char message[kMessageBytes] = {};
  std::size_t length = 0;
};

Slot g_slots[kSlots];
std::mutex g_install_mutex;
std::size_t g_live = 0;  // under g_install_mutex
struct sigaction g_previous {};

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (const Slot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) != 2) continue;
    if (addr - slot.begin < slot.size) {
      // Only async-signal-safe calls from here.
      const char* p = slot.message;
      std::size_t left = slot.length;
      while (left > 0) {
        const ssize_t n = write(STDERR_FILENO, p, left);
        if (n <= 0) break;
        p += n;
        left -= static_cast<std::size_t>(n);
      }
      _exit(1);
    }
  }
  // Not one of ours: whoever handled SIGBUS before, else the default action (the faulting
  // access runs again on return and raises it).
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
      g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  signal(SIGBUS, SIG_DFL);
}

// Enters [addr, addr + size) with its message; the slot's index, or -1 when the table is full
// (the mapping is then read without the message, as before).
int enter(const void* addr, std::size_t size, const std::string& message) {
  for (std::size_t i = 0; i < kSlots; ++i) {
    Slot& slot = g_slots[i];
    int expected = 0;
    if (!slot.state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;
    slot.begin = reinterpret_cast<std::uintptr_t>(addr);
    slot.size = size;
    // One line: control characters (a newline in a file name) shown as '?'.
    std::string line = "tally: error: " + message;
    if (line.size() > kMessageBytes - 1) {  // cut in place (g++ 12 misreads substr() + "...")
      line.resize(kMessageBytes - 4);
      line += "...";
    }
    for (char& c : line)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    line += '\n';
    std::memcpy(slot.message, line.data(), line.size());
    slot.length = line.size();
    {
      const std::lock_guard lock(g_install_mutex);
      if (g_live++ == 0) {
        struct sigaction action {};
        action.sa_sigaction = on_sigbus;
        action.sa_flags = SA_SIGINFO;
        sigemptyset(&action.sa_mask);
        sigaction(SIGBUS, &action, &g_previous);
      }
    }
    slot.state.store(2, std::memory_order_release);
    return static_cast<int>(i);
  }
  return -1;
}

void leave(int index) {
  if (index < 0) return;
  Slot& slot = g_slots[index];
  slot.state.store(1, std::memory_order_release);
  {
    // The handler lives in this library: it is taken down with the last mapping.
    const std::lock_guard lock(g_install_mutex);
    if (--g_live == 0) sigaction(SIGBUS, &g_previous, nullptr);
  }
  slot.state.store(0, std::memory_order_release);
}

}  // namespace sigbus

class Mapping {
 public:
  /// `fd` (owned: closed with the mapping) stays open so that the file's size can be asked again.
  Mapping(void* addr, std::size_t size, int fd) : addr_(addr), size_(size), fd_(fd) {}
  ~Mapping() {
    sigbus::leave(slot_);
    munmap(addr_, size_);
    if (fd_ >= 0) close(fd_);
  }
  /// The size of the file now (another process may have shortened it since it was mapped).
  std::uint64_t size_now() const {
    struct stat st {};
    return fstat(fd_, &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : size_;
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  const std::byte* bytes() const { return static_cast<const std::byte*>(addr_); }
  // From now on a SIGBUS in this mapping prints `message` and exits with 1.
  void watch(const std::string& message) { slot_ = sigbus::enter(addr_, size_, message); }

 private:
  void* addr_;
  std::size_t size_;
  int fd_;
  int slot_ = -1;
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() == 1) out += ",";
  return out + ")";
}

std::size_t npy_prefix_bytes(std::string_view first_12) {
  if (first_12.size() < 12 || !first_12.starts_with(kMagic)) return 0;
  const auto major = static_cast<unsigned char>(first_12[6]);
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  std::size_t header_len = 0;
  for (std::size_t i = 0; i < length_bytes; ++i)
    header_len |= std::size_t{static_cast<unsigned char>(first_12[8 + i])} << (8 * i);
  // Never more than the largest header parse_npy accepts (it refuses the rest): an archive
  // member's header is read into memory.
  return kMagic.size() + 2 + length_bytes + std::min(header_len, kMaxHeaderBytes + 1);
}

namespace {

// ---- parse_npy's steps
// ----------------------------------------------------------------------------

tally::InputError npy_error(const std::string& what, const std::string& problem) {
  return tally::InputError(what + ": " + problem);
}

/// The header as messages quote it: trailing padding dropped, escaped, at most 200 bytes.
std::string header_text(std::string_view header) {
  std::string_view shown = header;
  while (!shown.empty() && (shown.back() == ' ' || shown.back() == '\n')) shown.remove_suffix(1);
  return "\"" + escaped(shown, 200) + "\"";
}

/// The preamble: magic, major and minor version, header length (u16 for 1.0, u32 for 2.0 and
/// 3.0). Returns the header; `header_bytes` gets the length of the preamble and header.
std::string_view read_preamble(std::string_view file, std::size_t file_size,
                               const std::string& what, std::size_t& header_bytes) {
  if (!file.starts_with(kMagic)) {
    throw npy_error(what,
                    "not an npy file: expected the magic string \\x93NUMPY at the start, found '" +
                        escaped(file.substr(0, kMagic.size())) + "'");
  }
  if (file.size() < kMagic.size() + 2) {
    throw npy_error(what, "truncated npy preamble: the file has " + bytes_text(file_size) +
                              ", expected at least 10");
  }
  const auto major = static_cast<unsigned char>(file[6]);
  const auto minor = static_cast<unsigned char>(file[7]);
  if (!((major == 1 || major == 2 || major == 3) && minor == 0)) {
    throw npy_error(what, "unsupported npy format version " + std::to_string(major) + "." +
                              std::to_string(minor) + ": expected 1.0, 2.0 or 3.0");
  }
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::size_t preamble = kMagic.size() + 2 + length_bytes;
  if (file_size < preamble) {
    throw npy_error(what, "truncated npy preamble: the file has " + bytes_text(file_size) +
                              ", expected at least " + std::to_string(preamble));
  }
  std::size_t header_len = 0;
  for (std::size_t i = 0; i < length_bytes; ++i)
    header_len |= std::size_t{static_cast<unsigned char>(file[8 + i])} << (8 * i);
  if (header_len > kMaxHeaderBytes) {
    throw npy_error(what, "the preamble announces a header of " + bytes_text(header_len) +
                              ", expected at most " + std::to_string(kMaxHeaderBytes) +
                              " (NumPy writes a few hundred)");
  }
  if (file_size - preamble < header_len) {
    throw npy_error(what, "truncated header: the preamble announces a header of " +
                              bytes_text(header_len) + ", but the file has " +
                              bytes_text(file_size) + " in all");
  }
  header_bytes = preamble + header_len;
  return file.substr(preamble, header_len);
}

/// The header dict's three values (pointers into the dict).
struct HeaderKeys {
  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
};

/// The header dict holds exactly descr, fortran_order and shape (as NumPy requires), the last
/// two a bool and a tuple.
HeaderKeys header_keys(const std::vector<std::pair<std::string, PyValue>>& dict,
                       std::string_view header, const std::string& what) {
  HeaderKeys keys;
  for (const auto& [key, value] : dict) {
    if (key == "descr") {
      keys.descr = &value;
    } else if (key == "fortran_order") {
      keys.fortran = &value;
    } else if (key == "shape") {
      keys.shape = &value;
    } else {
      throw npy_error(what, "malformed header dict: unexpected key '" + key +
                                "' (expected exactly 'descr', 'fortran_order' and 'shape'): " +
                                header_text(header));
    }
  }
  for (const auto& [key, value] :
       {std::pair{"descr", keys.descr}, std::pair{"fortran_order", keys.fortran},
        std::pair{"shape", keys.shape}}) {
    if (value == nullptr)
      throw npy_error(what, std::string("malformed header dict: missing key '") + key +
                                "': " + header_text(header));
  }
  if (keys.fortran->kind != PyValue::Kind::Bool) {
    throw npy_error(what, "malformed header dict: 'fortran_order' must be True or False: " +
                              header_text(header));
  }
  if (keys.shape->kind != PyValue::Kind::Tuple) {
    throw npy_error(
        what, "malformed header dict: 'shape' must be a tuple of integers: " + header_text(header));
  }
  return keys;
}

/// The dtype (descr), C order and the shape (at least one dimension) into `out`.
void read_header_values(const HeaderKeys& keys, std::string_view header, const std::string& what,
                        NpyFile& out) {
  if (keys.descr->kind != PyValue::Kind::Str) {
    throw npy_error(what,
                    "unsupported dtype: structured arrays (a list 'descr') are not supported: "
                    "expected one of " +
                        std::string(kSupported));
  }
  out.descr = keys.descr->str;
  auto [dtype, dtype_error] = parse_descr(out.descr);
  if (!dtype) throw npy_error(what, dtype_error);
  out.dtype = *dtype;
  if (keys.fortran->boolean) {
    throw npy_error(what,
                    "Fortran-order arrays are not supported (fortran_order: True): expected C "
                    "order (save np.ascontiguousarray(arr))");
  }
  if (keys.shape->items.size() > kMaxDims) {
    throw npy_error(what, "'shape' has " + std::to_string(keys.shape->items.size()) +
                              " dimensions, expected at most " + std::to_string(kMaxDims));
  }
  for (const auto& dim : keys.shape->items) {
    if (dim.kind != PyValue::Kind::Int || dim.integer < 0) {
      throw npy_error(what,
                      "malformed header dict: 'shape' must be a tuple of non-negative integers: " +
                          header_text(header));
    }
    out.shape.push_back(dim.integer);
  }
  if (out.shape.empty()) {
    throw npy_error(what,
                    "0-d array (shape ()): expected at least one dimension, the sample dimension");
  }
}

/// Sizes, with overflow checks (a hostile header must not wrap around), and that the file holds
/// the data after its header.
void check_data_size(NpyFile& out, std::size_t file_size, const std::string& what) {
  std::size_t row_elements = 1;
  for (std::size_t i = 1; i < out.shape.size(); ++i) {
    if (__builtin_mul_overflow(row_elements, static_cast<std::size_t>(out.shape[i]), &row_elements))
      throw npy_error(what, "shape " + shape_string(out.shape) + " is too large");
  }
  std::size_t data_bytes = 0;
  if (__builtin_mul_overflow(row_elements, tally::dtype_size(out.dtype), &out.row_bytes) ||
      __builtin_mul_overflow(out.row_bytes, static_cast<std::size_t>(out.shape[0]), &data_bytes)) {
    throw npy_error(what, "shape " + shape_string(out.shape) + " is too large");
  }
  if (file_size - out.header_bytes < data_bytes) {
    throw npy_error(what, "truncated data: shape " + shape_string(out.shape) + " of '" + out.descr +
                              "' needs " + bytes_text(data_bytes) + " after a header of " +
                              bytes_text(out.header_bytes) + " (" +
                              bytes_text(out.header_bytes + data_bytes) +
                              " in all), but the file has " + bytes_text(file_size));
  }
}

}  // namespace

NpyFile parse_npy(std::string_view file, std::size_t file_size, const std::string& what) {
  std::size_t header_bytes = 0;
  const std::string_view header = read_preamble(file, file_size, what, header_bytes);
  HeaderParser parser(header);
  const auto dict = parser.parse_dict();
  if (!dict)
    throw npy_error(what, "malformed header dict (" + parser.error() + "): " + header_text(header));
  const HeaderKeys keys = header_keys(*dict, header, what);
  NpyFile out;
  read_header_values(keys, header, what, out);
  out.header_bytes = header_bytes;
  check_data_size(out, file_size, what);
  return out;
}

NpyFile open_npy(const std::filesystem::path& path, const std::string& what) {
  auto fail = [&](const std::string& problem) -> tally::InputError {
    return tally::InputError(what + ": " + problem);
  };

  // O_NONBLOCK: a FIFO named as a field must be refused (below), not waited on for a writer.
  const Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  const auto not_regular = [&] {
    return fail("not a regular file (" + tally::support::not_regular_kind(path) +
                "): expected an .npy file");
  };
  if (fd.get() < 0) {
    const int err = errno;
    if (err == ENOENT) throw fail("file not found");
    struct stat kind {};
    if (stat(path.c_str(), &kind) == 0 && !S_ISREG(kind.st_mode)) throw not_regular();  // a socket
    throw fail(std::string("cannot open the file: ") + std::strerror(err));
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0)
    throw fail(std::string("cannot stat the file: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw not_regular();
  const auto file_size = static_cast<std::size_t>(st.st_size);
  if (file_size == 0) throw fail("not an npy file: the file is empty");

  void* addr = mmap(nullptr, file_size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (addr == MAP_FAILED) throw fail(std::string("cannot map the file: ") + std::strerror(errno));
  const int kept = fcntl(fd.get(), F_DUPFD_CLOEXEC, 0);
  auto writable_mapping = std::make_shared<Mapping>(addr, file_size, kept);
  // Even the header is read through the mapping: a file truncated since fstat ends here too.
  writable_mapping->watch(what + ": the file was truncated while it was read (it had " +
                          bytes_text(file_size) +
                          " when it was opened; another process shortened it)");
  std::shared_ptr<const Mapping> mapping = std::move(writable_mapping);
  const std::string_view file(reinterpret_cast<const char*>(mapping->bytes()), file_size);
  NpyFile out = parse_npy(file, file_size, what);
  out.path = path;
  posix_madvise(addr, file_size, POSIX_MADV_SEQUENTIAL);
  out.data = mapping->bytes() + out.header_bytes;
  out.file_size = file_size;
  out.size_now = [m = mapping] { return m->size_now(); };
  out.mapping = std::move(mapping);
  return out;
}

}  // namespace tally_npy
