// The canary self-test (SPEC §8): a random secret in a fresh file outside every path the
// sandbox is given, and a sandboxed reader that must not see it. A sandbox that fails the
// proof is refused, never used.
#pragma once

#include <filesystem>
#include <string>

#include "sandbox/supervisor.hpp"

namespace toolwarden::sandbox {

struct CanaryResult {
  bool passed = false;
  std::string detail;  // why it failed, or what was checked
};

/// Places the secret under `scratch_parent` (a private directory of the caller) and runs
/// readers in the sandbox with an empty worktree beside it.
CanaryResult run_canary(Supervisor& supervisor, const std::filesystem::path& scratch_parent);

}  // namespace toolwarden::sandbox
