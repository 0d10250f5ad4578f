// The user's config file (SPEC §2): optional, trusted, strict. Built-in defaults when absent;
// refused when a symlink or group/world-writable; an unknown key is an error naming it.
#pragma once

#include <boost/json/array.hpp>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/log.hpp"
#include "policy/commands.hpp"
#include "policy/probe_policy.hpp"

namespace toolwarden::daemon {

using policy::CommandSpec;

struct Config {
  std::optional<std::string> listen;
  std::optional<LogLevel> log_level;
  std::vector<std::string> allowed_origins;
  std::size_t max_body_bytes = 1024 * 1024;
  int max_concurrent_calls = 4;
  std::size_t max_file_bytes = 1024 * 1024;
  std::vector<std::string> sensitive_names;
  std::vector<CommandSpec> commands;
  /// Validated when the config is loaded (SPEC §12): a bad policy refuses the daemon's start.
  std::vector<policy::ProbePolicy> probe_policies;

  std::vector<std::string> command_ids() const;
};

/// Loads `file`; defaults when it does not exist. Throws std::runtime_error naming the file
/// and what is wrong.
Config load_config(const std::filesystem::path& file);

/// Parses config JSON text (exposed for tests). Throws std::runtime_error.
Config parse_config(const std::string& text);

}  // namespace toolwarden::daemon
