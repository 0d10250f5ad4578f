#include "sandbox/features.hpp"

#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "sandbox/unique_fd.hpp"

namespace toolwarden::sandbox {

namespace {

// A small kernel file (procfs, cgroupfs) in one read, without an iostream: these are read on
// the way to every `toolwarden run`'s first sandbox.
std::optional<std::string> read_small_file(const char* path) {
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

// The number a one-number kernel file (a sysctl) holds, or `fallback` when it cannot be read.
long read_number(const char* path, long fallback) {
  const auto text = read_small_file(path);
  if (!text) return fallback;
  char* end = nullptr;
  const long v = std::strtol(text->c_str(), &end, 10);
  return end == text->c_str() ? fallback : v;
}

// /proc/sys/kernel/cap_last_cap, or 63 (every bit of the set) when it cannot be read.
int read_cap_last_cap() {
  const long v = read_number("/proc/sys/kernel/cap_last_cap", 63);
  return v < 0 || v > 63 ? 63 : static_cast<int>(v);
}

// Runs `fn` in a forked child and reports whether it returned true. The child only makes
// system calls (the caller may be multi-threaded).
template <class Fn>
bool in_child(Fn fn) {
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) ::_exit(fn() ? 0 : 1);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool probe_userns() {
  return in_child([] {
    return ::unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                     CLONE_NEWUTS | CLONE_NEWCGROUP) == 0;
  });
}

bool write_text(const char* path, std::string_view text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// As the sandbox does it: our own ids mapped, then an overlay with user xattrs (the only kind
// an unprivileged user namespace may mount), written to once.
bool probe_overlay() {
  // Built before the fork: the child of a threaded process must not allocate.
  const std::string uid_map =
      std::to_string(::geteuid()) + " " + std::to_string(::geteuid()) + " 1";
  const std::string gid_map =
      std::to_string(::getegid()) + " " + std::to_string(::getegid()) + " 1";
  return in_child([&uid_map, &gid_map] {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
    if (!write_text("/proc/self/setgroups", "deny") || !write_text("/proc/self/uid_map", uid_map) ||
        !write_text("/proc/self/gid_map", gid_map))
      return false;
    if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
    if (::mount("tmpfs", "/tmp", "tmpfs", 0, "size=64k") != 0) return false;
    for (const char* d : {"/tmp/l", "/tmp/u", "/tmp/w", "/tmp/m"}) ::mkdir(d, 0700);
    if (::mount("overlay", "/tmp/m", "overlay", 0,
                "lowerdir=/tmp/l,upperdir=/tmp/u,workdir=/tmp/w,userxattr") != 0)
      return false;
    int fd = ::open("/tmp/m/probe", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    ::close(fd);
    return ::access("/tmp/u/probe", F_OK) == 0;
  });
}

int probe_landlock() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : static_cast<int>(abi);
}

bool probe_seccomp() {
  // PR_GET_SECCOMP succeeds (0) on kernels built with seccomp; filters need SECCOMP_MODE_FILTER.
  if (::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) return false;
  const unsigned action = SECCOMP_RET_ERRNO;
  return ::syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
}

bool probe_openat2() {
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  int fd = static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof how));
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}

// Our cgroups as /proc/self/cgroup lists them: the v2 path ("0::/path") and the v1 pids one
// ("N:pids:/path"). One read serves both: the kernel builds this text anew for every read.
struct OwnCgroups {
  std::string v2_path, pids_v1_path;
};
OwnCgroups own_cgroups() {
  OwnCgroups out;
  const std::string self = read_small_file("/proc/self/cgroup").value_or("");
  for (std::size_t pos = 0; pos < self.size();) {
    std::size_t end = self.find('\n', pos);
    if (end == std::string::npos) end = self.size();
    const std::string_view line(self.data() + pos, end - pos);
    pos = end + 1;
    const auto a = line.find(':');
    const auto b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const auto controllers = line.substr(a + 1, b - a - 1);
    const auto path = line.substr(b + 1);
    if (line.substr(0, a) == "0" && controllers.empty()) out.v2_path = path;
    if (controllers == "pids") out.pids_v1_path = path;
  }
  return out;
}

std::string pids_v1_dir(const OwnCgroups& own) {
  if (own.pids_v1_path.empty()) return {};
  return "/sys/fs/cgroup/pids" + (own.pids_v1_path == "/" ? std::string() : own.pids_v1_path);
}

// The mount API the sandbox builds its binds with (open_tree, mount_setattr, move_mount; Linux
// 5.12, before any Landlock). Asked about an invalid descriptor, which only a kernel without
// the call answers with ENOSYS.
bool probe_mount_api() {
  const int rc = ::mount_setattr(-1, "", AT_EMPTY_PATH, nullptr, 0);
  return rc == 0 || errno != ENOSYS;
}

// A delegated cgroup v2 subtree: our own cgroup is writable and offers memory and pids.
bool probe_cgroup(const OwnCgroups& own, std::string* detail) {
  const std::string& path = own.v2_path;
  if (path.empty()) {
    *detail = "no cgroup v2 hierarchy";
    return false;
  }
  std::string base = "/sys/fs/cgroup" + path;
  const auto ctl = read_small_file((base + "/cgroup.controllers").c_str());
  if (!ctl || ctl->find("memory") == std::string::npos || ctl->find("pids") == std::string::npos) {
    *detail = "memory and pids controllers are not delegated to " + base;
    return false;
  }
  if (::access(base.c_str(), W_OK) != 0) {
    *detail = base + " is not writable";
    return false;
  }
  *detail = base;
  return true;
}

// What both probes share: all but the user-namespace check and overlayfs.
void probe_common(Features& f, std::string* cg_detail) {
  f.landlock_abi = probe_landlock();
  f.seccomp_filter = probe_seccomp();
  const OwnCgroups own = own_cgroups();
  f.cgroup_v2_delegated = probe_cgroup(own, cg_detail);
  f.pids_v1_cgroup = pids_v1_dir(own);
  f.cap_last_cap = read_cap_last_cap();
  f.openat2 = probe_openat2();
  f.mount_api = probe_mount_api();
}

// The sysctls that switch unprivileged user namespaces off (read, not tried).
bool userns_sysctls_allow() {
  if (read_number("/proc/sys/user/max_user_namespaces", 1) <= 0) return false;
  if (::geteuid() != 0 && read_number("/proc/sys/kernel/unprivileged_userns_clone", 1) == 0)
    return false;
  return true;
}

}  // namespace

const Features& probe_run_features() {
  static const Features features = [] {
    Features f;
    f.user_namespaces = userns_sysctls_allow();
    std::string cg_detail;
    probe_common(f, &cg_detail);
    f.list = {{"user_namespaces", f.user_namespaces, true, "sysctls"},
              {"landlock", f.landlock_abi > 0, true, "ABI " + std::to_string(f.landlock_abi)},
              {"seccomp", f.seccomp_filter, true, ""},
              {"mount_api", f.mount_api, true, ""}};
    return f;
  }();
  return features;
}

bool Features::sandbox_available() const {
  return user_namespaces && landlock_abi > 0 && seccomp_filter && mount_api;
}

bool Features::degraded() const { return sandbox_available() && !cgroup_v2_delegated; }

std::string Features::missing_required() const {
  std::string out;
  for (const auto& f : list) {
    if (f.required && !f.available) out += (out.empty() ? "" : ", ") + f.name;
  }
  return out;
}

const Features& probe_features() {
  static const Features features = [] {
    Features f;
    f.user_namespaces = probe_userns();
    std::string cg_detail;
    probe_common(f, &cg_detail);
    f.overlayfs_in_userns = probe_overlay();
    f.list = {
        {"user_namespaces", f.user_namespaces, true,
         f.user_namespaces
             ? "user, mount, PID, IPC, UTS, network and cgroup namespaces"
             : "unshare(CLONE_NEWUSER|...) refused (kernel.unprivileged_userns_clone?)"},
        {"landlock", f.landlock_abi > 0, true,
         f.landlock_abi > 0 ? "ABI " + std::to_string(f.landlock_abi)
                            : "not enabled in this kernel (lsm=)"},
        {"seccomp", f.seccomp_filter, true,
         f.seccomp_filter ? "seccomp-bpf filters" : "seccomp filters unavailable"},
        {"mount_api", f.mount_api, true,
         f.mount_api ? "open_tree, mount_setattr, move_mount"
                     : "missing (Linux 5.12 or later): the sandbox's binds are made with it"},
        {"cgroup_v2_delegation", f.cgroup_v2_delegated, false,
         f.cgroup_v2_delegated
             ? cg_detail
             : cg_detail + "; aggregate memory/process limits use rlimits and /proc accounting"},
        {"overlayfs_in_userns", f.overlayfs_in_userns, false,
         f.overlayfs_in_userns ? "available" : "unavailable (workspace overlays for custom tools)"},
        {"openat2", f.openat2, false,
         f.openat2 ? "available" : "missing; file tools use an O_NOFOLLOW walk"},
    };
    return f;
  }();
  return features;
}

}  // namespace toolwarden::sandbox
