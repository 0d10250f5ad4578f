// A custom tool's folder on disk (SPEC §11): discovery, the folder hash that pins it, and the
// sealed copy that runs. Every access is relative to an fd and never follows a symlink: each
// entry is opened with O_NOFOLLOW relative to its parent directory's fd and checked with
// fstat on that very fd.
//
// A folder is refused, with the reason, when it holds a symlink, FIFO, socket or device, a file
// with more than one hard link, a mount point, more than kMaxToolEntries files and directories,
// directories nested deeper than kMaxToolDepth, a file over kMaxToolFileBytes or more than
// kMaxToolBytes in all.
//
// The folder hash, as 64 lowercase hex digits, is SHA-256 over this byte string:
//
//   "toolwarden-tool-hash-v1" NUL
//   then one record per regular file and directory below the folder (not the folder itself),
//   ordered by PATH compared bytewise:
//     file:      "f" SP X SP SHA256 SP PATH NUL
//     directory: "d" SP "-" SP "-" SP PATH NUL
//   PATH   the path relative to the folder, '/'-separated, no leading "./" ("lib/util.py")
//   X      "x" when the owner-execute bit (S_IXUSR) is set, else "-"
//   SHA256 64 lowercase hex digits of the file's content
//
// tool.json is one of the files, so the manifest is covered. A record's fields are separated
// by single spaces and ended by NUL, which no path contains, so the listing is unambiguous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/error_code.hpp"
#include "policy/tool_manifest.hpp"
#include "sandbox/unique_fd.hpp"

namespace toolwarden::policy {

inline constexpr std::size_t kMaxToolEntries = 1000;  // files and directories together
inline constexpr std::size_t kMaxToolDepth = 16;      // directory levels below the folder
inline constexpr std::uint64_t kMaxToolFileBytes = 16ull << 20;
inline constexpr std::uint64_t kMaxToolBytes = 64ull << 20;

enum class ToolScope { user, project };
std::string_view to_string(ToolScope s);

struct DiscoveredTool {
  /// The folder's name; bytes that are not printable UTF-8 are shown as \xNN.
  std::string name;
  ToolScope scope = ToolScope::user;
  /// Set when the tool is valid: the folder passed every rule, the manifest parsed, its name
  /// is the folder's and every relative run entry names a file in the folder (argv[0] an
  /// executable one).
  std::optional<ToolManifest> manifest;
  std::string invalid_reason;  // when not valid: why, naming the key or the file
  std::string hash;            // empty only when the folder itself broke a rule
  bool valid() const { return manifest.has_value(); }
};

/// One entry per subdirectory of `tools_dir_fd` that holds a `tool.json`, sorted by name. A
/// symlink in place of a tool folder is listed as invalid (it is never followed); other
/// entries without a tool.json are not tools and are left out, and an unreadable
/// `tools_dir_fd` holds none. The caller opens `tools_dir_fd` itself without following
/// symlinks (for the project scope: beneath the worktree, e.g. WorktreeFs::open_directory).
std::vector<DiscoveredTool> discover_tools(int tools_dir_fd, ToolScope scope);

/// Opens the tool folder `name` below `tools_dir_fd` without following a symlink → NOT_FOUND,
/// DENIED_SYMLINK or DENIED_FILE (not a directory).
Result<UniqueFd> open_tool_folder(int tools_dir_fd, std::string_view name);

/// The folder hash of `tool_dir_fd`, or the rule the folder breaks: DENIED_SYMLINK,
/// DENIED_HARDLINK, DENIED_FILE (FIFO, socket, device, mount point, too many entries or levels),
/// DENIED_SIZE; LOCAL_TOOL_FAILED when a file cannot be read.
Result<std::string> hash_tool_folder(int tool_dir_fd);

/// Owns a sealed copy of a tool folder and removes it, without following symlinks, when
/// destroyed (unless released).
class SealedCopy {
 public:
  SealedCopy() = default;
  SealedCopy(std::string dir, std::string hash) : dir_(std::move(dir)), hash_(std::move(hash)) {}
  SealedCopy(SealedCopy&& o) noexcept;
  SealedCopy& operator=(SealedCopy&& o) noexcept;
  SealedCopy(const SealedCopy&) = delete;
  SealedCopy& operator=(const SealedCopy&) = delete;
  ~SealedCopy();

  const std::string& dir() const { return dir_; }    // absolute; empty when released/moved
  const std::string& hash() const { return hash_; }  // of the bytes that were copied
  /// Gives up ownership: the directory stays; returns its path.
  std::string release();

 private:
  std::string dir_;
  std::string hash_;
};

/// Copies the folder `tool_dir_fd` into `dest_dir` (absolute, in an existing directory only the
/// daemon can write; created 0700, must not exist), reading each file once through a no-follow
/// fd and hashing the very bytes it writes, so what runs is exactly what was hashed and a swap
/// after the check cannot take effect. Files are created O_EXCL|O_NOFOLLOW; the copy ends
/// read-only: files 0500 (owner-executable) or 0400, directories 0500. A hash other than
/// `expected_hash`, or a folder that now breaks a rule → DENIED_INTEGRITY, and nothing is left
/// at `dest_dir`. Failing to write the copy → LOCAL_TOOL_FAILED.
Result<SealedCopy> seal_tool(int tool_dir_fd, const std::string& expected_hash,
                             const std::string& dest_dir);

/// Removes `name` below `dir_fd` and, when it is a directory, everything in it, never following
/// a symlink (a symlink is removed, not its target) and making read-only directories writable
/// first. True when nothing is left (also when `name` did not exist).
bool remove_tree_at(int dir_fd, const std::string& name);

/// remove_tree_at on an absolute path's parent directory and last component.
bool remove_tree(const std::string& path);

}  // namespace toolwarden::policy
