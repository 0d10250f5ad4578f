// What a custom tool with `filesystem_write: workspace` changed (SPEC §11): its run saw the
// worktree as an overlay, so every change sits in the overlay's upper layer. The changes are
// checked against the job's grant as a whole and applied only when every one of them is
// allowed — the same path policy and atomic replacement as local_edit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/error_code.hpp"
#include "policy/grant.hpp"
#include "policy/path_rules.hpp"

namespace toolwarden::daemon {

struct WorkspaceChange {
  std::string path;    // relative to the worktree
  std::string change;  // "created", "modified" or "deleted"
};

/// Reads the upper layer at `upper_dir` (never following a link), checks each change and, when
/// all are allowed, applies them to the grant's worktree. Refusals: DENIED_READ_ONLY without
/// write access; DENIED_PATH / DENIED_SCOPE for a path the grant does not cover; DENIED_SYMLINK
/// for a symlink the run made; DENIED_HARDLINK for a file with several links; DENIED_SIZE over
/// `max_file_bytes` or more than `max_total_bytes` changed in all; DENIED_FILE for devices,
/// FIFOs, sockets, a removed or replaced directory. The worktree's side gets local_edit's
/// checks too (a symlink → DENIED_SYMLINK, a file with another link → DENIED_HARDLINK).
/// Nothing is applied when any change is refused.
policy::Result<std::vector<WorkspaceChange>> apply_workspace_changes(
    const std::string& upper_dir, const policy::Grant& grant,
    const policy::SensitiveNames& sensitive, std::uint64_t max_file_bytes,
    std::uint64_t max_total_bytes);

}  // namespace toolwarden::daemon
