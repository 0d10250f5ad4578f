// `toolwarden serve`: wires the store, both listeners and the signal handling together.
#pragma once

#include <optional>
#include <string>

#include "daemon/paths.hpp"

namespace toolwarden::daemon {

struct ServeOptions {
  DirOverrides dirs;
  std::optional<std::string> listen;  // "127.0.0.1:PORT"; config `listen` otherwise
  std::optional<std::string> log_level;
};

/// Runs the daemon in the foreground; returns the process exit status.
int serve(const ServeOptions& options);

/// Parses a loopback listen address ("127.0.0.1:PORT", "localhost:PORT", "[::1]:PORT").
/// False for anything else, which `serve` refuses with exit status 2.
bool parse_loopback_listen(const std::string& text, std::string* host, unsigned short* port);

}  // namespace toolwarden::daemon
