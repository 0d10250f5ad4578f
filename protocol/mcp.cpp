#include "protocol/mcp.hpp"

#include <algorithm>
#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

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
  o["outputSchema"] = tool.output_schema;
  o["annotations"] = std::move(ann);
  return o;
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

json::object tool_failure(std::string_view code, std::string_view reason) {
  json::object text;
  text["type"] = "text";
  std::string msg(code);
  msg += ": ";
  msg += reason;
  text["text"] = msg;
  json::object r;
  r["content"] = json::array{std::move(text)};
  r["structuredContent"] = json::object{{"error", code}};
  r["isError"] = true;
  return r;
}

std::string sse_event(std::string_view json_text) {
  std::string out = "event: message\ndata: ";
  out += json_text;  // serialized JSON never contains a raw newline
  out += "\n\n";
  return out;
}

}  // namespace toolwarden::protocol
