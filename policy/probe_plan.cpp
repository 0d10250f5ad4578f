#include "policy/probe_plan.hpp"

#include <algorithm>
#include <boost/json/array.hpp>
#include <cctype>

namespace toolwarden::policy {
namespace json = boost::json;

namespace {

constexpr std::string_view kFormat = "toolwarden-probe-plan-v1";

// A refusal on the way through the params; turned into a Denial at the top.
struct Bad {
  Denial denial;
};

[[noreturn]] void bad(ErrorCode code, std::string reason) {
  throw Bad{deny(code, std::move(reason))};
}
[[noreturn]] void bad_args(std::string reason) {
  bad(ErrorCode::kDeniedArguments, std::move(reason));
}

std::string text_of(const json::value& v, const std::string& key, std::size_t max,
                    bool allow_empty = false) {
  if (!v.is_string()) bad_args(key + " must be a string");
  const auto& s = v.get_string();
  if ((!allow_empty && s.empty()) || s.size() > max)
    bad_args(key + " must be " + (allow_empty ? "" : "1 to ") + std::to_string(max) + " bytes");
  if (!is_valid_utf8(s) || s.find('\0') != json::string::npos)
    bad_args(key + " must be UTF-8 text without NUL");
  return std::string(s);
}

Verdict verdict_of(const json::value& v, const std::string& key) {
  if (v.is_string()) {
    if (v.get_string() == "supports") return Verdict::supports;
    if (v.get_string() == "refutes") return Verdict::refutes;
  }
  bad_args(key + " must be \"supports\" or \"refutes\"");
}

bool is_hex_digest(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool valid_source(std::string_view s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// A scratch- or snapshot-relative file path: SPEC §7 syntax, nothing sensitive.
std::string file_path(std::string_view text, const std::string& key,
                      const SensitiveNames& sensitive) {
  auto parsed = parse_request_path(text, false);
  if (!parsed) bad(ErrorCode::kDeniedPath, key + ": " + parsed.denial().reason);
  if (sensitive.first_match(parsed.value()))
    bad(ErrorCode::kDeniedPath, key + ": names a sensitive file or directory");
  return parsed->text();
}

Oracle parse_oracle(const json::value& v, const SensitiveNames& sensitive) {
  if (!v.is_object()) bad_args("oracle must be an object");
  const auto& o = v.get_object();
  Oracle out;
  const json::value* expected = nullptr;
  bool has_type = false, has_source = false;
  for (const auto& kv : o) {
    const std::string key(kv.key());
    const std::string name = "oracle." + key;
    if (key == "type") {
      const auto* t = kv.value().if_string();
      if (t != nullptr && *t == "exit_code") {
        out.type = OracleType::exit_code;
      } else if (t != nullptr && *t == "stdout_contains") {
        out.type = OracleType::stdout_contains;
      } else if (t != nullptr && *t == "file_sha256") {
        out.type = OracleType::file_sha256;
      } else {
        bad_args(name + " must be exit_code, stdout_contains or file_sha256");
      }
      has_type = true;
    } else if (key == "expected") {
      expected = &kv.value();
    } else if (key == "path") {
      if (!kv.value().is_string()) bad_args(name + " must be a string");
      out.path = file_path(kv.value().get_string(), name, sensitive);
    } else if (key == "source") {
      out.source = text_of(kv.value(), name, 64);
      if (!valid_source(out.source)) bad_args(name + " must be a word of a-z, 0-9 and _");
      has_source = true;
    } else if (key == "reference") {
      out.reference = text_of(kv.value(), name, kMaxReferenceBytes);
    } else if (key == "pass_verdict") {
      out.pass_verdict = verdict_of(kv.value(), name);
    } else if (key == "fail_verdict") {
      out.fail_verdict = verdict_of(kv.value(), name);
    } else if (key == "independent") {
      // Written into stored plans for readers; always derived from the source.
    } else {
      bad_args("unknown key \"" + name + "\"");
    }
  }
  if (!has_type) bad_args("oracle.type is required");
  if (!has_source) bad_args("oracle.source is required");
  if (expected == nullptr) bad_args("oracle.expected is required");
  switch (out.type) {
    case OracleType::exit_code:
      if (!expected->is_int64() || expected->get_int64() < 0 || expected->get_int64() > 255)
        bad_args("oracle.expected must be an exit status from 0 to 255");
      out.expected_exit = static_cast<int>(expected->get_int64());
      break;
    case OracleType::stdout_contains:
      out.expected_text = text_of(*expected, "oracle.expected", kMaxExpectedBytes);
      break;
    case OracleType::file_sha256: {
      std::string d = text_of(*expected, "oracle.expected", 64);
      std::transform(d.begin(), d.end(), d.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (!is_hex_digest(d)) bad_args("oracle.expected must be a SHA-256 digest (64 hex digits)");
      out.expected_text = std::move(d);
      break;
    }
  }
  if (out.type == OracleType::file_sha256 && out.path.empty())
    bad_args("oracle.path is required for file_sha256 (a file in the scratch directory)");
  if (out.type != OracleType::file_sha256 && !out.path.empty())
    bad_args("oracle.path is only for file_sha256");
  if (out.independent() && out.reference.empty()) {
    bad_args("oracle.reference is required for the independent source \"" + out.source +
             "\" (say where the expectation comes from)");
  }
  // Equal verdicts (one given equal to the other's default, say) would let the oracle decide
  // nothing.
  if (out.pass_verdict == out.fail_verdict)
    bad_args("oracle.pass_verdict and oracle.fail_verdict must differ");
  return out;
}

std::map<std::string, std::string> parse_overlay(const json::value& v, const std::string& key,
                                                 const SensitiveNames& sensitive,
                                                 std::size_t max_file_bytes, std::size_t* total) {
  if (v.is_null()) return {};
  if (!v.is_object()) bad_args(key + " must be an object of path → content");
  const auto& o = v.get_object();
  if (o.size() > kMaxOverlayFiles)
    bad_args(key + " holds more than " + std::to_string(kMaxOverlayFiles) + " files");
  std::map<std::string, std::string> out;
  for (const auto& kv : o) {
    const std::string path =
        file_path(kv.key(), key + " path \"" + std::string(kv.key()) + "\"", sensitive);
    if (!kv.value().is_string()) bad_args(key + "[\"" + path + "\"] must be a string");
    const auto& content = kv.value().get_string();
    if (content.size() > max_file_bytes) {
      bad(ErrorCode::kDeniedSize,
          key + "[\"" + path + "\"] is larger than " + std::to_string(max_file_bytes) + " bytes");
    }
    *total += content.size();
    if (*total > kMaxOverlayBytes) {
      bad(ErrorCode::kDeniedSize,
          "fixture and intervention hold more than " + std::to_string(kMaxOverlayBytes) + " bytes");
    }
    if (!out.emplace(path, std::string(content)).second)
      bad_args(key + " names \"" + path + "\" twice");
  }
  // "a" and "a/b" cannot both be files. Sorted order puts "a" right before its "a/..." range.
  for (auto it = out.begin(); it != out.end(); ++it) {
    auto next = std::next(it);
    const std::string dir = it->first + "/";
    for (; next != out.end() && next->first.compare(0, it->first.size(), it->first) == 0; ++next) {
      if (next->first.rfind(dir, 0) == 0)
        bad_args(key + " names both \"" + it->first + "\" and \"" + next->first + "\"");
    }
  }
  return out;
}

json::object overlay_json(const std::map<std::string, std::string>& files) {
  json::object o;
  for (const auto& [p, c] : files) o[p] = c;
  return o;
}

ProbePlan parse_plan(const json::object& params, const SensitiveNames& sensitive,
                     std::size_t max_file_bytes, bool snapshot_optional, bool stored) {
  ProbePlan plan;
  bool has_hypothesis = false, has_command = false, has_wd = false, has_oracle = false,
       has_policy = false;
  std::size_t overlay_total = 0;
  for (const auto& kv : params) {
    const std::string key(kv.key());
    const auto& v = kv.value();
    if (key == "snapshot_id") {
      plan.snapshot_id = text_of(v, key, kMaxIdBytes);
    } else if (key == "hypothesis") {
      plan.hypothesis = text_of(v, key, kMaxHypothesisBytes);
      has_hypothesis = true;
    } else if (key == "command") {
      if (!v.is_array() || v.get_array().empty() || v.get_array().size() > kMaxCommandArgs) {
        bad_args("command must be an array of 1 to " + std::to_string(kMaxCommandArgs) +
                 " strings");
      }
      std::size_t bytes = 0;
      for (const auto& a : v.get_array()) {
        plan.command.push_back(text_of(a, "command[]", kMaxCommandBytes, true));
        bytes += plan.command.back().size();
      }
      if (bytes > kMaxCommandBytes)
        bad_args("command is longer than " + std::to_string(kMaxCommandBytes) + " bytes");
      if (plan.command.front().empty()) bad_args("command[0] must name an executable");
      has_command = true;
    } else if (key == "working_directory") {
      if (!v.is_string()) bad_args("working_directory must be a string");
      auto wd = parse_request_path(v.get_string(), true);
      if (!wd) bad(ErrorCode::kDeniedPath, "working_directory: " + wd.denial().reason);
      if (sensitive.first_match(wd.value()))
        bad(ErrorCode::kDeniedPath, "working_directory: names a sensitive directory");
      plan.working_directory = wd->text();
      has_wd = true;
    } else if (key == "oracle") {
      plan.oracle = parse_oracle(v, sensitive);
      has_oracle = true;
    } else if (key == "fixture") {
      plan.fixture = parse_overlay(v, key, sensitive, max_file_bytes, &overlay_total);
    } else if (key == "intervention") {
      plan.intervention = parse_overlay(v, key, sensitive, max_file_bytes, &overlay_total);
    } else if (key == "policy_id") {
      plan.policy_id = text_of(v, key, 64);
      has_policy = true;
    } else if (key == "claim_id") {
      if (!v.is_null()) plan.claim_id = text_of(v, key, kMaxIdBytes);
    } else if (stored && key == "format") {
      if (!v.is_string() || v.get_string() != kFormat) bad_args("not a stored probe plan");
    } else if (stored && (key == "snapshot_sha256" || key == "policy_sha256")) {
      (key == "snapshot_sha256" ? plan.snapshot_sha256 : plan.policy_sha256) = text_of(v, key, 64);
    } else if (stored && key == "executable") {
      const auto* o = v.if_object();
      const auto* p = o ? o->if_contains("path") : nullptr;
      const auto* d = o ? o->if_contains("sha256") : nullptr;
      if (p == nullptr || d == nullptr) bad_args("executable must name path and sha256");
      plan.executable_path = text_of(*p, "executable.path", 4096);
      plan.executable_sha256 = text_of(*d, "executable.sha256", 64);
    } else {
      bad_args("unknown key \"" + key + "\"");
    }
  }
  if (plan.snapshot_id.empty() && !snapshot_optional) bad_args("snapshot_id is required");
  if (!has_hypothesis) bad_args("hypothesis is required (the claim this probe checks)");
  if (!has_command) bad_args("command is required");
  if (!has_wd) bad_args("working_directory is required (\".\" for the snapshot's root)");
  if (!has_oracle) bad_args("oracle is required");
  if (!has_policy) bad_args("policy_id is required");
  return plan;
}

}  // namespace

std::string_view to_string(Verdict v) {
  switch (v) {
    case Verdict::supports:
      return "supports";
    case Verdict::refutes:
      return "refutes";
    case Verdict::inconclusive:
      return "inconclusive";
  }
  return "inconclusive";
}

std::string_view to_string(OracleType t) {
  switch (t) {
    case OracleType::exit_code:
      return "exit_code";
    case OracleType::stdout_contains:
      return "stdout_contains";
    case OracleType::file_sha256:
      return "file_sha256";
  }
  return "exit_code";
}

bool Oracle::independent() const {
  return std::any_of(std::begin(kIndependentSources), std::end(kIndependentSources),
                     [&](std::string_view s) { return s == source; });
}

json::object ProbePlan::to_json() const {
  json::object o;
  o["format"] = kFormat;
  o["snapshot_id"] = snapshot_id;
  o["snapshot_sha256"] = snapshot_sha256;
  o["hypothesis"] = hypothesis;
  o["claim_id"] = claim_id ? json::value(*claim_id) : json::value(nullptr);
  json::array cmd;
  for (const auto& a : command) cmd.emplace_back(a);
  o["command"] = std::move(cmd);
  o["working_directory"] = working_directory;
  json::object orc;
  orc["type"] = to_string(oracle.type);
  if (oracle.type == OracleType::exit_code) {
    orc["expected"] = oracle.expected_exit;
  } else {
    orc["expected"] = oracle.expected_text;
  }
  if (!oracle.path.empty()) orc["path"] = oracle.path;
  orc["source"] = oracle.source;
  if (!oracle.reference.empty()) orc["reference"] = oracle.reference;
  orc["independent"] = oracle.independent();
  orc["pass_verdict"] = to_string(oracle.pass_verdict);
  orc["fail_verdict"] = to_string(oracle.fail_verdict);
  o["oracle"] = std::move(orc);
  o["fixture"] = overlay_json(fixture);
  o["intervention"] = overlay_json(intervention);
  o["policy_id"] = policy_id;
  o["policy_sha256"] = policy_sha256;
  o["executable"] = json::object{{"path", executable_path}, {"sha256", executable_sha256}};
  return o;
}

Result<ProbePlan> parse_probe_plan(const json::object& params, const SensitiveNames& sensitive,
                                   std::size_t max_file_bytes, bool snapshot_optional) {
  try {
    return parse_plan(params, sensitive, max_file_bytes, snapshot_optional, false);
  } catch (const Bad& b) {
    return b.denial;
  }
}

std::optional<ProbePlan> plan_from_json(const json::object& stored,
                                        const SensitiveNames& sensitive) {
  try {
    // Sizes were checked when the plan was made; a later, smaller max_file_bytes must not make
    // a stored plan unreadable.
    return parse_plan(stored, sensitive, kMaxOverlayBytes, false, true);
  } catch (const Bad&) {
    return std::nullopt;
  }
}

Judgement judge(const Oracle& oracle, const RunFacts& run) {
  Judgement j;
  if (run.state != "completed") {
    j.reason = run.state == "output_limit"
                   ? "the output exceeded its budget and was truncated; a truncated witness never "
                     "passes"
                   : "the run ended with state " + run.state;
    return j;
  }
  switch (oracle.type) {
    case OracleType::exit_code:
      j.observed["exit_code"] = run.exit_code;
      j.oracle_passed = run.exit_code == oracle.expected_exit;
      break;
    case OracleType::stdout_contains:
      if (run.truncated) {
        j.reason = "stdout was truncated; a truncated witness never passes";
        return j;
      }
      j.oracle_passed = run.stdout_data.find(oracle.expected_text) != std::string_view::npos;
      j.observed["found"] = *j.oracle_passed;
      break;
    case OracleType::file_sha256:
      if (!run.file || run.file->kind == FileWitness::Kind::unusable) {
        j.reason = "the witness file cannot be trusted: " +
                   (run.file ? run.file->reason : std::string("it was not examined"));
        j.observed["file"] = "unusable";
        return j;
      }
      if (run.file->kind == FileWitness::Kind::missing) {
        j.observed["file"] = "missing";
        j.oracle_passed = false;
      } else {
        j.observed["file"] = "found";
        j.observed["sha256"] = run.file->sha256;
        j.oracle_passed = run.file->sha256 == oracle.expected_text;
      }
      break;
  }
  const bool passed = *j.oracle_passed;
  if (!oracle.independent()) {
    j.reason = "the oracle's source \"" + oracle.source +
               "\" is not independent of the model, so the run cannot decide the claim";
    return j;
  }
  j.verdict = passed ? oracle.pass_verdict : oracle.fail_verdict;
  j.reason = passed ? "the oracle passed" : "the oracle failed";
  return j;
}

}  // namespace toolwarden::policy
