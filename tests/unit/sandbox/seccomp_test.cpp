// The filters the sandbox loads are compiled at build time; they must be exactly what
// libseccomp compiles from seccomp_policy.cpp now, for every variant.
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "sandbox/seccomp_baked.hpp"
#include "sandbox/seccomp_policy.hpp"

namespace toolwarden::sandbox {
namespace {

bool same(const sock_filter& a, const sock_filter& b) {
  return a.code == b.code && a.jt == b.jt && a.jf == b.jf && a.k == b.k;
}

class SeccompVariant : public ::testing::TestWithParam<int> {};

TEST_P(SeccompVariant, BakedFilterEqualsAFreshCompilation) {
  SeccompOptions opts;
  opts.deny_unix_sockets = (GetParam() & 1) != 0;
  opts.deny_spawn = (GetParam() & 2) != 0;
  std::string error;
  const auto fresh = compile_seccomp_filter(opts, &error);
  ASSERT_FALSE(fresh.empty()) << error;
  const auto baked = baked_seccomp_filter(opts);
  ASSERT_EQ(baked.size(), fresh.size());
  for (std::size_t i = 0; i < fresh.size(); ++i)
    EXPECT_TRUE(same(baked[i], fresh[i])) << "instruction " << i;
}

INSTANTIATE_TEST_SUITE_P(AllOptions, SeccompVariant, ::testing::Values(0, 1, 2, 3));

TEST(SeccompBaked, VariantsDifferAndCheckTheArchitectureFirst) {
  SeccompOptions plain{.deny_unix_sockets = false, .deny_spawn = false};
  SeccompOptions spawn{.deny_unix_sockets = false, .deny_spawn = true};
  const auto a = baked_seccomp_filter(plain);
  const auto b = baked_seccomp_filter(spawn);
  EXPECT_LT(a.size(), b.size());  // the spawn rules add instructions
  // The program starts by loading seccomp_data.arch and comparing it with the native one.
  ASSERT_GE(a.size(), 2u);
  EXPECT_EQ(a[0].code, BPF_LD | BPF_W | BPF_ABS);
  EXPECT_EQ(a[0].k, 4u);  // offsetof(struct seccomp_data, arch)
#if defined(__x86_64__)
  EXPECT_EQ(a[1].k, static_cast<unsigned>(AUDIT_ARCH_X86_64));
#endif
}

// What the kernel makes of the personality rules: only PER_LINUX (0) and the query
// (0xffffffff) pass; every other value — each single bit, each value with one bit clear, the
// 32-bit personas, anything in the upper half — is refused with EPERM. Run in a child that
// loads the baked filter, since a filter cannot be taken off again.
TEST(SeccompBaked, PersonalityPassesOnlyLinuxAndTheQuery) {
  std::vector<std::uint64_t> denied = {0x0008,      0x0040000,      0x0020000,
                                       0x55555555u, 0xaaaaaaaau,    0x80000001u,
                                       0x7fffffffu, 0x100000000ull, 0xffffffff00000000ull};
  for (unsigned bit = 0; bit < 32; ++bit) {
    denied.push_back(1ull << bit);
    denied.push_back(0xffffffffull & ~(1ull << bit));
  }
  const auto filter = baked_seccomp_filter(SeccompOptions{});
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Writes the first value the filter judged wrongly (or nothing) and exits.
    sock_fprog prog{static_cast<unsigned short>(filter.size()),
                    const_cast<sock_filter*>(filter.data())};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
      ::_exit(2);
    auto report = [&](std::uint64_t v) {
      (void)!::write(fds[1], &v, sizeof v);
      ::_exit(1);
    };
    for (std::uint64_t allowed : {std::uint64_t{0}, std::uint64_t{0xffffffff}}) {
      if (::syscall(SYS_personality, allowed) == -1) report(allowed);
    }
    for (std::uint64_t v : denied) {
      errno = 0;
      if (::syscall(SYS_personality, v) != -1 || errno != EPERM) report(v);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::uint64_t wrong = 0;
  const bool got = ::read(fds[0], &wrong, sizeof wrong) == sizeof wrong;
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 2) << "could not load the filter";
  EXPECT_FALSE(got) << "personality(0x" << std::hex << wrong << ") was judged wrongly";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace toolwarden::sandbox
