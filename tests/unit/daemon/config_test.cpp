// The user's config file (SPEC §2): optional; refused when a symlink or group/world-writable;
// unknown keys are an error that names the key.
#include "daemon/config.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace toolwarden::daemon {
namespace {
namespace fs = std::filesystem;

// Throws std::runtime_error whose message contains every needle.
::testing::AssertionResult parse_fails(const std::string& text,
                                       std::initializer_list<std::string_view> needles = {}) {
  try {
    parse_config(text);
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    for (auto n : needles) {
      if (what.find(n) == std::string::npos) {
        return ::testing::AssertionFailure() << "message '" << what << "' lacks '" << n << "'";
      }
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-runtime_error: " << e.what();
  }
  return ::testing::AssertionFailure() << "accepted: " << text;
}

void expect_defaults(const Config& c) {
  EXPECT_FALSE(c.listen.has_value());
  EXPECT_FALSE(c.log_level.has_value());
  EXPECT_TRUE(c.allowed_origins.empty()) << "no extra origins by default";
  EXPECT_EQ(c.max_body_bytes, 1024u * 1024u);
  EXPECT_EQ(c.max_concurrent_calls, 4);
  EXPECT_EQ(c.max_file_bytes, 1024u * 1024u);
  EXPECT_TRUE(c.sensitive_names.empty());
  EXPECT_TRUE(c.commands.empty());
  EXPECT_TRUE(c.probe_policies.empty());
}

// ---- parse_config --------------------------------------------------------------------------

TEST(ParseConfig, EmptyObjectIsDefaults) { expect_defaults(parse_config("{}")); }

TEST(ParseConfig, FullConfig) {
  auto c = parse_config(R"({
    "listen": "127.0.0.1:7777",
    "log_level": "debug",
    "allowed_origins": ["https://ide.example.com"],
    "max_body_bytes": 2048,
    "max_concurrent_calls": 2,
    "max_file_bytes": 4096,
    "sensitive_names": ["secrets.txt", "vault*"],
    "commands": [
      {"id":"unit","argv":["/usr/bin/make","test"],"cwd":".","timeout_s":60,"env":{"K":"V"},"read_paths":["Makefile"]},
      {"id":"lint","argv":["/usr/bin/true"]}
    ],
    "probe_policies": [{"id":"p1"}]
  })");
  EXPECT_EQ(c.listen, "127.0.0.1:7777");
  ASSERT_TRUE(c.log_level.has_value());
  EXPECT_EQ(*c.log_level, LogLevel::debug);
  EXPECT_EQ(c.allowed_origins, (std::vector<std::string>{"https://ide.example.com"}));
  EXPECT_EQ(c.max_body_bytes, 2048u);
  EXPECT_EQ(c.max_concurrent_calls, 2);
  EXPECT_EQ(c.max_file_bytes, 4096u);
  EXPECT_EQ(c.sensitive_names, (std::vector<std::string>{"secrets.txt", "vault*"}));
  ASSERT_EQ(c.commands.size(), 2u);
  EXPECT_EQ(c.commands[0].id, "unit");
  EXPECT_EQ(c.commands[0].argv, (std::vector<std::string>{"/usr/bin/make", "test"}));
  EXPECT_EQ(c.commands[0].cwd, ".");
  EXPECT_EQ(c.commands[0].timeout_s, 60);
  EXPECT_EQ(c.commands[0].env.at("K"), "V");
  EXPECT_EQ(c.commands[0].read_paths, (std::vector<std::string>{"Makefile"}));
  EXPECT_EQ(c.commands[1].cwd, ".") << "cwd defaults to the worktree";
  EXPECT_EQ(c.commands[1].timeout_s, 60);
  EXPECT_EQ(c.command_ids(), (std::vector<std::string>{"unit", "lint"}));
  EXPECT_EQ(c.probe_policies.size(), 1u);
}

TEST(ParseConfig, EachLogLevel) {
  EXPECT_EQ(*parse_config(R"({"log_level":"debug"})").log_level, LogLevel::debug);
  EXPECT_EQ(*parse_config(R"({"log_level":"info"})").log_level, LogLevel::info);
  EXPECT_EQ(*parse_config(R"({"log_level":"warn"})").log_level, LogLevel::warn);
  EXPECT_EQ(*parse_config(R"({"log_level":"error"})").log_level, LogLevel::error);
}

TEST(ParseConfig, UnknownKeyErrorNamesTheKey) {
  EXPECT_TRUE(parse_fails(R"({"listen_port":1})", {"listen_port"}));
  EXPECT_TRUE(parse_fails(R"({"max_body_bytes":2048,"allowed_origin":[]})", {"allowed_origin"}));
  EXPECT_TRUE(parse_fails(R"({"Listen":"127.0.0.1:1"})", {"Listen"})) << "keys are case-sensitive";
  EXPECT_TRUE(
      parse_fails(R"({"commands":[{"id":"u","argv":["/bin/true"],"shell":true}]})", {"shell"}));
}

TEST(ParseConfig, NotJsonOrNotAnObject) {
  EXPECT_TRUE(parse_fails(""));
  EXPECT_TRUE(parse_fails("{"));
  EXPECT_TRUE(parse_fails("{\"listen\":\"x\",}"));
  EXPECT_TRUE(parse_fails("[]"));
  EXPECT_TRUE(parse_fails("null"));
  EXPECT_TRUE(parse_fails("\"config\""));
}

TEST(ParseConfig, WrongTypes) {
  for (auto text : {
           R"({"listen":7777})",
           R"({"listen":null})",
           R"({"log_level":"verbose"})",
           R"({"log_level":"DEBUG"})",
           R"({"log_level":1})",
           R"({"allowed_origins":"https://a.example"})",
           R"({"allowed_origins":[1]})",
           R"({"allowed_origins":[null]})",
           R"({"max_body_bytes":"1048576"})",
           R"({"max_body_bytes":1048576.5})",
           R"({"max_body_bytes":-1})",
           R"({"max_body_bytes":true})",
           R"({"max_body_bytes":18446744073709551615})",
           R"({"max_concurrent_calls":0})",
           R"({"max_concurrent_calls":"4"})",
           R"({"max_file_bytes":0})",
           R"({"max_file_bytes":[1]})",
           R"({"sensitive_names":".secret"})",
           R"({"sensitive_names":[{}]})",
           R"({"commands":{}})",
           R"({"commands":[1]})",
           R"({"commands":["unit"]})",
           R"({"probe_policies":{}})",
       }) {
    EXPECT_TRUE(parse_fails(text)) << text;
  }
}

TEST(ParseConfig, WrongTypeMessageNamesTheKey) {
  EXPECT_TRUE(parse_fails(R"({"listen":7777})", {"listen"}));
  EXPECT_TRUE(parse_fails(R"({"max_body_bytes":"big"})", {"max_body_bytes"}));
  EXPECT_TRUE(parse_fails(R"({"allowed_origins":"x"})", {"allowed_origins"}));
}

TEST(ParseConfig, BadCommands) {
  for (auto text : {
           R"({"commands":[{"argv":["/bin/true"]}]})",             // no id
           R"({"commands":[{"id":"u"}]})",                         // no argv
           R"({"commands":[{"id":"","argv":["/bin/true"]}]})",     // empty id
           R"({"commands":[{"id":"u","argv":[]}]})",               // empty argv
           R"({"commands":[{"id":"u","argv":["make","test"]}]})",  // relative argv[0]
           R"({"commands":[{"id":"u","argv":["./make"]}]})",
           R"({"commands":[{"id":"u","argv":"/usr/bin/make"}]})",
           R"({"commands":[{"id":"u","argv":["/bin/true",1]}]})",
           R"({"commands":[{"id":1,"argv":["/bin/true"]}]})",
           R"({"commands":[{"id":"u","argv":["/bin/true"],"timeout_s":"60"}]})",
           R"({"commands":[{"id":"u","argv":["/bin/true"],"timeout_s":0}]})",
           R"({"commands":[{"id":"u","argv":["/bin/true"],"env":{"K":1}}]})",
           R"({"commands":[{"id":"u","argv":["/bin/true"],"env":["K=V"]}]})",
           R"({"commands":[{"id":"u","argv":["/bin/true"],"read_paths":"Makefile"}]})",
           R"({"commands":[{"id":"u","argv":["/bin/true"],"cwd":1}]})",
       }) {
    EXPECT_TRUE(parse_fails(text)) << text;
  }
}

TEST(ParseConfig, ProbePoliciesAreValidatedAndNameTheKey) {
  auto c = parse_config(R"({"probe_policies":[{"id":"tests","timeout_s":5}]})");
  ASSERT_EQ(c.probe_policies.size(), 1u);
  EXPECT_EQ(c.probe_policies[0].timeout_s, 5);
  EXPECT_EQ(c.probe_policies[0].sha256.size(), 64u);
  EXPECT_TRUE(
      parse_fails(R"({"probe_policies":[{"id":"a","timeout":5}]})", {"probe_policies[0].timeout"}));
  EXPECT_TRUE(parse_fails(R"({"probe_policies":[{"id":"a","environment":{"LD_PRELOAD":"x"}}]})",
                          {"probe_policies[0].environment.LD_PRELOAD"}));
  EXPECT_TRUE(parse_fails(R"({"probe_policies":{"id":"a"}})", {"probe_policies"}));
}

TEST(ParseConfig, DuplicateCommandIdIsRefused) {
  EXPECT_TRUE(parse_fails(
      R"({"commands":[{"id":"unit","argv":["/bin/true"]},{"id":"unit","argv":["/bin/false"]}]})",
      {"unit"}));
}

// ---- load_config ---------------------------------------------------------------------------

class LoadConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tw-config-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& text, mode_t mode) {
    auto p = dir_ / name;
    {
      std::ofstream f(p, std::ios::binary | std::ios::trunc);
      f << text;
    }
    EXPECT_EQ(::chmod(p.c_str(), mode), 0);
    return p;
  }

  ::testing::AssertionResult load_fails(const fs::path& p,
                                        std::initializer_list<std::string_view> needles = {}) {
    try {
      load_config(p);
    } catch (const std::runtime_error& e) {
      std::string what = e.what();
      for (auto n : needles) {
        if (what.find(n) == std::string::npos) {
          return ::testing::AssertionFailure() << "message '" << what << "' lacks '" << n << "'";
        }
      }
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "loaded " << p;
  }

  fs::path dir_;
};

TEST_F(LoadConfig, AbsentFileGivesDefaults) {
  expect_defaults(load_config(dir_ / "config.json"));
  expect_defaults(load_config(dir_ / "no" / "such" / "dir" / "config.json"));
}

TEST_F(LoadConfig, OwnerOnlyFileLoads) {
  auto p = write("config.json", R"({"max_concurrent_calls":7})", 0600);
  EXPECT_EQ(load_config(p).max_concurrent_calls, 7);
}

TEST_F(LoadConfig, WorldReadableButNotWritableLoads) {
  auto p = write("config.json", R"({"listen":"127.0.0.1:9000"})", 0644);
  EXPECT_EQ(load_config(p).listen, "127.0.0.1:9000");
  ASSERT_EQ(::chmod(p.c_str(), 0444), 0);
  EXPECT_EQ(load_config(p).listen, "127.0.0.1:9000");
}

TEST_F(LoadConfig, GroupWritableIsRefused) {
  auto p = write("config.json", "{}", 0620);
  EXPECT_TRUE(load_fails(p, {p.string()}));
  ASSERT_EQ(::chmod(p.c_str(), 0664), 0);
  EXPECT_TRUE(load_fails(p));
}

TEST_F(LoadConfig, WorldWritableIsRefused) {
  auto p = write("config.json", "{}", 0602);
  EXPECT_TRUE(load_fails(p, {p.string()}));
  ASSERT_EQ(::chmod(p.c_str(), 0666), 0);
  EXPECT_TRUE(load_fails(p));
  ASSERT_EQ(::chmod(p.c_str(), 0777), 0);
  EXPECT_TRUE(load_fails(p));
}

TEST_F(LoadConfig, SymlinkIsRefused) {
  auto target = write("real.json", R"({"max_concurrent_calls":7})", 0600);
  auto link = dir_ / "config.json";
  fs::create_symlink(target, link);
  EXPECT_TRUE(load_fails(link, {link.string()}));
  auto rel = dir_ / "rel.json";
  fs::create_symlink("real.json", rel);
  EXPECT_TRUE(load_fails(rel));
}

TEST_F(LoadConfig, DanglingSymlinkIsRefusedNotDefaults) {
  auto link = dir_ / "config.json";
  fs::create_symlink(dir_ / "missing.json", link);
  EXPECT_TRUE(load_fails(link));
}

TEST_F(LoadConfig, DirectoryIsRefused) {
  auto p = dir_ / "config.json";
  fs::create_directory(p);
  ::chmod(p.c_str(), 0700);
  EXPECT_TRUE(load_fails(p));
}

// Probe policies decide what may run: they come only from a config file that is neither a
// symlink nor writable by anyone but its owner.
TEST_F(LoadConfig, ProbePoliciesOnlyFromASafeFile) {
  const std::string text = R"({"probe_policies":[{"id":"p","allowed_executables":["/opt/x"]}]})";
  auto p = write("real.json", text, 0600);
  ASSERT_EQ(load_config(p).probe_policies.size(), 1u);
  auto link = dir_ / "config.json";
  fs::create_symlink(p, link);
  EXPECT_TRUE(load_fails(link, {"symlink"}));
  ASSERT_EQ(::chmod(p.c_str(), 0660), 0);
  EXPECT_TRUE(load_fails(p, {"writable"}));
  ASSERT_EQ(::chmod(p.c_str(), 0602), 0);
  EXPECT_TRUE(load_fails(p, {"writable"}));
}

TEST_F(LoadConfig, ErrorsNameTheFileAndTheKey) {
  auto p = write("config.json", R"({"unknown_knob":true})", 0600);
  EXPECT_TRUE(load_fails(p, {p.string(), "unknown_knob"}));
}

TEST_F(LoadConfig, InvalidJsonNamesTheFile) {
  auto p = write("config.json", "{not json", 0600);
  EXPECT_TRUE(load_fails(p, {p.string()}));
}

}  // namespace
}  // namespace toolwarden::daemon
