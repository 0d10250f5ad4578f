// JSON-RPC 2.0 framing for MCP (SPEC §5): one message per body, no batches. Pure: no I/O.
#pragma once

#include <boost/json/value.hpp>
#include <string>
#include <string_view>
#include <variant>

namespace toolwarden::protocol {

namespace rpc_code {
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
}  // namespace rpc_code

/// Nesting limit for request bodies (SPEC §5).
inline constexpr std::size_t kMaxJsonDepth = 64;

enum class MessageKind { request, notification, response };

struct Message {
  MessageKind kind = MessageKind::request;
  boost::json::value id;      // string or number for requests; null otherwise
  std::string method;         // empty for responses
  boost::json::value params;  // object, array or null when absent
};

/// A body that is not an acceptable message: answered with `http_status` and a JSON-RPC
/// error carrying `rpc_code`.
struct Rejection {
  int http_status = 400;
  int rpc_code = rpc_code::kInvalidRequest;
  std::string message;
};

using ParseOutcome = std::variant<Message, Rejection>;

/// Parses and validates one JSON-RPC 2.0 message (depth ≤ kMaxJsonDepth, valid UTF-8).
ParseOutcome parse_message(std::string_view body);

/// `{"jsonrpc":"2.0","id":id,"result":result}`
boost::json::object make_result(const boost::json::value& id, boost::json::value result);
/// `{"jsonrpc":"2.0","id":id,"error":{"code","message"}}` — id null when unknown.
boost::json::object make_error(const boost::json::value& id, int code, std::string_view message);

}  // namespace toolwarden::protocol
