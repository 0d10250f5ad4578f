// Kernel-enforced resolution below a worktree (SPEC §7), run twice: with openat2 and with the
// O_NOFOLLOW walk that replaces it on kernels without openat2.
#include "policy/worktree_fs.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace toolwarden::policy {
namespace {
namespace fs = std::filesystem;

RelativePath rel(std::string_view p) {
  auto r = parse_request_path(p, true);
  EXPECT_TRUE(r.ok()) << p;
  return r.value();
}

class WorktreeFsTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    WorktreeFs::use_walk_fallback_for_testing(GetParam());
    base_ = fs::temp_directory_path() /
            ("tw-wtfs-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    base_ = fs::path(base_.string());
    fs::remove_all(base_);
    fs::create_directories(base_ / "wt" / "dir");
    fs::create_directories(base_ / "outside");
    base_ = fs::canonical(base_);
    wt_ = base_ / "wt";
    write(wt_ / "dir" / "file.txt", "inside\n");
    write(base_ / "outside" / "secret.txt", "secret\n");
  }
  void TearDown() override {
    ::umount2((wt_ / "mnt").c_str(), MNT_DETACH);
    fs::remove_all(base_);
    WorktreeFs::use_walk_fallback_for_testing(false);
  }
  static void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
  WorktreeFs open_wt() {
    auto w = WorktreeFs::open(wt_.string());
    EXPECT_TRUE(w.ok());
    return std::move(w.value());
  }
  static ErrorCode code_of(const Result<OpenedFile>& r) {
    EXPECT_FALSE(r.ok());
    return r.ok() ? ErrorCode::kLocalToolFailed : r.denial().code;
  }

  fs::path base_;
  fs::path wt_;
};

TEST_P(WorktreeFsTest, FallbackModeReallyWalks) {
  // With the switch on, nothing may reach openat2 (else these tests would test it twice).
  if (GetParam()) {
    EXPECT_FALSE(WorktreeFs::has_openat2());
  }
}

TEST_P(WorktreeFsTest, ReadsARegularFile) {
  auto w = open_wt();
  auto f = w.open_regular(rel("dir/file.txt"), 1024);
  ASSERT_TRUE(f.ok());
  std::string text;
  ASSERT_TRUE(read_all(f->fd.get(), 1024, &text));
  EXPECT_EQ(text, "inside\n");
}

TEST_P(WorktreeFsTest, FinalSymlinkIsDenied) {
  fs::create_symlink(base_ / "outside" / "secret.txt", wt_ / "link.txt");
  auto w = open_wt();
  EXPECT_EQ(code_of(w.open_regular(rel("link.txt"), 1024)), ErrorCode::kDeniedSymlink);
}

TEST_P(WorktreeFsTest, MiddleSymlinkIsDenied) {
  fs::create_directory_symlink(base_ / "outside", wt_ / "out");
  auto w = open_wt();
  EXPECT_EQ(code_of(w.open_regular(rel("out/secret.txt"), 1024)), ErrorCode::kDeniedSymlink);
  EXPECT_EQ(code_of(w.open_directory(rel("out"))), ErrorCode::kDeniedSymlink);
}

TEST_P(WorktreeFsTest, MagicLinkTargetIsDenied) {
  fs::create_directory_symlink("/proc/self/root", wt_ / "root");
  auto w = open_wt();
  EXPECT_EQ(code_of(w.open_regular(rel("root/etc/passwd"), 1 << 20)), ErrorCode::kDeniedSymlink);
}

TEST_P(WorktreeFsTest, MissingIsNotFound) {
  auto w = open_wt();
  EXPECT_EQ(code_of(w.open_regular(rel("dir/none.txt"), 1024)), ErrorCode::kNotFound);
  EXPECT_EQ(code_of(w.open_regular(rel("none/file.txt"), 1024)), ErrorCode::kNotFound);
}

TEST_P(WorktreeFsTest, HardlinkIsDenied) {
  fs::create_hard_link(base_ / "outside" / "secret.txt", wt_ / "hard.txt");
  auto w = open_wt();
  EXPECT_EQ(code_of(w.open_regular(rel("hard.txt"), 1024)), ErrorCode::kDeniedHardlink);
}

TEST_P(WorktreeFsTest, FifoIsDeniedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((wt_ / "fifo").c_str(), 0600), 0);
  auto w = open_wt();
  EXPECT_EQ(code_of(w.open_regular(rel("fifo"), 1024)), ErrorCode::kDeniedFile);
}

TEST_P(WorktreeFsTest, DirectoryAndFileKindsAreChecked) {
  auto w = open_wt();
  EXPECT_EQ(code_of(w.open_regular(rel("dir"), 1024)), ErrorCode::kDeniedFile);
  EXPECT_EQ(code_of(w.open_directory(rel("dir/file.txt"))), ErrorCode::kDeniedFile);
  EXPECT_TRUE(w.open_directory(rel("dir")).ok());
  EXPECT_TRUE(w.open_directory(rel(".")).ok());
}

TEST_P(WorktreeFsTest, SizeIsCheckedOnTheOpenedFile) {
  write(wt_ / "big.txt", std::string(2000, 'x'));
  auto w = open_wt();
  EXPECT_EQ(code_of(w.open_regular(rel("big.txt"), 1999)), ErrorCode::kDeniedSize);
  EXPECT_TRUE(w.open_regular(rel("big.txt"), 2000).ok());
}

TEST_P(WorktreeFsTest, WorktreeReachedThroughASymlinkIsRefused) {
  fs::create_directory_symlink(wt_, base_ / "wt-link");
  auto w = WorktreeFs::open((base_ / "wt-link").string());
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.denial().code, ErrorCode::kDeniedSymlink);
}

TEST_P(WorktreeFsTest, MountPointsAreNotCrossed) {
  fs::create_directory(wt_ / "mnt");
  if (::mount("tmpfs", (wt_ / "mnt").c_str(), "tmpfs", 0, "size=64k") != 0) {
    GTEST_SKIP() << "cannot mount here (needs root)";
  }
  write(wt_ / "mnt" / "x.txt", "on another filesystem\n");
  auto w = open_wt();
  EXPECT_EQ(code_of(w.open_regular(rel("mnt/x.txt"), 1024)), ErrorCode::kDeniedPath);
}

TEST_P(WorktreeFsTest, ListDirIsSortedBoundedAndMovesNoSharedOffset) {
  for (const char* n : {"b", "a", "C", "a.txt"}) write(wt_ / n, "x");
  const int fd = ::open(wt_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const off_t before = ::lseek(fd, 0, SEEK_CUR);
  std::vector<std::string> names;
  ASSERT_TRUE(list_dir(fd, &names));
  EXPECT_EQ(names, (std::vector<std::string>{"C", "a", "a.txt", "b", "dir"}));  // bytewise
  EXPECT_EQ(::lseek(fd, 0, SEEK_CUR), before);
  // At most max + 1 names, so the caller can tell there were more than max.
  ASSERT_TRUE(list_dir(fd, &names, 2));
  EXPECT_EQ(names.size(), 3u);
  ::close(fd);
  const int file = ::open((wt_ / "a").c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_FALSE(list_dir(file, &names));
  EXPECT_EQ(errno, ENOTDIR);
  ::close(file);
}

INSTANTIATE_TEST_SUITE_P(Resolution, WorktreeFsTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "OnofollowWalk" : "Openat2"; });

}  // namespace
}  // namespace toolwarden::policy
