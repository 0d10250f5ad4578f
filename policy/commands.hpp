// Registered test commands (SPEC §9): what the config lists, and the integrity pins that make
// a swapped executable or build file refuse to run (DENIED_INTEGRITY).
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "policy/error_code.hpp"
#include "policy/file_pin.hpp"
#include "policy/worktree_fs.hpp"

namespace toolwarden::policy {

struct CommandSpec {
  std::string id;
  std::vector<std::string> argv;
  std::string cwd = ".";
  int timeout_s = 60;
  std::map<std::string, std::string> env;
  std::vector<std::string> read_paths;  // worktree-relative files whose content is pinned
};

struct RegisteredCommand {
  CommandSpec spec;
  std::string executable;  // realpath of argv[0]
  FilePin pin;
};

class CommandRegistry {
 public:
  /// Pins every command's executable: absolute, a regular file, not writable by group or
  /// others. Returns nullopt with `*error` naming the command and the rule it breaks.
  static std::optional<CommandRegistry> load(const std::vector<CommandSpec>& specs,
                                             std::string* error);

  const RegisteredCommand* find(std::string_view id) const;
  std::vector<std::string> ids() const;

  /// The executable is still the pinned file → else DENIED_INTEGRITY.
  static Check verify_executable(const RegisteredCommand& cmd);

 private:
  std::map<std::string, RegisteredCommand, std::less<>> commands_;
};

/// Pins an absolute host file (no symlink in its last component).
std::optional<FilePin> pin_host_file(const std::string& path, std::string* error);

/// Pins a worktree-relative file through the worktree's fd (SPEC §7 resolution).
Result<FilePin> pin_worktree_file(const WorktreeFs& fs, const RelativePath& path,
                                  std::size_t max_bytes);

}  // namespace toolwarden::policy
