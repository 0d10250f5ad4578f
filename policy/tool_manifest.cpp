#include "policy/tool_manifest.hpp"

#include <algorithm>
#include <array>
#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cmath>
#include <set>

#include "policy/egress.hpp"
#include "sandbox/profile.hpp"

namespace toolwarden::policy {
namespace json = boost::json;

namespace {

// Deep enough for a schema of kMaxSchemaDepth levels (two JSON levels each) with enum values.
constexpr std::size_t kMaxJsonDepth = 128;
constexpr std::size_t kMaxRunEntries = 256;
constexpr std::size_t kMaxKeyShown = 64;

Denial invalid(const std::string& path, std::string_view what) {
  return deny(ErrorCode::kDeniedArguments, path + ": " + std::string(what));
}

// A key as it appears in a reason: plain when it is a simple word, else quoted JSON (cut), so a
// hostile key can neither forge another path nor put control characters into a listing.
std::string shown_key(std::string_view key) {
  const bool plain =
      !key.empty() && key.size() <= kMaxKeyShown && std::all_of(key.begin(), key.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-' || c == '$';
      });
  if (plain) return std::string(key);
  std::string cut(key.substr(0, kMaxKeyShown));
  while (!cut.empty() && (static_cast<unsigned char>(cut.back()) & 0xC0) == 0x80) cut.pop_back();
  if (!cut.empty() && static_cast<unsigned char>(cut.back()) >= 0xC0) cut.pop_back();
  // JSON escapes only U+0000-U+001F; DEL and the C1 controls (U+0080-U+009F, e.g. the 8-bit
  // CSI U+009B) are control characters too, and went into reasons raw (found by
  // fuzz_tool_manifest).
  const std::string quoted = json::serialize(json::string(cut));
  std::string shown;
  for (std::size_t i = 0; i < quoted.size(); ++i) {
    const auto c = static_cast<unsigned char>(quoted[i]);
    const auto next = i + 1 < quoted.size() ? static_cast<unsigned char>(quoted[i + 1]) : 0;
    if (c == 0x7F || (c == 0xC2 && next >= 0x80 && next <= 0x9F)) {
      const unsigned code = c == 0x7F ? 0x7F : next;
      static constexpr char kHex[] = "0123456789abcdef";
      shown += "\\u00";
      shown += kHex[code >> 4];
      shown += kHex[code & 0xF];
      if (c == 0xC2) ++i;
    } else {
      shown += quoted[i];
    }
  }
  return "[" + shown + (cut.size() < key.size() ? "...]" : "]");
}

std::string key_path(const std::string& parent, std::string_view key) {
  std::string k = shown_key(key);
  if (k.front() == '[') return parent + k;
  return parent.empty() ? k : parent + "." + k;
}

std::string index_path(const std::string& parent, std::size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

std::size_t utf8_chars(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// A first pass over the text that Boost.JSON's value parser cannot make: it keeps the last of
// duplicate keys silently, and turns 1e999 into an infinity that serializes as invalid JSON.
class ManifestScanner {
 public:
  static constexpr std::size_t max_object_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_array_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_key_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_string_size = static_cast<std::size_t>(-1);

  std::string problem;  // "path: what", set when a callback refused

  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code&) { return true; }
  bool on_object_begin(json::error_code&) { return begin_container(true); }
  bool on_object_end(std::size_t, json::error_code&) { return end_container(); }
  bool on_array_begin(json::error_code&) { return begin_container(false); }
  bool on_array_end(std::size_t, json::error_code&) { return end_container(); }
  bool on_key_part(json::string_view s, std::size_t, json::error_code&) {
    key_.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, std::size_t, json::error_code& ec) {
    key_.append(s.data(), s.size());
    Frame& f = frames_.back();
    if (!f.keys.insert(key_).second) {
      problem = key_path(path_of(frames_.size() - 1), key_) + ": duplicate key";
      return fail(ec);
    }
    f.key = std::move(key_);
    key_.clear();
    return true;
  }
  bool on_string_part(json::string_view, std::size_t, json::error_code&) { return true; }
  bool on_string(json::string_view, std::size_t, json::error_code&) { return value(); }
  bool on_number_part(json::string_view, json::error_code&) { return true; }
  bool on_int64(std::int64_t, json::string_view, json::error_code&) { return value(); }
  bool on_uint64(std::uint64_t, json::string_view, json::error_code&) { return value(); }
  bool on_double(double d, json::string_view, json::error_code& ec) {
    value();
    if (std::isfinite(d)) return true;
    problem = here() + ": number out of range";
    return fail(ec);
  }
  bool on_bool(bool, json::error_code&) { return value(); }
  bool on_null(json::error_code&) { return value(); }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }

 private:
  struct Frame {
    bool object = false;
    std::set<std::string, std::less<>> keys;
    std::string key;         // objects: the current member
    std::size_t values = 0;  // arrays: elements seen so far
  };

  static bool fail(json::error_code& ec) {
    ec = json::make_error_code(json::error::syntax);
    return false;
  }
  bool value() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().values;
    return true;
  }
  bool begin_container(bool object) {
    value();
    frames_.push_back(Frame{object, {}, {}, 0});
    return true;
  }
  bool end_container() {
    frames_.pop_back();
    return true;
  }
  // The path of the container at `depth` (0 = the document's top level).
  std::string path_of(std::size_t depth) const {
    std::string p;
    for (std::size_t i = 0; i < depth; ++i) {
      const Frame& f = frames_[i];
      p = f.object ? key_path(p, f.key) : index_path(p, f.values - 1);
    }
    return p;
  }
  // The path of the value just seen.
  std::string here() const {
    if (frames_.empty()) return "(document)";
    const Frame& f = frames_.back();
    std::string p = path_of(frames_.size() - 1);
    return f.object ? key_path(p, f.key) : index_path(p, f.values - 1);
  }

  std::vector<Frame> frames_;
  std::string key_;
};

std::optional<Denial> scan(std::string_view text) {
  json::parse_options opts;
  opts.max_depth = kMaxJsonDepth;
  json::basic_parser<ManifestScanner> p(opts);
  json::error_code ec;
  const std::size_t used = p.write_some(false, text.data(), text.size(), ec);
  if (!p.handler().problem.empty()) return deny(ErrorCode::kDeniedArguments, p.handler().problem);
  if (ec || used != text.size()) {
    return deny(ErrorCode::kDeniedArguments,
                "tool.json is not valid JSON (" +
                    (ec ? ec.message() : std::string("text after the value")) + " at byte " +
                    std::to_string(used) + ")");
  }
  return std::nullopt;
}

// ---- input_schema: the subset protocol/json_schema validates (SPEC §11) ----

constexpr std::array<std::string_view, 7> kSchemaTypes = {"object",  "array",   "string", "number",
                                                          "integer", "boolean", "null"};

bool is_schema_type(const json::value& v) {
  return v.is_string() && std::find(kSchemaTypes.begin(), kSchemaTypes.end(),
                                    std::string_view(v.get_string())) != kSchemaTypes.end();
}

bool is_count(const json::value& v) {
  return v.is_uint64() || (v.is_int64() && v.get_int64() >= 0);
}

bool is_number(const json::value& v) { return v.is_int64() || v.is_uint64() || v.is_double(); }

std::optional<Denial> check_schema(const json::value& v, const std::string& path, std::size_t depth,
                                   bool root);

std::optional<Denial> check_keyword(std::string_view key, const json::value& v,
                                    const std::string& path, std::size_t depth) {
  if (key == "type") {
    if (is_schema_type(v)) return std::nullopt;
    if (v.is_array() && !v.get_array().empty()) {
      std::set<std::string_view> seen;
      for (std::size_t i = 0; i < v.get_array().size(); ++i) {
        const auto& t = v.get_array()[i];
        if (!is_schema_type(t)) return invalid(index_path(path, i), "not a JSON Schema type");
        if (!seen.insert(t.get_string()).second) return invalid(index_path(path, i), "repeated");
      }
      return std::nullopt;
    }
    return invalid(path, "must be a JSON Schema type name or a non-empty array of them");
  }
  if (key == "properties") {
    if (!v.is_object()) return invalid(path, "must be an object of schemas");
    for (const auto& kv : v.get_object()) {
      if (auto bad = check_schema(kv.value(), key_path(path, kv.key()), depth + 1, false)) {
        return bad;
      }
    }
    return std::nullopt;
  }
  if (key == "required") {
    if (!v.is_array()) return invalid(path, "must be an array of property names");
    std::set<std::string_view> seen;
    for (std::size_t i = 0; i < v.get_array().size(); ++i) {
      const auto& n = v.get_array()[i];
      if (!n.is_string()) return invalid(index_path(path, i), "must be a string");
      if (!seen.insert(n.get_string()).second) return invalid(index_path(path, i), "repeated");
    }
    return std::nullopt;
  }
  if (key == "additionalProperties" || key == "items") {
    return check_schema(v, path, depth + 1, false);
  }
  if (key == "enum") {
    if (!v.is_array() || v.get_array().empty()) return invalid(path, "must be a non-empty array");
    return std::nullopt;
  }
  if (key == "const") return std::nullopt;
  if (key == "minLength" || key == "maxLength" || key == "minItems" || key == "maxItems") {
    if (!is_count(v)) return invalid(path, "must be a non-negative integer");
    return std::nullopt;
  }
  if (key == "minimum" || key == "maximum") {
    if (!is_number(v)) return invalid(path, "must be a number");
    return std::nullopt;
  }
  if (key == "description" || key == "title") {
    if (!v.is_string()) return invalid(path, "must be a string");
    return std::nullopt;
  }
  return invalid(path,
                 "unsupported schema keyword (allowed: type, properties, required, "
                 "additionalProperties, enum, const, minLength, maxLength, minimum, maximum, "
                 "minItems, maxItems, items, description, title)");
}

std::optional<Denial> check_schema(const json::value& v, const std::string& path, std::size_t depth,
                                   bool root) {
  if (depth > kMaxSchemaDepth) {
    return invalid(path, "schemas nested deeper than " + std::to_string(kMaxSchemaDepth));
  }
  if (v.is_bool() && !root) return std::nullopt;
  if (!v.is_object()) {
    return invalid(path,
                   root ? "must be an object schema" : "a schema must be an object or a bool");
  }
  const auto& o = v.get_object();
  for (const auto& kv : o) {
    if (auto bad = check_keyword(kv.key(), kv.value(), key_path(path, kv.key()), depth)) {
      return bad;
    }
  }
  if (root) {
    const auto* type = o.if_contains("type");
    if (type == nullptr || !type->is_string() || type->get_string() != "object") {
      return invalid(key_path(path, "type"), "the input schema must have \"type\": \"object\"");
    }
  }
  return std::nullopt;
}

// ---- small value checks ----

std::optional<Denial> check_string(const json::value* v, const std::string& path) {
  if (v == nullptr) return invalid(path, "missing");
  if (!v->is_string()) return invalid(path, "must be a string");
  return std::nullopt;
}

std::optional<Denial> check_env_names(const json::value& v, const std::string& path,
                                      std::vector<std::string>* out) {
  if (!v.is_array()) return invalid(path, "must be an array of environment variable names");
  const auto& a = v.get_array();
  if (a.size() > kMaxEnvNames) {
    return invalid(path, "more than " + std::to_string(kMaxEnvNames) + " names");
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string p = index_path(path, i);
    if (!a[i].is_string()) return invalid(p, "must be a string");
    std::string name(a[i].get_string());
    std::string why;
    if (!is_allowed_env_name(name, &why)) return invalid(p, why);
    if (std::find(out->begin(), out->end(), name) != out->end()) return invalid(p, "repeated");
    out->push_back(std::move(name));
  }
  return std::nullopt;
}

std::optional<Denial> check_run(const json::value& v, std::vector<std::string>* out) {
  if (!v.is_array() || v.get_array().empty()) {
    return invalid("run", "must be a non-empty array of strings");
  }
  const auto& a = v.get_array();
  if (a.size() > kMaxRunEntries) {
    return invalid("run", "more than " + std::to_string(kMaxRunEntries) + " entries");
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string p = index_path("run", i);
    if (!a[i].is_string()) return invalid(p, "must be a string");
    std::string_view e = a[i].get_string();
    if (e.size() > kMaxRunEntryBytes) {
      return invalid(p, "longer than " + std::to_string(kMaxRunEntryBytes) + " bytes");
    }
    if (e.find('\0') != std::string_view::npos) return invalid(p, "contains a NUL character");
    if (i == 0 && !e.empty() && e.front() == '-')
      return invalid(p, "the program cannot be an option");
    if (e.empty() || is_relative_run_entry(e)) {
      auto rel = run_entry_path(e);
      if (!rel) {
        return invalid(p,
                       "a relative entry is a path inside the tool folder: no empty, '.' or "
                       "'..' segments");
      }
      if (i == 0 && rel->empty()) return invalid(p, "names the tool folder, not a program");
    }
    out->emplace_back(e);
  }
  return std::nullopt;
}

std::optional<Denial> check_network(const json::value& v, std::vector<std::string>* hosts) {
  const std::string path = "capabilities.network";
  if (v.is_string() && v.get_string() == "none") return std::nullopt;
  if (!v.is_object()) return invalid(path, "must be \"none\" or {\"hosts\": [...]}");
  for (const auto& kv : v.get_object()) {
    if (kv.key() != "hosts") return invalid(key_path(path, kv.key()), "unknown key");
  }
  const auto* list = v.get_object().if_contains("hosts");
  if (list == nullptr) return invalid(path + ".hosts", "missing");
  if (!list->is_array() || list->get_array().empty() ||
      list->get_array().size() > kMaxNetworkHosts) {
    return invalid(path + ".hosts",
                   "must be an array of 1 to " + std::to_string(kMaxNetworkHosts) + " hosts");
  }
  const auto& a = list->get_array();
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string p = index_path(path + ".hosts", i);
    if (!a[i].is_string()) return invalid(p, "must be a string");
    std::string why;
    auto host = normalize_network_host(a[i].get_string(), &why);
    if (!host) return invalid(p, why);
    if (std::find(hosts->begin(), hosts->end(), *host) != hosts->end()) {
      return invalid(p, "repeated");
    }
    hosts->push_back(std::move(*host));
  }
  return std::nullopt;
}

std::optional<Denial> check_capabilities(const json::value& v, ToolManifest* m) {
  if (!v.is_object()) return invalid("capabilities", "must be an object");
  auto& caps = m->capabilities;
  for (const auto& kv : v.get_object()) {
    const std::string p = key_path("capabilities", kv.key());
    const json::value& x = kv.value();
    if (kv.key() == "filesystem_write") {
      if (x == "none") {
        caps.filesystem_write = FilesystemWrite::none;
      } else if (x == "tool_dir") {
        caps.filesystem_write = FilesystemWrite::tool_dir;
      } else if (x == "workspace") {
        caps.filesystem_write = FilesystemWrite::workspace;
      } else {
        return invalid(p, "must be \"none\", \"tool_dir\" or \"workspace\"");
      }
    } else if (kv.key() == "network") {
      if (auto bad = check_network(x, &caps.network_hosts)) return bad;
      // What the proxy will enforce must be buildable now, not fail at the first call.
      std::string why;
      if (!caps.network_hosts.empty() && !EgressAllowlist::from_hosts(caps.network_hosts, &why))
        return invalid("capabilities.network.hosts", why);
    } else if (kv.key() == "process_spawn") {
      if (!x.is_bool()) return invalid(p, "must be true or false");
      caps.process_spawn = x.get_bool();
    } else if (kv.key() == "secrets") {
      if (auto bad = check_env_names(x, p, &caps.secrets)) return bad;
    } else {
      return invalid(p, "unknown key");
    }
  }
  for (std::size_t i = 0; i < caps.secrets.size(); ++i) {
    if (std::find(m->required_env.begin(), m->required_env.end(), caps.secrets[i]) !=
        m->required_env.end()) {
      return invalid(index_path("capabilities.secrets", i), "also listed in required_env");
    }
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(FilesystemWrite w) {
  switch (w) {
    case FilesystemWrite::none:
      return "none";
    case FilesystemWrite::tool_dir:
      return "tool_dir";
    case FilesystemWrite::workspace:
      return "workspace";
  }
  return "none";
}

bool is_valid_tool_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() < 'a' || name.front() > 'z') return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return name.substr(0, 6) != "local_" && name.substr(0, 6) != "probe_" && name != "probes";
}

bool is_allowed_env_name(std::string_view name, std::string* why) {
  bool syntax = !name.empty() && ((name.front() >= 'A' && name.front() <= 'Z') || name[0] == '_');
  for (char c : name)
    syntax = syntax && ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
  if (!syntax) {
    *why = "not an environment variable name ([A-Z_][A-Z0-9_]*)";
    return false;
  }
  static constexpr std::array<std::string_view, 9> kSetBySandbox = {
      "PATH",       "HOME",        "TMPDIR",   "LANG",     "TERM",
      "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"};
  if (std::find(kSetBySandbox.begin(), kSetBySandbox.end(), name) != kSetBySandbox.end()) {
    *why = "set by the sandbox itself";
    return false;
  }
  if (name.substr(0, 11) == "TOOLWARDEN_") {
    *why = "the TOOLWARDEN_ prefix is reserved";
    return false;
  }
  if (sandbox::is_injection_variable(name)) {
    *why = "can inject code into a program and is never passed (SPEC §8)";
    return false;
  }
  return true;
}

bool is_relative_run_entry(std::string_view entry) {
  return !entry.empty() && entry.front() != '/' && entry.front() != '-';
}

std::optional<std::string> run_entry_path(std::string_view entry) {
  if (!is_relative_run_entry(entry) || entry.find('\0') != std::string_view::npos) {
    return std::nullopt;
  }
  if (entry == "." || entry == "./") return std::string();
  if (entry.substr(0, 2) == "./") entry.remove_prefix(2);
  std::size_t i = 0;
  while (i <= entry.size()) {
    std::size_t slash = entry.find('/', i);
    if (slash == std::string_view::npos) slash = entry.size();
    std::string_view seg = entry.substr(i, slash - i);
    if (seg.empty() || seg == "." || seg == "..") return std::nullopt;
    i = slash + 1;
  }
  return std::string(entry);
}

std::vector<std::string> resolve_run(const std::vector<std::string>& run,
                                     std::string_view tool_dir) {
  std::string base(tool_dir);
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  std::vector<std::string> argv;
  argv.reserve(run.size());
  for (const auto& e : run) {
    auto rel = run_entry_path(e);
    if (!rel) {
      argv.push_back(e);
    } else {
      argv.push_back(rel->empty() ? base : base + "/" + *rel);
    }
  }
  return argv;
}

Result<ToolManifest> parse_tool_manifest(std::string_view json_text) {
  if (json_text.size() > kMaxManifestBytes) {
    return deny(ErrorCode::kDeniedArguments,
                "tool.json is larger than " + std::to_string(kMaxManifestBytes) + " bytes");
  }
  if (auto bad = scan(json_text)) return *bad;
  json::parse_options opts;
  opts.max_depth = kMaxJsonDepth;
  json::error_code ec;
  json::value doc = json::parse(json_text, ec, {}, opts);
  if (ec) return deny(ErrorCode::kDeniedArguments, "tool.json is not valid JSON");
  if (!doc.is_object()) return deny(ErrorCode::kDeniedArguments, "tool.json must be an object");
  const auto& o = doc.get_object();

  for (const auto& kv : o) {
    static constexpr std::array<std::string_view, 7> kKeys = {
        "name", "description", "input_schema", "run", "timeout_s", "required_env", "capabilities"};
    if (std::find(kKeys.begin(), kKeys.end(), kv.key()) != kKeys.end()) continue;
    if (kv.key() == "secrets")
      return invalid("secrets", "unknown key (secrets go in capabilities)");
    return invalid(key_path("", kv.key()), "unknown key");
  }

  ToolManifest m;
  const json::value* name = o.if_contains("name");
  if (auto bad = check_string(name, "name")) return *bad;
  m.name = name->get_string();
  if (!is_valid_tool_name(m.name)) {
    return invalid("name",
                   "must match [a-z][a-z0-9_]{0,63} and not start with local_ or probe_ "
                   "(nor be probes)");
  }

  const json::value* desc = o.if_contains("description");
  if (auto bad = check_string(desc, "description")) return *bad;
  m.description = desc->get_string();
  if (m.description.find_first_not_of(" \t\r\n") == std::string::npos) {
    return invalid("description", "must not be empty");
  }
  if (utf8_chars(m.description) > kMaxDescriptionChars) {
    return invalid("description",
                   "longer than " + std::to_string(kMaxDescriptionChars) + " characters");
  }

  const json::value* schema = o.if_contains("input_schema");
  if (schema == nullptr) return invalid("input_schema", "missing");
  if (auto bad = check_schema(*schema, "input_schema", 1, true)) return *bad;
  m.input_schema = schema->get_object();

  const json::value* run = o.if_contains("run");
  if (run == nullptr) return invalid("run", "missing");
  if (auto bad = check_run(*run, &m.run)) return *bad;

  if (const auto* t = o.if_contains("timeout_s")) {
    const bool in_range =
        (t->is_int64() && t->get_int64() >= 1 && t->get_int64() <= kMaxToolTimeoutS) ||
        (t->is_uint64() && t->get_uint64() <= kMaxToolTimeoutS);
    if (!in_range) {
      return invalid("timeout_s",
                     "must be an integer from 1 to " + std::to_string(kMaxToolTimeoutS));
    }
    m.timeout_s = static_cast<int>(t->to_number<std::int64_t>());
  }

  if (const auto* env = o.if_contains("required_env")) {
    if (auto bad = check_env_names(*env, "required_env", &m.required_env)) return *bad;
  }
  if (const auto* caps = o.if_contains("capabilities")) {
    if (auto bad = check_capabilities(*caps, &m)) return *bad;
  }
  return m;
}

}  // namespace toolwarden::policy
