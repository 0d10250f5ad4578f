// JSON-RPC 2.0 framing (SPEC §5): parse errors → -32700, invalid requests → -32600, both 400.
#include "protocol/jsonrpc.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <string>

namespace toolwarden::protocol {
namespace {
namespace json = boost::json;

const Message& expect_message(const ParseOutcome& out) {
  if (const auto* r = std::get_if<Rejection>(&out)) {
    ADD_FAILURE() << "unexpected rejection " << r->rpc_code << ": " << r->message;
    static const Message empty;
    return empty;
  }
  return std::get<Message>(out);
}

// Asserts a rejection with HTTP 400 and the given JSON-RPC code.
::testing::AssertionResult rejected_with(std::string_view body, int code) {
  auto out = parse_message(body);
  const auto* r = std::get_if<Rejection>(&out);
  if (r == nullptr) {
    return ::testing::AssertionFailure() << "accepted: " << std::string(body.substr(0, 200));
  }
  if (r->http_status != 400 || r->rpc_code != code) {
    return ::testing::AssertionFailure()
           << "got http " << r->http_status << " rpc " << r->rpc_code << " (" << r->message
           << "), want 400 / " << code << " for " << std::string(body.substr(0, 200));
  }
  if (r->message.empty()) return ::testing::AssertionFailure() << "empty rejection message";
  return ::testing::AssertionSuccess();
}

// A valid request whose outermost object is level 1 and `params` adds arrays until the total
// container depth is `depth` (≥ 2).
std::string request_with_depth(std::size_t depth) {
  std::string s = R"({"jsonrpc":"2.0","id":1,"method":"ping","params":)";
  const std::size_t arrays = depth - 1;
  s.append(arrays, '[');
  s.append(arrays, ']');
  s += "}";
  return s;
}

// ---- valid kinds ---------------------------------------------------------------------------

TEST(JsonRpcParse, RequestWithNumberId) {
  auto out = parse_message(R"({"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"a":1}})");
  const auto& m = expect_message(out);
  EXPECT_EQ(m.kind, MessageKind::request);
  EXPECT_EQ(m.id, json::value(7));
  EXPECT_EQ(m.method, "tools/list");
  ASSERT_TRUE(m.params.is_object());
  EXPECT_EQ(m.params.at("a"), json::value(1));
}

TEST(JsonRpcParse, RequestWithStringId) {
  auto out = parse_message(R"({"jsonrpc":"2.0","id":"abc","method":"ping"})");
  const auto& m = expect_message(out);
  EXPECT_EQ(m.kind, MessageKind::request);
  ASSERT_TRUE(m.id.is_string());
  EXPECT_EQ(m.id.get_string(), "abc");
  EXPECT_TRUE(m.params.is_null()) << "absent params are null";
}

TEST(JsonRpcParse, RequestWithNegativeAndFractionalIds) {
  EXPECT_EQ(expect_message(parse_message(R"({"jsonrpc":"2.0","id":-3,"method":"ping"})")).id,
            json::value(-3));
  auto frac = parse_message(R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})");
  EXPECT_EQ(expect_message(frac).kind, MessageKind::request);
  auto big = parse_message(R"({"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"})");
  EXPECT_EQ(expect_message(big).kind, MessageKind::request);
}

TEST(JsonRpcParse, RequestWithArrayParams) {
  auto out = parse_message(R"({"jsonrpc":"2.0","id":1,"method":"m","params":[1,2]})");
  const auto& m = expect_message(out);
  ASSERT_TRUE(m.params.is_array());
  EXPECT_EQ(m.params.as_array().size(), 2u);
}

TEST(JsonRpcParse, Notification) {
  auto out = parse_message(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  const auto& m = expect_message(out);
  EXPECT_EQ(m.kind, MessageKind::notification);
  EXPECT_TRUE(m.id.is_null());
  EXPECT_EQ(m.method, "notifications/initialized");
}

TEST(JsonRpcParse, NotificationWithParams) {
  auto out = parse_message(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}})");
  const auto& m = expect_message(out);
  EXPECT_EQ(m.kind, MessageKind::notification);
  EXPECT_EQ(m.params.at("requestId"), json::value(3));
}

TEST(JsonRpcParse, ResponseWithResult) {
  auto out = parse_message(R"({"jsonrpc":"2.0","id":4,"result":{}})");
  const auto& m = expect_message(out);
  EXPECT_EQ(m.kind, MessageKind::response);
  EXPECT_EQ(m.id, json::value(4));
  EXPECT_TRUE(m.method.empty());
}

TEST(JsonRpcParse, ResponseWithError) {
  auto out = parse_message(R"({"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"m"}})");
  const auto& m = expect_message(out);
  EXPECT_EQ(m.kind, MessageKind::response);
  EXPECT_EQ(m.id, json::value("x"));
}

TEST(JsonRpcParse, WhitespaceAroundBodyIsFine) {
  auto out = parse_message(" \n\t{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n ");
  EXPECT_EQ(expect_message(out).kind, MessageKind::request);
}

TEST(JsonRpcParse, ValidUtf8InStringsIsAccepted) {
  auto out = parse_message(
      "{\"jsonrpc\":\"2.0\",\"id\":\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\","
      "\"method\":\"ping\"}");
  EXPECT_EQ(expect_message(out).kind, MessageKind::request);
}

// ---- -32700 parse errors -------------------------------------------------------------------

TEST(JsonRpcParseError, InvalidJson) {
  EXPECT_TRUE(rejected_with("", rpc_code::kParseError));
  EXPECT_TRUE(rejected_with("   ", rpc_code::kParseError));
  EXPECT_TRUE(rejected_with("{", rpc_code::kParseError));
  EXPECT_TRUE(rejected_with("not json", rpc_code::kParseError));
  EXPECT_TRUE(rejected_with(R"({"jsonrpc":"2.0","id":1,"method":"ping",})", rpc_code::kParseError));
  EXPECT_TRUE(rejected_with(R"({'jsonrpc':'2.0'})", rpc_code::kParseError));
  EXPECT_TRUE(
      rejected_with(R"({"jsonrpc":"2.0","id":1,"method":"ping"} {})", rpc_code::kParseError))
      << "trailing data after the message";
  EXPECT_TRUE(rejected_with(R"({"jsonrpc":"2.0","id":1,"method":"ping"}x)", rpc_code::kParseError));
  EXPECT_TRUE(
      rejected_with(R"(/*c*/{"jsonrpc":"2.0","id":1,"method":"ping"})", rpc_code::kParseError))
      << "comments are not JSON";
  EXPECT_TRUE(
      rejected_with(R"({"jsonrpc":"2.0","id":NaN,"method":"ping"})", rpc_code::kParseError));
}

// Regression (fuzz_mcp): a number past the range of a double parsed to ±infinity, and the
// answer echoed the id as `"id":Infinity`, which is not JSON; the audit stored it the same way.
TEST(JsonRpcParseError, NumberOutOfRangeIsRefusedNotInfinity) {
  EXPECT_TRUE(
      rejected_with(R"({"jsonrpc":"2.0","id":1e999,"method":"ping"})", rpc_code::kParseError));
  EXPECT_TRUE(
      rejected_with(R"({"jsonrpc":"2.0","id":-1e400,"method":"ping"})", rpc_code::kParseError));
  EXPECT_TRUE(rejected_with(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"n":[1e999]}}})",
      rpc_code::kParseError));
  EXPECT_TRUE(
      rejected_with(R"({"jsonrpc":"2.0","id":1,"result":{"x":-1E+309}})", rpc_code::kParseError));
  // Boost.JSON 1.81 reads 0e999 as NaN (0 times an infinite power of ten).
  EXPECT_TRUE(
      rejected_with(R"({"jsonrpc":"2.0","id":0e999,"method":"ping"})", rpc_code::kParseError));
  // The largest and smallest finite doubles and an underflow to zero still parse.
  auto out = parse_message(
      R"({"jsonrpc":"2.0","id":1.7976931348623157e308,"method":"ping","params":[-1.7976931348623157e308,1e-400]})");
  const auto& m = expect_message(out);
  EXPECT_EQ(m.id, json::value(1.7976931348623157e308));
  EXPECT_EQ(json::serialize(m.params).find("Infinity"), std::string::npos);
}

TEST(JsonRpcParseError, NulByteInsideBody) {
  std::string body = R"({"jsonrpc":"2.0","id":1,"method":"pi)";
  body.push_back('\0');
  body += R"(ng"})";
  EXPECT_TRUE(rejected_with(body, rpc_code::kParseError)) << "raw control character in a string";
}

TEST(JsonRpcParseError, InvalidUtf8InStringValue) {
  // A lone continuation byte, a truncated sequence, an overlong '/', and a UTF-8 surrogate.
  for (const char* bad : {"\x80", "\xC3", "\xC0\xAF", "\xED\xA0\x80", "\xFF"}) {
    std::string body = R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":")";
    body += bad;
    body += "\"}}";
    EXPECT_TRUE(rejected_with(body, rpc_code::kParseError))
        << "bytes " << ::testing::PrintToString(std::string(bad));
  }
}

TEST(JsonRpcParseError, InvalidUtf8InKeyAndMethod) {
  EXPECT_TRUE(rejected_with("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xFFing\"}",
                            rpc_code::kParseError));
  EXPECT_TRUE(rejected_with(
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"\xC0\x80\":1}}",
      rpc_code::kParseError));
}

// Boost.JSON's max_depth counts every open container, the outermost object included: with
// max_depth = 64 the 64th nested container parses and the 65th fails with too_deep.
TEST(JsonRpcParseError, DepthSixtyFourIsAllowed) {
  auto out = parse_message(request_with_depth(kMaxJsonDepth));
  EXPECT_EQ(expect_message(out).kind, MessageKind::request);
  EXPECT_EQ(kMaxJsonDepth, 64u);
}

TEST(JsonRpcParseError, DepthSixtyFiveIsRejected) {
  EXPECT_TRUE(rejected_with(request_with_depth(kMaxJsonDepth + 1), rpc_code::kParseError));
}

TEST(JsonRpcParseError, DepthBoundaryWithObjects) {
  auto nested_objects = [](std::size_t depth) {
    std::string s = R"({"jsonrpc":"2.0","id":1,"method":"ping","params":)";
    for (std::size_t i = 1; i < depth; ++i) s += R"({"a":)";
    s += "1";
    for (std::size_t i = 1; i < depth; ++i) s += "}";
    // The innermost level is the scalar's object; depth counts the objects.
    return s + "}";
  };
  // params holds depth-1 objects → total depth `depth`.
  EXPECT_EQ(expect_message(parse_message(nested_objects(64))).kind, MessageKind::request);
  EXPECT_TRUE(rejected_with(nested_objects(65), rpc_code::kParseError));
}

TEST(JsonRpcParseError, TenThousandDeepArrayDoesNotCrash) {
  std::string body(10000, '[');
  body.append(10000, ']');
  EXPECT_TRUE(rejected_with(body, rpc_code::kParseError));
  // The same inside a request object.
  std::string req = R"({"jsonrpc":"2.0","id":1,"method":"ping","params":)" + body + "}";
  EXPECT_TRUE(rejected_with(req, rpc_code::kParseError));
  // Unterminated, too.
  EXPECT_TRUE(rejected_with(std::string(10000, '['), rpc_code::kParseError));
}

// ---- -32600 invalid requests ---------------------------------------------------------------

TEST(JsonRpcInvalidRequest, BatchArrayIsRefused) {
  EXPECT_TRUE(
      rejected_with(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])", rpc_code::kInvalidRequest));
  EXPECT_TRUE(rejected_with("[]", rpc_code::kInvalidRequest));
  EXPECT_TRUE(rejected_with(
      R"([{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"b"}])",
      rpc_code::kInvalidRequest));
}

TEST(JsonRpcInvalidRequest, NonObject) {
  for (const char* body : {"1", "\"str\"", "true", "false", "null", "-2.5"}) {
    EXPECT_TRUE(rejected_with(body, rpc_code::kInvalidRequest)) << body;
  }
}

TEST(JsonRpcInvalidRequest, MissingOrWrongJsonrpc) {
  EXPECT_TRUE(rejected_with(R"({"id":1,"method":"ping"})", rpc_code::kInvalidRequest));
  EXPECT_TRUE(
      rejected_with(R"({"jsonrpc":"1.0","id":1,"method":"ping"})", rpc_code::kInvalidRequest));
  EXPECT_TRUE(
      rejected_with(R"({"jsonrpc":2.0,"id":1,"method":"ping"})", rpc_code::kInvalidRequest));
  EXPECT_TRUE(
      rejected_with(R"({"jsonrpc":"2.0 ","id":1,"method":"ping"})", rpc_code::kInvalidRequest));
  EXPECT_TRUE(
      rejected_with(R"({"jsonrpc":null,"id":1,"method":"ping"})", rpc_code::kInvalidRequest));
  EXPECT_TRUE(
      rejected_with(R"({"jsonrpc":["2.0"],"id":1,"method":"ping"})", rpc_code::kInvalidRequest));
}

TEST(JsonRpcInvalidRequest, IdOfWrongType) {
  for (const char* id : {"true", "false", "null", "{}", R"({"a":1})", "[]", "[1]"}) {
    std::string body = std::string(R"({"jsonrpc":"2.0","id":)") + id + R"(,"method":"ping"})";
    EXPECT_TRUE(rejected_with(body, rpc_code::kInvalidRequest)) << "id " << id;
  }
}

TEST(JsonRpcInvalidRequest, ResponseWithWrongIdType) {
  EXPECT_TRUE(
      rejected_with(R"({"jsonrpc":"2.0","id":true,"result":{}})", rpc_code::kInvalidRequest));
  EXPECT_TRUE(
      rejected_with(R"({"jsonrpc":"2.0","id":[1],"result":{}})", rpc_code::kInvalidRequest));
}

TEST(JsonRpcInvalidRequest, NonStringMethod) {
  for (const char* method : {"1", "null", "true", "{}", R"(["ping"])"}) {
    std::string body = std::string(R"({"jsonrpc":"2.0","id":1,"method":)") + method + "}";
    EXPECT_TRUE(rejected_with(body, rpc_code::kInvalidRequest)) << "method " << method;
  }
}

TEST(JsonRpcInvalidRequest, ParamsOfWrongType) {
  for (const char* params : {"\"str\"", "1", "2.5", "true"}) {
    std::string body =
        std::string(R"({"jsonrpc":"2.0","id":1,"method":"ping","params":)") + params + "}";
    EXPECT_TRUE(rejected_with(body, rpc_code::kInvalidRequest)) << "params " << params;
    std::string note = std::string(R"({"jsonrpc":"2.0","method":"n","params":)") + params + "}";
    EXPECT_TRUE(rejected_with(note, rpc_code::kInvalidRequest)) << "notification params " << params;
  }
}

TEST(JsonRpcInvalidRequest, NeitherMethodNorResult) {
  EXPECT_TRUE(rejected_with(R"({"jsonrpc":"2.0","id":1})", rpc_code::kInvalidRequest));
  EXPECT_TRUE(rejected_with(R"({"jsonrpc":"2.0"})", rpc_code::kInvalidRequest));
  EXPECT_TRUE(rejected_with("{}", rpc_code::kInvalidRequest));
  // A response needs an id.
  EXPECT_TRUE(rejected_with(R"({"jsonrpc":"2.0","result":{}})", rpc_code::kInvalidRequest));
}

// ---- builders ------------------------------------------------------------------------------

TEST(JsonRpcBuild, MakeResultShape) {
  auto o = make_result(json::value(3), json::object{{"ok", true}});
  EXPECT_EQ(o.size(), 3u);
  EXPECT_EQ(o.at("jsonrpc"), json::value("2.0"));
  EXPECT_EQ(o.at("id"), json::value(3));
  EXPECT_EQ(o.at("result"), (json::value{{"ok", true}}));
  EXPECT_FALSE(o.contains("error"));

  auto s = make_result(json::value("req-1"), json::object{});
  EXPECT_EQ(s.at("id"), json::value("req-1"));
  EXPECT_TRUE(s.at("result").is_object());
}

TEST(JsonRpcBuild, MakeErrorShape) {
  auto o = make_error(json::value("q"), rpc_code::kMethodNotFound, "Method not found");
  EXPECT_EQ(o.size(), 3u);
  EXPECT_EQ(o.at("jsonrpc"), json::value("2.0"));
  EXPECT_EQ(o.at("id"), json::value("q"));
  ASSERT_TRUE(o.at("error").is_object());
  const auto& err = o.at("error").get_object();
  EXPECT_EQ(err.at("code"), json::value(-32601));
  EXPECT_EQ(err.at("message"), json::value("Method not found"));
  EXPECT_FALSE(o.contains("result"));
}

TEST(JsonRpcBuild, MakeErrorWithUnknownIdIsNull) {
  auto o = make_error(json::value(nullptr), rpc_code::kParseError, "Parse error");
  ASSERT_TRUE(o.contains("id"));
  EXPECT_TRUE(o.at("id").is_null());
  EXPECT_EQ(o.at("error").at("code"), json::value(-32700));
}

TEST(JsonRpcBuild, ErrorRoundTripsThroughParser) {
  auto o = make_error(json::value(9), rpc_code::kInvalidParams, "bad");
  auto out = parse_message(json::serialize(o));
  const auto& m = expect_message(out);
  EXPECT_EQ(m.kind, MessageKind::response);
  EXPECT_EQ(m.id, json::value(9));
}

TEST(JsonRpcCodes, StandardValues) {
  EXPECT_EQ(rpc_code::kParseError, -32700);
  EXPECT_EQ(rpc_code::kInvalidRequest, -32600);
  EXPECT_EQ(rpc_code::kMethodNotFound, -32601);
  EXPECT_EQ(rpc_code::kInvalidParams, -32602);
  EXPECT_EQ(rpc_code::kInternalError, -32603);
}

}  // namespace
}  // namespace toolwarden::protocol
