// Probe policies and executable resolution (SPEC §12): a bad policy names its key; an
// executable comes from the trusted directories or the policy's list, never the snapshot.
#include "policy/probe_policy.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <filesystem>
#include <fstream>

namespace toolwarden::policy {
namespace {
namespace fs = std::filesystem;
namespace json = boost::json;

std::string error_of(const std::string& text) {
  std::string why;
  auto parsed = parse_probe_policies(json::parse(text).as_array(), &why);
  EXPECT_FALSE(parsed) << text;
  return why;
}

ProbePolicy policy_of(const std::string& text) {
  std::string why;
  auto parsed = parse_probe_policies(json::parse("[" + text + "]").as_array(), &why);
  EXPECT_TRUE(parsed) << why;
  return parsed ? parsed->front() : ProbePolicy{};
}

TEST(ProbePolicies, DefaultsAndDigest) {
  auto p = policy_of(R"({"id":"unit"})");
  EXPECT_EQ(p.id, "unit");
  EXPECT_EQ(p.timeout_s, 60);
  EXPECT_EQ(p.max_output_bytes, 1'000'000u);
  EXPECT_TRUE(p.allowed_executables.empty());
  EXPECT_TRUE(p.allowed_domains.empty());
  EXPECT_EQ(p.sha256.size(), 64u);
  // The digest covers the normalized policy: spelling defaults out changes nothing, a limit does.
  EXPECT_EQ(policy_of(R"({"id":"unit","timeout_s":60,"environment":{}})").sha256, p.sha256);
  EXPECT_NE(policy_of(R"({"id":"unit","timeout_s":61})").sha256, p.sha256);
}

TEST(ProbePolicies, FullPolicy) {
  auto p = policy_of(
      R"({"id":"net","allowed_executables":["/opt/tools/bin/check"],"timeout_s":5,
          "max_output_bytes":4096,"allowed_domains":["api.example.com","*.example.org"],
          "environment":{"LANG":"C","MODE":"strict"}})");
  EXPECT_EQ(p.allowed_executables, std::vector<std::string>{"/opt/tools/bin/check"});
  EXPECT_EQ(p.timeout_s, 5);
  EXPECT_EQ(p.max_output_bytes, 4096u);
  EXPECT_EQ(p.allowed_domains.size(), 2u);
  EXPECT_EQ(p.environment.at("MODE"), "strict");
}

TEST(ProbePolicies, ErrorsNameTheKey) {
  EXPECT_EQ(error_of(R"([{"id":"a","timeout":5}])"), "unknown key \"probe_policies[0].timeout\"");
  EXPECT_NE(error_of(R"([{"id":"a"},{"id":"b","timeout_s":0}])")
                .find("probe_policies[1].timeout_s must be between 1 and 3600"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"timeout_s":5}])").find("probe_policies[0]: missing \"id\""),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"id":"a"},{"id":"a"}])").find("probe_policies[1].id"), std::string::npos);
  EXPECT_NE(error_of(R"([{"id":"Bad Id"}])").find("probe_policies[0].id"), std::string::npos);
  EXPECT_NE(error_of(R"([{"id":"a","max_output_bytes":1099511627776}])")
                .find("probe_policies[0].max_output_bytes"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"id":"a","allowed_executables":["bin/x"]}])")
                .find("probe_policies[0].allowed_executables"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"id":"a","allowed_executables":["/usr/bin/../bin/sh"]}])")
                .find("probe_policies[0].allowed_executables"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"id":"a","allowed_domains":["http://x.com/"]}])")
                .find("probe_policies[0].allowed_domains"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"id":"a","environment":{"LD_PRELOAD":"/x.so"}}])")
                .find("probe_policies[0].environment.LD_PRELOAD"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"id":"a","environment":{"TOOLWARDEN_SCRATCH":"/"}}])").find("reserved"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"id":"a","environment":{"A":1}}])")
                .find("probe_policies[0].environment.A must be a string"),
            std::string::npos);
  EXPECT_NE(error_of(R"(["a"])").find("probe_policies[0] must be an object"), std::string::npos);
}

TEST(ProbeCommand, WhereAnExecutableMayComeFrom) {
  auto p = policy_of(R"({"id":"a","allowed_executables":["/opt/tools/check"]})");
  EXPECT_TRUE(check_probe_command("python3", p));
  EXPECT_TRUE(check_probe_command("/usr/bin/python3", p));
  EXPECT_TRUE(check_probe_command("/usr/local/bin/tool", p));
  EXPECT_TRUE(check_probe_command("/sbin/ip", p));
  EXPECT_TRUE(check_probe_command("/opt/tools/check", p));
  // A relative path names a file of the snapshot.
  EXPECT_EQ(check_probe_command("./run.sh", p).denial().code, ErrorCode::kDeniedCommand);
  EXPECT_EQ(check_probe_command("scripts/run.sh", p).denial().code, ErrorCode::kDeniedCommand);
  EXPECT_EQ(check_probe_command("/opt/tools/other", p).denial().code, ErrorCode::kDeniedCommand);
  EXPECT_EQ(check_probe_command("/usr/bin/sub/x", p).denial().code, ErrorCode::kDeniedCommand);
  EXPECT_EQ(check_probe_command("/usr/bin/../../tmp/x", p).denial().code,
            ErrorCode::kDeniedCommand);
  EXPECT_EQ(check_probe_command("", p).denial().code, ErrorCode::kDeniedCommand);
  EXPECT_EQ(check_probe_command("..", p).denial().code, ErrorCode::kDeniedCommand);
}

class ResolveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tw-probe-exe-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "wt");
    dir_ = fs::canonical(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path tool(const std::string& name, mode_t mode) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << "#!/bin/sh\nexit 0\n";
    ::chmod(p.c_str(), mode);
    return p;
  }
  fs::path dir_;
};

TEST_F(ResolveTest, BareNameResolvesInTrustedDirsAndIsPinned) {
  auto p = policy_of(R"({"id":"a"})");
  auto exe = resolve_probe_executable("sh", p, {});
  ASSERT_TRUE(exe) << exe.denial().reason;
  EXPECT_EQ(exe->requested, "sh");
  EXPECT_EQ(exe->path, fs::canonical("/bin/sh").string());
  EXPECT_EQ(exe->pin.sha256.size(), 64u);
  EXPECT_GT(exe->pin.size, 0);
  EXPECT_EQ(resolve_probe_executable("no-such-program-tw", p, {}).denial().code,
            ErrorCode::kNotFound);
}

TEST_F(ResolveTest, ListedExecutableOutsideTrustedDirs) {
  const auto exe_path = tool("check", 0755).string();
  auto p = policy_of(R"({"id":"a","allowed_executables":[")" + exe_path + R"("]})");
  auto exe = resolve_probe_executable(exe_path, p, {(dir_ / "wt").string()});
  ASSERT_TRUE(exe) << exe.denial().reason;
  EXPECT_EQ(exe->path, exe_path);
  // The same file unlisted is refused.
  EXPECT_EQ(resolve_probe_executable(exe_path, policy_of(R"({"id":"a"})"), {}).denial().code,
            ErrorCode::kDeniedCommand);
}

TEST_F(ResolveTest, NeverFromTheWorktreeEvenWhenListed) {
  fs::create_directories(dir_ / "wt" / "bin");
  const auto inside = (dir_ / "wt" / "bin" / "run").string();
  std::ofstream(inside) << "#!/bin/sh\n";
  ::chmod(inside.c_str(), 0755);
  auto p = policy_of(R"({"id":"a","allowed_executables":[")" + inside + R"("]})");
  EXPECT_EQ(resolve_probe_executable(inside, p, {(dir_ / "wt").string()}).denial().code,
            ErrorCode::kDeniedCommand);
  // Nor through a listed symlink that leads into it.
  fs::create_symlink(inside, dir_ / "alias");
  auto q =
      policy_of(R"({"id":"a","allowed_executables":[")" + (dir_ / "alias").string() + R"("]})");
  EXPECT_EQ(resolve_probe_executable((dir_ / "alias").string(), q, {(dir_ / "wt").string()})
                .denial()
                .code,
            ErrorCode::kDeniedCommand);
}

TEST_F(ResolveTest, GroupWritableExecutableIsRefused) {
  const auto exe_path = tool("loose", 0775).string();
  auto p = policy_of(R"({"id":"a","allowed_executables":[")" + exe_path + R"("]})");
  auto exe = resolve_probe_executable(exe_path, p, {});
  ASSERT_FALSE(exe);
  EXPECT_EQ(exe.denial().code, ErrorCode::kDeniedFile);
  EXPECT_EQ(exe.denial().reason.find(exe_path), std::string::npos) << "reason names a host path";
}

}  // namespace
}  // namespace toolwarden::policy
