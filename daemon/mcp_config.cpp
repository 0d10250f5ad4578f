#include "daemon/mcp_config.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace toolwarden::daemon {
namespace json = boost::json;

namespace {

constexpr std::string_view kServerName = "toolwarden";

// Indented JSON, two spaces a level, as people keep these files (Boost 1.81 has no pretty
// printer). Strings and numbers go through json::serialize, which escapes them.
void pretty(std::string& out, const json::value& v, int depth) {
  const std::string pad(2 * (depth + 1), ' ');
  if (v.is_object() && !v.get_object().empty()) {
    out += "{\n";
    bool first = true;
    for (const auto& [key, value] : v.get_object()) {
      if (!first) out += ",\n";
      first = false;
      out += pad + json::serialize(json::value(key)) + ": ";
      pretty(out, value, depth + 1);
    }
    out += "\n" + std::string(2 * depth, ' ') + "}";
  } else if (v.is_array() && !v.get_array().empty()) {
    out += "[\n";
    bool first = true;
    for (const auto& value : v.get_array()) {
      if (!first) out += ",\n";
      first = false;
      out += pad;
      pretty(out, value, depth + 1);
    }
    out += "\n" + std::string(2 * depth, ' ') + "]";
  } else {
    out += json::serialize(v);
  }
}

std::string pretty(const json::value& v) {
  std::string out;
  pretty(out, v, 0);
  return out + "\n";
}

// A word the shell takes literally: as is when every character is harmless, else in single
// quotes (an IPv6 URL's brackets are glob characters).
std::string shell_word(std::string_view word) {
  bool plain = !word.empty();
  for (char c : word) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      std::string_view("_./:@%+=,-").find(c) != std::string_view::npos;
    plain = plain && safe;
  }
  if (plain) return std::string(word);
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace

std::optional<McpClient> parse_mcp_client(std::string_view name) {
  if (name == "claude-code") return McpClient::claude_code;
  if (name == "vscode") return McpClient::vscode;
  if (name == "cursor") return McpClient::cursor;
  if (name == "json") return McpClient::json;
  return std::nullopt;
}

bool looks_like_token(std::string_view token) {
  if (token.size() != 43) return false;
  for (char c : token) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

std::string mcp_config_snippet(McpClient client, std::string_view mcp_url, std::string_view token) {
  const std::string bearer = "Bearer " + std::string(token);
  json::object headers{{"Authorization", bearer}};
  switch (client) {
    case McpClient::claude_code:
      // --header is variadic in the claude CLI: it comes after the name and the URL, or it
      // would swallow them. The token's alphabet needs no escaping inside double quotes.
      return "claude mcp add --transport http " + std::string(kServerName) + " " +
             shell_word(mcp_url) + " --header \"Authorization: " + bearer + "\"\n";
    case McpClient::vscode: {
      json::object server{{"type", "http"}, {"url", mcp_url}, {"headers", headers}};
      return pretty(json::object{{"servers", json::object{{kServerName, server}}}});
    }
    case McpClient::cursor: {
      json::object server{{"url", mcp_url}, {"headers", headers}};
      return pretty(json::object{{"mcpServers", json::object{{kServerName, server}}}});
    }
    case McpClient::json:
      return pretty(json::object{
          {"name", kServerName}, {"type", "http"}, {"url", mcp_url}, {"headers", headers}});
  }
  return {};
}

}  // namespace toolwarden::daemon
