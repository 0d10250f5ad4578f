#include "protocol/jsonrpc.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/parse_options.hpp>

namespace toolwarden::protocol {
namespace json = boost::json;

ParseOutcome parse_message(std::string_view body) {
  json::parse_options opts;
  opts.max_depth = kMaxJsonDepth;
  opts.allow_invalid_utf8 = false;
  json::error_code ec;
  json::value v = json::parse(body, ec, json::storage_ptr(), opts);
  if (ec) return Rejection{400, rpc_code::kParseError, "Parse error: " + ec.message()};

  if (v.is_array()) {
    return Rejection{400, rpc_code::kInvalidRequest, "Invalid Request: batches are not supported"};
  }
  if (!v.is_object()) {
    return Rejection{400, rpc_code::kInvalidRequest, "Invalid Request: not a JSON-RPC object"};
  }
  auto& obj = v.get_object();
  const auto* version = obj.if_contains("jsonrpc");
  if (version == nullptr || !version->is_string() || version->get_string() != "2.0") {
    return Rejection{400, rpc_code::kInvalidRequest, "Invalid Request: jsonrpc must be \"2.0\""};
  }

  Message m;
  const auto* id = obj.if_contains("id");
  if (id != nullptr && !(id->is_string() || id->is_int64() || id->is_uint64() || id->is_double())) {
    return Rejection{400, rpc_code::kInvalidRequest,
                     "Invalid Request: id must be a string or a number"};
  }
  if (const auto* method = obj.if_contains("method")) {
    if (!method->is_string()) {
      return Rejection{400, rpc_code::kInvalidRequest, "Invalid Request: method must be a string"};
    }
    m.method = std::string(method->get_string());
    m.kind = id != nullptr ? MessageKind::request : MessageKind::notification;
    if (const auto* params = obj.if_contains("params")) {
      if (!params->is_object() && !params->is_array()) {
        return Rejection{400, rpc_code::kInvalidRequest,
                         "Invalid Request: params must be an object or an array"};
      }
      m.params = *params;
    }
  } else if (id != nullptr && (obj.contains("result") || obj.contains("error"))) {
    m.kind = MessageKind::response;
  } else {
    return Rejection{400, rpc_code::kInvalidRequest, "Invalid Request: no method"};
  }
  if (id != nullptr) m.id = *id;
  return m;
}

json::object make_result(const json::value& id, json::value result) {
  json::object o;
  o["jsonrpc"] = "2.0";
  o["id"] = id;
  o["result"] = std::move(result);
  return o;
}

json::object make_error(const json::value& id, int code, std::string_view message) {
  json::object err;
  err["code"] = code;
  err["message"] = message;
  json::object o;
  o["jsonrpc"] = "2.0";
  o["id"] = id;
  o["error"] = std::move(err);
  return o;
}

}  // namespace toolwarden::protocol
