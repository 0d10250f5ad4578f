// Where toolwarden keeps its files (SPEC §2) and the permission rules they must meet.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace toolwarden::daemon {

struct DirOverrides {
  std::optional<std::string> runtime_dir;
  std::optional<std::string> state_dir;
  std::optional<std::string> config;
};

struct Dirs {
  std::filesystem::path runtime;
  std::filesystem::path state;
  std::filesystem::path config;
  /// User-scope custom tools (SPEC §11): `$XDG_CONFIG_HOME/toolwarden/tools`, else
  /// `~/.config/toolwarden/tools`; empty when neither can be named.
  std::filesystem::path user_tools;
  std::filesystem::path admin_socket() const { return runtime / "admin.sock"; }
  std::filesystem::path endpoint_file() const { return runtime / "endpoint.json"; }
  std::filesystem::path store_file() const { return state / "store.db"; }
};

/// Applies the resolution order of SPEC §2 (flag, environment, XDG, fallback). Throws
/// std::runtime_error when no candidate exists (no HOME for the state dir, say).
Dirs resolve_dirs(const DirOverrides& overrides);

/// Creates the runtime dir 0700 if missing; refuses one that is a symlink, not a directory,
/// owned by another uid, or group/world-accessible. Throws std::runtime_error naming why.
void prepare_runtime_dir(const std::filesystem::path& dir);

/// Creates the state dir (and `artifacts/`) 0700 if missing; refuses one owned by another uid
/// or writable by group or others.
void prepare_state_dir(const std::filesystem::path& dir);

/// Writes `content` to `file` atomically with mode 0600 (temp file, fsync, rename, fsync dir).
void write_file_atomically(const std::filesystem::path& file, const std::string& content);

}  // namespace toolwarden::daemon
