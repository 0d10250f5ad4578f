// SPEC §7 path policy, pure part: request path syntax, sensitive names, scopes.
#include "policy/path_rules.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace toolwarden::policy {
namespace {

using namespace std::string_literals;

::testing::AssertionResult path_denied(std::string_view path, bool allow_root = false) {
  auto r = parse_request_path(path, allow_root);
  if (r.ok()) {
    return ::testing::AssertionFailure()
           << "accepted " << ::testing::PrintToString(std::string(path)) << " as " << r->text();
  }
  if (r.denial().code != ErrorCode::kDeniedPath) {
    return ::testing::AssertionFailure() << "denied with " << to_string(r.denial().code);
  }
  if (r.denial().reason.empty()) return ::testing::AssertionFailure() << "empty reason";
  return ::testing::AssertionSuccess();
}

std::vector<std::string> segs(std::string_view path, bool allow_root = false) {
  auto r = parse_request_path(path, allow_root);
  if (!r.ok()) {
    ADD_FAILURE() << "denied " << std::string(path) << ": " << r.denial().reason;
    return {"<denied>"};
  }
  return r->segments;
}

RelativePath rp(std::string_view path) {
  auto r = parse_request_path(path, true);
  EXPECT_TRUE(r.ok()) << std::string(path);
  return r.ok() ? r.value() : RelativePath{};
}

// ---- request path syntax -------------------------------------------------------------------

TEST(PathSyntax, ValidPathsSplitIntoSegments) {
  EXPECT_EQ(segs("a"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(segs("src/main.cpp"), (std::vector<std::string>{"src", "main.cpp"}));
  EXPECT_EQ(segs("a/b/c/d.txt"), (std::vector<std::string>{"a", "b", "c", "d.txt"}));
  EXPECT_EQ(segs("...", false), (std::vector<std::string>{"..."})) << "'...' is an ordinary name";
  EXPECT_EQ(segs(".hidden/..x/x.."), (std::vector<std::string>{".hidden", "..x", "x.."}));
  EXPECT_EQ(segs("with space/ü.txt"), (std::vector<std::string>{"with space", "ü.txt"}));
  EXPECT_EQ(segs("*?[]"), (std::vector<std::string>{"*?[]"}))
      << "glob characters are literal in request paths";
}

TEST(PathSyntax, TextJoinsSegments) {
  EXPECT_EQ(rp("a/b/c").text(), "a/b/c");
  EXPECT_EQ(rp(".").text(), ".");
  EXPECT_EQ(RelativePath{}.text(), ".");
}

TEST(PathSyntax, Empty) {
  EXPECT_TRUE(path_denied(""));
  EXPECT_TRUE(path_denied("", true));
}

TEST(PathSyntax, Absolute) {
  EXPECT_TRUE(path_denied("/etc/passwd"));
  EXPECT_TRUE(path_denied("/"));
  EXPECT_TRUE(path_denied("/", true));
  EXPECT_TRUE(path_denied("//a"));
}

TEST(PathSyntax, Nul) {
  EXPECT_TRUE(path_denied("a\0b"s));
  EXPECT_TRUE(path_denied("a.txt\0"s));
  EXPECT_TRUE(path_denied("\0"s));
  EXPECT_TRUE(path_denied(".\0"s, true));
}

TEST(PathSyntax, Backslash) {
  EXPECT_TRUE(path_denied("a\\b"));
  EXPECT_TRUE(path_denied("..\\etc"));
  EXPECT_TRUE(path_denied("\\"));
  EXPECT_TRUE(path_denied("dir\\"));
}

TEST(PathSyntax, LengthLimitIs4096Bytes) {
  EXPECT_EQ(kMaxPathBytes, 4096u);
  std::string ok(4096, 'a');
  EXPECT_EQ(segs(ok).size(), 1u);
  EXPECT_TRUE(path_denied(std::string(4097, 'a')));
  // Bytes, not characters: 2049 two-byte characters are 4098 bytes.
  std::string wide;
  for (int i = 0; i < 2049; ++i) wide += "\xC3\xA9";
  EXPECT_TRUE(path_denied(wide));
  std::string wide_ok;
  for (int i = 0; i < 2048; ++i) wide_ok += "\xC3\xA9";
  EXPECT_EQ(segs(wide_ok).size(), 1u);
  // Many short segments.
  std::string many;
  while (many.size() < 4095) many += "a/";
  many += "bb";  // 4097 bytes
  EXPECT_TRUE(path_denied(many));
}

TEST(PathSyntax, InvalidUtf8) {
  EXPECT_TRUE(path_denied("a\x80"));                 // lone continuation byte
  EXPECT_TRUE(path_denied("\xC3"));                  // truncated two-byte sequence
  EXPECT_TRUE(path_denied("a/\xE2\x82"));            // truncated three-byte sequence
  EXPECT_TRUE(path_denied("\xC0\xAF"));              // overlong '/'
  EXPECT_TRUE(path_denied("\xC1\xBF"));              // overlong two-byte
  EXPECT_TRUE(path_denied("\xE0\x80\xAF"));          // overlong three-byte '/'
  EXPECT_TRUE(path_denied("\xF0\x80\x80\xAF"));      // overlong four-byte '/'
  EXPECT_TRUE(path_denied("\xC0\xAE\xC0\xAE/x"));    // overlong ".."
  EXPECT_TRUE(path_denied("\xED\xA0\x80"));          // U+D800 high surrogate
  EXPECT_TRUE(path_denied("\xED\xBF\xBF"));          // U+DFFF low surrogate
  EXPECT_TRUE(path_denied("\xF4\x90\x80\x80"));      // U+110000
  EXPECT_TRUE(path_denied("\xF8\x88\x80\x80\x80"));  // five-byte form
  EXPECT_TRUE(path_denied("\xFE"));
  EXPECT_TRUE(path_denied("\xFF"));
}

TEST(PathSyntax, IsValidUtf8Boundaries) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain"));
  EXPECT_TRUE(is_valid_utf8("\x7F"));
  EXPECT_TRUE(is_valid_utf8("\xC2\x80"));           // U+0080
  EXPECT_TRUE(is_valid_utf8("\xDF\xBF"));           // U+07FF
  EXPECT_TRUE(is_valid_utf8("\xE0\xA0\x80"));       // U+0800
  EXPECT_TRUE(is_valid_utf8("\xED\x9F\xBF"));       // U+D7FF
  EXPECT_TRUE(is_valid_utf8("\xEE\x80\x80"));       // U+E000
  EXPECT_TRUE(is_valid_utf8("\xEF\xBF\xBF"));       // U+FFFF
  EXPECT_TRUE(is_valid_utf8("\xF0\x90\x80\x80"));   // U+10000
  EXPECT_TRUE(is_valid_utf8("\xF4\x8F\xBF\xBF"));   // U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xE0\x9F\xBF"));      // overlong U+07FF
  EXPECT_FALSE(is_valid_utf8("\xF0\x8F\xBF\xBF"));  // overlong U+FFFF
  EXPECT_FALSE(is_valid_utf8("\xC2"));
  EXPECT_FALSE(is_valid_utf8("\xC2\xC2"));
  EXPECT_FALSE(is_valid_utf8("\xE2\x82\x41"));
}

// Long text is checked eight ASCII bytes at a time: a sequence at any offset, whole or cut
// by the end of the text, is judged as it is alone.
TEST(PathSyntax, IsValidUtf8AtEveryOffsetOfLongText) {
  const std::string ascii(40, 'a');
  for (std::size_t at = 0; at <= 24; ++at) {
    for (const char* seq : {"\xC2\x80", "\xE0\xA0\x80", "\xF4\x8F\xBF\xBF"}) {
      EXPECT_TRUE(is_valid_utf8(ascii.substr(0, at) + seq + ascii)) << at;
      EXPECT_TRUE(is_valid_utf8(ascii.substr(0, at) + seq)) << at;
    }
    for (const char* bad : {"\x80", "\xFF", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80"}) {
      EXPECT_FALSE(is_valid_utf8(ascii.substr(0, at) + bad + ascii)) << at;
      EXPECT_FALSE(is_valid_utf8(ascii + ascii.substr(0, at) + bad)) << at;
    }
    EXPECT_FALSE(is_valid_utf8(ascii.substr(0, at) + "\xE2\x82")) << at;  // cut short
  }
}

TEST(PathSyntax, EmptySegment) {
  EXPECT_TRUE(path_denied("a//b"));
  EXPECT_TRUE(path_denied("a///b"));
  EXPECT_TRUE(path_denied("a/b/"));  // trailing slash
  EXPECT_TRUE(path_denied("a/"));
  EXPECT_TRUE(path_denied("a/", true));
  EXPECT_TRUE(path_denied("./", true));
}

TEST(PathSyntax, DotAndDotDotSegments) {
  EXPECT_TRUE(path_denied(".."));
  EXPECT_TRUE(path_denied("..", true));
  EXPECT_TRUE(path_denied("../x"));
  EXPECT_TRUE(path_denied("a/.."));
  EXPECT_TRUE(path_denied("a/../b"));
  EXPECT_TRUE(path_denied("a/./b"));
  EXPECT_TRUE(path_denied("./a"));
  EXPECT_TRUE(path_denied("./a", true));
  EXPECT_TRUE(path_denied("a/."));
  EXPECT_TRUE(path_denied("a/.", true));
  EXPECT_TRUE(path_denied("./."));
  EXPECT_TRUE(path_denied("x/../../etc/passwd"));
}

TEST(PathSyntax, LoneDotOnlyWithAllowRoot) {
  EXPECT_TRUE(path_denied(".", false));
  auto root = parse_request_path(".", true);
  ASSERT_TRUE(root.ok());
  EXPECT_TRUE(root->segments.empty());
  EXPECT_EQ(root->text(), ".");
}

TEST(PathSyntax, DenialIsDeniedPathString) {
  auto r = parse_request_path("../x", false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(to_string(r.denial().code), "DENIED_PATH");
}

// ---- sensitive names -----------------------------------------------------------------------

class Sensitive : public ::testing::Test {
 protected:
  ::testing::AssertionResult sensitive(std::string_view path) const {
    auto m = names_.first_match(rp(path));
    if (m) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << std::string(path) << " is not sensitive";
  }
  SensitiveNames names_;
};

TEST_F(Sensitive, EverySpecNameExactly) {
  for (auto name : {".git",        ".mcp",      ".npmrc",    ".netrc",    "id_rsa",   "id_ed25519",
                    ".env",        ".codex",    ".claude",   ".ssh",      ".aws",     ".config",
                    ".toolwarden", "auth.json", "auth.toml", "auth.yaml", "auth.yml", "credentials",
                    "AGENTS.md",   "CLAUDE.md", "mcp.json",  "mcp.toml",  "mcp.yaml", "mcp.yml"}) {
    EXPECT_TRUE(names_.matches(name)) << name;
    EXPECT_TRUE(sensitive(name)) << name;
  }
}

TEST_F(Sensitive, CaseInsensitive) {
  for (auto name : {".GIT",      ".Git",        ".gIT",      ".NPMRC",      ".NetRc",
                    "ID_RSA",    "Id_Ed25519",  ".ENV",      ".Codex",      ".CLAUDE",
                    ".SSH",      ".Aws",        ".CONFIG",   ".ToolWarden", "AUTH.JSON",
                    "Auth.Toml", "CREDENTIALS", "agents.md", "Agents.Md",   "claude.md",
                    "Claude.MD", "MCP.yaml",    "Mcp.Json",  "MCP.YML",     ".MCP"}) {
    EXPECT_TRUE(names_.matches(name)) << name;
  }
}

TEST_F(Sensitive, PrefixPatterns) {
  // .mcp*, .env.*, auth.{json,toml,yaml,yml}*, credentials*, mcp.{json,toml,yaml,yml}*
  for (auto name : {".mcp-servers",     ".mcp.json",        ".MCPconfig",      ".env.local",
                    ".Env.local",       ".ENV.PRODUCTION",  ".env.",           "auth.json.bak",
                    "auth.JSON.bak",    "auth.yaml~",       "auth.yml.orig",   "auth.toml2",
                    "credentials.json", "Credentials.json", "CREDENTIALS.txt", "credentials_backup",
                    "mcp.json.bak",     "MCP.yaml.old",     "mcp.toml.d",      "mcp.ymlx"}) {
    EXPECT_TRUE(names_.matches(name)) << name;
  }
}

TEST_F(Sensitive, AnySegmentAtAnyDepth) {
  EXPECT_TRUE(sensitive(".git/config"));
  EXPECT_TRUE(sensitive("src/.GIT/config"));
  EXPECT_TRUE(sensitive("a/b/c/.git"));
  EXPECT_TRUE(sensitive("a/b/.Env.local"));
  EXPECT_TRUE(sensitive("deploy/Credentials.json"));
  EXPECT_TRUE(sensitive("x/y/auth.JSON.bak"));
  EXPECT_TRUE(sensitive("tools/MCP.yaml"));
  EXPECT_TRUE(sensitive("docs/agents.md"));
  EXPECT_TRUE(sensitive("pkg/sub/.mcp-servers/list"));
  EXPECT_TRUE(sensitive("home/.ssh/id_rsa"));
  EXPECT_TRUE(sensitive("deep/er/id_ED25519"));
  EXPECT_TRUE(sensitive("p/.toolwarden/tools/x/tool.json"));
  EXPECT_TRUE(sensitive(".config/app/settings"));
  auto m = names_.first_match(rp("src/.GIT/config"));
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, ".GIT") << "the first sensitive segment, as written";
  auto first = names_.first_match(rp("a/.env/.git"));
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, ".env");
}

TEST_F(Sensitive, NearMissesPass) {
  for (auto name :
       {"gitignore",     ".gitignore",      ".gitattributes", ".github",    ".gitmodules",
        "git",           "my.env",          "environment",    ".envrc",     "env",
        ".environment",  "id_rsa.pub",      "id_rsa_old",     "my_id_rsa",  "id_ed25519.pub",
        "npmrc",         ".npmrc.bak",      "netrc",          "ssh",        ".sshd",
        ".aws-sdk",      ".configure",      "config",         "auth.js",    "auth",
        "oauth.json",    "author.json",     "mycredentials",  "credential", "AGENTS.md.txt",
        "agents",        "AGENTS.txt",      "CLAUDE.md.bak",  "claude",     "mcp",
        "mcp.js",        "mcp-server.json", "my.mcp.json",    "codex",      ".codexrc",
        ".claude-notes", "toolwarden",      "README.md",      "main.cpp"}) {
    EXPECT_FALSE(names_.matches(name)) << name;
  }
  EXPECT_FALSE(names_.first_match(rp("src/gitignore/my.env")));
  EXPECT_FALSE(names_.first_match(rp("docs/environment/id_rsa.pub")));
  EXPECT_FALSE(names_.first_match(rp(".")));
}

TEST_F(Sensitive, ConfigExtras) {
  EXPECT_FALSE(names_.matches("secrets.txt"));
  EXPECT_FALSE(names_.matches("vault"));
  names_.add("secrets.txt");
  names_.add("Vault*");
  EXPECT_TRUE(names_.matches("secrets.txt"));
  EXPECT_TRUE(names_.matches("SECRETS.TXT"));
  EXPECT_FALSE(names_.matches("secrets.txt.bak")) << "a literal name is matched exactly";
  EXPECT_TRUE(names_.matches("vault"));
  EXPECT_TRUE(names_.matches("VAULT-prod"));
  EXPECT_FALSE(names_.matches("myvault"));
  EXPECT_TRUE(names_.first_match(rp("ops/Secrets.TXT")));
  // The built-ins still hold.
  EXPECT_TRUE(names_.matches(".git"));
}

TEST_F(Sensitive, AddingEmptyPatternDoesNotMatchEverything) {
  names_.add("");
  EXPECT_FALSE(names_.matches("main.cpp"));
  EXPECT_FALSE(names_.matches(""));
}

// ---- scopes --------------------------------------------------------------------------------

Scope scope(std::string_view text) {
  std::string err;
  auto s = parse_scope(text, &err);
  EXPECT_TRUE(s.has_value()) << std::string(text) << ": " << err;
  return s.value_or(Scope{{"<refused>"}});
}

::testing::AssertionResult scope_refused(std::string_view text) {
  std::string err;
  auto s = parse_scope(text, &err);
  if (s)
    return ::testing::AssertionFailure()
           << "accepted scope '" << std::string(text) << "' as " << s->text();
  if (err.empty()) return ::testing::AssertionFailure() << "no error message";
  return ::testing::AssertionSuccess();
}

TEST(ScopeParse, Everything) {
  auto s = scope("**");
  EXPECT_TRUE(s.everything());
  EXPECT_EQ(s.text(), "**");
}

TEST(ScopeParse, SubtreeSpellingsAreEquivalent) {
  EXPECT_EQ(scope("dir").segments, (std::vector<std::string>{"dir"}));
  EXPECT_EQ(scope("dir/"), scope("dir"));
  EXPECT_EQ(scope("dir/**"), scope("dir"));
  EXPECT_EQ(scope("a/b/**"), scope("a/b"));
  EXPECT_EQ(scope("a/b/"), scope("a/b"));
  EXPECT_EQ(scope("dir/**").text(), "dir");
  EXPECT_EQ(scope("a/b/").text(), "a/b");
}

TEST(ScopeParse, ExactFile) {
  auto s = scope("src/main.cpp");
  EXPECT_EQ(s.segments, (std::vector<std::string>{"src", "main.cpp"}));
  EXPECT_FALSE(s.everything());
}

TEST(ScopeParse, Refused) {
  for (auto text : {"/abs",  "/",     "/**",  "../x", "..",      "a/../b", "a/./b", ".",  "./a",
                    "a/*/b", "*.txt", "*",    "a/*",  "a/**/b",  "**/a",   "a/b*",  "a?", "a/[ab]",
                    "{a,b}", "",      "a//b", "a//",  "dir/***", "a\\b",   "***"}) {
    EXPECT_TRUE(scope_refused(text)) << "'" << text << "'";
  }
  EXPECT_TRUE(scope_refused("a\0b"s));
  EXPECT_TRUE(scope_refused("\xC0\xAF"));
  EXPECT_TRUE(scope_refused(std::string(4097, 'a')));
}

TEST(ScopeParse, NullErrorPointerIsAllowed) {
  EXPECT_FALSE(parse_scope("../x", nullptr));
  EXPECT_TRUE(parse_scope("src", nullptr));
}

TEST(ScopeCovers, EverythingCoversAllIncludingRoot) {
  auto all = scope("**");
  EXPECT_TRUE(all.covers(rp(".")));
  EXPECT_TRUE(all.covers(rp("a")));
  EXPECT_TRUE(all.covers(rp("a/b/c")));
}

TEST(ScopeCovers, SubtreeCoversItselfAndBelowOnly) {
  auto src = scope("src/**");
  EXPECT_TRUE(src.covers(rp("src")));
  EXPECT_TRUE(src.covers(rp("src/a.cpp")));
  EXPECT_TRUE(src.covers(rp("src/lib/x/y.h")));
  EXPECT_FALSE(src.covers(rp("srcx")));
  EXPECT_FALSE(src.covers(rp("srcx/a.cpp")));
  EXPECT_FALSE(src.covers(rp("sr")));
  EXPECT_FALSE(src.covers(rp("lib/src")));
  EXPECT_FALSE(src.covers(rp("."))) << "the root is not inside a subtree";
  EXPECT_FALSE(src.covers(rp("SRC/a.cpp"))) << "scopes are case-sensitive like the filesystem";
}

TEST(ScopeCovers, NestedSubtree) {
  auto lib = scope("src/lib");
  EXPECT_TRUE(lib.covers(rp("src/lib/a")));
  EXPECT_FALSE(lib.covers(rp("src")));
  EXPECT_FALSE(lib.covers(rp("src/lib2")));
  EXPECT_FALSE(lib.covers(rp("src/other/a")));
}

TEST(ScopeCovers, ExactFile) {
  auto f = scope("docs/README.md");
  EXPECT_TRUE(f.covers(rp("docs/README.md")));
  EXPECT_FALSE(f.covers(rp("docs/README.md.bak")));
  EXPECT_FALSE(f.covers(rp("docs")));
  EXPECT_FALSE(f.covers(rp("docs/OTHER.md")));
}

TEST(ScopeWithin, Relations) {
  auto all = scope("**");
  auto src = scope("src");
  auto lib = scope("src/lib");
  auto docs = scope("docs");
  auto file = scope("src/lib/a.cpp");
  EXPECT_TRUE(all.within(all));
  EXPECT_TRUE(src.within(all));
  EXPECT_FALSE(all.within(src));
  EXPECT_TRUE(lib.within(src));
  EXPECT_TRUE(src.within(src));
  EXPECT_FALSE(src.within(lib));
  EXPECT_FALSE(docs.within(src));
  EXPECT_FALSE(src.within(docs));
  EXPECT_TRUE(file.within(lib));
  EXPECT_TRUE(file.within(all));
  EXPECT_FALSE(lib.within(file));
  EXPECT_FALSE(scope("srcx").within(src));
}

}  // namespace
}  // namespace toolwarden::policy
