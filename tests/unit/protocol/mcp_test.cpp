// MCP messages (SPEC §5): version negotiation, initialize, tool descriptors, tool results, SSE.
#include "protocol/mcp.hpp"

#include <gtest/gtest.h>

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <string>

namespace toolwarden::protocol {
namespace {
namespace json = boost::json;

TEST(McpVersion, TheThreeSpecVersionsAreSupported) {
  ASSERT_EQ(kProtocolVersions.size(), 3u);
  EXPECT_EQ(kProtocolVersions[0], "2025-03-26");
  EXPECT_EQ(kProtocolVersions[1], "2025-06-18");
  EXPECT_EQ(kProtocolVersions[2], "2025-11-25");
  for (auto v : {"2025-03-26", "2025-06-18", "2025-11-25"}) {
    EXPECT_TRUE(is_supported_version(v)) << v;
    EXPECT_EQ(negotiate_version(v), v) << "a supported version is answered as requested";
  }
}

TEST(McpVersion, UnknownVersionsAreNotSupported) {
  for (auto v : {"", "2024-11-05", "2025-01-01", "2026-01-01", "2025-11-25 ", " 2025-06-18",
                 "2025-6-18", "latest", "2025-11-25\n"}) {
    EXPECT_FALSE(is_supported_version(v)) << "'" << v << "'";
  }
}

TEST(McpVersion, UnknownVersionsNegotiateTheNewest) {
  for (auto v : {"", "2024-11-05", "2099-12-31", "garbage"}) {
    EXPECT_EQ(negotiate_version(v), "2025-11-25") << "'" << v << "'";
  }
}

TEST(McpInitialize, ResultFields) {
  auto r = initialize_result("2025-06-18", "0.1.0");
  EXPECT_EQ(r.at("protocolVersion"), json::value("2025-06-18"));
  ASSERT_TRUE(r.at("serverInfo").is_object());
  EXPECT_EQ(r.at("serverInfo").at("name"), json::value("toolwarden"));
  EXPECT_EQ(r.at("serverInfo").at("version"), json::value("0.1.0"));
  ASSERT_TRUE(r.at("capabilities").is_object());
  ASSERT_TRUE(r.at("capabilities").at("tools").is_object());
  EXPECT_EQ(r.at("capabilities").at("tools").at("listChanged"), json::value(false));
  // Only tools is offered; no resources/prompts capability is advertised.
  EXPECT_FALSE(r.at("capabilities").as_object().contains("resources"));
  EXPECT_FALSE(r.at("capabilities").as_object().contains("prompts"));
}

TEST(McpInitialize, ResultEchoesEachVersion) {
  for (auto v : kProtocolVersions) {
    EXPECT_EQ(initialize_result(v, "x").at("protocolVersion"), json::value(v));
  }
}

TEST(McpToolDescriptor, JsonShape) {
  ToolDescriptor t;
  t.name = "local_read";
  t.title = "Read a file";
  t.description = "Reads one UTF-8 file";
  t.input_schema = json::object{{"type", "object"}, {"required", json::array{"path"}}};
  t.output_schema = json::object{{"type", "object"}};
  t.annotations.read_only = true;
  t.annotations.destructive = false;
  t.annotations.idempotent = true;
  t.annotations.open_world = false;
  auto o = to_json(t);
  EXPECT_EQ(o.at("name"), json::value("local_read"));
  EXPECT_EQ(o.at("description"), json::value("Reads one UTF-8 file"));
  EXPECT_EQ(o.at("inputSchema"), json::value(t.input_schema));
  // The success schema, or the error shape of a denied call (SPEC §5).
  const auto& out = o.at("outputSchema").as_object();
  EXPECT_EQ(out.at("type"), json::value("object"));
  const auto& any = out.at("anyOf").as_array();
  ASSERT_EQ(any.size(), 2u);
  EXPECT_EQ(any[0], json::value(t.output_schema));
  EXPECT_EQ(any[1].at("required"), json::value(json::array{"error"}));
  ASSERT_TRUE(o.at("annotations").is_object());
  const auto& a = o.at("annotations").get_object();
  EXPECT_EQ(a.at("readOnlyHint"), json::value(true));
  EXPECT_EQ(a.at("destructiveHint"), json::value(false));
  EXPECT_EQ(a.at("idempotentHint"), json::value(true));
  EXPECT_EQ(a.at("openWorldHint"), json::value(false));
}

TEST(McpToolDescriptor, AnnotationsFollowFlags) {
  ToolDescriptor t;
  t.name = "local_edit";
  t.annotations = ToolAnnotations{false, true, false, true};
  auto a = to_json(t).at("annotations");
  EXPECT_EQ(a.at("readOnlyHint"), json::value(false));
  EXPECT_EQ(a.at("destructiveHint"), json::value(true));
  EXPECT_EQ(a.at("idempotentHint"), json::value(false));
  EXPECT_EQ(a.at("openWorldHint"), json::value(true));
}

TEST(McpToolResult, FailureShapeExactlyPerSpec) {
  auto r = tool_failure("DENIED_PATH", "path has a '..' segment");
  EXPECT_EQ(r.at("isError"), json::value(true));
  ASSERT_TRUE(r.at("content").is_array());
  const auto& content = r.at("content").get_array();
  ASSERT_EQ(content.size(), 1u);
  EXPECT_EQ(content[0].at("type"), json::value("text"));
  EXPECT_EQ(content[0].at("text"), json::value("DENIED_PATH: path has a '..' segment"));
  EXPECT_EQ(r.at("structuredContent"), (json::value{{"error", "DENIED_PATH"}}));
  ASSERT_TRUE(r.at("structuredContent").is_object());
  EXPECT_EQ(r.at("structuredContent").get_object().size(), 1u);
}

TEST(McpToolResult, FailureTextIsCodeColonSpaceReason) {
  for (auto code : {"DENIED_SCOPE", "NOT_FOUND", "SANDBOX_UNAVAILABLE", "CANCELLED"}) {
    auto r = tool_failure(code, "why");
    const auto text = std::string(r.at("content").at(0).at("text").get_string());
    EXPECT_EQ(text, std::string(code) + ": why");
    EXPECT_EQ(text.substr(0, text.find(':')), code) << "the code is the text before the colon";
    EXPECT_EQ(r.at("structuredContent").at("error"), json::value(code));
  }
}

TEST(McpToolResult, SuccessMirrorsStructuredContent) {
  json::object structured{{"path", "a.txt"}, {"size", 3}, {"sha256", "abc"}, {"content", "hi\n"}};
  auto r = tool_success(structured);
  EXPECT_EQ(r.at("structuredContent"), json::value(structured));
  if (const auto* e = r.if_contains("isError")) {
    EXPECT_EQ(*e, json::value(false));
  }
  ASSERT_TRUE(r.at("content").is_array());
  const auto& content = r.at("content").get_array();
  ASSERT_EQ(content.size(), 1u);
  EXPECT_EQ(content[0].at("type"), json::value("text"));
  ASSERT_TRUE(content[0].at("text").is_string());
  // The text block is the same JSON, serialized.
  EXPECT_EQ(json::parse(content[0].at("text").get_string()), json::value(structured));
}

TEST(McpToolResult, SuccessWithEmptyObject) {
  auto r = tool_success(json::object{});
  EXPECT_EQ(r.at("structuredContent"), json::value(json::object{}));
  EXPECT_EQ(json::parse(r.at("content").at(0).at("text").get_string()),
            json::value(json::object{}));
}

TEST(McpToolResult, SuccessTextIsTheSerializedResultByteForByte) {
  // The fast path must not change a byte of what clients receive or what the audit digests.
  for (const json::object& structured :
       {json::object{},
        json::object{{"path", "a.txt"}, {"content", "quote \" backslash \\ nl \n tab \t \u0001"}},
        json::object{{"nested", json::object{{"a", json::array{1, 2.5, nullptr, true}}}},
                     {"unicode", "h\u00e9llo \u2028 \U0001F600"}}}) {
    EXPECT_EQ(tool_success_text(structured), json::serialize(tool_success(structured)));
  }
}

TEST(McpSse, EventFraming) {
  std::string msg = R"({"jsonrpc":"2.0","id":1,"result":{}})";
  auto ev = sse_event(msg);
  EXPECT_EQ(ev, "event: message\ndata: " + msg + "\n\n");
}

TEST(McpSse, EventCarriesExactlyOneDataLineAndEndsWithBlankLine) {
  auto text =
      json::serialize(json::value{{"jsonrpc", "2.0"}, {"id", 2}, {"result", {{"s", "a\nb"}}}});
  auto ev = sse_event(text);
  ASSERT_GE(ev.size(), 2u);
  EXPECT_EQ(ev.substr(ev.size() - 2), "\n\n");
  auto body = ev.substr(0, ev.size() - 2);
  EXPECT_EQ(body.find("\n\n"), std::string::npos) << "only one event";
  auto data_pos = body.find("data: ");
  ASSERT_NE(data_pos, std::string::npos);
  EXPECT_TRUE(data_pos == 0 || body[data_pos - 1] == '\n');
  auto payload = body.substr(data_pos + 6);
  EXPECT_EQ(payload.find('\n'), std::string::npos) << "one data line";
  EXPECT_EQ(json::parse(payload), json::parse(text));
}

}  // namespace
}  // namespace toolwarden::protocol
