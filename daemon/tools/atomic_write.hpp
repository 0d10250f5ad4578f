// Replacing a worktree file so that a reader, or a crash, sees the old content or the new and
// never a mix (SPEC §6 local_edit): write an unnamed file in the same directory, fsync it,
// name it, rename it over the target, fsync the directory. Shared by local_edit and the
// workspace changes of custom tools.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "policy/error_code.hpp"

namespace toolwarden::daemon {

/// The temporary name used for `target` in its directory: one per target (edits of a path are
/// serialized), so a leftover of a crashed edit is replaced by the next edit of that file.
std::string temp_name_for(const std::string& target);

/// Replaces (or creates) `name` in the directory `dirfd` with `content` and `mode`. A denial
/// (LOCAL_TOOL_FAILED, or DENIED_FILE when `name` is a directory) on failure, nothing changed.
std::optional<policy::Denial> replace_file(int dirfd, const std::string& name,
                                           std::string_view content, mode_t mode);

}  // namespace toolwarden::daemon
