// What a custom tool writes to stdout, made into the result an agent sees (SPEC §11): parsed
// as one JSON value, then sanitized so no tool can flood or break the client. Pure: no I/O.
//
// "Characters" here are Unicode code points of UTF-8 text; a cut never splits a code point.
#pragma once

#include <boost/json/value.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace toolwarden::protocol {

inline constexpr std::size_t kMaxResultStringChars = 2000;
inline constexpr std::size_t kMaxResultDepth = 10;
inline constexpr std::size_t kMaxResultBytes = 24000;
inline constexpr std::size_t kMaxToolOutputDepth = 2000;  // parse limit; past 10 is omitted
inline constexpr std::size_t kToolOutputPreviewChars = 1200;

/// Parses a tool's stdout: exactly one JSON value, whitespace around it allowed, strings valid
/// UTF-8 (RFC 8259). The bare NaN, Infinity and -Infinity that Python's json.dumps writes are
/// accepted outside strings and become non-finite numbers, as do numbers too large for a double
/// (1e999); sanitize_tool_result replaces them all. Values nested up to kMaxToolOutputDepth
/// parse (so a deep result is reported as depth_exceeded); deeper, or anything else that is not
/// one JSON value → nullopt with `*error` (when not null) saying why.
std::optional<boost::json::value> parse_tool_output(std::string_view text, std::string* error);

/// SPEC §11 sanitization:
/// - a string or object key over 2,000 characters keeps its first 2,000 and gets "..." appended
///   (when two keys of an object become equal that way, the first one is kept);
/// - the value itself is at depth 0 and a container's members one deeper than it: an array or
///   object at depth 10 or deeper — the 11th level of nesting — becomes
///   {"omitted":true,"reason":"depth_exceeded"};
/// - a NaN or infinite number becomes {"omitted":true,"reason":"non_finite_number"};
/// - then, when the sanitized value serializes to more than 24,000 bytes, the whole result
///   becomes {"omitted":true,"reason":"result_too_large","size_bytes":N}, N being that
///   serialized size.
boost::json::value sanitize_tool_result(const boost::json::value& result);

/// The last `n` characters of `text` (stdout/stderr previews), with every byte that is not part
/// of valid UTF-8 replaced by U+FFFD (one per byte, as valid_utf8 does). Decodes only the last
/// 4·n bytes of `text`.
std::string tail_chars(std::string_view text, std::size_t n);

}  // namespace toolwarden::protocol
