// Job grants (SPEC §3 `job create`, §4 `task`, §7 scopes).
#include "policy/grant.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <set>
#include <string>
#include <vector>

namespace toolwarden::policy {
namespace {
namespace json = boost::json;

using Strings = std::vector<std::string>;

const Strings kKnown = {"unit", "lint", "e2e"};

std::set<std::string> as_set(const Strings& v) { return {v.begin(), v.end()}; }

Strings scope_texts(const std::vector<Scope>& scopes) {
  Strings out;
  for (const auto& s : scopes) out.push_back(s.text());
  std::sort(out.begin(), out.end());
  return out;
}

JobRequest request(std::optional<std::string> access = std::nullopt) {
  JobRequest r;
  r.worktree = "/home/u/repo";
  r.access = std::move(access);
  return r;
}

Grant must_build(const JobRequest& req, const Strings& known = kKnown) {
  std::string err;
  auto g = build_grant(req, known, &err);
  EXPECT_TRUE(g.has_value()) << "refused: " << err;
  return g.value_or(Grant{});
}

// Refused with a non-empty message that contains every `needle`.
::testing::AssertionResult refused(const JobRequest& req,
                                   std::initializer_list<std::string_view> needles = {},
                                   const Strings& known = kKnown) {
  std::string err;
  auto g = build_grant(req, known, &err);
  if (g) return ::testing::AssertionFailure() << "granted: " << json::serialize(g->to_json());
  if (err.empty()) return ::testing::AssertionFailure() << "refused without a message";
  for (auto n : needles) {
    if (err.find(n) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message '" << err << "' does not mention '" << n << "'";
    }
  }
  return ::testing::AssertionSuccess();
}

RelativePath rp(std::string_view path) {
  auto r = parse_request_path(path, true);
  EXPECT_TRUE(r.ok()) << std::string(path);
  return r.ok() ? r.value() : RelativePath{};
}

json::object task(std::string_view text) { return json::parse(text).as_object(); }

// ---- defaults ------------------------------------------------------------------------------

TEST(GrantDefaults, ReadAccessEverythingReadTools) {
  auto g = must_build(request());
  EXPECT_EQ(g.worktree, "/home/u/repo");
  EXPECT_EQ(g.access, Access::read);
  EXPECT_EQ(scope_texts(g.allowed), (Strings{"**"}));
  EXPECT_TRUE(g.blocked.empty());
  EXPECT_TRUE(g.commands.empty());
  EXPECT_EQ(as_set(g.tools), (std::set<std::string>{"local_read", "local_list", "local_search"}));
}

TEST(GrantDefaults, ExplicitReadIsTheSame) {
  auto g = must_build(request("read"));
  EXPECT_EQ(g.access, Access::read);
  EXPECT_FALSE(g.grants_tool("local_edit"));
}

TEST(GrantDefaults, WriteAddsLocalEdit) {
  auto g = must_build(request("write"));
  EXPECT_EQ(g.access, Access::write);
  EXPECT_EQ(as_set(g.tools),
            (std::set<std::string>{"local_read", "local_list", "local_search", "local_edit"}));
}

TEST(GrantDefaults, CommandsAddLocalTest) {
  auto req = request();
  req.commands = {"unit"};
  auto g = must_build(req);
  EXPECT_EQ(g.commands, (Strings{"unit"}));
  EXPECT_EQ(as_set(g.tools),
            (std::set<std::string>{"local_read", "local_list", "local_search", "local_test"}));
}

TEST(GrantDefaults, WriteAndCommands) {
  auto req = request("write");
  req.commands = {"unit", "lint"};
  auto g = must_build(req);
  EXPECT_EQ(as_set(g.tools), (std::set<std::string>{"local_read", "local_list", "local_search",
                                                    "local_edit", "local_test"}));
  EXPECT_EQ(as_set(g.commands), (std::set<std::string>{"unit", "lint"}));
}

TEST(GrantDefaults, DefaultToolsFunction) {
  EXPECT_EQ(as_set(default_tools(Access::read, false)),
            (std::set<std::string>{"local_read", "local_list", "local_search"}));
  EXPECT_EQ(as_set(default_tools(Access::write, false)),
            (std::set<std::string>{"local_read", "local_list", "local_search", "local_edit"}));
  EXPECT_EQ(as_set(default_tools(Access::read, true)),
            (std::set<std::string>{"local_read", "local_list", "local_search", "local_test"}));
  EXPECT_EQ(to_string(Access::read), "read");
  EXPECT_EQ(to_string(Access::write), "write");
}

TEST(GrantDefaults, DuplicateCommandsAndScopesCollapse) {
  auto req = request();
  req.commands = {"unit", "unit"};
  req.allowed_paths = {"src", "src/", "src/**"};
  auto g = must_build(req);
  EXPECT_EQ(g.commands, (Strings{"unit"}));
  EXPECT_EQ(scope_texts(g.allowed), (Strings{"src"}));
}

// ---- refusals ------------------------------------------------------------------------------

TEST(GrantRefuse, UnknownAccess) {
  EXPECT_TRUE(refused(request("admin"), {"access"}));
  EXPECT_TRUE(refused(request("WRITE")));
  EXPECT_TRUE(refused(request("")));
}

TEST(GrantRefuse, UnregisteredCommand) {
  auto req = request();
  req.commands = {"unit", "deploy"};
  EXPECT_TRUE(refused(req, {"deploy"}));
  EXPECT_TRUE(refused(req, {"unit"}, Strings{})) << "no commands registered at all";
}

TEST(GrantRefuse, InvalidScopes) {
  for (auto bad : {"/etc", "../x", "a/*/b", "*.txt", "a/**/b", "", "a//b"}) {
    auto req = request();
    req.allowed_paths = {bad};
    EXPECT_TRUE(refused(req)) << "allow '" << bad << "'";
    auto req2 = request();
    req2.blocked_paths = {bad};
    EXPECT_TRUE(refused(req2)) << "block '" << bad << "'";
  }
}

// ---- --tool narrowing ----------------------------------------------------------------------

TEST(GrantTools, NarrowingKeepsOnlyTheNamedTools) {
  auto req = request("write");
  req.tools = {"local_read"};
  auto g = must_build(req);
  EXPECT_EQ(g.tools, (Strings{"local_read"}));
  EXPECT_TRUE(g.grants_tool("local_read"));
  EXPECT_FALSE(g.grants_tool("local_edit"));
  EXPECT_FALSE(g.grants_tool("local_list"));
}

TEST(GrantTools, NarrowingToSeveral) {
  auto req = request("write");
  req.commands = {"unit"};
  req.tools = {"local_edit", "local_test", "local_edit"};
  auto g = must_build(req);
  EXPECT_EQ(as_set(g.tools), (std::set<std::string>{"local_edit", "local_test"}));
  EXPECT_EQ(g.tools.size(), 2u);
}

TEST(GrantTools, LocalEditNeedsWriteAccess) {
  auto req = request("read");
  req.tools = {"local_read", "local_edit"};
  EXPECT_TRUE(refused(req, {"local_edit"}));
  auto implicit = request();
  implicit.tools = {"local_edit"};
  EXPECT_TRUE(refused(implicit, {"local_edit"}));
}

TEST(GrantTools, LocalTestNeedsACommand) {
  auto req = request("write");
  req.tools = {"local_test"};
  EXPECT_TRUE(refused(req, {"local_test"}));
}

TEST(GrantTools, ProbesGrantsTheThreeProbeTools) {
  auto req = request();
  req.tools = {"local_read", "probes"};
  auto g = must_build(req);
  EXPECT_EQ(g.tools, (Strings{"local_read", "probe_plan", "probe_run", "probe_show"}));
  EXPECT_TRUE(g.authorize_tool("probe_run"));
  // One probe tool alone, and never by default.
  auto one = request();
  one.tools = {"probe_show", "probe_show"};
  EXPECT_EQ(must_build(one).tools, (Strings{"probe_show"}));
  for (const auto& t : must_build(request("write")).tools)
    EXPECT_EQ(t.rfind("probe", 0), std::string::npos) << t;
  auto both = request();
  both.tools = {"probe_plan", "probes"};
  EXPECT_EQ(must_build(both).tools, (Strings{"probe_plan", "probe_run", "probe_show"}));
}

TEST(GrantTools, UnknownToolIsRefused) {
  auto req = request();
  req.tools = {"local_read", "rm_rf"};
  EXPECT_TRUE(refused(req, {"rm_rf"}));
  auto other = request();
  other.tools = {"LOCAL_READ"};
  EXPECT_TRUE(refused(other));
}

// ---- authorize_scope -----------------------------------------------------------------------

TEST(GrantScope, AllowedAndBlocked) {
  auto req = request();
  req.allowed_paths = {"src/**", "README.md"};
  req.blocked_paths = {"src/secret/", "src/gen/big.bin"};
  auto g = must_build(req);
  EXPECT_TRUE(g.authorize_scope(rp("src/a.cpp")).ok());
  EXPECT_TRUE(g.authorize_scope(rp("src")).ok());
  EXPECT_TRUE(g.authorize_scope(rp("src/gen/small.txt")).ok());
  EXPECT_TRUE(g.authorize_scope(rp("README.md")).ok());

  for (auto outside : {"docs/x.md", "README.md.bak", "srcx/a", "."}) {
    auto c = g.authorize_scope(rp(outside));
    ASSERT_FALSE(c.ok()) << outside;
    EXPECT_EQ(c.denial().code, ErrorCode::kDeniedScope) << outside;
    EXPECT_EQ(to_string(c.denial().code), "DENIED_SCOPE");
  }
  for (auto blocked : {"src/secret", "src/secret/key.pem", "src/secret/a/b", "src/gen/big.bin"}) {
    auto c = g.authorize_scope(rp(blocked));
    ASSERT_FALSE(c.ok()) << blocked;
    EXPECT_EQ(c.denial().code, ErrorCode::kDeniedScope) << blocked;
  }
}

TEST(GrantScope, EverythingAllowedBlockWins) {
  auto req = request();
  req.blocked_paths = {"vendor"};
  auto g = must_build(req);
  EXPECT_TRUE(g.authorize_scope(rp(".")).ok());
  EXPECT_TRUE(g.authorize_scope(rp("main.c")).ok());
  EXPECT_EQ(g.authorize_scope(rp("vendor/lib.c")).denial().code, ErrorCode::kDeniedScope);
}

TEST(GrantScope, BlockingEverything) {
  auto req = request();
  req.blocked_paths = {"**"};
  auto g = must_build(req);
  EXPECT_FALSE(g.authorize_scope(rp("a")).ok());
  EXPECT_FALSE(g.authorize_scope(rp(".")).ok());
}

// ---- task intersection (SPEC §4) -----------------------------------------------------------

TEST(GrantTask, EverythingApprovedTaskSubtree) {
  auto req = request();
  req.task = task(R"({"allowed_paths":["src"],"access":"read","required_commands":[]})");
  auto g = must_build(req);
  EXPECT_EQ(scope_texts(g.allowed), (Strings{"src"}));
  EXPECT_TRUE(g.authorize_scope(rp("src/a")).ok());
  EXPECT_FALSE(g.authorize_scope(rp("docs/a")).ok());
}

TEST(GrantTask, ApprovedSubtreeTaskNarrower) {
  auto req = request();
  req.allowed_paths = {"src/**"};
  req.task = task(R"({"allowed_paths":["src/lib"],"required_commands":[]})");
  auto g = must_build(req);
  EXPECT_EQ(scope_texts(g.allowed), (Strings{"src/lib"}));
}

TEST(GrantTask, TaskWiderThanApproval) {
  auto req = request();
  req.allowed_paths = {"src/lib"};
  req.task = task(R"({"allowed_paths":["**"],"required_commands":[]})");
  auto g = must_build(req);
  EXPECT_EQ(scope_texts(g.allowed), (Strings{"src/lib"}));
}

TEST(GrantTask, NothingInCommonIsRefused) {
  auto req = request();
  req.allowed_paths = {"docs"};
  req.task = task(R"({"allowed_paths":["src"],"required_commands":[]})");
  EXPECT_TRUE(refused(req));
  auto sibling = request();
  sibling.allowed_paths = {"src/lib"};
  sibling.task = task(R"({"allowed_paths":["src/libx"],"required_commands":[]})");
  EXPECT_TRUE(refused(sibling));
}

TEST(GrantTask, SeveralScopesIntersectPiecewise) {
  auto req = request();
  req.allowed_paths = {"src", "docs/api", "tests"};
  req.task = task(R"({"allowed_paths":["src/core","docs","build"],"required_commands":[]})");
  auto g = must_build(req);
  EXPECT_EQ(scope_texts(g.allowed), (Strings{"docs/api", "src/core"}));
  EXPECT_FALSE(g.authorize_scope(rp("tests/t.cpp")).ok());
  EXPECT_FALSE(g.authorize_scope(rp("build/x")).ok());
  EXPECT_FALSE(g.authorize_scope(rp("docs/guide.md")).ok());
  EXPECT_TRUE(g.authorize_scope(rp("docs/api/x.md")).ok());
}

TEST(GrantTask, BlockedScopesOfTheApprovalStay) {
  auto req = request();
  req.blocked_paths = {"src/secret"};
  req.task = task(R"({"allowed_paths":["src"],"required_commands":[]})");
  auto g = must_build(req);
  EXPECT_FALSE(g.authorize_scope(rp("src/secret/k")).ok());
  EXPECT_TRUE(g.authorize_scope(rp("src/ok")).ok());
}

TEST(GrantTask, WriteOnlyIfBothSayWrite) {
  struct Case {
    const char* approval;
    const char* task_access;
    Access want;
  };
  for (const auto& c : {Case{"write", "write", Access::write}, Case{"write", "read", Access::read},
                        Case{"read", "write", Access::read}, Case{"read", "read", Access::read}}) {
    auto req = request(c.approval);
    req.task = task(std::string(R"({"allowed_paths":["**"],"access":")") + c.task_access +
                    R"(","required_commands":[]})");
    auto g = must_build(req);
    EXPECT_EQ(g.access, c.want) << c.approval << " + " << c.task_access;
    EXPECT_EQ(g.grants_tool("local_edit"), c.want == Access::write)
        << c.approval << " + " << c.task_access;
  }
}

TEST(GrantTask, TaskWithoutAccessMeansRead) {
  auto req = request("write");
  req.task = task(R"({"allowed_paths":["**"],"required_commands":[]})");
  EXPECT_EQ(must_build(req).access, Access::read);
}

TEST(GrantTask, TaskDowngradeRefusesExplicitLocalEdit) {
  auto req = request("write");
  req.tools = {"local_edit"};
  req.task = task(R"({"allowed_paths":["**"],"access":"read","required_commands":[]})");
  EXPECT_TRUE(refused(req, {"local_edit"}));
}

TEST(GrantTask, RequiredCommandsEqualAsSets) {
  auto req = request();
  req.commands = {"unit", "lint"};
  req.task = task(R"({"allowed_paths":["**"],"required_commands":["lint","unit","lint"]})");
  auto g = must_build(req);
  EXPECT_EQ(as_set(g.commands), (std::set<std::string>{"unit", "lint"}));
  EXPECT_TRUE(g.grants_tool("local_test"));
}

TEST(GrantTask, TaskNeedsACommandNotGranted) {
  auto req = request();
  req.commands = {"unit"};
  req.task = task(R"({"allowed_paths":["**"],"required_commands":["unit","e2e"]})");
  EXPECT_TRUE(refused(req, {"required_commands", "e2e"}));
}

TEST(GrantTask, GrantHasACommandTheTaskDoesNotNeed) {
  auto req = request();
  req.commands = {"unit", "lint"};
  req.task = task(R"({"allowed_paths":["**"],"required_commands":["unit"]})");
  EXPECT_TRUE(refused(req, {"required_commands", "lint"}));
}

TEST(GrantTask, TaskNeedsCommandsNoneGranted) {
  auto req = request();
  req.task = task(R"({"allowed_paths":["**"],"required_commands":["unit"]})");
  EXPECT_TRUE(refused(req, {"unit"}));
}

TEST(GrantTask, MissingRequiredCommandsMeansNone) {
  auto req = request();
  req.task = task(R"({"allowed_paths":["src"]})");
  EXPECT_EQ(scope_texts(must_build(req).allowed), (Strings{"src"}));
  auto with_cmd = request();
  with_cmd.commands = {"unit"};
  with_cmd.task = task(R"({"allowed_paths":["src"]})");
  EXPECT_TRUE(refused(with_cmd, {"unit"}));
}

TEST(GrantTask, MalformedTaskIsRefused) {
  for (auto text : {R"({"allowed_paths":"src"})", R"({"allowed_paths":[1]})",
                    R"({"allowed_paths":["../x"]})", R"({"allowed_paths":["*.c"]})",
                    R"({"access":"root"})", R"({"access":true})", R"({"required_commands":"unit"})",
                    R"({"required_commands":[1]})", R"({"allowed_paths":["**"],"extra":1})"}) {
    auto req = request();
    req.task = task(text);
    EXPECT_TRUE(refused(req)) << text;
  }
}

// ---- JSON round trip -----------------------------------------------------------------------

TEST(GrantJson, RoundTrip) {
  auto req = request("write");
  req.allowed_paths = {"src/**", "README.md"};
  req.blocked_paths = {"src/secret/"};
  req.commands = {"unit"};
  auto g = must_build(req);
  auto o = g.to_json();
  EXPECT_EQ(o.at("worktree"), json::value("/home/u/repo"));
  EXPECT_EQ(o.at("access"), json::value("write"));
  EXPECT_EQ(o.at("allowed_paths"), json::value(json::array{"src", "README.md"}));
  EXPECT_EQ(o.at("blocked_paths"), json::value(json::array{"src/secret"}));
  EXPECT_EQ(o.at("commands"), json::value(json::array{"unit"}));
  ASSERT_TRUE(o.at("tools").is_array());

  std::string err;
  auto back = Grant::from_json(o, &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->worktree, g.worktree);
  EXPECT_EQ(back->access, g.access);
  EXPECT_EQ(back->allowed, g.allowed);
  EXPECT_EQ(back->blocked, g.blocked);
  EXPECT_EQ(back->commands, g.commands);
  EXPECT_EQ(back->tools, g.tools);
  EXPECT_EQ(back->to_json(), o);
}

TEST(GrantJson, RoundTripThroughText) {
  auto g = must_build(request());
  auto text = json::serialize(g.to_json());
  std::string err;
  auto back = Grant::from_json(json::parse(text).as_object(), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(back->allowed, g.allowed);
  EXPECT_TRUE(back->allowed.at(0).everything());
  EXPECT_EQ(back->access, Access::read);
  EXPECT_EQ(back->tools, g.tools);
}

TEST(GrantJson, FromJsonRefusesBadInput) {
  for (auto text : {R"({})", R"({"worktree":"/w"})", R"({"access":"read"})",
                    R"({"worktree":1,"access":"read"})", R"({"worktree":"/w","access":"all"})",
                    R"({"worktree":"/w","access":"read","allowed_paths":"**"})",
                    R"({"worktree":"/w","access":"read","allowed_paths":["../x"]})",
                    R"({"worktree":"/w","access":"read","blocked_paths":["/abs"]})",
                    R"({"worktree":"/w","access":"read","tools":[1]})",
                    R"({"worktree":"/w","access":"read","commands":{}})"}) {
    std::string err;
    EXPECT_FALSE(Grant::from_json(json::parse(text).as_object(), &err)) << text;
    EXPECT_FALSE(err.empty()) << text;
  }
}

}  // namespace
}  // namespace toolwarden::policy

// ---- custom tools (SPEC §11) ----------------------------------------------------------------
namespace toolwarden::policy {
namespace {

TEST(GrantCustomTools, ADiscoveredToolIsGrantedAndPinned) {
  auto req = request();
  req.tools = {"local_read", "fmt"};
  req.custom_tools["fmt"] =
      CustomToolPin{"project", "/home/u/repo/.toolwarden/tools/fmt", "ab", "{}"};
  Grant g = must_build(req);
  EXPECT_EQ(g.tools, (Strings{"local_read", "fmt"}));
  ASSERT_EQ(g.custom_tools.count("fmt"), 1u);
  EXPECT_EQ(g.custom_tools.at("fmt").sha256, "ab");
  EXPECT_TRUE(g.authorize_tool("fmt").ok());
}

TEST(GrantCustomTools, AnUndiscoveredNameIsAnUnknownTool) {
  auto req = request();
  req.tools = {"fmt"};
  EXPECT_TRUE(refused(req, {"unknown tool", "fmt"}));
}

TEST(GrantCustomTools, PinsSurviveTheStoredForm) {
  auto req = request();
  req.tools = {"gen"};
  req.custom_tools["gen"] =
      CustomToolPin{"user", "/home/u/.config/toolwarden/tools/gen", "cd", R"({"name":"gen"})"};
  Grant g = must_build(req);
  std::string err;
  auto back = Grant::from_json(g.to_json(), &err);
  ASSERT_TRUE(back.has_value()) << err;
  ASSERT_EQ(back->custom_tools.count("gen"), 1u);
  EXPECT_EQ(back->custom_tools.at("gen").scope, "user");
  EXPECT_EQ(back->custom_tools.at("gen").folder, "/home/u/.config/toolwarden/tools/gen");
  EXPECT_EQ(back->custom_tools.at("gen").sha256, "cd");
  EXPECT_EQ(back->custom_tools.at("gen").manifest, R"({"name":"gen"})");

  json::object broken = g.to_json();
  broken["custom_tools"].as_object()["gen"].as_object().erase("sha256");
  EXPECT_FALSE(Grant::from_json(broken, &err).has_value());
}

}  // namespace
}  // namespace toolwarden::policy
