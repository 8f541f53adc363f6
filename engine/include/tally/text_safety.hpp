// Text that crosses into tally from outside (configs, file names, plugin manifests, data) is
// checked or escaped here, in one place: the UTF-8 check that config values pass before any work,
// and the escaping of whatever is only reported (messages, tables, file names in JSON), so that a
// control character never reaches a terminal raw and a JSON writer never fails after the work.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tally {

/// The byte offset of the first byte that does not start a well-formed UTF-8 sequence (truncated
/// sequences, stray continuation bytes, overlong forms, surrogates, code points above U+10FFFF,
/// 0xC0, 0xC1, 0xF5..0xFF); nullopt when `text` is valid UTF-8.
std::optional<std::size_t> invalid_utf8_offset(std::string_view text) noexcept;

/// ConfigError "WHERE: WHAT is not valid UTF-8: byte 0xNN at offset K ("escaped text")" unless
/// `text` is valid UTF-8.
void require_utf8(std::string_view text, std::string_view where, std::string_view what);

/// Valid UTF-8 is kept as it is; every byte of an ill-formed sequence becomes "\xNN". For text
/// that is only reported (file names in the results JSON): valid UTF-8 out, whatever came in.
std::string escape_invalid_utf8(std::string_view text);

/// escape_invalid_utf8, and moreover every control character as "\xNN" (C0 but tab, DEL, and the
/// C1 controls U+0080..U+009F, byte by byte: \xc2\x9b), and the code points that reorder or
/// break lines on a terminal (U+2028, U+2029, bidirectional embeddings, overrides and isolates)
/// as "\u{XXXX}". What tally prints to a terminal (messages, tables) goes through this.
std::string escape_for_terminal(std::string_view text);

}  // namespace tally
