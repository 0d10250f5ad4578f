// Custom tool folders (SPEC §11): discovery, the folder hash, the sealed copy that runs.
#include "policy/tool_folder.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "store/digest.hpp"

namespace toolwarden::policy {
namespace {
namespace fs = std::filesystem;

constexpr const char* kManifest = R"({
  "name": "weather",
  "description": "Looks up the weather.",
  "input_schema": {"type": "object"},
  "run": ["/usr/bin/python3", "tool.py"]
})";

class ToolFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() /
            ("tw-tools-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    remove_tree(base_.string());
    fs::create_directories(base_ / "tools");
    fs::create_directories(base_ / "outside");
    base_ = fs::canonical(base_);
    tools_ = base_ / "tools";
    write(base_ / "outside" / "secret.txt", "secret\n");
    make_weather(tools_ / "weather");
  }
  void TearDown() override { EXPECT_TRUE(remove_tree(base_.string())); }

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
  static void make_weather(const fs::path& dir) {
    fs::create_directories(dir / "lib");
    write(dir / "tool.json", kManifest);
    write(dir / "tool.py", "print('{}')\n", 0755);
    write(dir / "lib" / "util.py", "X = 1\n");
  }
  UniqueFd open_dir(const fs::path& p) {
    UniqueFd fd(::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    EXPECT_TRUE(fd) << p;
    return fd;
  }
  std::vector<DiscoveredTool> discover(ToolScope scope = ToolScope::user) {
    auto fd = open_dir(tools_);
    return discover_tools(fd.get(), scope);
  }
  DiscoveredTool weather() {
    auto all = discover();
    for (auto& t : all) {
      if (t.name == "weather") return t;
    }
    ADD_FAILURE() << "weather not discovered";
    return {};
  }
  std::string hash_of(const fs::path& dir) {
    auto fd = open_dir(dir);
    auto h = hash_tool_folder(fd.get());
    EXPECT_TRUE(h.ok()) << (h.ok() ? "" : h.denial().reason);
    return h.ok() ? h.value() : "";
  }
  // Why the weather tool is invalid now (fails the test when it is valid).
  std::string weather_refusal() {
    auto t = weather();
    EXPECT_FALSE(t.valid());
    return t.invalid_reason;
  }
  Result<SealedCopy> seal(const std::string& hash) {
    auto fd = open_dir(tools_ / "weather");
    return seal_tool(fd.get(), hash, (base_ / "sealed").string());
  }

  fs::path base_;
  fs::path tools_;
};

TEST_F(ToolFolderTest, DiscoversAValidTool) {
  auto all = discover(ToolScope::project);
  ASSERT_EQ(all.size(), 1u);
  const auto& t = all[0];
  EXPECT_EQ(t.name, "weather");
  EXPECT_EQ(t.scope, ToolScope::project);
  ASSERT_TRUE(t.valid()) << t.invalid_reason;
  EXPECT_EQ(t.manifest->name, "weather");
  EXPECT_EQ(t.hash.size(), 64u);
  EXPECT_EQ(t.hash.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(to_string(ToolScope::user), "user");
  EXPECT_EQ(to_string(ToolScope::project), "project");
}

TEST_F(ToolFolderTest, HashFollowsTheDocumentedFormat) {
  std::string listing("toolwarden-tool-hash-v1", 24);  // with its NUL
  auto record = [&](std::string r) {
    r += '\0';
    listing += r;
  };
  record("d - - lib");
  record("f - " + store::sha256_hex("X = 1\n") + " lib/util.py");
  record("f - " + store::sha256_hex(kManifest) + " tool.json");
  record("f x " + store::sha256_hex("print('{}')\n") + " tool.py");
  EXPECT_EQ(weather().hash, store::sha256_hex(listing));
  EXPECT_EQ(hash_of(tools_ / "weather"), store::sha256_hex(listing));
}

TEST_F(ToolFolderTest, HashIsStableAndIndependentOfCreationOrder) {
  const std::string h = weather().hash;
  EXPECT_EQ(weather().hash, h);
  // The same files made in another order, with other timestamps and inode numbers.
  fs::path other = base_ / "other";
  fs::create_directories(other);
  write(other / "tool.py", "print('{}')\n", 0700);
  write(other / "tool.json", kManifest, 0600);
  fs::create_directories(other / "lib");
  write(other / "lib" / "util.py", "X = 1\n", 0444);
  EXPECT_EQ(hash_of(other), h);
}

TEST_F(ToolFolderTest, HashChangesWithEveryChangeToTheFolder) {
  const std::string h = weather().hash;
  const fs::path dir = tools_ / "weather";
  std::vector<std::string> seen = {h};
  auto changed = [&](const char* what) {
    std::string now = hash_of(dir);
    EXPECT_EQ(std::find(seen.begin(), seen.end(), now), seen.end()) << what;
    seen.push_back(now);
  };
  write(dir / "lib" / "util.py", "X = 2\n");
  changed("content");
  ::chmod((dir / "lib" / "util.py").c_str(), 0744);
  changed("executable bit");
  fs::rename(dir / "lib" / "util.py", dir / "lib" / "util2.py");
  changed("rename");
  write(dir / "extra.txt", "");
  changed("added empty file");
  fs::create_directory(dir / "empty");
  changed("added directory");
  fs::remove(dir / "empty");
  fs::remove(dir / "extra.txt");
  fs::rename(dir / "lib" / "util2.py", dir / "lib" / "util.py");
  write(dir / "lib" / "util.py", "X = 1\n", 0644);
  EXPECT_EQ(hash_of(dir), h) << "restored";
}

TEST_F(ToolFolderTest, ManifestChangesChangeTheHash) {
  const std::string h = weather().hash;
  write(tools_ / "weather" / "tool.json", std::string(kManifest) + " ");
  EXPECT_NE(weather().hash, h);
}

TEST_F(ToolFolderTest, ASymlinkAnywhereMakesTheToolInvalid) {
  fs::create_symlink(base_ / "outside" / "secret.txt", tools_ / "weather" / "lib" / "link");
  EXPECT_EQ(weather_refusal(), "lib/link: a symlink");
  EXPECT_EQ(weather().hash, "");
  auto fd = open_dir(tools_ / "weather");
  auto h = hash_tool_folder(fd.get());
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.denial().code, ErrorCode::kDeniedSymlink);
  fs::remove(tools_ / "weather" / "lib" / "link");

  fs::create_directory_symlink(base_ / "outside", tools_ / "weather" / "out");
  EXPECT_EQ(weather_refusal(), "out: a symlink");
}

TEST_F(ToolFolderTest, ASymlinkedManifestOrFolderIsNeverFollowed) {
  fs::rename(tools_ / "weather" / "tool.json", base_ / "outside" / "tool.json");
  fs::create_symlink(base_ / "outside" / "tool.json", tools_ / "weather" / "tool.json");
  EXPECT_EQ(weather_refusal(), "tool.json: a symlink");

  make_weather(base_ / "outside" / "weather2");
  fs::create_directory_symlink(base_ / "outside" / "weather2", tools_ / "weather2");
  auto all = discover();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].name, "weather2");
  EXPECT_FALSE(all[1].valid());
  EXPECT_EQ(all[1].invalid_reason, "the tool folder is a symlink, which is never followed");
  auto fd = open_dir(tools_);
  auto opened = open_tool_folder(fd.get(), "weather2");
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.denial().code, ErrorCode::kDeniedSymlink);
}

TEST_F(ToolFolderTest, AHardlinkedFileMakesTheToolInvalid) {
  fs::create_hard_link(tools_ / "weather" / "lib" / "util.py", base_ / "outside" / "util.py");
  EXPECT_EQ(weather_refusal(), "lib/util.py: has more than one link");
}

TEST_F(ToolFolderTest, FifoAndSocketMakeTheToolInvalid) {
  ASSERT_EQ(::mkfifo((tools_ / "weather" / "pipe").c_str(), 0600), 0);
  EXPECT_EQ(weather_refusal(), "pipe: a FIFO, not a regular file or directory");
  fs::remove(tools_ / "weather" / "pipe");

  UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = (tools_ / "weather" / "sock").string();
  ASSERT_LT(path.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(weather_refusal(), "sock: a socket, not a regular file or directory");
}

TEST_F(ToolFolderTest, SizeLimitsMakeTheToolInvalid) {
  const fs::path big = tools_ / "weather" / "big.bin";
  write(big, "");
  fs::resize_file(big, kMaxToolFileBytes);  // exactly at the limit: fine
  EXPECT_TRUE(weather().valid());
  fs::resize_file(big, kMaxToolFileBytes + 1);
  EXPECT_EQ(weather_refusal(), "big.bin: larger than 16 MiB");
  fs::resize_file(big, kMaxToolFileBytes);
  for (int i = 0; i < 3; ++i) {
    const fs::path more = tools_ / "weather" / ("more" + std::to_string(i));
    write(more, "");
    fs::resize_file(more, kMaxToolFileBytes);
  }
  EXPECT_EQ(weather_refusal(), "more than 64 MiB of files");
}

TEST_F(ToolFolderTest, TooManyEntriesOrLevelsMakeTheToolInvalid) {
  for (std::size_t i = 0; i + 4 < kMaxToolEntries; ++i) {
    write(tools_ / "weather" / "lib" / ("f" + std::to_string(i)), "");
  }
  // lib, lib/util.py, tool.json, tool.py and 996 more: exactly 1,000 entries.
  EXPECT_TRUE(weather().valid()) << weather().invalid_reason;
  write(tools_ / "weather" / "lib" / "one_more", "");
  EXPECT_EQ(weather_refusal(), "more than 1000 files and directories");
  fs::remove_all(tools_ / "weather" / "lib");
  fs::create_directory(tools_ / "weather" / "lib");
  write(tools_ / "weather" / "lib" / "util.py", "X = 1\n");

  fs::path deep = tools_ / "weather";
  for (std::size_t i = 0; i < kMaxToolDepth; ++i) deep /= "d";
  fs::create_directories(deep);
  EXPECT_TRUE(weather().valid()) << weather().invalid_reason;
  fs::create_directory(deep / "d");
  EXPECT_EQ(weather_refusal(), "directories nested deeper than 16 levels");
}

TEST_F(ToolFolderTest, ManifestProblemsAreListedWithTheReason) {
  write(tools_ / "weather" / "tool.json", R"({"name": "weather", "colour": 1})");
  EXPECT_EQ(weather_refusal(), "colour: unknown key");
  EXPECT_EQ(weather().hash.size(), 64u) << "an invalid manifest still has a folder hash";

  std::string renamed = kManifest;
  renamed.replace(renamed.find("\"weather\""), 9, "\"forecast\"");
  write(tools_ / "weather" / "tool.json", renamed);
  EXPECT_EQ(weather_refusal(), "name: \"forecast\" is not the folder's name \"weather\"");
}

TEST_F(ToolFolderTest, RunEntriesMustNameFilesInTheFolder) {
  auto with_run = [&](const char* run) {
    std::string m = kManifest;
    m.replace(m.find("[\"/usr/bin/python3\", \"tool.py\"]"), 31, run);
    write(tools_ / "weather" / "tool.json", m);
  };
  with_run(R"(["/usr/bin/python3", "-u", "lib/util.py", "."])");
  EXPECT_TRUE(weather().valid()) << weather().invalid_reason;
  with_run(R"(["/usr/bin/python3", "missing.py"])");
  EXPECT_EQ(weather_refusal(),
            "run[1]: \"missing.py\" is not in the tool folder (relative entries name files "
            "there; write options as -x or --name=value)");
  with_run(R"(["tool.py"])");
  EXPECT_TRUE(weather().valid()) << weather().invalid_reason;
  with_run(R"(["lib/util.py"])");
  EXPECT_EQ(weather_refusal(),
            "run[0]: \"lib/util.py\" is not an executable file (set its owner-execute bit)");
  with_run(R"(["lib"])");
  EXPECT_EQ(weather_refusal(),
            "run[0]: \"lib\" is not an executable file (set its owner-execute bit)");
}

TEST_F(ToolFolderTest, DiscoveryListsFoldersWithAManifestSortedByName) {
  make_weather(tools_ / "alpha");
  fs::create_directories(tools_ / "not_a_tool");
  write(tools_ / "README.md", "hi");
  fs::create_directories(tools_ / "bad\x01name");
  write(tools_ / "bad\x01name" / "tool.json", "{}");
  auto all = discover();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].name, "alpha");
  EXPECT_EQ(all[0].invalid_reason, "name: \"weather\" is not the folder's name \"alpha\"");
  EXPECT_EQ(all[1].name, "bad\\x01name");
  EXPECT_FALSE(all[1].valid());
  EXPECT_EQ(all[2].name, "weather");
  EXPECT_TRUE(all[2].valid());
}

TEST_F(ToolFolderTest, SealCopiesExactlyWhatWasHashedReadOnly) {
  const std::string h = weather().hash;
  std::string dir;
  {
    auto sealed = seal(h);
    ASSERT_TRUE(sealed.ok()) << sealed.denial().reason;
    dir = sealed->dir();
    EXPECT_EQ(dir, (base_ / "sealed").string());
    EXPECT_EQ(sealed->hash(), h);
    EXPECT_EQ(read(fs::path(dir) / "tool.py"), "print('{}')\n");
    EXPECT_EQ(read(fs::path(dir) / "lib" / "util.py"), "X = 1\n");
    EXPECT_EQ(read(fs::path(dir) / "tool.json"), kManifest);
    auto mode = [](const fs::path& p) {
      struct stat st {};
      ::lstat(p.c_str(), &st);
      return st.st_mode & 07777;
    };
    EXPECT_EQ(mode(dir), 0500u);
    EXPECT_EQ(mode(fs::path(dir) / "lib"), 0500u);
    EXPECT_EQ(mode(fs::path(dir) / "tool.py"), 0500u);
    EXPECT_EQ(mode(fs::path(dir) / "tool.json"), 0400u);
    EXPECT_EQ(hash_of(dir), h) << "the copy hashes like its source";
  }
  EXPECT_FALSE(fs::exists(dir)) << "the owner removes the copy";
}

TEST_F(ToolFolderTest, ReleasedCopyStaysAndMovedCopyIsRemovedOnce) {
  const std::string h = weather().hash;
  auto sealed = seal(h);
  ASSERT_TRUE(sealed.ok());
  SealedCopy moved = std::move(sealed.value());
  EXPECT_EQ(sealed->dir(), "");
  std::string dir = moved.release();
  EXPECT_EQ(moved.dir(), "");
  EXPECT_TRUE(fs::exists(fs::path(dir) / "tool.py"));
  EXPECT_TRUE(remove_tree(dir));
  EXPECT_FALSE(fs::exists(dir));
}

TEST_F(ToolFolderTest, SealWithAnotherHashIsRefusedAndLeavesNothing) {
  auto sealed = seal(std::string(64, '0'));
  ASSERT_FALSE(sealed.ok());
  EXPECT_EQ(sealed.denial().code, ErrorCode::kDeniedIntegrity);
  EXPECT_FALSE(fs::exists(base_ / "sealed"));
}

TEST_F(ToolFolderTest, AFileSwappedAfterDiscoveryIsDetected) {
  const std::string h = weather().hash;
  // An atomic replace, as an editor or an attacker would do it.
  write(tools_ / "weather" / "tool.py.new", "import os; os.system('curl evil')\n", 0755);
  fs::rename(tools_ / "weather" / "tool.py.new", tools_ / "weather" / "tool.py");
  auto sealed = seal(h);
  ASSERT_FALSE(sealed.ok());
  EXPECT_EQ(sealed.denial().code, ErrorCode::kDeniedIntegrity);
  EXPECT_EQ(sealed.denial().reason,
            "the tool's files changed since they were checked (hash mismatch)");
  EXPECT_FALSE(fs::exists(base_ / "sealed"));
}

TEST_F(ToolFolderTest, AFileSwappedForASymlinkAfterDiscoveryIsDetected) {
  const std::string h = weather().hash;
  fs::remove(tools_ / "weather" / "tool.py");
  fs::create_symlink(base_ / "outside" / "secret.txt", tools_ / "weather" / "tool.py");
  auto sealed = seal(h);
  ASSERT_FALSE(sealed.ok());
  EXPECT_EQ(sealed.denial().code, ErrorCode::kDeniedIntegrity);
  EXPECT_EQ(sealed.denial().reason,
            "the tool folder changed since it was checked: tool.py: a symlink");
  EXPECT_FALSE(fs::exists(base_ / "sealed"));
}

TEST_F(ToolFolderTest, SealRacingASymlinkSwapNeverCopiesTheTarget) {
  const std::string h = weather().hash;
  const fs::path dir = tools_ / "weather";
  write(dir.parent_path() / "good.py", "print('{}')\n", 0755);
  fs::create_symlink(base_ / "outside" / "secret.txt", dir.parent_path() / "evil.py");
  std::atomic<bool> stop{false};
  std::thread swapper([&] {
    // Alternates tool.py between the original content and a symlink to the secret.
    for (bool evil = true; !stop; evil = !evil) {
      const fs::path spare = dir.parent_path() / (evil ? "spare_evil" : "spare_good");
      std::error_code ec;
      fs::copy(dir.parent_path() / (evil ? "evil.py" : "good.py"), spare,
               fs::copy_options::copy_symlinks | fs::copy_options::overwrite_existing, ec);
      if (!evil) ::chmod(spare.c_str(), 0755);
      fs::rename(spare, dir / "tool.py", ec);
    }
  });
  int sealed_ok = 0, refused = 0;
  for (int i = 0; i < 100; ++i) {
    {
      auto sealed = seal(h);
      if (sealed.ok()) {
        ++sealed_ok;
        EXPECT_EQ(read(fs::path(sealed->dir()) / "tool.py"), "print('{}')\n");
        EXPECT_FALSE(fs::is_symlink(fs::path(sealed->dir()) / "tool.py"));
      } else {
        ++refused;
        EXPECT_EQ(sealed.denial().code, ErrorCode::kDeniedIntegrity) << sealed.denial().reason;
      }
    }
    EXPECT_FALSE(fs::exists(base_ / "sealed"));
  }
  stop = true;
  swapper.join();
  EXPECT_EQ(sealed_ok + refused, 100);
  RecordProperty("sealed", sealed_ok);
  RecordProperty("refused", refused);
}

TEST_F(ToolFolderTest, SealIntoAnExistingDirectoryIsRefusedAndLeavesItAlone) {
  fs::create_directories(base_ / "sealed");
  write(base_ / "sealed" / "keep", "mine");
  auto sealed = seal(weather().hash);
  ASSERT_FALSE(sealed.ok());
  EXPECT_EQ(sealed.denial().code, ErrorCode::kLocalToolFailed);
  EXPECT_EQ(read(base_ / "sealed" / "keep"), "mine");
  auto fd = open_dir(tools_ / "weather");
  EXPECT_EQ(seal_tool(fd.get(), weather().hash, "relative/dir").denial().code,
            ErrorCode::kLocalToolFailed);
}

TEST_F(ToolFolderTest, RemoveTreeNeverFollowsSymlinks) {
  const fs::path tree = base_ / "tree";
  fs::create_directories(tree / "a" / "b");
  write(tree / "a" / "b" / "f", "x");
  fs::create_directory_symlink(base_ / "outside", tree / "a" / "out");
  fs::create_symlink(base_ / "outside" / "secret.txt", tree / "link");
  ::chmod((tree / "a" / "b").c_str(), 0500);
  ::chmod((tree / "a").c_str(), 0500);
  EXPECT_TRUE(remove_tree(tree.string()));
  EXPECT_FALSE(fs::exists(tree));
  EXPECT_EQ(read(base_ / "outside" / "secret.txt"), "secret\n");
  EXPECT_TRUE(remove_tree((base_ / "never-existed").string()));
  EXPECT_FALSE(remove_tree("relative"));
  EXPECT_FALSE(remove_tree("/"));
}

}  // namespace
}  // namespace toolwarden::policy
