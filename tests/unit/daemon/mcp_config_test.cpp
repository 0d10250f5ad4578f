// The client set-ups `mcp-config` prints: the exact shapes Claude Code, VS Code and Cursor
// read (checked against their documentation), each with the Authorization header.
#include "daemon/mcp_config.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

namespace toolwarden::daemon {
namespace {
namespace json = boost::json;

constexpr std::string_view kUrl = "http://127.0.0.1:7869/mcp";
constexpr std::string_view kToken = "W0gvq5H9ISAvEZQsTODFMprRK-oAtxnjM9n_dibr9t8";

TEST(McpConfig, ClaudeCodeIsOneCommandWithTheHeaderAfterNameAndUrl) {
  EXPECT_EQ(mcp_config_snippet(McpClient::claude_code, kUrl, kToken),
            "claude mcp add --transport http toolwarden http://127.0.0.1:7869/mcp --header "
            "\"Authorization: Bearer W0gvq5H9ISAvEZQsTODFMprRK-oAtxnjM9n_dibr9t8\"\n");
}

TEST(McpConfig, ClaudeCodeQuotesAnIpv6UrlWhoseBracketsTheShellWouldGlob) {
  auto s = mcp_config_snippet(McpClient::claude_code, "http://[::1]:7869/mcp", kToken);
  EXPECT_NE(s.find(" toolwarden 'http://[::1]:7869/mcp' --header "), std::string::npos) << s;
}

TEST(McpConfig, VsCodeIsAServersEntryOfTypeHttp) {
  auto v = json::parse(mcp_config_snippet(McpClient::vscode, kUrl, kToken));
  EXPECT_EQ(v, json::parse(R"({"servers":{"toolwarden":{"type":"http",
      "url":"http://127.0.0.1:7869/mcp",
      "headers":{"Authorization":"Bearer W0gvq5H9ISAvEZQsTODFMprRK-oAtxnjM9n_dibr9t8"}}}})"));
}

TEST(McpConfig, CursorIsAnMcpServersEntryWithUrlAndHeaders) {
  auto v = json::parse(mcp_config_snippet(McpClient::cursor, kUrl, kToken));
  EXPECT_EQ(v, json::parse(R"({"mcpServers":{"toolwarden":{
      "url":"http://127.0.0.1:7869/mcp",
      "headers":{"Authorization":"Bearer W0gvq5H9ISAvEZQsTODFMprRK-oAtxnjM9n_dibr9t8"}}}})"));
}

TEST(McpConfig, JsonIsOneFlatServerObject) {
  auto v = json::parse(mcp_config_snippet(McpClient::json, kUrl, kToken));
  EXPECT_EQ(v, json::parse(R"({"name":"toolwarden","type":"http",
      "url":"http://127.0.0.1:7869/mcp",
      "headers":{"Authorization":"Bearer W0gvq5H9ISAvEZQsTODFMprRK-oAtxnjM9n_dibr9t8"}})"));
}

TEST(McpConfig, JsonSnippetsAreIndentedForHumansAndEndInANewline) {
  const std::string s = mcp_config_snippet(McpClient::vscode, kUrl, kToken);
  EXPECT_EQ(s.substr(0, 16), "{\n  \"servers\": {");
  EXPECT_EQ(s.back(), '\n');
  EXPECT_NE(s.find("\n        \"Authorization\": \"Bearer "), std::string::npos) << s;
}

TEST(McpConfig, ClientNames) {
  EXPECT_EQ(parse_mcp_client("claude-code"), McpClient::claude_code);
  EXPECT_EQ(parse_mcp_client("vscode"), McpClient::vscode);
  EXPECT_EQ(parse_mcp_client("cursor"), McpClient::cursor);
  EXPECT_EQ(parse_mcp_client("json"), McpClient::json);
  EXPECT_FALSE(parse_mcp_client("claude"));
  EXPECT_FALSE(parse_mcp_client("VSCode"));
  EXPECT_FALSE(parse_mcp_client(""));
}

TEST(McpConfig, TokenShape) {
  EXPECT_TRUE(looks_like_token(kToken));
  EXPECT_FALSE(looks_like_token("Bearer " + std::string(kToken)));
  EXPECT_FALSE(looks_like_token(std::string(kToken) + " "));
  EXPECT_FALSE(looks_like_token(std::string(kToken.substr(1))));
  EXPECT_FALSE(looks_like_token("W0gvq5H9ISAvEZQsTODFMprRK+oAtxnjM9n/dibr9t8"))
      << "base64, not url";
  EXPECT_FALSE(looks_like_token("W0gvq5H9ISAvEZQsTODFMprRK-oAtxnjM9n_dibr9\"8"));
}

}  // namespace
}  // namespace toolwarden::daemon
