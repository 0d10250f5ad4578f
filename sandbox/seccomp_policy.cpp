#include "sandbox/seccomp_policy.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "sandbox/unique_fd.hpp"

namespace toolwarden::sandbox {

namespace {

struct CtxRelease {
  void operator()(scmp_filter_ctx ctx) const { seccomp_release(ctx); }
};
using Ctx = std::unique_ptr<void, CtxRelease>;

// Denied outright with EPERM (SPEC §8, plus the usual container-escape helpers).
constexpr const char* kDenied[] = {"ptrace",
                                   "process_vm_readv",
                                   "process_vm_writev",
                                   "kexec_load",
                                   "kexec_file_load",
                                   "bpf",
                                   "perf_event_open",
                                   "keyctl",
                                   "add_key",
                                   "request_key",
                                   "userfaultfd",
                                   "io_uring_setup",
                                   "io_uring_enter",
                                   "io_uring_register",
                                   "mount",
                                   "umount2",
                                   "pivot_root",
                                   "unshare",
                                   "setns",
                                   "fsopen",
                                   "fsconfig",
                                   "fsmount",
                                   "fspick",
                                   "move_mount",
                                   "open_tree",
                                   "mount_setattr",
                                   "open_by_handle_at",
                                   "name_to_handle_at",
                                   "chroot",
                                   "acct",
                                   "swapon",
                                   "swapoff",
                                   "reboot",
                                   "init_module",
                                   "finit_module",
                                   "delete_module",
                                   "syslog",
                                   "quotactl",
                                   "vhangup",
                                   "settimeofday",
                                   "clock_settime",
                                   "clock_adjtime",
                                   "adjtimex",
                                   "iopl",
                                   "ioperm",
                                   "lookup_dcookie",
                                   "uselib",
                                   "pidfd_getfd",
                                   "landlock_create_ruleset",
                                   "fanotify_init",
                                   "kcmp",
                                   "move_pages",
                                   "migrate_pages",
                                   "mbind",
                                   "set_mempolicy"};

constexpr unsigned long kNamespaceFlags[] = {CLONE_NEWUSER,   CLONE_NEWNS,  CLONE_NEWPID,
                                             CLONE_NEWNET,    CLONE_NEWIPC, CLONE_NEWUTS,
                                             CLONE_NEWCGROUP, CLONE_NEWTIME};

}  // namespace

std::vector<sock_filter> compile_seccomp_filter(const SeccompOptions& options, std::string* error) {
  Ctx ctx(seccomp_init(SCMP_ACT_ALLOW));
  auto fail = [&](const std::string& what, int rc) {
    *error = "seccomp: " + what + " (" + std::to_string(rc) + ")";
    return std::vector<sock_filter>{};
  };
  if (!ctx) return fail("init", 0);
  // Only the native ABI: a 32-bit or x32 syscall number would bypass every rule below.
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
      rc != 0) {
    return fail("bad-arch action", rc);
  }
  // A binary tree over the syscall numbers instead of one compare per rule in a row: every
  // system call of the payload walks about log2(rules) instructions rather than up to ~60,
  // and so does the kernel's emulation of the filter for each syscall number when it builds
  // its allow-cache, which it does with interrupts off while it attaches the filter.
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2); rc != 0)
    return fail("optimize", rc);
  const auto eperm = SCMP_ACT_ERRNO(EPERM);
  for (const char* name : kDenied) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // unknown to this libseccomp/arch
    if (int rc = seccomp_rule_add(ctx.get(), eperm, nr, 0); rc != 0)
      return fail(std::string("rule ") + name, rc);
  }
  int rc = 0;
  // ioctl(TIOCSTI/TIOCLINUX): compare only the low 32 bits, as the kernel does.
  rc |= seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(ioctl), 1,
                         SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
  rc |= seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(ioctl), 1,
                         SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX));
  // personality: only PER_LINUX (0) and the query (0xffffffff) pass. libseccomp checks an
  // argument once per rule, so "neither 0 nor all-ones" is spelled with masked compares: read
  // the low 32 bits as a ring, and a value that is neither has a set bit followed (cyclically)
  // by a clear one, which one of these 32 rules ("bit i set, bit i+1 mod 32 clear") matches;
  // 0 and all-ones match none of them.
  for (unsigned bit = 0; bit < 32; ++bit) {
    const std::uint64_t b = 1ull << bit, next = 1ull << ((bit + 1) % 32);
    rc |= seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(personality), 1,
                           SCMP_A0(SCMP_CMP_MASKED_EQ, b | next, b));
  }
  rc |= seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(personality), 1,
                         SCMP_A0(SCMP_CMP_GT, 0xffffffffull));
  // clone3 hides its flags in memory the filter cannot read: ENOSYS makes libc fall back to
  // clone, whose flags are checked here.
  rc |= seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  // clone with any namespace flag: one rule per flag (rules of one syscall are OR-ed).
  for (unsigned long flag : kNamespaceFlags) {
    rc |= seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(clone), 1,
                           SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
  }
  if (rc != 0) return fail("argument rules", rc);
  if (options.deny_unix_sockets) {
    rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1,
                          SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
    if (rc != 0) return fail("socket rule", rc);
  }
  if (options.deny_spawn) {
    rc |= seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(fork), 0);
    rc |= seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(vfork), 0);
    rc |= seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(clone), 1,
                           SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
    // An anonymous file can be executed through /proc/self/fd, and Landlock's execute right
    // does not cover it: no memfd at all.
    rc |= seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(memfd_create), 0);
    if (rc != 0) return fail("spawn rules", rc);
  }

  // libseccomp 2.5 exports BPF only to a file descriptor: use a memfd and read it back.
  UniqueFd mem(::memfd_create("toolwarden-seccomp", MFD_CLOEXEC));
  if (!mem) return fail("memfd", errno);
  if (int erc = seccomp_export_bpf(ctx.get(), mem.get()); erc != 0) return fail("export", erc);
  off_t size = ::lseek(mem.get(), 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0)
    return fail("export size", static_cast<int>(size));
  std::vector<sock_filter> prog(static_cast<std::size_t>(size) / sizeof(sock_filter));
  if (::pread(mem.get(), prog.data(), static_cast<std::size_t>(size), 0) != size)
    return fail("read back", errno);
  return prog;
}

}  // namespace toolwarden::sandbox
