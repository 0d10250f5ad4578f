// Fuzzes custom-tool manifests (SPEC §11): `tool.json` is repository content, untrusted until
// the user trusts it, and parse_tool_manifest is the only thing between it and a sandbox
// profile. Input: the text of one tool.json.
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cstddef>
#include <string>
#include <string_view>

#include "policy/network_host.hpp"
#include "policy/path_rules.hpp"
#include "policy/tool_manifest.hpp"
#include "protocol/json_schema.hpp"
#include "tests/fuzz/fuzz_check.hpp"
#include "tests/fuzz/json_near.hpp"

namespace {
namespace json = boost::json;
namespace pol = toolwarden::policy;
using toolwarden::fuzz::json_near;

constexpr std::string_view kToolDir = "/var/lib/toolwarden/sealed/t1";

std::string show(std::string_view s) { return json::serialize(json::string(s.substr(0, 300))); }

// A refusal's reason ends up in `tools list` and in answers: it must not carry what a hostile
// manifest could use to forge lines or terminal escapes: no C0 control, DEL or C1 control
// (U+0080-U+009F, UTF-8 C2 80 to C2 9F).
void check_reason(const std::string& reason) {
  FUZZ_CHECK(!reason.empty(), "empty reason");
  FUZZ_CHECK(pol::is_valid_utf8(reason), show(reason));
  for (std::size_t i = 0; i < reason.size(); ++i) {
    const auto c = static_cast<unsigned char>(reason[i]);
    const auto next = i + 1 < reason.size() ? static_cast<unsigned char>(reason[i + 1]) : 0;
    FUZZ_CHECK(c >= 0x20 && c != 0x7f && !(c == 0xC2 && next >= 0x80 && next <= 0x9F),
               "a control character in " + show(reason));
  }
}

std::size_t schema_depth(const json::value& schema) {
  if (!schema.is_object()) return 1;
  std::size_t deepest = 0;
  for (const auto& kv : schema.get_object()) {
    if (kv.key() == "properties" && kv.value().is_object()) {
      for (const auto& p : kv.value().get_object())
        deepest = std::max(deepest, schema_depth(p.value()));
    } else if (kv.key() == "items" || kv.key() == "additionalProperties") {
      deepest = std::max(deepest, schema_depth(kv.value()));
    }
  }
  return 1 + deepest;
}

bool has_bad_segment(std::string_view path) {
  std::size_t start = 0;
  for (;;) {
    const auto slash = path.find('/', start);
    const auto seg = path.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (seg.empty() || seg == "." || seg == "..") return true;
    if (slash == std::string_view::npos) return false;
    start = slash + 1;
  }
}

// What an accepted manifest promises to the code that runs the tool.
void check_manifest(const pol::ToolManifest& m) {
  FUZZ_CHECK(pol::is_valid_tool_name(m.name), show(m.name));
  FUZZ_CHECK(m.name.rfind("local_", 0) != 0 && m.name.rfind("probe_", 0) != 0, show(m.name));
  FUZZ_CHECK(m.description.find_first_not_of(" \t\r\n") != std::string::npos, "blank");
  FUZZ_CHECK(m.timeout_s >= 1 && m.timeout_s <= pol::kMaxToolTimeoutS, std::to_string(m.timeout_s));

  const json::value schema(m.input_schema);
  FUZZ_CHECK(m.input_schema.contains("type") && m.input_schema.at("type") == "object",
             json::serialize(schema));
  FUZZ_CHECK(schema_depth(schema) <= pol::kMaxSchemaDepth, json::serialize(schema));
  // The validator takes every accepted schema: arguments of the wrong shape are refused.
  FUZZ_CHECK(toolwarden::protocol::validate(schema, json::value(42)).has_value(),
             json::serialize(schema));

  // The program and its relative arguments stay inside the sealed copy of the tool's folder.
  FUZZ_CHECK(!m.run.empty(), "no program");
  const auto argv = pol::resolve_run(m.run, kToolDir);
  FUZZ_CHECK(argv.size() == m.run.size(), "argv");
  FUZZ_CHECK(!argv.front().empty() && argv.front().front() == '/', show(argv.front()));
  for (std::size_t i = 0; i < m.run.size(); ++i) {
    FUZZ_CHECK(m.run[i].find('\0') == std::string::npos, show(m.run[i]));
    if (!pol::is_relative_run_entry(m.run[i])) {
      FUZZ_CHECK(argv[i] == m.run[i], show(m.run[i]));
      continue;
    }
    const std::string prefix = std::string(kToolDir) + "/";
    FUZZ_CHECK(argv[i] == kToolDir || argv[i].rfind(prefix, 0) == 0, show(argv[i]));
    if (argv[i] != kToolDir) {
      FUZZ_CHECK(!has_bad_segment(std::string_view(argv[i]).substr(prefix.size())),
                 "escapes the tool folder: " + show(argv[i]));
    }
    if (i == 0) FUZZ_CHECK(argv[i] != kToolDir, "the folder as the program");
  }

  // Environment: names only, none the sandbox sets or refuses, no secret also required.
  for (const auto* names : {&m.required_env, &m.capabilities.secrets}) {
    for (const auto& n : *names) {
      std::string why;
      FUZZ_CHECK(pol::is_allowed_env_name(n, &why), show(n));
      FUZZ_CHECK(n.rfind("LD_", 0) != 0 && n.rfind("TOOLWARDEN_", 0) != 0 && n != "PATH" &&
                     n != "PYTHONPATH" && n != "NODE_OPTIONS" && n.rfind("BASH_FUNC_", 0) != 0,
                 "injection variable passed: " + show(n));
    }
  }
  for (const auto& s : m.capabilities.secrets) {
    FUZZ_CHECK(std::find(m.required_env.begin(), m.required_env.end(), s) == m.required_env.end(),
               show(s));
  }
  // Hosts are stored normalised: normalising again changes nothing.
  for (const auto& h : m.capabilities.network_hosts) {
    std::string why;
    auto again = pol::normalize_network_host(h, &why);
    FUZZ_CHECK(again && *again == h, show(h) + " " + why);
    FUZZ_CHECK(h.find(':') == std::string::npos || h.front() == '[' ||
                   std::count(h.begin(), h.end(), ':') >= 2,
               "a port in a host: " + show(h));
  }
}

// The manifest written out again from what was parsed reads back as the same manifest (its
// schema's doubles within json_near's few ulps: Boost.JSON 1.81 rounds some long numbers).
json::object rewrite(const pol::ToolManifest& m) {
  json::array run, env, secrets, hosts;
  for (const auto& e : m.run) run.emplace_back(e);
  for (const auto& e : m.required_env) env.emplace_back(e);
  for (const auto& e : m.capabilities.secrets) secrets.emplace_back(e);
  for (const auto& e : m.capabilities.network_hosts) hosts.emplace_back(e);
  json::object caps{{"filesystem_write", pol::to_string(m.capabilities.filesystem_write)},
                    {"process_spawn", m.capabilities.process_spawn},
                    {"secrets", std::move(secrets)}};
  if (hosts.empty()) {
    caps["network"] = "none";
  } else {
    caps["network"] = json::object{{"hosts", std::move(hosts)}};
  }
  return json::object{{"name", m.name},
                      {"description", m.description},
                      {"input_schema", m.input_schema},
                      {"run", std::move(run)},
                      {"timeout_s", m.timeout_s},
                      {"required_env", std::move(env)},
                      {"capabilities", std::move(caps)}};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = toolwarden::fuzz::as_text(data, size);
  auto parsed = pol::parse_tool_manifest(text);
  if (!parsed) {
    FUZZ_CHECK(parsed.denial().code == pol::ErrorCode::kDeniedArguments, parsed.denial().reason);
    check_reason(parsed.denial().reason);
    return 0;
  }
  const auto& m = parsed.value();
  check_manifest(m);

  const std::string again_text = json::serialize(rewrite(m));
  auto again = pol::parse_tool_manifest(again_text);
  FUZZ_CHECK(again, again_text + "\n  " + (again ? "" : again.denial().reason));
  const auto& a = again.value();
  FUZZ_CHECK(a.name == m.name && a.description == m.description &&
                 json_near(a.input_schema, m.input_schema) && a.run == m.run &&
                 a.timeout_s == m.timeout_s && a.required_env == m.required_env &&
                 a.capabilities.filesystem_write == m.capabilities.filesystem_write &&
                 a.capabilities.network_hosts == m.capabilities.network_hosts &&
                 a.capabilities.process_spawn == m.capabilities.process_spawn &&
                 a.capabilities.secrets == m.capabilities.secrets,
             "the rewritten manifest differs: " + again_text);
  return 0;
}
