// Custom tool manifests (SPEC §11): what is accepted, normalised and refused, with the key.
#include "policy/tool_manifest.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <string>

namespace toolwarden::policy {
namespace {
namespace json = boost::json;

json::object minimal() {
  return json::parse(R"({
    "name": "weather",
    "description": "Looks up the weather.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    "run": ["/usr/bin/python3", "tool.py"]
  })")
      .as_object();
}

Result<ToolManifest> parse(const json::object& o) {
  return parse_tool_manifest(json::serialize(o));
}

// The reason of a refused manifest; fails the test when it was accepted.
std::string refusal(const Result<ToolManifest>& r) {
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "(accepted)";
  EXPECT_EQ(r.denial().code, ErrorCode::kDeniedArguments);
  return r.denial().reason;
}

// The reason given for the minimal manifest with the member at `path` ("/a/b", objects only)
// set to `v`.
std::string refusal_with(std::string_view path, json::value v) {
  json::object doc = minimal();
  json::object* at = &doc;
  for (;;) {
    path.remove_prefix(1);
    const auto slash = path.find('/');
    if (slash == std::string_view::npos) break;
    at = &(*at)[path.substr(0, slash)].as_object();
    path.remove_prefix(slash);
  }
  (*at)[path] = std::move(v);
  return refusal(parse(doc));
}

TEST(ToolManifest, MinimalManifestGetsDefaults) {
  auto r = parse(minimal());
  ASSERT_TRUE(r.ok()) << r.denial().reason;
  EXPECT_EQ(r->name, "weather");
  EXPECT_EQ(r->timeout_s, 15);
  EXPECT_EQ(r->run, (std::vector<std::string>{"/usr/bin/python3", "tool.py"}));
  EXPECT_EQ(r->capabilities.filesystem_write, FilesystemWrite::none);
  EXPECT_TRUE(r->capabilities.network_hosts.empty());
  EXPECT_TRUE(r->capabilities.process_spawn);
  EXPECT_TRUE(r->capabilities.secrets.empty());
  EXPECT_TRUE(r->required_env.empty());
  EXPECT_EQ(json::serialize(r->input_schema),
            R"({"type":"object","properties":{"city":{"type":"string"}}})");
}

TEST(ToolManifest, FullManifestIsParsed) {
  auto r = parse_tool_manifest(R"({
    "name": "gh_issues", "description": "Lists issues.",
    "input_schema": {"type": "object", "title": "in", "description": "d",
      "properties": {
        "repo": {"type": "string", "minLength": 1, "maxLength": 200},
        "state": {"enum": ["open", "closed"]},
        "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": 100.5},
        "labels": {"type": "array", "items": {"type": "string"}, "minItems": 0, "maxItems": 5},
        "kind": {"const": {"a": [1, 2]}}},
      "required": ["repo"], "additionalProperties": false},
    "run": ["./bin/run", "--fast", "lib/x.py", "."],
    "timeout_s": 300,
    "required_env": ["GH_HOST", "_X1"],
    "capabilities": {"filesystem_write": "workspace",
                     "network": {"hosts": ["API.GitHub.com", "*.example.org", "10.0.0.1",
                                           "[2001:DB8::1]", "::1"]},
                     "process_spawn": false, "secrets": ["GH_TOKEN"]}
  })");
  ASSERT_TRUE(r.ok()) << r.denial().reason;
  EXPECT_EQ(r->timeout_s, 300);
  EXPECT_EQ(r->required_env, (std::vector<std::string>{"GH_HOST", "_X1"}));
  EXPECT_EQ(r->capabilities.filesystem_write, FilesystemWrite::workspace);
  EXPECT_EQ(r->capabilities.network_hosts,
            (std::vector<std::string>{"api.github.com", "*.example.org", "10.0.0.1", "2001:db8::1",
                                      "::1"}));
  EXPECT_FALSE(r->capabilities.process_spawn);
  EXPECT_EQ(r->capabilities.secrets, (std::vector<std::string>{"GH_TOKEN"}));
}

TEST(ToolManifest, NetworkNoneAndToolDirAreAccepted) {
  auto o = minimal();
  o["capabilities"] = json::parse(R"({"network": "none", "filesystem_write": "tool_dir"})");
  auto r = parse(o);
  ASSERT_TRUE(r.ok()) << r.denial().reason;
  EXPECT_TRUE(r->capabilities.network_hosts.empty());
  EXPECT_EQ(r->capabilities.filesystem_write, FilesystemWrite::tool_dir);
}

TEST(ToolManifest, InvalidJsonIsRefused) {
  EXPECT_NE(refusal(parse_tool_manifest("{\"name\": ")).find("not valid JSON"), std::string::npos);
  EXPECT_NE(refusal(parse_tool_manifest("{} x")).find("not valid JSON"), std::string::npos);
  EXPECT_EQ(refusal(parse_tool_manifest("[1]")), "tool.json must be an object");
  EXPECT_NE(refusal(parse_tool_manifest(std::string(kMaxManifestBytes + 1, ' '))).find("larger"),
            std::string::npos);
}

TEST(ToolManifest, UnknownKeysAnywhereAreNamed) {
  auto o = minimal();
  o["network"] = "none";
  EXPECT_EQ(refusal(parse(o)), "network: unknown key");

  o = minimal();
  o["secrets"] = json::array{"X"};
  EXPECT_EQ(refusal(parse(o)), "secrets: unknown key (secrets go in capabilities)");

  o = minimal();
  o["capabilities"] = json::parse(R"({"process_spawn": true, "gpu": true})");
  EXPECT_EQ(refusal(parse(o)), "capabilities.gpu: unknown key");

  o = minimal();
  o["capabilities"] = json::parse(R"({"network": {"hosts": ["a.com"], "ports": [8080]}})");
  EXPECT_EQ(refusal(parse(o)), "capabilities.network.ports: unknown key");

  o = minimal();
  o["input_schema"].as_object()["properties"].as_object()["city"].as_object()["pattern"] = "x";
  EXPECT_EQ(refusal(parse(o)).substr(0, 64),
            "input_schema.properties.city.pattern: unsupported schema keyword");

  o = minimal();
  o["wéird key\n"] = 1;
  EXPECT_EQ(refusal(parse(o)), "[\"wéird key\\n\"]: unknown key");
  // Regression (fuzz_tool_manifest): DEL and C1 controls (here U+009B, an 8-bit CSI) are
  // escaped like the C0 ones, never shown raw.
  o.erase("wéird key\n");
  o["a\x7F\xC2\x9B[31m"] = 1;
  EXPECT_EQ(refusal(parse(o)), "[\"a\\u007f\\u009b[31m\"]: unknown key");
}

TEST(ToolManifest, DuplicateKeysAreRefusedWithTheirPath) {
  EXPECT_EQ(refusal(parse_tool_manifest(R"({"name":"a","name":"b"})")), "name: duplicate key");
  EXPECT_EQ(refusal(parse_tool_manifest(
                R"({"capabilities":{"network":"none","network":{"hosts":["x.com"]}}})")),
            "capabilities.network: duplicate key");
  EXPECT_EQ(refusal(parse_tool_manifest(R"({"run":[{"a":1},{"b":1,"b":2}]})")),
            "run[1].b: duplicate key");
}

TEST(ToolManifest, NonFiniteNumbersAreRefused) {
  // Boost.JSON turns 1e999 into an infinity that would serialize as invalid JSON in tools/list.
  EXPECT_EQ(refusal(parse_tool_manifest(
                R"({"input_schema":{"type":"object","properties":{"n":{"maximum":1e999}}}})")),
            "input_schema.properties.n.maximum: number out of range");
  EXPECT_EQ(refusal(parse_tool_manifest(R"({"x":[1,[2,-1e999]]})")),
            "x[1][1]: number out of range");
}

TEST(ToolManifest, RequiredKeysAreNamedWhenMissing) {
  for (const char* key : {"name", "description", "input_schema", "run"}) {
    auto o = minimal();
    o.erase(key);
    EXPECT_EQ(refusal(parse(o)), std::string(key) + ": missing");
  }
}

TEST(ToolManifest, NameRules) {
  for (const char* ok : {"a", "weather", "x_1",
                         "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl"}) {
    EXPECT_TRUE(is_valid_tool_name(ok)) << ok;
  }
  for (const char* bad :
       {"", "1a", "_a", "A", "a-b", "a.b", "local_read", "local_x", "probe_run", "probes",
        "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklm"}) {
    EXPECT_FALSE(is_valid_tool_name(bad)) << bad;
  }
  EXPECT_EQ(refusal_with("/name", "local_read").substr(0, 6), "name: ");
  EXPECT_EQ(refusal_with("/name", 3), "name: must be a string");
}

TEST(ToolManifest, DescriptionRules) {
  EXPECT_EQ(refusal_with("/description", " \n"), "description: must not be empty");
  EXPECT_TRUE(parse_tool_manifest(json::serialize(json::value(minimal()))).ok());
  std::string at_limit;
  for (int i = 0; i < 1024; ++i) at_limit += "é";  // 1,024 characters, 2,048 bytes
  auto o = minimal();
  o["description"] = at_limit;
  EXPECT_TRUE(parse(o).ok());
  EXPECT_EQ(refusal_with("/description", json::string(at_limit + "x")),
            "description: longer than 1024 characters");
}

TEST(ToolManifest, InputSchemaRules) {
  EXPECT_EQ(refusal_with("/input_schema", true), "input_schema: must be an object schema");
  EXPECT_EQ(refusal_with("/input_schema", json::parse(R"({"type":"string"})")),
            "input_schema.type: the input schema must have \"type\": \"object\"");
  EXPECT_EQ(refusal_with("/input_schema", json::parse(R"({"properties":{}})")),
            "input_schema.type: the input schema must have \"type\": \"object\"");
  EXPECT_EQ(refusal_with("/input_schema/properties/city/type", "str"),
            "input_schema.properties.city.type: must be a JSON Schema type name or a non-empty "
            "array of them");
  EXPECT_EQ(refusal_with("/input_schema/properties/city/type", json::parse(R"(["string",7])")),
            "input_schema.properties.city.type[1]: not a JSON Schema type");
  EXPECT_EQ(refusal_with("/input_schema/properties/city", json::parse(R"({"minLength":-1})")),
            "input_schema.properties.city.minLength: must be a non-negative integer");
  EXPECT_EQ(refusal_with("/input_schema/properties/city", json::parse(R"({"maxItems":1.5})")),
            "input_schema.properties.city.maxItems: must be a non-negative integer");
  EXPECT_EQ(refusal_with("/input_schema/properties/city", json::parse(R"({"minimum":"1"})")),
            "input_schema.properties.city.minimum: must be a number");
  EXPECT_EQ(refusal_with("/input_schema/properties/city", json::parse(R"({"enum":[]})")),
            "input_schema.properties.city.enum: must be a non-empty array");
  EXPECT_EQ(refusal_with("/input_schema/properties/city", json::parse(R"({"items":[{}]})")),
            "input_schema.properties.city.items: a schema must be an object or a bool");
  EXPECT_EQ(refusal_with("/input_schema/properties/city", 5),
            "input_schema.properties.city: a schema must be an object or a bool");
  EXPECT_EQ(refusal_with("/input_schema/required", json::parse(R"(["a","a"])")),
            "input_schema.required[1]: repeated");
  EXPECT_EQ(refusal_with("/input_schema/properties/city",
                         json::parse(R"({"additionalProperties":{"$ref":"#"}})")),
            "input_schema.properties.city.additionalProperties.$ref: unsupported schema keyword "
            "(allowed: type, properties, required, additionalProperties, enum, const, minLength, "
            "maxLength, minimum, maximum, minItems, maxItems, items, description, title)");
  // Boolean sub-schemas are part of JSON Schema and of the validator.
  auto o = minimal();
  o["input_schema"].as_object()["additionalProperties"] = false;
  o["input_schema"].as_object()["properties"].as_object()["any"] = true;
  EXPECT_TRUE(parse(o).ok());
}

TEST(ToolManifest, SchemaDepthIsBounded) {
  // depth 1 is the root; each "items" adds one.
  auto nested = [](int levels) {
    json::value s = json::object{{"type", "string"}};
    for (int i = 1; i < levels; ++i) s = json::object{{"type", "array"}, {"items", s}};
    json::object root{{"type", "object"}, {"properties", json::object{{"p", s}}}};
    auto o = minimal();
    o["input_schema"] = root;
    return parse(o);
  };
  EXPECT_TRUE(nested(15).ok());  // root + 15 = 16
  std::string why = refusal(nested(16));
  EXPECT_NE(why.find("schemas nested deeper than 16"), std::string::npos) << why;
  EXPECT_EQ(why.substr(0, 26), "input_schema.properties.p.");
}

TEST(ToolManifest, RunRules) {
  EXPECT_EQ(refusal_with("/run", json::array{}), "run: must be a non-empty array of strings");
  EXPECT_EQ(refusal_with("/run", "tool.py"), "run: must be a non-empty array of strings");
  EXPECT_EQ(refusal_with("/run", json::array{"/bin/sh", 1}), "run[1]: must be a string");
  EXPECT_EQ(refusal_with("/run", json::array{"-c"}), "run[0]: the program cannot be an option");
  EXPECT_EQ(refusal_with("/run", json::array{"."}), "run[0]: names the tool folder, not a program");
  for (const char* bad : {"../x.py", "a/../b", "a//b", ".//", "a/./b", "dir/", ""}) {
    auto why = refusal_with("/run", json::array{"/usr/bin/python3", bad});
    EXPECT_EQ(why.substr(0, 36), "run[1]: a relative entry is a path i") << bad;
  }
  EXPECT_EQ(refusal_with("/run", json::array{"/bin/sh", json::string("a\0b", 3)}),
            "run[1]: contains a NUL character");
  EXPECT_EQ(refusal_with("/run", json::array{"/bin/sh", std::string(4097, 'a')}),
            "run[1]: longer than 4096 bytes");
  auto o = minimal();
  o["run"] = json::array{"/bin/sh", std::string(4096, 'a')};
  EXPECT_TRUE(parse(o).ok());
}

TEST(ToolManifest, RunEntriesResolveIntoTheToolFolder) {
  EXPECT_TRUE(is_relative_run_entry("tool.py"));
  EXPECT_TRUE(is_relative_run_entry("./tool.py"));
  EXPECT_FALSE(is_relative_run_entry("/usr/bin/python3"));
  EXPECT_FALSE(is_relative_run_entry("-u"));
  EXPECT_FALSE(is_relative_run_entry(""));
  EXPECT_EQ(run_entry_path("tool.py"), "tool.py");
  EXPECT_EQ(run_entry_path("./bin/run"), "bin/run");
  EXPECT_EQ(run_entry_path("."), "");
  EXPECT_EQ(run_entry_path("-m"), std::nullopt);
  EXPECT_EQ(run_entry_path("/abs"), std::nullopt);
  EXPECT_EQ(run_entry_path("../up"), std::nullopt);
  EXPECT_EQ(run_entry_path("././x"), std::nullopt);
  EXPECT_EQ(resolve_run({"/usr/bin/python3", "-u", "tool.py", "./lib/a.py", ".", "/etc/x"},
                        "/run/tw/seal-1/"),
            (std::vector<std::string>{"/usr/bin/python3", "-u", "/run/tw/seal-1/tool.py",
                                      "/run/tw/seal-1/lib/a.py", "/run/tw/seal-1", "/etc/x"}));
}

TEST(ToolManifest, TimeoutRules) {
  for (auto bad : {json::value(0), json::value(301), json::value(-5), json::value(1.5),
                   json::value("15"), json::value(15.0), json::value(18446744073709551615ull)}) {
    EXPECT_EQ(refusal_with("/timeout_s", bad), "timeout_s: must be an integer from 1 to 300")
        << json::serialize(bad);
  }
  auto o = minimal();
  o["timeout_s"] = 1;
  EXPECT_EQ(parse(o)->timeout_s, 1);
}

TEST(ToolManifest, EnvNameRules) {
  std::string why;
  for (const char* ok : {"GH_TOKEN", "_X", "A1", "PATHS", "HOMEDIR"}) {
    EXPECT_TRUE(is_allowed_env_name(ok, &why)) << ok;
  }
  for (const char* bad : {"", "1A", "gh_token", "A-B", "A B", "A=B"}) {
    EXPECT_FALSE(is_allowed_env_name(bad, &why)) << bad;
    EXPECT_EQ(why, "not an environment variable name ([A-Z_][A-Z0-9_]*)");
  }
  for (const char* bad : {"PATH", "HOME", "TMPDIR", "LANG", "HTTPS_PROXY"}) {
    EXPECT_FALSE(is_allowed_env_name(bad, &why)) << bad;
    EXPECT_EQ(why, "set by the sandbox itself");
  }
  EXPECT_FALSE(is_allowed_env_name("TOOLWARDEN_JOB_ID", &why));
  EXPECT_EQ(why, "the TOOLWARDEN_ prefix is reserved");
  for (const char* bad :
       {"LD_PRELOAD", "LD_", "BASH_FUNC_X%%", "BASH_FUNC_X", "PYTHONPATH", "NODE_OPTIONS"}) {
    EXPECT_FALSE(is_allowed_env_name(bad, &why)) << bad;
  }

  EXPECT_EQ(refusal_with("/required_env", json::array{"A", "LD_PRELOAD"}).substr(0, 17),
            "required_env[1]: ");
  EXPECT_EQ(refusal_with("/required_env", json::array{"A", "A"}), "required_env[1]: repeated");
  EXPECT_EQ(refusal_with("/required_env", "A"),
            "required_env: must be an array of environment variable names");
  json::array many;
  for (int i = 0; i < 65; ++i) many.push_back(json::string("V" + std::to_string(i)));
  EXPECT_EQ(refusal_with("/required_env", many), "required_env: more than 64 names");
  many.pop_back();
  auto o = minimal();
  o["required_env"] = many;
  EXPECT_TRUE(parse(o).ok());

  o = minimal();
  o["capabilities"] = json::parse(R"({"secrets": ["TOKEN", "HOME"]})");
  EXPECT_EQ(refusal(parse(o)), "capabilities.secrets[1]: set by the sandbox itself");
  o["required_env"] = json::array{"TOKEN"};
  o["capabilities"] = json::parse(R"({"secrets": ["TOKEN"]})");
  EXPECT_EQ(refusal(parse(o)), "capabilities.secrets[0]: also listed in required_env");
}

TEST(ToolManifest, CapabilityValueRules) {
  auto caps = [](const char* text) {
    auto o = minimal();
    o["capabilities"] = json::parse(text);
    return refusal(parse(o));
  };
  EXPECT_EQ(caps(R"({"filesystem_write": "all"})"),
            "capabilities.filesystem_write: must be \"none\", \"tool_dir\" or \"workspace\"");
  EXPECT_EQ(caps(R"({"process_spawn": "no"})"),
            "capabilities.process_spawn: must be true or false");
  EXPECT_EQ(caps(R"({"network": "any"})"),
            "capabilities.network: must be \"none\" or {\"hosts\": [...]}");
  EXPECT_EQ(caps(R"({"network": {}})"), "capabilities.network.hosts: missing");
  EXPECT_EQ(caps(R"({"network": {"hosts": []}})"),
            "capabilities.network.hosts: must be an array of 1 to 64 hosts");
  EXPECT_EQ(caps(R"({"network": {"hosts": ["a.com", "b.com", "bad_host"]}})"),
            "capabilities.network.hosts[2]: not a host name (labels are letters, digits and '-')");
  EXPECT_EQ(caps(R"({"network": {"hosts": ["A.com", "a.COM"]}})"),
            "capabilities.network.hosts[1]: repeated");
  EXPECT_EQ(caps(R"({"network": {"hosts": ["api.example.com:8443"]}})"),
            "capabilities.network.hosts[0]: a port is not allowed (the proxy connects to ports "
            "443 and 80)");
  EXPECT_EQ(caps("[]"), "capabilities: must be an object");
  json::array hosts;
  for (int i = 0; i < 65; ++i) hosts.push_back(json::string("h" + std::to_string(i) + ".com"));
  EXPECT_EQ(
      caps(json::serialize(json::object{{"network", json::object{{"hosts", hosts}}}}).c_str()),
      "capabilities.network.hosts: must be an array of 1 to 64 hosts");
}

TEST(ToolManifest, NetworkHostNormalisation) {
  std::string why;
  auto norm = [&](std::string_view h) { return normalize_network_host(h, &why); };
  EXPECT_EQ(norm("Api.Example.COM"), "api.example.com");
  EXPECT_EQ(norm("localhost"), "localhost");
  EXPECT_EQ(norm("xn--bcher-kva.example"), "xn--bcher-kva.example");
  EXPECT_EQ(norm("*.Example.org"), "*.example.org");
  EXPECT_EQ(norm("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(norm("169.254.169.254"), "169.254.169.254");
  EXPECT_EQ(norm("[::1]"), "::1");
  EXPECT_EQ(norm("2001:DB8:0:0::1"), "2001:db8::1");
  EXPECT_EQ(norm("::ffff:10.0.0.1"), "::ffff:10.0.0.1");
  std::string label63(63, 'a');
  std::string name253 = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');
  ASSERT_EQ(name253.size(), 253u);
  EXPECT_EQ(norm(name253), name253);

  for (const char* bad :
       {"",          "*",          "*.com",      "a.*.com",    "foo*.com",     "-a.com",
        "a-.com",    "a..com",     ".a.com",     "a.com.",     "a_b.com",      "bücher.de",
        "a.com/x",   "user@a.com", "127.1",      "2130706433", "1.2.3.4.5",    "010.0.0.1",
        "256.1.1.1", "1.2.3",      "[::1",       "[::1]x",     "fe80::1%eth0", "::g",
        "a.com:443", "[::1]:443",  "10.0.0.1:80"}) {
    EXPECT_EQ(norm(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(norm(name253 + "c"), std::nullopt);
  EXPECT_EQ(norm(std::string(64, 'a') + ".com"), std::nullopt);
  norm("[::1]:443");
  EXPECT_EQ(why, "a port is not allowed (the proxy connects to ports 443 and 80)");
  norm("10.0.0.1:80");
  EXPECT_EQ(why, "a port is not allowed (the proxy connects to ports 443 and 80)");
  norm("*.com");
  EXPECT_EQ(why, "a wildcard needs a name of at least two labels (\"*.example.com\")");
}

TEST(ToolManifest, MissingEnvHasItsSpecSpelling) {
  EXPECT_EQ(to_string(ErrorCode::kMissingEnv), "MISSING_ENV");
}

}  // namespace
}  // namespace toolwarden::policy
