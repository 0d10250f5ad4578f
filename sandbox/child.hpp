// What runs inside the new namespaces: the sandbox's init (PID 1) builds the minimal root,
// then forks the payload, which locks itself down and execs. Everything the child needs is
// prepared by the parent in a ChildPlan before clone, because a child of a multi-threaded
// process may only make system calls (no allocation, no locks) until it execs.
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <cstdint>

namespace toolwarden::sandbox {

enum class StepKind : std::uint8_t {
  mkdir,    // target
  bind,     // src_fd → target (dir or file, created as needed), then flags
  symlink,  // target → link
  tmpfs,    // target with data (mount options)
  proc,     // a fresh proc at target
  overlay,  // target: overlayfs, lower = src (fd-checked like a bind), upper/work on the host
  scratch_overlay,  // target: overlayfs, lower = src, upper/work in a tmpfs (data = its options)
};

struct MountStep {
  StepKind kind;
  const char* target = nullptr;  // absolute path under the new root (before pivot)
  const char* src = nullptr;     // bind: host path, opened in the child's own mount namespace
  dev_t src_dev = 0;             // bind: the identity the parent saw; the child refuses another
  ino_t src_ino = 0;
  bool src_is_dir = true;
  bool writable = false;
  bool device = false;  // bind of a device node: keep dev, add noexec
  const char* link = nullptr;
  const char* data = nullptr;
  const char* upper = nullptr;  // overlay: the host directories for changes and overlayfs'
  const char* work = nullptr;   //   work, opened before the new root hides them
};

/// One Landlock rule, applied after pivot_root.
struct LandlockPath {
  const char* path;
  std::uint64_t access;
};

/// Setup steps reported on failure (the `detail` of a setup_failed result).
enum class SetupStep : std::uint8_t {
  sync = 1,
  cgroup,
  id_maps,
  proxy,
  hostname,
  private_mounts,
  new_root,
  mount_step,
  pivot,
  remount_root,
  loopback,
  fork_payload,
  session,
  stdio,
  cwd,
  rlimits,
  no_new_privs,
  landlock,
  capabilities,
  seccomp,
  exec
};
const char* to_string(SetupStep s);

/// Records the child writes to the report pipe.
struct Report {
  char kind;  // 'E' setup error, 'X' payload exit
  std::uint8_t step;
  std::int16_t index;
  int err;
  int wait_status;  // for 'X'
  std::uint8_t scratch_full;
};

inline constexpr int kMaxMountSteps = 96;

struct ChildPlan {
  int parent_pidfd;     // the daemon's pidfd: readable when it died before PDEATHSIG took hold
  const char* uid_map;  // the lines the child writes to its own uid_map / gid_map
  const char* gid_map;
  int report_fd;  // write end (close-on-exec in the payload)
  int stdin_fd;   // /dev/null or a pipe's read end
  int stdout_fd;  // write ends
  int stderr_fd;
  // A root supervisor's pids cgroup (v1) for this run, which the parent makes while the child
  // builds its mounts: -1, or the read end of a pipe on which the parent says 'Y' once the
  // group exists ('N': it could not be made). The child then joins it, before the payload
  // starts, through `cgroup_tasks_path` ("<group>/tasks") below `cgroup_dir_fd` (the parent's
  // own pids directory).
  int cgroup_sync_fd;
  int cgroup_dir_fd;
  const char* cgroup_tasks_path;
  // -1, or the `tasks` file of the parent's own pids cgroup: init moves itself back there
  // once every other process of the sandbox is gone, so that the run's group is empty (and
  // can be removed) before init's own exit, which the kernel takes a while to finish.
  int cgroup_leave_fd;
  const char* new_root;  // where the new root tmpfs is mounted before pivot ("/tmp")
  const MountStep* steps;
  int step_count;
  const LandlockPath* landlock_paths;
  int landlock_count;
  int landlock_abi;
  std::uint64_t landlock_handled_fs;
  const char* const* argv;
  const char* const* envp;
  const char* cwd;
  const sock_fprog* seccomp;
  int proxy_channel_fd;  // -1, or a socket to send the proxy's listening socket through
  std::uint16_t proxy_port;
  std::uint64_t max_processes, max_open_files, file_size_bytes, cpu_seconds;
  int cap_last_cap;  // capabilities 0..cap_last_cap are dropped from the bounding set
};

/// The body of the cloned child; never returns.
[[noreturn]] void child_main(const ChildPlan& plan);

}  // namespace toolwarden::sandbox
