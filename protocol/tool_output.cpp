#include "protocol/tool_output.hpp"

#include <array>
#include <boost/json/parser.hpp>
#include <boost/json/serializer.hpp>
#include <cmath>

#include "protocol/mcp.hpp"

namespace toolwarden::protocol {
namespace json = boost::json;

namespace {

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Where a value may start: the text's start, after whitespace, '[', ',' or ':'.
bool value_may_start_after(char c) { return is_json_space(c) || c == '[' || c == ',' || c == ':'; }

// Where a value may end: the text's end, before whitespace, ',', ']' or '}'.
bool value_may_end_before(char c) { return is_json_space(c) || c == ',' || c == ']' || c == '}'; }

// Rewrites the bare NaN, Infinity and -Infinity outside strings into 1e999 / -1e999, which
// Boost.JSON parses as infinities: every non-finite number then meets the same sanitizing. A
// token counts only where a value can stand, so "1NaN" stays invalid. nullopt: nothing to do.
std::optional<std::string> rewrite_non_finite(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kTokens = {{
      {"-Infinity", "-1e999"},
      {"Infinity", "1e999"},
      {"-NaN", "1e999"},
      {"NaN", "1e999"},
  }};
  std::optional<std::string> out;
  std::size_t copied = 0;  // text[0, copied) is in *out already
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is, cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    if (c != 'N' && c != 'I' && c != '-') continue;
    if (i > 0 && !value_may_start_after(text[i - 1])) continue;
    for (const auto& [token, replacement] : kTokens) {
      if (text.substr(i, token.size()) != token) continue;
      const std::size_t end = i + token.size();
      if (end < text.size() && !value_may_end_before(text[end])) break;
      if (!out) {
        out.emplace();
        out->reserve(text.size() + 64);
      }
      out->append(text.substr(copied, i - copied));
      out->append(replacement);
      copied = end;
      i = end - 1;
      break;
    }
  }
  if (out) out->append(text.substr(copied));
  return out;
}

json::value omitted(std::string_view reason) {
  return json::object{{"omitted", true}, {"reason", reason}};
}

// `s` cut to kMaxResultStringChars code points plus "...", or nullopt when it is short enough.
std::optional<std::string> cut(std::string_view s) {
  if (s.size() <= kMaxResultStringChars) return std::nullopt;  // bytes ≥ code points
  std::size_t chars = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (is_continuation(s[i])) continue;
    if (chars == kMaxResultStringChars) return std::string(s.substr(0, i)) + "...";
    ++chars;
  }
  return std::nullopt;
}

json::value sanitize_at(const json::value& v, std::size_t depth) {
  switch (v.kind()) {
    case json::kind::double_:
      return std::isfinite(v.get_double()) ? v : omitted("non_finite_number");
    case json::kind::string: {
      auto short_form = cut(v.get_string());
      return short_form ? json::value(*short_form) : v;
    }
    case json::kind::array: {
      if (depth >= kMaxResultDepth) return omitted("depth_exceeded");
      json::array out;
      out.reserve(v.get_array().size());
      for (const auto& e : v.get_array()) out.push_back(sanitize_at(e, depth + 1));
      return out;
    }
    case json::kind::object: {
      if (depth >= kMaxResultDepth) return omitted("depth_exceeded");
      json::object out;
      out.reserve(v.get_object().size());
      for (const auto& kv : v.get_object()) {
        auto key = cut(kv.key());
        // emplace keeps the first of two keys that the cut made equal
        out.emplace(key ? json::string_view(*key) : kv.key(), sanitize_at(kv.value(), depth + 1));
      }
      return out;
    }
    default:
      return v;
  }
}

// The size of json::serialize(v), without building the string.
std::size_t serialized_size(const json::value& v) {
  json::serializer sr;
  sr.reset(&v);
  std::size_t n = 0;
  std::array<char, 16384> buf;
  while (!sr.done()) n += sr.read(buf.data(), buf.size()).size();
  return n;
}

}  // namespace

std::optional<json::value> parse_tool_output(std::string_view text, std::string* error) {
  auto fail = [error](std::string why) -> std::optional<json::value> {
    if (error != nullptr) *error = std::move(why);
    return std::nullopt;
  };
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return fail("the tool wrote no JSON value");
  }
  const auto rewritten = rewrite_non_finite(text);
  const std::string_view input = rewritten ? std::string_view(*rewritten) : text;
  json::parse_options opts;
  opts.max_depth = kMaxToolOutputDepth;
  json::parser p({}, opts);
  json::error_code ec;
  p.write(input.data(), input.size(), ec);
  if (ec == json::error::too_deep) {
    return fail("the tool's JSON is nested deeper than " + std::to_string(kMaxToolOutputDepth) +
                " levels");
  }
  if (ec == json::error::extra_data) return fail("the tool wrote more than one JSON value");
  if (ec) return fail("the tool did not write valid JSON (" + ec.message() + ")");
  return p.release();
}

json::value sanitize_tool_result(const json::value& result) {
  json::value clean = sanitize_at(result, 0);
  const std::size_t size = serialized_size(clean);
  if (size <= kMaxResultBytes) return clean;
  return json::object{{"omitted", true}, {"reason", "result_too_large"}, {"size_bytes", size}};
}

std::string tail_chars(std::string_view text, std::size_t n) {
  if (n == 0) return {};
  // Decoding the last 4·n bytes is enough: a character cut at the window's start spills at most
  // 3 bytes into it (decoded as replacements that are never kept), and the rest, at least
  // 4·n - 3 bytes, decodes exactly as in the whole text into at least n characters of at most
  // 4 bytes each.
  const std::size_t start = n < text.size() / 4 ? text.size() - 4 * n : 0;
  const std::string clean = valid_utf8(text.substr(start));
  std::size_t i = clean.size();
  for (std::size_t chars = 0; i > 0 && chars < n;) {
    --i;
    if (!is_continuation(clean[i])) ++chars;
  }
  return clean.substr(i);
}

}  // namespace toolwarden::protocol
