#include "protocol/mcp.hpp"

#include <algorithm>
#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <cstdint>

namespace toolwarden::protocol {
namespace json = boost::json;

bool is_supported_version(std::string_view version) {
  return std::find(kProtocolVersions.begin(), kProtocolVersions.end(), version) !=
         kProtocolVersions.end();
}

std::string_view negotiate_version(std::string_view requested) {
  auto it = std::find(kProtocolVersions.begin(), kProtocolVersions.end(), requested);
  return it != kProtocolVersions.end() ? *it : kProtocolVersions.back();  // static storage
}

json::object initialize_result(std::string_view version, std::string_view server_version) {
  json::object caps;
  caps["tools"] = json::object{{"listChanged", false}};
  json::object info;
  info["name"] = "toolwarden";
  info["version"] = server_version;
  json::object r;
  r["protocolVersion"] = version;
  r["capabilities"] = std::move(caps);
  r["serverInfo"] = std::move(info);
  r["instructions"] =
      "Tools act on one worktree under the job's policy; every call is audited. "
      "Denials answer isError with a stable code before the colon.";
  return r;
}

json::object output_schema_with_errors(const json::object& success) {
  if (success.empty()) return success;
  // A denied or failed call answers {"error": CODE, ...} (SPEC §5) as its structuredContent,
  // and MCP clients validate structuredContent against outputSchema even then: the schema
  // must admit both shapes.
  json::object error_shape{
      {"type", "object"},
      {"properties", json::object{{"error", json::object{{"type", "string"}}}}},
      {"required", json::array{"error"}}};
  return json::object{{"type", "object"}, {"anyOf", json::array{success, std::move(error_shape)}}};
}

json::object to_json(const ToolDescriptor& tool) {
  json::object ann;
  ann["title"] = tool.title;
  ann["readOnlyHint"] = tool.annotations.read_only;
  ann["destructiveHint"] = tool.annotations.destructive;
  ann["idempotentHint"] = tool.annotations.idempotent;
  ann["openWorldHint"] = tool.annotations.open_world;
  json::object o;
  o["name"] = tool.name;
  o["title"] = tool.title;
  o["description"] = tool.description;
  o["inputSchema"] = tool.input_schema;
  o["outputSchema"] = output_schema_with_errors(tool.output_schema);
  o["annotations"] = std::move(ann);
  return o;
}

std::string tool_success_text(const json::object& structured) {
  // Byte for byte what serialize(tool_success(structured)) gives, with the structured content
  // serialized once instead of twice (it is most of a read's answer).
  const std::string inner = json::serialize(structured);
  const std::string quoted = json::serialize(json::string_view(inner));
  std::string out;
  out.reserve(quoted.size() + inner.size() + 80);
  out += R"({"content":[{"type":"text","text":)";
  out += quoted;
  out += R"(}],"structuredContent":)";
  out += inner;
  out += R"(,"isError":false})";
  return out;
}

json::object tool_success(json::object structured) {
  json::object text;
  text["type"] = "text";
  text["text"] = json::serialize(structured);
  json::object r;
  r["content"] = json::array{std::move(text)};
  r["structuredContent"] = std::move(structured);
  r["isError"] = false;
  return r;
}

json::object tool_failure(std::string_view code, std::string_view reason, json::object details) {
  json::object text;
  text["type"] = "text";
  std::string msg(code);
  msg += ": ";
  msg += reason;
  text["text"] = msg;
  json::object r;
  r["content"] = json::array{std::move(text)};
  details["error"] = code;
  r["structuredContent"] = std::move(details);
  r["isError"] = true;
  return r;
}

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80             ? 1
                      : (c & 0xE0) == 0xC0 ? 2
                      : (c & 0xF0) == 0xE0 ? 3
                      : (c & 0xF8) == 0xF0 ? 4
                                           : 0;
    bool ok = len > 0 && i + len <= s.size();
    std::uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (std::size_t k = 1; ok && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    ok = ok && !((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
                 (len == 4 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF));
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    }
  }
  return out;
}

std::string sse_event(std::string_view json_text) {
  std::string out = "event: message\ndata: ";
  out += json_text;  // serialized JSON never contains a raw newline
  out += "\n\n";
  return out;
}

}  // namespace toolwarden::protocol
