// Runs in the child of clone3(); see child.hpp for the rules this code lives by: system
// calls only, no allocation, every failure reported as a Report record and _exit.
#include "sandbox/child.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <iterator>

#include "sandbox/fd_passing.hpp"
#include "sandbox/landlock_abi.hpp"

namespace toolwarden::sandbox {

const char* to_string(SetupStep s) {
  switch (s) {
    case SetupStep::sync:
      return "sync";
    case SetupStep::id_maps:
      return "write the user namespace's id maps";
    case SetupStep::proxy:
      return "open the proxy listener";
    case SetupStep::cgroup:
      return "join the pids cgroup";
    case SetupStep::hostname:
      return "hostname";
    case SetupStep::private_mounts:
      return "private mounts";
    case SetupStep::new_root:
      return "new root";
    case SetupStep::mount_step:
      return "mount";
    case SetupStep::pivot:
      return "pivot_root";
    case SetupStep::remount_root:
      return "read-only root";
    case SetupStep::loopback:
      return "loopback";
    case SetupStep::fork_payload:
      return "fork";
    case SetupStep::session:
      return "setsid";
    case SetupStep::stdio:
      return "stdio";
    case SetupStep::cwd:
      return "working directory";
    case SetupStep::rlimits:
      return "rlimits";
    case SetupStep::no_new_privs:
      return "no_new_privs";
    case SetupStep::landlock:
      return "landlock";
    case SetupStep::capabilities:
      return "capabilities";
    case SetupStep::seccomp:
      return "seccomp";
    case SetupStep::exec:
      return "exec";
  }
  return "setup";
}

namespace {

int g_report_fd = -1;

void write_report(const Report& r) {
  if (g_report_fd >= 0) {
    ssize_t n;
    do {
      n = ::write(g_report_fd, &r, sizeof r);
    } while (n < 0 && errno == EINTR);
  }
}

[[noreturn]] void fail(SetupStep step, int index = -1) {
  Report r{};
  r.kind = 'E';
  r.step = static_cast<std::uint8_t>(step);
  r.index = static_cast<std::int16_t>(index);
  r.err = errno;
  write_report(r);
  ::_exit(126);
}

bool write_proc_self(const char* path, const char* text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const std::size_t len = std::strlen(text);
  const bool ok = ::write(fd, text, len) == static_cast<ssize_t>(len);
  ::close(fd);
  return ok;
}

// Init never execs, so it would otherwise hold a copy of every descriptor the daemon had open
// at the clone (listeners, the store, other sandboxes' pipes). Keep 0-2 and the plan's own.
void close_inherited_fds(const ChildPlan& p) {
  // -1 (no proxy channel) becomes the largest value and keeps nothing.
  unsigned keep[] = {
      static_cast<unsigned>(p.report_fd),        static_cast<unsigned>(p.stdin_fd),
      static_cast<unsigned>(p.stdout_fd),        static_cast<unsigned>(p.stderr_fd),
      static_cast<unsigned>(p.proxy_channel_fd), static_cast<unsigned>(p.cgroup_leave_fd),
      static_cast<unsigned>(p.cgroup_sync_fd),   static_cast<unsigned>(p.cgroup_dir_fd)};
  std::sort(std::begin(keep), std::end(keep));
  unsigned next = 3;
  for (unsigned fd : keep) {
    if (fd == ~0u) break;
    if (fd > next) ::syscall(SYS_close_range, next, fd - 1, 0u);
    if (fd + 1 > next) next = fd + 1;
  }
  ::syscall(SYS_close_range, next, ~0u, 0u);
}

// The proxy's listening socket, made here because only a process in this network namespace
// can make it, and sent to the daemon, which serves it; the payload never holds it.
void open_proxy_listener(const ChildPlan& p) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) fail(SetupStep::proxy, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(p.proxy_port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail(SetupStep::proxy, 1);
  if (::listen(s, 64) != 0) fail(SetupStep::proxy, 2);
  if (!send_fd(p.proxy_channel_fd, s)) fail(SetupStep::proxy, 3);
  ::close(s);
  ::close(p.proxy_channel_fd);
}

// The last component of a mount point: a directory, or (last_is_file) an empty file. What
// exists already is kept: a directory as it is; a file (say in a read-only system dir, which
// a file bind may cover) when a file is wanted; a symlink never.
bool make_leaf(const char* path, bool last_is_file) {
  if (!last_is_file) return ::mkdir(path, 0755) == 0 || errno == EEXIST;
  struct stat st {};
  if (::lstat(path, &st) == 0) {
    if (S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode)) {
      errno = S_ISLNK(st.st_mode) ? ELOOP : EISDIR;
      return false;
    }
    return true;
  }
  int fd = ::open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
  if (fd < 0) return errno == EEXIST;
  ::close(fd);
  return true;
}

// mkdir -p on a path copied into a stack buffer. Most parents exist already (an earlier step
// made them), so the leaf is tried first and the walk from the root only when it is missing.
bool mkdir_p(const char* path, bool last_is_file) {
  if (make_leaf(path, last_is_file)) return true;
  if (errno != ENOENT) return false;
  char buf[4096];
  std::size_t len = std::strlen(path);
  if (len == 0 || len >= sizeof buf) {
    errno = ENAMETOOLONG;
    return false;
  }
  std::memcpy(buf, path, len + 1);
  for (std::size_t i = 1; i < len; ++i) {
    if (buf[i] != '/') continue;
    buf[i] = '\0';
    const bool ok = ::mkdir(buf, 0755) == 0 || errno == EEXIST;
    buf[i] = '/';
    if (!ok) return false;
  }
  return make_leaf(buf, last_is_file);
}

void fd_path(int fd, char (&buf)[64]) {
  // "/proc/self/fd/N" without snprintf (which may allocate for locales).
  const char prefix[] = "/proc/self/fd/";
  std::memcpy(buf, prefix, sizeof prefix - 1);
  char digits[16];
  int n = 0;
  unsigned v = static_cast<unsigned>(fd);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  std::size_t pos = sizeof prefix - 1;
  while (n > 0) buf[pos++] = digits[--n];
  buf[pos] = '\0';
}

// Appends a C string to a fixed buffer, keeping it terminated; false when it does not fit.
constexpr std::size_t kMaxOverlayOptions = 8192;
bool append(char (&buf)[kMaxOverlayOptions], std::size_t& len, const char* text) {
  const std::size_t n = std::strlen(text);
  if (len + n + 1 > sizeof buf) return false;
  std::memcpy(buf + len, text, n + 1);
  len += n;
  return true;
}

// Bind sources opened before the new root hides anything (phase 1), mounted in phase 2.
int g_bind_fds[kMaxMountSteps];

int g_overlay_upper_fd = -1;
int g_overlay_work_fd = -1;

int open_dir_nofollow(const char* path) {
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC | O_DIRECTORY;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd = static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how));
  if (fd < 0 && errno == ENOSYS) fd = ::open(path, O_PATH | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW);
  return fd;
}

void open_bind_sources(const ChildPlan& p) {
  if (p.step_count > kMaxMountSteps) {
    errno = E2BIG;
    fail(SetupStep::mount_step, p.step_count);
  }
  for (int i = 0; i < p.step_count; ++i) {
    const MountStep& s = p.steps[i];
    g_bind_fds[i] = -1;
    if (s.kind != StepKind::bind && s.kind != StepKind::overlay &&
        s.kind != StepKind::scratch_overlay)
      continue;
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC | (s.src_is_dir ? O_DIRECTORY : 0);
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    int fd = static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, s.src, &how, sizeof how));
    if (fd < 0 && errno == ENOSYS) fd = ::open(s.src, static_cast<int>(how.flags) | O_NOFOLLOW);
    if (fd < 0) fail(SetupStep::mount_step, i);
    struct stat st {};
    if (::fstat(fd, &st) != 0) fail(SetupStep::mount_step, i);
    if (st.st_dev != s.src_dev || st.st_ino != s.src_ino) {
      errno = ESTALE;  // swapped since the parent checked it
      fail(SetupStep::mount_step, i);
    }
    g_bind_fds[i] = fd;
    if (s.kind == StepKind::overlay) {
      g_overlay_upper_fd = open_dir_nofollow(s.upper);
      g_overlay_work_fd = open_dir_nofollow(s.work);
      if (g_overlay_upper_fd < 0 || g_overlay_work_fd < 0) fail(SetupStep::mount_step, i);
    }
  }
}

// Mounts the overlay of step `s`: lower = its checked source, upper and work = the two
// directory descriptors opened for it, all named by descriptor.
void mount_overlay(const MountStep& s, int index) {
  // The lower layer is named by the checked fd, so a swapped path cannot slip in.
  char options[kMaxOverlayOptions];
  char lower[64], upper[64], work[64];
  fd_path(g_bind_fds[index], lower);
  fd_path(g_overlay_upper_fd, upper);
  fd_path(g_overlay_work_fd, work);
  std::size_t len = 0;
  if (!append(options, len, "lowerdir=") || !append(options, len, lower) ||
      !append(options, len, ",upperdir=") || !append(options, len, upper) ||
      !append(options, len, ",workdir=") || !append(options, len, work) ||
      !append(options, len, ",userxattr")) {
    errno = ENAMETOOLONG;
    fail(SetupStep::mount_step, index);
  }
  if (::mount("overlay", s.target, "overlay", MS_NOSUID | MS_NODEV, options) != 0)
    fail(SetupStep::mount_step, index);
  for (int* fd : {&g_bind_fds[index], &g_overlay_upper_fd, &g_overlay_work_fd}) {
    ::close(*fd);
    *fd = -1;
  }
}

void run_step(const MountStep& s, int index) {
  switch (s.kind) {
    case StepKind::mkdir:
      if (!mkdir_p(s.target, false)) fail(SetupStep::mount_step, index);
      return;
    case StepKind::symlink:
      if (::symlink(s.link, s.target) != 0 && errno != EEXIST) fail(SetupStep::mount_step, index);
      return;
    case StepKind::tmpfs:
      if (!mkdir_p(s.target, false)) fail(SetupStep::mount_step, index);
      if (::mount("tmpfs", s.target, "tmpfs", MS_NOSUID | MS_NODEV, s.data) != 0)
        fail(SetupStep::mount_step, index);
      return;
    case StepKind::proc:
      if (!mkdir_p(s.target, false)) fail(SetupStep::mount_step, index);
      if (::mount("proc", s.target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
        fail(SetupStep::mount_step, index);
      }
      return;
    case StepKind::overlay:
      if (!mkdir_p(s.target, false)) fail(SetupStep::mount_step, index);
      mount_overlay(s, index);
      return;
    case StepKind::scratch_overlay: {
      // A tmpfs at the target holds the upper and work layers; the overlay then covers it.
      if (!mkdir_p(s.target, false)) fail(SetupStep::mount_step, index);
      if (::mount("tmpfs", s.target, "tmpfs", MS_NOSUID | MS_NODEV, s.data) != 0)
        fail(SetupStep::mount_step, index);
      int layers = ::open(s.target, O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (layers < 0 || ::mkdirat(layers, "u", 0755) != 0 || ::mkdirat(layers, "w", 0700) != 0)
        fail(SetupStep::mount_step, index);
      g_overlay_upper_fd = ::openat(layers, "u", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      g_overlay_work_fd = ::openat(layers, "w", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      ::close(layers);
      if (g_overlay_upper_fd < 0 || g_overlay_work_fd < 0) fail(SetupStep::mount_step, index);
      mount_overlay(s, index);
      return;
    }
    case StepKind::bind: {
      if (!mkdir_p(s.target, !s.src_is_dir)) fail(SetupStep::mount_step, index);
      // A detached copy of the mount at the source fd (opened without following symlinks and
      // checked against the identity the parent saw: what is mounted is what was checked),
      // given its flags before it is attached. Flags the kernel locked (those a more
      // privileged mount namespace set) stay as they are; clearing one fails.
      const int tree =
          ::open_tree(g_bind_fds[index], "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
      if (tree < 0) fail(SetupStep::mount_step, index);
      mount_attr attr{};
      attr.attr_set = MOUNT_ATTR_NOSUID | (s.device ? MOUNT_ATTR_NOEXEC : MOUNT_ATTR_NODEV) |
                      (s.writable ? 0 : MOUNT_ATTR_RDONLY);
      attr.attr_clr = (s.device ? MOUNT_ATTR_NODEV : 0) | (s.writable ? MOUNT_ATTR_RDONLY : 0);
      if (::mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0 ||
          ::move_mount(tree, "", AT_FDCWD, s.target, MOVE_MOUNT_F_EMPTY_PATH) != 0)
        fail(SetupStep::mount_step, index);
      ::close(tree);
      ::close(g_bind_fds[index]);
      g_bind_fds[index] = -1;
      return;
    }
  }
}

void loopback_up() {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(SetupStep::loopback);
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, "lo", 3);
  if (::ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) fail(SetupStep::loopback);
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  if (::ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) fail(SetupStep::loopback);
  ::close(fd);
}

void set_limit(int resource, std::uint64_t soft, std::uint64_t hard) {
  rlimit rl{static_cast<rlim_t>(soft), static_cast<rlim_t>(hard)};
  if (::setrlimit(resource, &rl) != 0) fail(SetupStep::rlimits, resource);
}

void apply_landlock(const ChildPlan& p) {
  landlock::RulesetAttr attr{};
  attr.handled_access_fs = p.landlock_handled_fs;
  std::size_t attr_size = sizeof attr.handled_access_fs;
  if (p.landlock_abi >= 4) {
    // No network rule is added: TCP bind and connect are denied on top of the empty netns.
    attr.handled_access_net = landlock::kNetBindTcp | landlock::kNetConnectTcp;
    attr_size = offsetof(landlock::RulesetAttr, scoped);
  }
  if (p.landlock_abi >= 6) {
    // Abstract unix sockets and signals outside this sandbox are out of reach.
    attr.scoped = landlock::kScopeAbstractUnixSocket | landlock::kScopeSignal;
    attr_size = sizeof attr;
  }
  int ruleset = static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0));
  if (ruleset < 0) fail(SetupStep::landlock, 0);
  if (p.proxy_channel_fd >= 0 && p.landlock_abi >= 4) {
    // The one TCP connection the payload may make: to the daemon's proxy.
    landlock::NetPortAttr np{landlock::kNetConnectTcp, p.proxy_port};
    if (::syscall(SYS_landlock_add_rule, ruleset, landlock::kRuleNetPort, &np, 0) != 0)
      fail(SetupStep::landlock, 998);
  }
  for (int i = 0; i < p.landlock_count; ++i) {
    const auto& lp = p.landlock_paths[i];
    int fd = ::open(lp.path, O_PATH | O_CLOEXEC);
    if (fd < 0) fail(SetupStep::landlock, i + 1);
    landlock::PathBeneathAttr pb{};
    pb.allowed_access = lp.access & p.landlock_handled_fs;
    pb.parent_fd = fd;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) pb.allowed_access &= landlock::kFileRights;
    if (::syscall(SYS_landlock_add_rule, ruleset, landlock::kRulePathBeneath, &pb, 0) != 0) {
      fail(SetupStep::landlock, i + 1);
    }
    ::close(fd);
  }
  if (::syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) fail(SetupStep::landlock, 999);
  ::close(ruleset);
}

void drop_capabilities(const ChildPlan& p) {
  for (int cap = 0; cap <= p.cap_last_cap; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
      fail(SetupStep::capabilities, cap);
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
    fail(SetupStep::capabilities, 100);
  // uid 0 inside must not regain capabilities on exec.
  if (::prctl(PR_SET_SECUREBITS,
              SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                  SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED,
              0, 0, 0) != 0) {
    fail(SetupStep::capabilities, 101);
  }
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capset, &hdr, data) != 0) fail(SetupStep::capabilities, 102);
}

// Joins the run's pids group once the parent says it exists. Joining by writing "0" (this
// thread) to `tasks` moves one task the kernel need not hold still, so it skips the global
// threadgroup lock that moving another pid takes — and with it an RCU grace period per sandbox.
void join_pids_group(const ChildPlan& p) {
  if (p.cgroup_sync_fd < 0) return;
  char made = 0;
  ssize_t n;
  do {
    n = ::read(p.cgroup_sync_fd, &made, 1);
  } while (n < 0 && errno == EINTR);
  ::close(p.cgroup_sync_fd);
  if (n != 1) fail(SetupStep::cgroup);  // the parent is gone
  if (made == 'Y') {
    const int tasks = ::openat(p.cgroup_dir_fd, p.cgroup_tasks_path, O_WRONLY | O_CLOEXEC);
    if (tasks < 0 || ::write(tasks, "0", 1) != 1) fail(SetupStep::cgroup);
    ::close(tasks);
  }
  ::close(p.cgroup_dir_fd);
}

[[noreturn]] void payload_main(const ChildPlan& p) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
  if (::setsid() < 0) fail(SetupStep::session);
  if (::dup2(p.stdin_fd, 0) < 0 || ::dup2(p.stdout_fd, 1) < 0 || ::dup2(p.stderr_fd, 2) < 0 ||
      ::dup2(p.report_fd, 3) < 0) {
    fail(SetupStep::stdio);
  }
  g_report_fd = 3;
  ::fcntl(3, F_SETFD, FD_CLOEXEC);  // a successful exec closes it: EOF means "exec'd"
  ::syscall(SYS_close_range, 4u, ~0u, 0u);
  if (::chdir(p.cwd) != 0) fail(SetupStep::cwd);
  set_limit(RLIMIT_NPROC, p.max_processes, p.max_processes);
  set_limit(RLIMIT_NOFILE, p.max_open_files, p.max_open_files);
  set_limit(RLIMIT_FSIZE, p.file_size_bytes, p.file_size_bytes);
  set_limit(RLIMIT_CPU, p.cpu_seconds, p.cpu_seconds + 1);
  set_limit(RLIMIT_CORE, 0, 0);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(SetupStep::no_new_privs);
  apply_landlock(p);
  drop_capabilities(p);
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, p.seccomp) != 0) fail(SetupStep::seccomp);
  ::execve(p.argv[0], const_cast<char* const*>(p.argv), const_cast<char* const*>(p.envp));
  fail(SetupStep::exec);
}

}  // namespace

[[noreturn]] void child_main(const ChildPlan& p) {
  g_report_fd = p.report_fd;
  // The whole sandbox dies with the thread that cloned it (the supervisor thread).
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) fail(SetupStep::sync);
  pollfd parent{p.parent_pidfd, POLLIN, 0};
  if (::poll(&parent, 1, 0) != 0) ::_exit(125);  // the daemon died before the line above
  ::close(p.parent_pidfd);
  // Our own uid and gid, mapped by ourselves (we hold every capability of the new namespace):
  // setgroups must be denied before an unprivileged gid_map is accepted.
  if (!write_proc_self("/proc/self/setgroups", "deny") ||
      !write_proc_self("/proc/self/uid_map", p.uid_map) ||
      !write_proc_self("/proc/self/gid_map", p.gid_map)) {
    fail(SetupStep::id_maps);
  }
  close_inherited_fds(p);

  if (::sethostname("toolwarden", 10) != 0) fail(SetupStep::hostname);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    fail(SetupStep::private_mounts);
  open_bind_sources(p);
  if (::mount("tmpfs", p.new_root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0) {
    fail(SetupStep::new_root);
  }
  for (int i = 0; i < p.step_count; ++i) run_step(p.steps[i], i);

  if (::chdir(p.new_root) != 0) fail(SetupStep::pivot);
  // pivot_root(".", ".") stacks the old root under the new one; detaching it leaves only ours.
  if (::syscall(SYS_pivot_root, ".", ".") != 0) fail(SetupStep::pivot);
  if (::umount2(".", MNT_DETACH) != 0) fail(SetupStep::pivot);
  if (::chdir("/") != 0) fail(SetupStep::pivot);
  if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
              nullptr) != 0) {
    fail(SetupStep::remount_root);
  }
  loopback_up();
  if (p.proxy_channel_fd >= 0) open_proxy_listener(p);

  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2})
    sigaddset(&set, sig);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);

  // The payload shares init's memory until its execve (CLONE_VM|CLONE_VFORK, as posix_spawn
  // does): no page tables to copy, no copy-on-write faults, and init sleeps meanwhile, so the
  // payload's writes (its stack, errno, g_report_fd) cannot race it. Not fork(): glibc's fork
  // takes the allocator's locks, which another thread of the (multi-threaded) daemon may have
  // held at the instant this process was cloned.
  // Nothing has been forked yet; from here on, every process counts against the limit.
  join_pids_group(p);
  constexpr std::size_t kPayloadStack = 256 * 1024;
  void* stack = ::mmap(nullptr, kPayloadStack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) fail(SetupStep::fork_payload);
  pid_t payload =
      ::clone([](void* plan) -> int { payload_main(*static_cast<const ChildPlan*>(plan)); },
              static_cast<char*>(stack) + kPayloadStack, CLONE_VM | CLONE_VFORK | SIGCHLD,
              const_cast<ChildPlan*>(&p));
  g_report_fd = p.report_fd;  // the payload moved it to its own fd 3
  if (payload < 0) fail(SetupStep::fork_payload);
  ::munmap(stack, kPayloadStack);

  // Init: hold no end of the payload's pipes, so they reach EOF when the tree is gone.
  ::close(p.stdin_fd);
  ::close(p.stdout_fd);
  ::close(p.stderr_fd);
  int payload_status = 0;
  for (;;) {
    siginfo_t info{};
    int sig = ::sigwaitinfo(&set, &info);
    if (sig < 0) continue;
    if (sig != SIGCHLD) {
      ::kill(-payload, sig);  // forward to the payload's session
      continue;
    }
    bool payload_done = false;
    int status = 0;
    pid_t w;
    while ((w = ::waitpid(-1, &status, WNOHANG)) > 0) {
      if (w == payload) {
        payload_status = status;
        payload_done = true;
      }
    }
    if (!payload_done) continue;
    // Nothing outlives the payload: kill every other process of this PID namespace. Each of
    // them descends from init (orphans are re-parented to init or to a subreaper below it),
    // so when init has no child left (ECHILD) there is none, and the kill is skipped: kill(-1)
    // walks every process of the host, not just the namespace's.
    if (w == 0 || errno != ECHILD) {
      ::kill(-1, SIGKILL);
      while (::waitpid(-1, &status, 0) > 0 || errno == EINTR) {
      }
    }
    // Alone now: leave the run's pids group (a failure only means the parent removes it after
    // our exit instead of on this report).
    if (p.cgroup_leave_fd >= 0) {
      [[maybe_unused]] auto n = ::write(p.cgroup_leave_fd, "0", 1);
    }
    Report r{};
    r.kind = 'X';
    r.wait_status = payload_status;
    struct statvfs sv {};
    r.scratch_full = ::statvfs("/tmp", &sv) == 0 && sv.f_bavail == 0 ? 1 : 0;
    write_report(r);
    ::_exit(0);
  }
}

}  // namespace toolwarden::sandbox
