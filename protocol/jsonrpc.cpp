#include "protocol/jsonrpc.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/parse_options.hpp>
#include <cmath>

namespace toolwarden::protocol {
namespace json = boost::json;

namespace {

// A number beyond the range of a double parses to ±infinity, which has no JSON spelling: an id
// 1e999 was answered as `"id":Infinity` and written so into the audit. Found by fuzz_mcp.
bool numbers_are_finite(const json::value& v) {
  if (v.is_double()) return std::isfinite(v.get_double());
  if (const auto* a = v.if_array()) {
    for (const auto& e : *a)
      if (!numbers_are_finite(e)) return false;
  } else if (const auto* o = v.if_object()) {
    for (const auto& kv : *o)
      if (!numbers_are_finite(kv.value())) return false;
  }
  return true;
}

}  // namespace

ParseOutcome parse_message(std::string_view body) {
  json::parse_options opts;
  opts.max_depth = kMaxJsonDepth;
  opts.allow_invalid_utf8 = false;
  json::error_code ec;
  json::value v = json::parse(body, ec, json::storage_ptr(), opts);
  if (ec) return Rejection{400, rpc_code::kParseError, "Parse error: " + ec.message()};
  if (!numbers_are_finite(v)) {
    return Rejection{400, rpc_code::kParseError, "Parse error: a number is out of range"};
  }

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
