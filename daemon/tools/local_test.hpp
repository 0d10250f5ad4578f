// local_test (SPEC §6, §9): a registered command, integrity-checked before and after, run in
// the sandbox with the worktree read-only and no network.
#pragma once

#include <memory>

#include "daemon/tools/tool.hpp"
#include "policy/commands.hpp"

namespace toolwarden::daemon {

/// What makes sandboxed tools refuse: a missing kernel feature or a failed canary.
struct SandboxReadiness {
  bool ready = false;
  std::string reason;  // for SANDBOX_UNAVAILABLE
};

std::unique_ptr<Tool> make_local_test(std::shared_ptr<const policy::CommandRegistry> commands,
                                      std::shared_ptr<const SandboxReadiness> readiness);

/// Pins the read_paths of the granted commands in the job's worktree (at job creation).
/// Returns a message naming the file when one is missing or not a plain file.
std::optional<std::string> pin_read_paths(const policy::CommandRegistry& commands,
                                          policy::Grant& grant, std::size_t max_file_bytes);

}  // namespace toolwarden::daemon
