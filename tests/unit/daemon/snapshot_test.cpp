// Snapshots on disk (SPEC §12): what a capture records and skips, that materialization gives
// back exactly what was captured without ever following a symlink, and that fixture and
// intervention files never write through one.
#include "daemon/probes/snapshot.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "store/digest.hpp"

namespace toolwarden::daemon {
namespace {
namespace fs = std::filesystem;
using policy::ErrorCode;

class SnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() /
            ("tw-snap-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    clean();
    fs::create_directories(base_ / "wt" / "src" / "deep");
    fs::create_directories(base_ / "outside");
    fs::create_directories(base_ / "out");
    fs::permissions(base_, fs::perms::owner_all);
    base_ = fs::canonical(base_);
    wt_ = base_ / "wt";
    write(wt_ / "README.md", "# demo\n");
    write(wt_ / "src" / "main.py", "print('hi')\n", 0755);
    write(wt_ / "src" / "deep" / "data.txt", "data\n", 0600);
    write(wt_ / "a.txt", "a\n");  // sorts before "a/..." but after... see ManifestOrder
    write(base_ / "outside" / "secret.txt", "secret\n");
    blobs_.emplace(base_ / "blobs");
  }
  void TearDown() override {
    blobs_.reset();
    clean();
  }
  void clean() {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(base_, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      if (!it->is_symlink())
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    }
    fs::remove_all(base_, ec);
  }
  static void write(const fs::path& p, const std::string& text, mode_t mode = 0644) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
    ::chmod(p.c_str(), mode);
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  Capture capture(const policy::Grant* scope = nullptr, std::uint64_t max_file = 1 << 20,
                  std::uint64_t budget = 1ull << 40) {
    CaptureRules rules{sensitive_, scope, max_file, kMaxSnapshotFiles, budget};
    store::BlobBatch batch(*blobs_);
    auto c = capture_worktree(wt_.string(), rules, batch);
    EXPECT_TRUE(c) << (c ? "" : c.denial().reason);
    EXPECT_TRUE(batch.commit());
    return c ? std::move(c.value()) : Capture{};
  }
  static const store::SnapshotFile* find(const Capture& c, const std::string& path) {
    for (const auto& e : c.entries)
      if (e.path == path) return &e;
    return nullptr;
  }
  UniqueFd open_dir(const fs::path& p) {
    return UniqueFd(::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }

  fs::path base_, wt_;
  policy::SensitiveNames sensitive_;
  std::optional<store::BlobStore> blobs_;
};

TEST_F(SnapshotTest, CapturesRegularFilesWithModesAndDigests) {
  Capture c = capture();
  EXPECT_EQ(c.files, 4);
  const auto* main = find(c, "src/main.py");
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->mode, 0755u);
  EXPECT_EQ(main->sha256, store::sha256_hex("print('hi')\n"));
  EXPECT_EQ(find(c, "src/deep/data.txt")->mode, 0600u);
  EXPECT_EQ(c.bytes, 7 + 12 + 5 + 2);
  EXPECT_EQ(c.new_bytes, c.bytes);
  EXPECT_EQ(c.manifest_sha256, manifest_digest(c.entries));
  // Bytewise path order: "a.txt" < "src/..." and the manifest is sorted whatever the walk did.
  for (std::size_t i = 1; i < c.entries.size(); ++i)
    EXPECT_LT(c.entries[i - 1].path, c.entries[i].path);
}

TEST_F(SnapshotTest, SkipsWhatIsNotAPlainAllowedFile) {
  fs::create_symlink(base_ / "outside" / "secret.txt", wt_ / "link.txt");
  fs::create_directory_symlink(base_ / "outside", wt_ / "linkdir");
  ASSERT_EQ(::mkfifo((wt_ / "fifo").c_str(), 0644), 0);
  write(wt_ / "hard.txt", "two links\n");
  fs::create_hard_link(wt_ / "hard.txt", base_ / "outside" / "hard-alias");
  fs::create_directories(wt_ / ".git");
  write(wt_ / ".git" / "config", "[core]\n");
  write(wt_ / ".env", "TOKEN=1\n");
  write(wt_ / "big.bin", std::string(5000, 'b'));
  Capture c = capture(nullptr, 4096);
  EXPECT_EQ(c.files, 4);
  EXPECT_EQ(c.skipped.symlinks, 2);
  EXPECT_EQ(c.skipped.special, 1);
  EXPECT_EQ(c.skipped.hardlinked, 1);
  EXPECT_EQ(c.skipped.sensitive, 2);
  EXPECT_EQ(c.skipped.too_large, 1);
  // Symlinks are listed (so overlays through them can be refused), never captured.
  const auto* link = find(c, "linkdir");
  ASSERT_NE(link, nullptr);
  EXPECT_TRUE(link->symlink);
  EXPECT_TRUE(link->sha256.empty());
  EXPECT_EQ(find(c, "linkdir/secret.txt"), nullptr);
  EXPECT_EQ(find(c, ".git/config"), nullptr);
  for (const auto& e : c.entries) EXPECT_NE(e.sha256, store::sha256_hex("secret\n")) << e.path;
}

TEST_F(SnapshotTest, JobScopesLimitTheCapture) {
  policy::Grant g;
  g.worktree = wt_.string();
  std::string err;
  g.allowed = {*policy::parse_scope("src/**", &err)};
  g.blocked = {*policy::parse_scope("src/deep", &err)};
  Capture c = capture(&g);
  ASSERT_EQ(c.files, 1);
  EXPECT_NE(find(c, "src/main.py"), nullptr);
  EXPECT_EQ(c.skipped.out_of_scope, 3);  // README.md, a.txt, src/deep
}

TEST_F(SnapshotTest, TheDaemonsOwnStateIsNeverCaptured) {
  fs::create_directories(wt_ / "state" / "blobs");
  write(wt_ / "state" / "store.db", "sqlite");
  struct stat st {};
  ASSERT_EQ(::stat((wt_ / "state").c_str(), &st), 0);
  CaptureRules rules{sensitive_,        nullptr,    1 << 20,
                     kMaxSnapshotFiles, 1ull << 40, {{st.st_dev, st.st_ino}}};
  store::BlobBatch batch(*blobs_);
  auto c = capture_worktree(wt_.string(), rules, batch);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->skipped.daemon_state, 1);
  EXPECT_EQ(find(c.value(), "state/store.db"), nullptr);
  EXPECT_EQ(c->files, 4);
}

TEST_F(SnapshotTest, SecondCaptureStoresOnlyWhatChanged) {
  Capture first = capture();
  write(wt_ / "src" / "main.py", "print('changed')\n", 0755);
  Capture second = capture();
  EXPECT_EQ(second.files, first.files);
  EXPECT_EQ(second.new_bytes, static_cast<std::int64_t>(std::string("print('changed')\n").size()));
  EXPECT_NE(second.manifest_sha256, first.manifest_sha256);
  Capture third = capture();
  EXPECT_EQ(third.new_bytes, 0);
  EXPECT_EQ(third.manifest_sha256, second.manifest_sha256);
}

TEST_F(SnapshotTest, CaptureRespectsTheByteBudget) {
  CaptureRules rules{sensitive_, nullptr, 1 << 20, kMaxSnapshotFiles, 10};
  store::BlobBatch batch(*blobs_);
  auto c = capture_worktree(wt_.string(), rules, batch);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.denial().code, ErrorCode::kDeniedSize);
}

TEST_F(SnapshotTest, MaterializesExactlyWithModesAndNoSymlinks) {
  fs::create_symlink(base_ / "outside" / "secret.txt", wt_ / "src" / "link");
  Capture c = capture();
  fs::create_directories(base_ / "out" / "tree");
  UniqueFd dest = open_dir(base_ / "out" / "tree");
  ASSERT_TRUE(materialize_snapshot(c.entries, *blobs_, dest.get()));
  const fs::path t = base_ / "out" / "tree";
  EXPECT_EQ(read(t / "src" / "main.py"), "print('hi')\n");
  EXPECT_EQ(read(t / "src" / "deep" / "data.txt"), "data\n");
  EXPECT_EQ(fs::status(t / "src" / "main.py").permissions() & fs::perms::all, fs::perms(0755));
  EXPECT_EQ(fs::status(t / "src" / "deep" / "data.txt").permissions() & fs::perms::all,
            fs::perms(0600));
  EXPECT_FALSE(fs::exists(fs::symlink_status(t / "src" / "link")));
  // The worktree changing after the capture changes nothing materialized from it.
  write(wt_ / "src" / "main.py", "print('later')\n", 0755);
  fs::create_directories(base_ / "out" / "again");
  UniqueFd again = open_dir(base_ / "out" / "again");
  ASSERT_TRUE(materialize_snapshot(c.entries, *blobs_, again.get()));
  EXPECT_EQ(read(base_ / "out" / "again" / "src" / "main.py"), "print('hi')\n");
}

TEST_F(SnapshotTest, DamagedBlobIsRefusedAtMaterialization) {
  Capture c = capture();
  const auto* main = find(c, "src/main.py");
  const fs::path blob = base_ / "blobs" / main->sha256.substr(0, 2) / main->sha256.substr(2);
  ::chmod(blob.c_str(), 0600);
  write(blob, "print('XX')\n", 0400);  // same size, other bytes
  fs::create_directories(base_ / "out" / "tree");
  UniqueFd dest = open_dir(base_ / "out" / "tree");
  auto ok = materialize_snapshot(c.entries, *blobs_, dest.get());
  ASSERT_FALSE(ok);
  EXPECT_EQ(ok.denial().code, ErrorCode::kDeniedIntegrity);
}

TEST_F(SnapshotTest, OverlayWritesFilesAndKeepsModes) {
  fs::create_directories(base_ / "out" / "tree" / "src");
  write(base_ / "out" / "tree" / "src" / "run.sh", "old\n", 0750);
  UniqueFd dest = open_dir(base_ / "out" / "tree");
  ASSERT_TRUE(write_overlay(dest.get(), {{"src/run.sh", "new\n"}, {"new/dir/file.txt", "x"}}));
  EXPECT_EQ(read(base_ / "out" / "tree" / "src" / "run.sh"), "new\n");
  EXPECT_EQ(fs::status(base_ / "out" / "tree" / "src" / "run.sh").permissions() & fs::perms::all,
            fs::perms(0750));
  EXPECT_EQ(read(base_ / "out" / "tree" / "new" / "dir" / "file.txt"), "x");
}

// Regression guard for fixture and intervention paths: a symlink planted on the way (or as
// the file itself) is refused and its target is never written.
TEST_F(SnapshotTest, OverlayNeverWritesThroughASymlink) {
  fs::create_directories(base_ / "out" / "tree");
  fs::create_directory_symlink(base_ / "outside", base_ / "out" / "tree" / "dir");
  fs::create_symlink(base_ / "outside" / "secret.txt", base_ / "out" / "tree" / "file");
  UniqueFd dest = open_dir(base_ / "out" / "tree");
  auto through_dir = write_overlay(dest.get(), {{"dir/secret.txt", "pwned"}});
  ASSERT_FALSE(through_dir);
  EXPECT_EQ(through_dir.denial().code, ErrorCode::kDeniedSymlink);
  auto onto_link = write_overlay(dest.get(), {{"file", "pwned"}});
  ASSERT_FALSE(onto_link);
  EXPECT_EQ(onto_link.denial().code, ErrorCode::kDeniedSymlink);
  auto new_below = write_overlay(dest.get(), {{"dir/new.txt", "pwned"}});
  ASSERT_FALSE(new_below);
  EXPECT_EQ(read(base_ / "outside" / "secret.txt"), "secret\n");
  EXPECT_FALSE(fs::exists(base_ / "outside" / "new.txt"));
  write(base_ / "out" / "tree" / "plain", "x");
  auto through_file = write_overlay(dest.get(), {{"plain/x", "y"}});
  ASSERT_FALSE(through_file);
  EXPECT_EQ(through_file.denial().code, ErrorCode::kDeniedFile);
}

TEST_F(SnapshotTest, PlanIsCheckedAgainstTheManifest) {
  fs::create_directory_symlink(base_ / "outside", wt_ / "linkdir");
  fs::create_symlink("README.md", wt_ / "readme-link");
  Capture c = capture();
  policy::ProbePlan plan;
  plan.working_directory = "src";
  EXPECT_TRUE(check_plan_against_manifest(plan, c.entries));
  plan.working_directory = "src/deep";
  EXPECT_TRUE(check_plan_against_manifest(plan, c.entries));
  plan.working_directory = "nope";
  EXPECT_EQ(check_plan_against_manifest(plan, c.entries).denial().code, ErrorCode::kNotFound);
  plan.working_directory = "README.md";
  EXPECT_EQ(check_plan_against_manifest(plan, c.entries).denial().code, ErrorCode::kDeniedFile);
  plan.working_directory = "linkdir";
  EXPECT_EQ(check_plan_against_manifest(plan, c.entries).denial().code, ErrorCode::kDeniedSymlink);
  plan.working_directory = ".";
  plan.intervention = {{"linkdir/secret.txt", "x"}};
  EXPECT_EQ(check_plan_against_manifest(plan, c.entries).denial().code, ErrorCode::kDeniedSymlink);
  plan.intervention = {{"readme-link", "x"}};
  EXPECT_EQ(check_plan_against_manifest(plan, c.entries).denial().code, ErrorCode::kDeniedSymlink);
  plan.intervention = {{"README.md/x", "x"}};
  EXPECT_EQ(check_plan_against_manifest(plan, c.entries).denial().code, ErrorCode::kDeniedFile);
  plan.intervention = {{"src", "x"}};
  EXPECT_EQ(check_plan_against_manifest(plan, c.entries).denial().code, ErrorCode::kDeniedFile);
  plan.intervention = {{"src/main.py", "print('patched')\n"}, {"src/new/x.py", ""}};
  EXPECT_TRUE(check_plan_against_manifest(plan, c.entries));
}

TEST_F(SnapshotTest, WitnessIsReadWithoutFollowingLinks) {
  const fs::path s = base_ / "out";
  write(s / "ok.txt", "result\n");
  fs::create_symlink(base_ / "outside" / "secret.txt", s / "link.txt");
  write(s / "hard.txt", "h");
  fs::create_hard_link(s / "hard.txt", s / "hard2.txt");
  write(s / "big.txt", std::string(100, 'x'));
  UniqueFd dir = open_dir(s);
  using Kind = policy::FileWitness::Kind;
  auto ok = read_witness(dir.get(), "ok.txt", 50);
  EXPECT_EQ(ok.kind, Kind::found);
  EXPECT_EQ(ok.sha256, store::sha256_hex("result\n"));
  EXPECT_EQ(read_witness(dir.get(), "missing.txt", 50).kind, Kind::missing);
  EXPECT_EQ(read_witness(dir.get(), "link.txt", 50).kind, Kind::unusable);
  EXPECT_EQ(read_witness(dir.get(), "hard.txt", 50).kind, Kind::unusable);
  EXPECT_EQ(read_witness(dir.get(), "big.txt", 50).kind, Kind::unusable);
  fs::create_directory_symlink(base_ / "outside", s / "ldir");
  EXPECT_EQ(read_witness(dir.get(), "ldir/secret.txt", 50).kind, Kind::unusable);
}

TEST_F(SnapshotTest, BoundedRemovalOfAVeryDeepTree) {
  // Deeper than any recursion limit; what a probe may leave in its scratch.
  fs::create_directories(base_ / "out" / "victim");
  UniqueFd cur = open_dir(base_ / "out" / "victim");
  for (int i = 0; i < 300; ++i) {  // more than twice the depth limit
    ASSERT_EQ(::mkdirat(cur.get(), "d", 0500 | 0200), 0);
    UniqueFd next(::openat(cur.get(), "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(next);
    if (i % 100 == 0) {
      int fd = ::openat(next.get(), "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0400);
      ::close(fd);
      ::fchmod(next.get(), 0500);  // read-only directories on the way
    }
    cur = std::move(next);
  }
  cur.reset();
  UniqueFd out = open_dir(base_ / "out");
  EXPECT_GT(tree_bytes(out.get(), 1 << 20), 0u);
  EXPECT_TRUE(remove_tree_bounded(out.get(), "victim"));
  EXPECT_FALSE(fs::exists(base_ / "out" / "victim"));
  EXPECT_TRUE(fs::is_empty(base_ / "out"));
}

}  // namespace
}  // namespace toolwarden::daemon
