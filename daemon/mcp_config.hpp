// The set-up that connects an MCP client to a job (`toolwarden mcp-config`, `job create
// --mcp-config`): the job's mcp_url with the header `Authorization: Bearer TOKEN`, in the
// shape each client reads.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace toolwarden::daemon {

enum class McpClient {
  claude_code,  // `claude mcp add --transport http toolwarden URL --header "Authorization: ..."`
  vscode,       // .vscode/mcp.json: {"servers":{"toolwarden":{"type":"http","url","headers"}}}
  cursor,       // ~/.cursor/mcp.json: {"mcpServers":{"toolwarden":{"url","headers"}}}
  json,         // {"name":"toolwarden","type":"http","url","headers"}, for scripts
};

inline constexpr std::string_view kMcpClientNames = "claude-code|vscode|cursor|json";

/// "claude-code", "vscode", "cursor" or "json"; nullopt for anything else.
std::optional<McpClient> parse_mcp_client(std::string_view name);

/// True for the shape of a job token (43 characters of the base64url alphabet), so a pasted
/// "Bearer ..." or a stray space is caught before it lands in a config file.
bool looks_like_token(std::string_view token);

/// The snippet for `client`, ending in a newline. `token` must pass looks_like_token.
std::string mcp_config_snippet(McpClient client, std::string_view mcp_url, std::string_view token);

}  // namespace toolwarden::daemon
