// The filters the sandbox loads are compiled at build time; they must be exactly what
// libseccomp compiles from seccomp_policy.cpp now, for every variant.
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>

#include <string>

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

}  // namespace
}  // namespace toolwarden::sandbox
