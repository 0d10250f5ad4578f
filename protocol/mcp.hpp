// MCP messages over JSON-RPC (SPEC §5): version negotiation, initialize, tool descriptors and
// tool results. Pure: no I/O.
#pragma once

#include <array>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <string>
#include <string_view>

namespace toolwarden::protocol {

/// Oldest first; the last is the newest and the answer to an unsupported request.
inline constexpr std::array<std::string_view, 3> kProtocolVersions = {"2025-03-26", "2025-06-18",
                                                                      "2025-11-25"};

bool is_supported_version(std::string_view version);

/// The version `initialize` answers: the requested one when supported, else the newest.
std::string_view negotiate_version(std::string_view requested);

boost::json::object initialize_result(std::string_view version, std::string_view server_version);

struct ToolAnnotations {
  bool read_only = true;
  bool destructive = false;
  bool idempotent = true;
  bool open_world = false;
};

struct ToolDescriptor {
  std::string name;
  std::string title;
  std::string description;
  boost::json::object input_schema;
  boost::json::object output_schema;
  ToolAnnotations annotations;
};

boost::json::object to_json(const ToolDescriptor& tool);

/// The outputSchema a tool advertises: its success schema, or the error shape of a denied or
/// failed call (`{"error": CODE, ...}`, SPEC §5), which validating clients check too.
boost::json::object output_schema_with_errors(const boost::json::object& success);

/// A successful call: the structured result, mirrored as text for clients without
/// structuredContent support.
boost::json::object tool_success(boost::json::object structured);
/// serialize(tool_success(structured)), built with one serialization of `structured`.
std::string tool_success_text(const boost::json::object& structured);

/// A tool that ran and was denied or failed: `CODE: reason`, isError, {"error": CODE}.
boost::json::object tool_failure(std::string_view code, std::string_view reason,
                                 boost::json::object details = {});

/// `text` with every invalid UTF-8 sequence replaced by U+FFFD, so it can be a JSON string.
std::string valid_utf8(std::string_view text);

/// One Server-Sent Event carrying a JSON-RPC message.
std::string sse_event(std::string_view json_text);

}  // namespace toolwarden::protocol
