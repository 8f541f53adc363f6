#include "npz_member.hpp"

#include <sys/stat.h>
#include <zip.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "tally/sdk/error.hpp"
#include "tally_support/folder_fields.hpp"

namespace tally_npy {

std::optional<NpzRef> parse_npz_ref(std::string_view value, std::string_view field) {
  constexpr std::string_view kSep = ".npz:";
  const auto at = value.rfind(kSep);
  if (at != std::string_view::npos)
    return NpzRef{std::string(value.substr(0, at + 4)),
                  std::string(value.substr(at + kSep.size()))};
  if (value.ends_with(".npz")) return NpzRef{std::string(value), std::string(field)};
  return std::nullopt;
}

struct NpzMember::Impl {
  zip_t* archive = nullptr;
  zip_file_t* file = nullptr;
  std::string member;          // the name in the archive
  std::uint64_t size = 0;      // uncompressed
  std::uint64_t consumed = 0;  // bytes read so far
  ~Impl() {
    if (file != nullptr) zip_fclose(file);
    if (archive != nullptr) zip_discard(archive);
  }
};

namespace {

std::string zip_message(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string out = zip_error_strerror(&error);
  zip_error_fini(&error);
  return out;
}

}  // namespace

NpzMember::NpzMember(const NpzRef& ref, const std::string& what)
    : impl_(std::make_unique<Impl>()), what_(what) {
  auto fail = [&](const std::string& problem) -> tally::InputError {
    return tally::InputError(what + ": " + problem);
  };
  // A FIFO, device or folder is refused by its kind before libzip opens it.
  struct stat file {};
  if (::stat(ref.archive.c_str(), &file) == 0 && !S_ISREG(file.st_mode))
    tally::support::require_regular_file(ref.archive, what, "an .npz archive");
  int code = 0;
  impl_->archive = zip_open(ref.archive.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  if (impl_->archive == nullptr) {
    if (code == ZIP_ER_NOENT) throw fail("archive not found");
    if (code == ZIP_ER_NOZIP)
      throw fail("not an .npz archive: the file is not a zip archive (np.savez writes one)");
    if (code == ZIP_ER_INCONS || code == ZIP_ER_CRC || code == ZIP_ER_EOF)
      throw fail("corrupt .npz archive: " + zip_message(code));
    throw fail("cannot open the .npz archive: " + zip_message(code));
  }
  // np.savez names members "<key>.npy"; the config may name them with or without the suffix.
  zip_int64_t index = zip_name_locate(impl_->archive, ref.member.c_str(), ZIP_FL_ENC_GUESS);
  if (index < 0 && !ref.member.ends_with(".npy"))
    index = zip_name_locate(impl_->archive, (ref.member + ".npy").c_str(), ZIP_FL_ENC_GUESS);
  if (index < 0) {
    std::string members;
    const zip_int64_t n = zip_get_num_entries(impl_->archive, 0);
    for (zip_int64_t i = 0; i < n; ++i) {
      const char* name = zip_get_name(impl_->archive, static_cast<zip_uint64_t>(i), 0);
      if (name == nullptr) continue;
      std::string_view shown(name);
      if (shown.ends_with(".npy")) shown.remove_suffix(4);
      members += (members.empty() ? "" : ", ") + std::string(shown);
    }
    throw fail("the archive has no member '" + ref.member +
               "' (members: " + (members.empty() ? std::string("none") : members) + ")");
  }
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(impl_->archive, static_cast<zip_uint64_t>(index), 0, &st) != 0 ||
      (st.valid & ZIP_STAT_SIZE) == 0)
    throw fail("corrupt .npz archive: cannot read the entry of member '" + ref.member +
               "': " + zip_strerror(impl_->archive));
  impl_->member = st.name != nullptr ? st.name : ref.member;
  impl_->size = st.size;
  impl_->file = zip_fopen_index(impl_->archive, static_cast<zip_uint64_t>(index), 0);
  if (impl_->file == nullptr) {
    const int err = zip_error_code_zip(zip_get_error(impl_->archive));
    if (err == ZIP_ER_NOPASSWD || err == ZIP_ER_WRONGPASSWD)
      throw fail("member '" + impl_->member + "' is encrypted: expected a plain np.savez archive");
    throw fail("cannot read member '" + impl_->member + "': " + zip_strerror(impl_->archive));
  }

  // The .npy header: the first 12 bytes give its length; then the rest of it.
  std::string prefix(static_cast<std::size_t>(std::min<std::uint64_t>(impl_->size, 12)), '\0');
  auto read_exact = [&](char* out, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      const zip_int64_t r = zip_fread(impl_->file, out + got, n - got);
      if (r < 0)
        throw fail("corrupt member '" + impl_->member +
                   "': " + zip_error_strerror(zip_file_get_error(impl_->file)));
      if (r == 0)
        throw fail("corrupt member '" + impl_->member + "': it ends after " +
                   std::to_string(impl_->consumed + got) + " bytes, its entry says " +
                   std::to_string(impl_->size));
      got += static_cast<std::size_t>(r);
    }
    impl_->consumed += n;
  };
  read_exact(prefix.data(), prefix.size());
  const std::size_t want = std::min<std::uint64_t>(impl_->size, npy_prefix_bytes(prefix));
  if (want > prefix.size()) {
    const std::size_t have = prefix.size();
    prefix.resize(want);
    read_exact(prefix.data() + have, want - have);
  }
  header_ = parse_npy(prefix, static_cast<std::size_t>(impl_->size), what);
  header_.path = ref.archive + ":" + impl_->member;
  impl_->consumed = prefix.size();
}

NpzMember::~NpzMember() = default;

tally::Tensor NpzMember::read_rows(std::int64_t begin, std::int64_t end) {
  auto fail = [&](const std::string& problem) -> tally::InputError {
    return tally::InputError(what_ + ": " + problem);
  };
  std::vector<std::int64_t> shape = header_.shape;
  shape[0] = end - begin;
  tally::Tensor out = tally::Tensor::zeros(header_.dtype, shape);
  const std::uint64_t skip_to =
      header_.header_bytes + static_cast<std::uint64_t>(begin) * header_.row_bytes;
  const std::uint64_t stop = skip_to + out.nbytes();
  auto* dest = static_cast<char*>(out.mutable_data());
  std::vector<char> chunk(1 << 16);
  // Every byte of the member passes through zip_fread: libzip checks the CRC at the end.
  while (impl_->consumed < impl_->size) {
    const zip_int64_t r = zip_fread(impl_->file, chunk.data(), chunk.size());
    if (r < 0)
      throw fail("corrupt member '" + impl_->member +
                 "': " + zip_error_strerror(zip_file_get_error(impl_->file)));
    if (r == 0)
      throw fail("corrupt member '" + impl_->member + "': it ends after " +
                 std::to_string(impl_->consumed) + " bytes, its entry says " +
                 std::to_string(impl_->size));
    const std::uint64_t lo = impl_->consumed, hi = lo + static_cast<std::uint64_t>(r);
    const std::uint64_t a = std::max(lo, skip_to), b = std::min(hi, stop);
    if (a < b) std::memcpy(dest + (a - skip_to), chunk.data() + (a - lo), b - a);
    impl_->consumed = hi;
  }
  // A final read returns 0, or the CRC error of a damaged member.
  if (zip_fread(impl_->file, chunk.data(), 1) < 0)
    throw fail("corrupt member '" + impl_->member +
               "': " + zip_error_strerror(zip_file_get_error(impl_->file)));
  return out;
}

}  // namespace tally_npy
