// Probe plans and verdicts (SPEC §12): what a plan may say, and how a run becomes supports,
// refutes or inconclusive — never decided by a source that is not independent of the model.
#include "policy/probe_plan.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace toolwarden::policy {
namespace {
namespace json = boost::json;

constexpr const char* kPlan = R"({
  "snapshot_id": "snap_1",
  "hypothesis": "add(2, 2) is not 4",
  "command": ["python3", "test_calc.py"],
  "working_directory": ".",
  "oracle": {"type": "exit_code", "expected": 1, "source": "user_requirement",
             "reference": "the README says add(2, 2) == 4"},
  "policy_id": "default"
})";

json::object plan_json(const std::function<void(json::object&)>& edit = {}) {
  json::object o = json::parse(kPlan).as_object();
  if (edit) edit(o);
  return o;
}

Result<ProbePlan> parse(const json::object& o, std::size_t max_file_bytes = 1 << 20) {
  return parse_probe_plan(o, SensitiveNames{}, max_file_bytes, false);
}

Denial denial_of(const std::function<void(json::object&)>& edit) {
  auto r = parse(plan_json(edit));
  EXPECT_FALSE(r);
  return r ? Denial{ErrorCode::kLocalToolFailed, "parsed"} : r.denial();
}

TEST(ProbePlan, ValidPlanWithDefaults) {
  auto r = parse(plan_json());
  ASSERT_TRUE(r) << r.denial().reason;
  const auto& p = r.value();
  EXPECT_EQ(p.command, (std::vector<std::string>{"python3", "test_calc.py"}));
  EXPECT_EQ(p.oracle.type, OracleType::exit_code);
  EXPECT_EQ(p.oracle.expected_exit, 1);
  EXPECT_TRUE(p.oracle.independent());
  EXPECT_EQ(p.oracle.pass_verdict, Verdict::supports);
  EXPECT_EQ(p.oracle.fail_verdict, Verdict::refutes);
  EXPECT_FALSE(p.claim_id);
}

TEST(ProbePlan, StoredPlanReadsBackToTheSameDigestInput) {
  auto r = parse(plan_json([](json::object& o) {
    o["fixture"] = json::object{{"input.txt", "2 2\n"}};
    o["intervention"] = json::object{{"src/calc.py", "def add(a, b):\n    return a + b\n"}};
    o["claim_id"] = "claim-7";
  }));
  ASSERT_TRUE(r);
  r->snapshot_sha256 = std::string(64, 'a');
  r->policy_sha256 = std::string(64, 'b');
  r->executable_path = "/usr/bin/python3.11";
  r->executable_sha256 = std::string(64, 'c');
  const json::object stored = r->to_json();
  auto back = plan_from_json(stored, SensitiveNames{});
  ASSERT_TRUE(back);
  EXPECT_EQ(json::serialize(back->to_json()), json::serialize(stored));
}

TEST(ProbePlan, UnknownKeysAreNamed) {
  auto d = denial_of([](json::object& o) { o["comand"] = json::array{"x"}; });
  EXPECT_EQ(d.code, ErrorCode::kDeniedArguments);
  EXPECT_NE(d.reason.find("\"comand\""), std::string::npos);
  d = denial_of([](json::object& o) { o["oracle"].as_object()["expect"] = 1; });
  EXPECT_NE(d.reason.find("oracle.expect"), std::string::npos);
  // The pinned fields are the daemon's to fill in, never the caller's.
  d = denial_of([](json::object& o) { o["executable"] = json::object{{"path", "/x"}}; });
  EXPECT_NE(d.reason.find("\"executable\""), std::string::npos);
}

TEST(ProbePlan, RequiredFields) {
  for (const char* key :
       {"hypothesis", "command", "working_directory", "oracle", "policy_id", "snapshot_id"}) {
    auto d = denial_of([key](json::object& o) { o.erase(key); });
    EXPECT_NE(d.reason.find(key), std::string::npos) << key;
  }
  // A job's plan may leave the snapshot out (it is captured for it).
  auto o = plan_json([](json::object& p) { p.erase("snapshot_id"); });
  EXPECT_TRUE(parse_probe_plan(o, SensitiveNames{}, 1 << 20, true));
}

TEST(ProbePlan, IndependentSourcesNeedAReference) {
  for (const char* source : {"differential_reference", "historical_regression",
                             "published_specification", "user_requirement"}) {
    auto d = denial_of([source](json::object& o) {
      auto& orc = o["oracle"].as_object();
      orc["source"] = source;
      orc.erase("reference");
    });
    EXPECT_NE(d.reason.find("oracle.reference is required"), std::string::npos) << source;
  }
  // Any other source is recorded, reference or not, and makes every verdict inconclusive.
  auto r = parse(plan_json([](json::object& o) {
    auto& orc = o["oracle"].as_object();
    orc["source"] = "model_assertion";
    orc.erase("reference");
  }));
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->oracle.independent());
}

TEST(ProbePlan, OracleShapes) {
  auto d = denial_of([](json::object& o) { o["oracle"].as_object()["type"] = "regex"; });
  EXPECT_NE(d.reason.find("oracle.type"), std::string::npos);
  d = denial_of([](json::object& o) { o["oracle"].as_object()["expected"] = 256; });
  EXPECT_NE(d.reason.find("0 to 255"), std::string::npos);
  d = denial_of([](json::object& o) {
    auto& orc = o["oracle"].as_object();
    orc["type"] = "file_sha256";
    orc["expected"] = std::string(64, 'A');
  });
  EXPECT_NE(d.reason.find("oracle.path is required"), std::string::npos);
  d = denial_of([](json::object& o) {
    auto& orc = o["oracle"].as_object();
    orc["type"] = "file_sha256";
    orc["expected"] = "not-a-digest";
    orc["path"] = "out.txt";
  });
  EXPECT_NE(d.reason.find("SHA-256"), std::string::npos);
  d = denial_of([](json::object& o) { o["oracle"].as_object()["path"] = "out.txt"; });
  EXPECT_NE(d.reason.find("only for file_sha256"), std::string::npos);
  d = denial_of([](json::object& o) { o["oracle"].as_object()["pass_verdict"] = "refutes"; });
  EXPECT_NE(d.reason.find("must differ"), std::string::npos);
  d = denial_of([](json::object& o) { o["oracle"].as_object()["fail_verdict"] = "inconclusive"; });
  EXPECT_NE(d.reason.find("oracle.fail_verdict"), std::string::npos);
  auto r = parse(plan_json([](json::object& o) {
    auto& orc = o["oracle"].as_object();
    orc["type"] = "file_sha256";
    orc["expected"] = std::string(64, 'A');  // normalized to lowercase
    orc["path"] = "out/result.bin";
    orc["pass_verdict"] = "refutes";
    orc["fail_verdict"] = "supports";
  }));
  ASSERT_TRUE(r) << r.denial().reason;
  EXPECT_EQ(r->oracle.expected_text, std::string(64, 'a'));
}

TEST(ProbePlan, OverlayPathsFollowThePathPolicy) {
  for (const char* bad : {"../x", "/etc/passwd", "a//b", "a/./b", "a\\b", ".", ""}) {
    auto d = denial_of([bad](json::object& o) { o["intervention"] = json::object{{bad, "x"}}; });
    EXPECT_EQ(d.code, ErrorCode::kDeniedPath) << bad;
  }
  for (const char* sensitive : {".git/hooks/pre-commit", "src/.env", "id_rsa", ".ssh/config"}) {
    auto d = denial_of([sensitive](json::object& o) {
      o["fixture"] = json::object{{sensitive, "x"}};
    });
    EXPECT_EQ(d.code, ErrorCode::kDeniedPath) << sensitive;
  }
  auto d = denial_of([](json::object& o) {
    o["fixture"] = json::object{{"a", "file"}, {"a/b", "file below a file"}};
  });
  EXPECT_EQ(d.code, ErrorCode::kDeniedArguments);
  d = denial_of([](json::object& o) { o["fixture"] = json::object{{"a", 1}}; });
  EXPECT_EQ(d.code, ErrorCode::kDeniedArguments);
  // "a-b" and "a.txt" sort between "a" and "a/..." and are no conflict.
  auto r = parse(plan_json([](json::object& o) {
    o["fixture"] = json::object{{"a", "1"}, {"a-b/c", "2"}, {"a.txt", "3"}};
  }));
  EXPECT_TRUE(r);
}

TEST(ProbePlan, OverlaySizesAreCapped) {
  auto r = parse(plan_json([](json::object& o) {
                   o["fixture"] = json::object{{"big.txt", std::string(2000, 'x')}};
                 }),
                 1000);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.denial().code, ErrorCode::kDeniedSize);
  json::object many;
  for (int i = 0; i <= static_cast<int>(kMaxOverlayFiles); ++i) many["f" + std::to_string(i)] = "";
  auto d = denial_of([&](json::object& o) { o["intervention"] = many; });
  EXPECT_EQ(d.code, ErrorCode::kDeniedArguments);
}

Oracle exit_oracle(int expected, const char* source = "user_requirement") {
  Oracle o;
  o.type = OracleType::exit_code;
  o.expected_exit = expected;
  o.source = source;
  o.reference = "ref";
  return o;
}

RunFacts completed(int exit_code, std::string_view out = {}, bool truncated = false) {
  RunFacts f;
  f.state = "completed";
  f.exit_code = exit_code;
  f.stdout_data = out;
  f.truncated = truncated;
  return f;
}

TEST(Judge, OracleDecidesBetweenSupportsAndRefutes) {
  EXPECT_EQ(judge(exit_oracle(1), completed(1)).verdict, Verdict::supports);
  EXPECT_EQ(judge(exit_oracle(1), completed(0)).verdict, Verdict::refutes);
  auto swapped = exit_oracle(0);
  swapped.pass_verdict = Verdict::refutes;
  swapped.fail_verdict = Verdict::supports;
  EXPECT_EQ(judge(swapped, completed(0)).verdict, Verdict::refutes);
  EXPECT_EQ(judge(swapped, completed(3)).verdict, Verdict::supports);
}

TEST(Judge, NonIndependentSourceIsAlwaysInconclusive) {
  auto j = judge(exit_oracle(1, "model_assertion"), completed(1));
  EXPECT_EQ(j.verdict, Verdict::inconclusive);
  EXPECT_EQ(j.oracle_passed, std::optional<bool>(true)) << "the oracle's outcome is still recorded";
  EXPECT_NE(j.reason.find("not independent"), std::string::npos);
}

TEST(Judge, RunsThatDidNotCompleteAreInconclusive) {
  for (const char* state :
       {"timeout", "output_limit", "resource_limit", "setup_failed", "unsupported"}) {
    RunFacts f = completed(1);
    f.state = state;
    auto j = judge(exit_oracle(1), f);
    EXPECT_EQ(j.verdict, Verdict::inconclusive) << state;
    EXPECT_FALSE(j.oracle_passed) << state;
  }
}

TEST(Judge, TruncatedStdoutNeverPasses) {
  Oracle o;
  o.type = OracleType::stdout_contains;
  o.expected_text = "FAILED";
  o.source = "historical_regression";
  o.reference = "issue 12";
  EXPECT_EQ(judge(o, completed(0, "1 FAILED\n")).verdict, Verdict::supports);
  EXPECT_EQ(judge(o, completed(0, "all passed\n")).verdict, Verdict::refutes);
  auto j = judge(o, completed(0, "1 FAILED\n", true));
  EXPECT_EQ(j.verdict, Verdict::inconclusive);
  EXPECT_FALSE(j.oracle_passed);
  EXPECT_NE(j.reason.find("truncated"), std::string::npos);
}

TEST(Judge, WitnessFile) {
  Oracle o;
  o.type = OracleType::file_sha256;
  o.expected_text = std::string(64, 'a');
  o.path = "out.txt";
  o.source = "differential_reference";
  o.reference = "the reference build";
  RunFacts f = completed(0);
  f.file = FileWitness{FileWitness::Kind::found, std::string(64, 'a'), {}};
  EXPECT_EQ(judge(o, f).verdict, Verdict::supports);
  f.file = FileWitness{FileWitness::Kind::found, std::string(64, 'b'), {}};
  EXPECT_EQ(judge(o, f).verdict, Verdict::refutes);
  f.file = FileWitness{FileWitness::Kind::missing, {}, {}};
  EXPECT_EQ(judge(o, f).verdict, Verdict::refutes);
  f.file = FileWitness{FileWitness::Kind::unusable, {}, "it is or passes through a symlink"};
  auto j = judge(o, f);
  EXPECT_EQ(j.verdict, Verdict::inconclusive);
  EXPECT_NE(j.reason.find("symlink"), std::string::npos);
}

}  // namespace
}  // namespace toolwarden::policy
