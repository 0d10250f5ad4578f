// Custom tools' workspace writes (SPEC §11): a real sandbox run over an overlay makes the
// changes; they are applied only when every one of them is allowed.
#include "daemon/tools/workspace_changes.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "sandbox/features.hpp"
#include "sandbox/supervisor.hpp"

namespace toolwarden::daemon {
namespace {
namespace fs = std::filesystem;
using policy::ErrorCode;

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class WorkspaceChanges : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!sandbox::probe_features().sandbox_available()) GTEST_SKIP() << "no sandbox here";
    if (!sandbox::probe_features().overlayfs_in_userns) GTEST_SKIP() << "no overlayfs in userns";
    std::string tmpl = (fs::temp_directory_path() / "tw-ws-XXXXXX").string();
    base_ = ::mkdtemp(tmpl.data());
    worktree_ = fs::canonical(base_) / "wt";
    fs::create_directories(worktree_ / "src");
    std::ofstream(worktree_ / "src" / "a.txt") << "old\n";
    std::ofstream(worktree_ / "src" / "gone.txt") << "bye\n";
    std::ofstream(worktree_ / "top.txt") << "top\n";
    fs::create_directories(base_ / "ov" / "upper");
    fs::create_directories(base_ / "ov" / "work");
  }
  void TearDown() override {
    std::error_code ec;
    if (!base_.empty()) fs::remove_all(base_, ec);
  }

  // Runs `script` in the worktree overlay; the upper layer holds what it changed.
  void run(const std::string& script) {
    sandbox::Profile p;
    p.argv = {"/bin/sh", "-c", script};
    p.env = sandbox::build_environment({});
    p.worktree = worktree_.string();
    p.worktree_overlay_dir = (base_ / "ov").string();
    auto r = supervisor_.run(std::move(p));
    ASSERT_EQ(r.state, sandbox::State::completed) << r.detail;
    ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  }

  policy::Grant grant(policy::Access access, std::vector<std::string> allowed = {"**"}) {
    policy::JobRequest req;
    req.worktree = worktree_.string();
    req.access = access == policy::Access::write ? "write" : "read";
    req.allowed_paths = std::move(allowed);
    std::string err;
    auto g = policy::build_grant(req, {}, &err);
    EXPECT_TRUE(g.has_value()) << err;
    return g.value_or(policy::Grant{});
  }

  auto apply(const policy::Grant& g, std::uint64_t max_total = 64 << 20) {
    return apply_workspace_changes((base_ / "ov" / "upper").string(), g, sensitive_, 1 << 20,
                                   max_total);
  }

  fs::path base_, worktree_;
  policy::SensitiveNames sensitive_;
  sandbox::Supervisor supervisor_;
};

TEST_F(WorkspaceChanges, AllowedChangesAreAppliedAndReported) {
  run("echo new >> src/a.txt && rm src/gone.txt && mkdir src/sub && echo x > src/sub/b.txt");
  auto r = apply(grant(policy::Access::write));
  ASSERT_TRUE(r.ok()) << r.denial().reason;
  std::vector<std::pair<std::string, std::string>> got;
  for (const auto& c : r.value()) got.emplace_back(c.path, c.change);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, std::string>>{{"src/a.txt", "modified"},
                                                                   {"src/gone.txt", "deleted"},
                                                                   {"src/sub", "created"},
                                                                   {"src/sub/b.txt", "created"}}));
  EXPECT_EQ(slurp(worktree_ / "src" / "a.txt"), "old\nnew\n");
  EXPECT_FALSE(fs::exists(worktree_ / "src" / "gone.txt"));
  EXPECT_EQ(slurp(worktree_ / "src" / "sub" / "b.txt"), "x\n");
}

TEST_F(WorkspaceChanges, OneChangeOutsideTheScopesAndNothingIsApplied) {
  run("echo in >> src/a.txt && echo out >> top.txt");
  auto r = apply(grant(policy::Access::write, {"src/**"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.denial().code, ErrorCode::kDeniedScope);
  EXPECT_EQ(slurp(worktree_ / "src" / "a.txt"), "old\n");
  EXPECT_EQ(slurp(worktree_ / "top.txt"), "top\n");
}

TEST_F(WorkspaceChanges, ReadAccessRefusesEveryWrite) {
  run("echo x > src/new.txt");
  auto r = apply(grant(policy::Access::read));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.denial().code, ErrorCode::kDeniedReadOnly);
  EXPECT_FALSE(fs::exists(worktree_ / "src" / "new.txt"));
}

TEST_F(WorkspaceChanges, SymlinksHardlinksAndSensitiveNamesAreRefused) {
  run("ln -s /etc/passwd src/link");
  auto r = apply(grant(policy::Access::write));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.denial().code, ErrorCode::kDeniedSymlink);
  EXPECT_FALSE(fs::exists(fs::symlink_status(worktree_ / "src" / "link")));
}

TEST_F(WorkspaceChanges, AHardlinkMadeByTheRunIsRefused) {
  run("echo x > src/one && ln src/one src/two");
  auto r = apply(grant(policy::Access::write));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.denial().code, ErrorCode::kDeniedHardlink);
  EXPECT_FALSE(fs::exists(worktree_ / "src" / "one"));
}

TEST_F(WorkspaceChanges, ASensitiveNameIsRefused) {
  run("echo SECRET=1 > .env");
  auto r = apply(grant(policy::Access::write));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.denial().code, ErrorCode::kDeniedPath);
  EXPECT_FALSE(fs::exists(worktree_ / ".env"));
}

TEST_F(WorkspaceChanges, RemovingADirectoryIsRefused) {
  run("rm -r src");
  auto r = apply(grant(policy::Access::write));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.denial().code, ErrorCode::kDeniedFile);
  EXPECT_TRUE(fs::exists(worktree_ / "src" / "a.txt"));
}

TEST_F(WorkspaceChanges, MoreThanTheTotalBudgetAndNothingIsApplied) {
  run("head -c 300000 /dev/zero > src/a.txt && head -c 300000 /dev/zero > src/b.bin");
  auto r = apply(grant(policy::Access::write), 500'000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.denial().code, ErrorCode::kDeniedSize);
  EXPECT_EQ(slurp(worktree_ / "src" / "a.txt"), "old\n");
  EXPECT_FALSE(fs::exists(worktree_ / "src" / "b.bin"));
}

TEST_F(WorkspaceChanges, AWorktreeFileWithASecondLinkIsNotReplaced) {
  fs::create_hard_link(worktree_ / "src" / "a.txt", base_ / "outside-link");
  run("echo changed > src/a.txt");
  auto r = apply(grant(policy::Access::write));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.denial().code, ErrorCode::kDeniedHardlink);
  EXPECT_EQ(slurp(base_ / "outside-link"), "old\n");
}

TEST_F(WorkspaceChanges, ADirectorySwappedForASymlinkAfterTheRunIsRefused) {
  run("echo x > src/new.txt");
  fs::rename(worktree_ / "src", base_ / "moved");
  fs::create_directory_symlink(base_ / "moved", worktree_ / "src");
  auto r = apply(grant(policy::Access::write));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.denial().code, ErrorCode::kDeniedSymlink);
  EXPECT_FALSE(fs::exists(base_ / "moved" / "new.txt"));
}

}  // namespace
}  // namespace toolwarden::daemon
