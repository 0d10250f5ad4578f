// Kernel-enforced resolution below a worktree (SPEC §7). Every open is relative to the
// worktree's root fd with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV), so no symlink in any component is followed, even
// while the tree is being changed underneath. Where openat2 is missing (Linux < 5.6), an
// O_NOFOLLOW walk one component at a time gives the same guarantee.
#pragma once

#include <sys/stat.h>

#include <limits>
#include <string>
#include <vector>

#include "policy/error_code.hpp"
#include "policy/path_rules.hpp"
#include "sandbox/unique_fd.hpp"

namespace toolwarden::policy {

/// An opened file with the fstat taken on that very fd.
struct OpenedFile {
  UniqueFd fd;
  struct stat st {};
};

class WorktreeFs {
 public:
  /// Opens the worktree root; refused unless `realpath` is a directory reached without any
  /// symlink.
  static Result<WorktreeFs> open(const std::string& realpath);

  int root_fd() const { return root_.get(); }

  /// Opens `path` (empty = the root) with `flags` (O_NOFOLLOW, O_CLOEXEC added). Errors:
  /// a symlink anywhere → DENIED_SYMLINK; missing → NOT_FOUND; leaving the tree or crossing a
  /// mount → DENIED_PATH.
  Result<OpenedFile> open_beneath(const RelativePath& path, int flags) const;

  /// Opens a regular, singly-linked file of at most `max_bytes` for reading and checks all of
  /// that on the opened fd → DENIED_FILE / DENIED_HARDLINK / DENIED_SIZE.
  Result<OpenedFile> open_regular(const RelativePath& path, std::size_t max_bytes) const;

  /// Opens a directory for reading its entries → DENIED_FILE when `path` is not one.
  Result<OpenedFile> open_directory(const RelativePath& path) const;

  /// True when this kernel offers openat2 (probed once) and it is not switched off.
  static bool has_openat2();

  /// Tests only: resolve with the O_NOFOLLOW walk even where openat2 exists, so the fallback
  /// meets the same tests on kernels that never need it.
  static void use_walk_fallback_for_testing(bool on);

 private:
  explicit WorktreeFs(UniqueFd root) : root_(std::move(root)) {}
  UniqueFd root_;
};

/// openat2 beneath `dirfd` (or the O_NOFOLLOW walk); returns -1 with errno set.
int open_beneath_fd(int dirfd, const std::string& relative, int flags);

/// Reads the whole of `fd` up to `max_bytes`; false on a read error or more data than that.
bool read_all(int fd, std::size_t max_bytes, std::string* out);

/// Text we hand to a model: valid UTF-8 without NUL bytes.
bool is_text(std::string_view data);

/// The names in the directory `dir_fd`, sorted bytewise, without "." and "..": at most
/// `max` + 1 of them, so a caller can tell there were too many. Read through a fresh open file
/// description, so no offset the caller shares moves. False with errno set on a read error.
bool list_dir(int dir_fd, std::vector<std::string>* names,
              std::size_t max = std::numeric_limits<std::size_t>::max());

}  // namespace toolwarden::policy
