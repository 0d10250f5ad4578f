// Kernel features the sandbox needs, checked at run time (never assumed) for `doctor` and
// for refusing to run without them (SPEC §1, §8).
#pragma once

#include <string>
#include <vector>

namespace toolwarden::sandbox {

struct Feature {
  std::string name;
  bool available = false;
  bool required = false;  // missing → no sandbox at all
  std::string detail;
};

struct Features {
  bool user_namespaces = false;
  int landlock_abi = 0;  // 0 = unavailable
  bool seccomp_filter = false;
  bool cgroup_v2_delegated = false;  // memory+pids controllers in a writable cgroup
  bool overlayfs_in_userns = false;
  bool openat2 = false;
  bool mount_api = false;  // open_tree, mount_setattr, move_mount (Linux 5.12): the binds
  // Our own cgroup v1 pids directory (/sys/fs/cgroup/pids/...), where a root supervisor makes
  // one group per sandbox; empty when this system has no such hierarchy.
  std::string pids_v1_cgroup;
  int cap_last_cap = 63;      // the highest capability this kernel knows (its bounding set's top)
  std::vector<Feature> list;  // the same, for printing

  /// Every required mechanism is present: the sandbox can run.
  bool sandbox_available() const;
  /// Required ones present but an optional one missing (a fallback is in use).
  bool degraded() const;
  /// What is missing among the required mechanisms, for SANDBOX_UNAVAILABLE reasons.
  std::string missing_required() const;
};

/// Probes the kernel thoroughly (forks short-lived children for the namespace and overlayfs
/// checks) — for `doctor` and daemon start. Cached after the first call; thread-safe.
const Features& probe_features();

/// The cheap subset a run needs before it clones: Landlock ABI, seccomp and the user-namespace
/// sysctls, no forks (clone itself is the final proof; its failure refuses the run).
/// Cached; thread-safe.
const Features& probe_run_features();

}  // namespace toolwarden::sandbox
