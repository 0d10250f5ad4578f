// Fuzzes what a custom tool writes to stdout (SPEC §11): parse_tool_output, the sanitizing that
// makes it safe to hand to an agent, and the stdout/stderr previews. A tool is untrusted code;
// its output must never reach a client as invalid JSON, too deep, too long or too large.
// Input: the bytes of one stdout.
#include <boost/json/parse.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/serialize.hpp>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "policy/path_rules.hpp"
#include "protocol/mcp.hpp"
#include "protocol/tool_output.hpp"
#include "tests/fuzz/fuzz_check.hpp"
#include "tests/fuzz/json_near.hpp"

namespace {
namespace json = boost::json;
namespace proto = toolwarden::protocol;
using toolwarden::fuzz::json_near;

std::size_t code_points(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// {"omitted": true, "reason": reason, ...}; a tool may write one itself.
bool is_marker(const json::value& v, std::string_view reason) {
  const auto* o = v.if_object();
  if (o == nullptr) return false;
  const auto* omitted = o->if_contains("omitted");
  const auto* why = o->if_contains("reason");
  return omitted != nullptr && *omitted == true && why != nullptr && why->is_string() &&
         why->get_string() == reason;
}

// Clean as SPEC §11 promises: finite numbers, UTF-8 strings of at most 2,000 characters plus
// "...", and nothing nested deeper than depth 10 but the markers that replaced it.
// (Sanitizing twice is not the same as once: a non_finite_number marker at depth 10 is itself
// an object there, which a second pass would replace by depth_exceeded.)
void check_clean(const json::value& v, std::size_t depth, const std::string& all) {
  auto check_text = [&](std::string_view s) {
    FUZZ_CHECK(toolwarden::policy::is_valid_utf8(s), all);
    const auto n = code_points(s);
    FUZZ_CHECK(n <= proto::kMaxResultStringChars ||
                   (n == proto::kMaxResultStringChars + 3 && s.substr(s.size() - 3) == "..."),
               "a string of " + std::to_string(n) + " characters");
  };
  switch (v.kind()) {
    case json::kind::double_:
      FUZZ_CHECK(std::isfinite(v.get_double()), all);
      break;
    case json::kind::string:
      check_text(v.get_string());
      break;
    case json::kind::array:
      FUZZ_CHECK(depth < proto::kMaxResultDepth, "too deep: " + all.substr(0, 300));
      for (const auto& e : v.get_array()) check_clean(e, depth + 1, all);
      break;
    case json::kind::object:
      if (depth >= proto::kMaxResultDepth) {
        // Only the flat markers that replaced a container or a number sit this deep.
        FUZZ_CHECK(is_marker(v, "depth_exceeded") || is_marker(v, "non_finite_number"),
                   all.substr(0, 300));
        break;
      }
      for (const auto& kv : v.get_object()) {
        check_text(kv.key());
        check_clean(kv.value(), depth + 1, all);
      }
      break;
    default:
      break;
  }
}

// Nothing to cut, replace or omit: finite numbers, strings and keys of at most 2,000
// characters, containers only above depth 10.
bool needs_nothing(const json::value& v, std::size_t depth) {
  switch (v.kind()) {
    case json::kind::double_:
      return std::isfinite(v.get_double());
    case json::kind::string:
      return code_points(v.get_string()) <= proto::kMaxResultStringChars;
    case json::kind::array:
      if (depth >= proto::kMaxResultDepth) return false;
      for (const auto& e : v.get_array())
        if (!needs_nothing(e, depth + 1)) return false;
      return true;
    case json::kind::object:
      if (depth >= proto::kMaxResultDepth) return false;
      for (const auto& kv : v.get_object()) {
        if (code_points(kv.key()) > proto::kMaxResultStringChars) return false;
        if (!needs_nothing(kv.value(), depth + 1)) return false;
      }
      return true;
    default:
      return true;
  }
}

// The last n characters of the whole stdout repaired as UTF-8: what tail_chars promises while
// decoding only the end of it.
std::string last_chars(std::string_view text, std::size_t n) {
  const std::string clean = proto::valid_utf8(text);
  std::size_t i = clean.size();
  for (std::size_t chars = 0; i > 0 && chars < n;) {
    --i;
    if ((static_cast<unsigned char>(clean[i]) & 0xC0) != 0x80) ++chars;
  }
  return n == 0 ? std::string() : clean.substr(i);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = toolwarden::fuzz::as_text(data, size);

  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{64},
                        proto::kToolOutputPreviewChars}) {
    const std::string tail = proto::tail_chars(text, n);
    FUZZ_CHECK(tail == last_chars(text, n), "tail_chars(" + std::to_string(n) + ") differs");
  }

  std::string error;
  const auto parsed = proto::parse_tool_output(text, &error);

  // Plain JSON means what it says: the NaN/Infinity rewriting never touches a valid document.
  json::parse_options opts;
  opts.max_depth = proto::kMaxToolOutputDepth;
  json::error_code ec;
  const json::value strict = json::parse(text, ec, {}, opts);
  if (!ec) {
    FUZZ_CHECK(parsed.has_value(), "valid JSON refused: " + error);
    FUZZ_CHECK(json_near(*parsed, strict), "valid JSON changed by the rewriting");
  }
  if (!parsed) {
    FUZZ_CHECK(!error.empty(), "refused without a reason");
    return 0;
  }

  const json::value clean = proto::sanitize_tool_result(*parsed);
  const std::string out = json::serialize(clean);
  if (is_marker(clean, "result_too_large") && clean != *parsed) {
    const auto* size_bytes = clean.as_object().if_contains("size_bytes");
    FUZZ_CHECK(size_bytes != nullptr && size_bytes->is_uint64() &&
                   size_bytes->get_uint64() > proto::kMaxResultBytes,
               out);
  } else {
    FUZZ_CHECK(out.size() <= proto::kMaxResultBytes, std::to_string(out.size()) + " bytes");
    check_clean(clean, 0, out);
  }
  // What reaches the client is strict JSON (no Infinity, no NaN) that reads back the same.
  json::error_code back_ec;
  const json::value back = json::parse(out, back_ec);
  FUZZ_CHECK(!back_ec && json_near(back, clean), "not JSON: " + out.substr(0, 300));
  // A result that needs no sanitizing is passed on exactly as the tool wrote it.
  if (needs_nothing(*parsed, 0) && json::serialize(*parsed).size() <= proto::kMaxResultBytes) {
    FUZZ_CHECK(clean == *parsed, "a clean result was changed: " + out.substr(0, 300));
  }
  return 0;
}
