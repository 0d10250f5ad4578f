#include "policy/grant.hpp"

#include <algorithm>
#include <boost/json/array.hpp>
#include <set>

namespace toolwarden::policy {
namespace json = boost::json;

std::string_view to_string(Access a) { return a == Access::write ? "write" : "read"; }

namespace {

std::optional<Access> parse_access(std::string_view s) {
  if (s == "read") return Access::read;
  if (s == "write") return Access::write;
  return std::nullopt;
}

bool contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::optional<std::vector<Scope>> parse_scopes(const std::vector<std::string>& texts,
                                               std::string* error) {
  std::vector<Scope> out;
  for (const auto& t : texts) {
    auto s = parse_scope(t, error);
    if (!s) return std::nullopt;
    if (std::find(out.begin(), out.end(), *s) == out.end()) out.push_back(std::move(*s));
  }
  return out;
}

std::optional<std::vector<std::string>> string_list(const json::object& o, std::string_view key,
                                                    std::string* error) {
  std::vector<std::string> out;
  const auto* v = o.if_contains(key);
  if (v == nullptr) return out;
  if (!v->is_array()) {
    *error = std::string(key) + " must be an array of strings";
    return std::nullopt;
  }
  for (const auto& e : v->get_array()) {
    if (!e.is_string()) {
      *error = std::string(key) + " must be an array of strings";
      return std::nullopt;
    }
    out.emplace_back(e.get_string());
  }
  return out;
}

// Scopes contained in both lists: each scope of one side that lies within some scope of the
// other. The union of both directions is exactly the set of paths both sides cover.
std::vector<Scope> intersect(const std::vector<Scope>& a, const std::vector<Scope>& b) {
  std::vector<Scope> out;
  auto add_within = [&](const std::vector<Scope>& inner, const std::vector<Scope>& outer) {
    for (const auto& s : inner) {
      bool inside =
          std::any_of(outer.begin(), outer.end(), [&](const Scope& o) { return s.within(o); });
      if (inside && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
  };
  add_within(a, b);
  add_within(b, a);
  return out;
}

json::array to_array(const std::vector<std::string>& v) {
  json::array a;
  for (const auto& s : v) a.emplace_back(s);
  return a;
}

json::array to_array(const std::vector<Scope>& v) {
  json::array a;
  for (const auto& s : v) a.emplace_back(s.text());
  return a;
}

}  // namespace

std::vector<std::string> default_tools(Access access, bool has_commands) {
  std::vector<std::string> tools = {"local_read", "local_list", "local_search"};
  if (access == Access::write) tools.emplace_back("local_edit");
  if (has_commands) tools.emplace_back("local_test");
  return tools;
}

bool Grant::grants_tool(std::string_view name) const { return contains(tools, name); }

Check Grant::authorize_tool(std::string_view name) const {
  if (name == "local_edit" && access != Access::write) {
    return deny(ErrorCode::kDeniedReadOnly, "the job has read access only");
  }
  if (!grants_tool(name))
    return deny(ErrorCode::kDeniedTool, "the tool is not granted to this job");
  return Allowed{};
}

Result<RelativePath> Grant::authorize_path(std::string_view path, const SensitiveNames& sensitive,
                                           bool allow_root) const {
  auto parsed = parse_request_path(path, allow_root);
  if (!parsed) return parsed;
  if (auto hit = sensitive.first_match(parsed.value())) {
    return deny(ErrorCode::kDeniedPath, "the path names a sensitive file or directory");
  }
  const auto& p = parsed.value();
  const bool blocked = std::any_of(this->blocked.begin(), this->blocked.end(),
                                   [&](const Scope& s) { return s.covers(p); });
  if (blocked) return deny(ErrorCode::kDeniedScope, "path lies in a blocked scope");
  const bool covered =
      std::any_of(allowed.begin(), allowed.end(), [&](const Scope& s) { return s.covers(p); });
  // A directory above the scopes may be listed or searched; what lies outside is filtered.
  if (!covered && !(allow_root && leads_into_scope(p))) {
    return deny(ErrorCode::kDeniedScope, "path is outside the job's scopes");
  }
  return parsed;
}

bool Grant::leads_into_scope(const RelativePath& dir) const {
  return std::any_of(allowed.begin(), allowed.end(), [&](const Scope& s) {
    Scope d{dir.segments};
    return s.within(d);
  });
}

Check Grant::authorize_scope(const RelativePath& path) const {
  bool in_allowed =
      std::any_of(allowed.begin(), allowed.end(), [&](const Scope& s) { return s.covers(path); });
  if (!in_allowed) return deny(ErrorCode::kDeniedScope, "path is outside the job's scopes");
  bool in_blocked =
      std::any_of(blocked.begin(), blocked.end(), [&](const Scope& s) { return s.covers(path); });
  if (in_blocked) return deny(ErrorCode::kDeniedScope, "path lies in a blocked scope");
  return Allowed{};
}

json::object Grant::to_json() const {
  json::object o;
  o["worktree"] = worktree;
  o["access"] = to_string(access);
  o["allowed_paths"] = to_array(allowed);
  o["blocked_paths"] = to_array(blocked);
  o["commands"] = to_array(commands);
  o["tools"] = to_array(tools);
  json::object pins;
  for (const auto& [path, pin] : read_pins) {
    pins[path] = json::object{{"sha256", pin.sha256},
                              {"dev", static_cast<std::uint64_t>(pin.dev)},
                              {"ino", static_cast<std::uint64_t>(pin.ino)},
                              {"size", static_cast<std::int64_t>(pin.size)},
                              {"mtime_ns", pin.mtime_ns}};
  }
  o["read_pins"] = std::move(pins);
  json::object custom;
  for (const auto& [name, pin] : custom_tools) {
    custom[name] = json::object{{"scope", pin.scope},
                                {"folder", pin.folder},
                                {"sha256", pin.sha256},
                                {"manifest", pin.manifest}};
  }
  o["custom_tools"] = std::move(custom);
  return o;
}

std::optional<Grant> Grant::from_json(const json::object& o, std::string* error) {
  Grant g;
  const auto* wt = o.if_contains("worktree");
  const auto* access = o.if_contains("access");
  if (wt == nullptr || !wt->is_string() || access == nullptr || !access->is_string()) {
    *error = "grant lacks worktree or access";
    return std::nullopt;
  }
  g.worktree = std::string(wt->get_string());
  auto a = parse_access(access->get_string());
  if (!a) {
    *error = "grant has an unknown access";
    return std::nullopt;
  }
  g.access = *a;
  auto allowed = string_list(o, "allowed_paths", error);
  auto blocked = string_list(o, "blocked_paths", error);
  auto commands = string_list(o, "commands", error);
  auto tools = string_list(o, "tools", error);
  if (!allowed || !blocked || !commands || !tools) return std::nullopt;
  auto as = parse_scopes(*allowed, error);
  auto bs = parse_scopes(*blocked, error);
  if (!as || !bs) return std::nullopt;
  g.allowed = std::move(*as);
  g.blocked = std::move(*bs);
  g.commands = std::move(*commands);
  g.tools = std::move(*tools);
  if (const auto* pins = o.if_contains("read_pins"); pins != nullptr && pins->is_object()) {
    for (const auto& kv : pins->get_object()) {
      const auto* p = kv.value().if_object();
      if (p == nullptr) continue;
      auto number = [&](std::string_view k) -> std::uint64_t {
        const auto* v = p->if_contains(k);
        if (v == nullptr) return 0;
        if (v->is_uint64()) return v->get_uint64();
        return v->is_int64() ? static_cast<std::uint64_t>(v->get_int64()) : 0;
      };
      FilePin pin;
      if (const auto* sha = p->if_contains("sha256"); sha != nullptr && sha->is_string()) {
        pin.sha256 = std::string(sha->get_string());
      }
      pin.dev = static_cast<dev_t>(number("dev"));
      pin.ino = static_cast<ino_t>(number("ino"));
      pin.size = static_cast<off_t>(number("size"));
      pin.mtime_ns = static_cast<std::int64_t>(number("mtime_ns"));
      g.read_pins[std::string(kv.key())] = std::move(pin);
    }
  }
  if (const auto* custom = o.if_contains("custom_tools");
      custom != nullptr && custom->is_object()) {
    for (const auto& kv : custom->get_object()) {
      const auto* c = kv.value().if_object();
      auto text = [&](std::string_view k) -> std::string {
        const auto* v = c == nullptr ? nullptr : c->if_contains(k);
        return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
      };
      CustomToolPin pin{text("scope"), text("folder"), text("sha256"), text("manifest")};
      if (pin.scope.empty() || pin.folder.empty() || pin.sha256.empty() || pin.manifest.empty()) {
        *error = "grant has an incomplete custom tool pin";
        return std::nullopt;
      }
      g.custom_tools[std::string(kv.key())] = std::move(pin);
    }
  }
  return g;
}

std::optional<Grant> build_grant(const JobRequest& req,
                                 const std::vector<std::string>& known_commands,
                                 std::string* error) {
  Grant g;
  g.worktree = req.worktree;
  auto access = parse_access(req.access.value_or("read"));
  if (!access) {
    *error = "access must be \"read\" or \"write\"";
    return std::nullopt;
  }
  g.access = *access;

  auto allowed = parse_scopes(
      req.allowed_paths.empty() ? std::vector<std::string>{"**"} : req.allowed_paths, error);
  auto blocked = parse_scopes(req.blocked_paths, error);
  if (!allowed || !blocked) return std::nullopt;
  g.allowed = std::move(*allowed);
  g.blocked = std::move(*blocked);

  for (const auto& c : req.commands) {
    if (!contains(known_commands, c)) {
      *error = "command '" + c + "' is not registered in the config";
      return std::nullopt;
    }
    if (!contains(g.commands, c)) g.commands.push_back(c);
  }

  if (req.task) {
    const auto& t = *req.task;
    for (const auto& kv : t) {
      if (kv.key() != "allowed_paths" && kv.key() != "access" && kv.key() != "required_commands") {
        *error = "task has an unknown key '" + std::string(kv.key()) + "'";
        return std::nullopt;
      }
    }
    auto task_paths = string_list(t, "allowed_paths", error);
    auto required = string_list(t, "required_commands", error);
    if (!task_paths || !required) return std::nullopt;
    auto task_scopes =
        parse_scopes(task_paths->empty() ? std::vector<std::string>{"**"} : *task_paths, error);
    if (!task_scopes) return std::nullopt;
    Access task_access = Access::read;
    if (const auto* ta = t.if_contains("access")) {
      auto parsed = ta->is_string() ? parse_access(ta->get_string()) : std::nullopt;
      if (!parsed) {
        *error = "task access must be \"read\" or \"write\"";
        return std::nullopt;
      }
      task_access = *parsed;
    }
    std::set<std::string> want(required->begin(), required->end());
    std::set<std::string> have(g.commands.begin(), g.commands.end());
    if (want != have) {
      std::string missing, extra;
      for (const auto& c : want)
        if (!have.count(c)) missing += (missing.empty() ? "" : ",") + c;
      for (const auto& c : have)
        if (!want.count(c)) extra += (extra.empty() ? "" : ",") + c;
      *error = "task required_commands do not match the granted commands (task only: [" + missing +
               "], grant only: [" + extra + "])";
      return std::nullopt;
    }
    g.allowed = intersect(g.allowed, *task_scopes);
    if (g.allowed.empty()) {
      *error = "task allowed_paths and the approved scopes have nothing in common";
      return std::nullopt;
    }
    if (task_access != Access::write) g.access = Access::read;
  }

  auto defaults = default_tools(g.access, !g.commands.empty());
  if (req.tools.empty()) {
    g.tools = defaults;
  } else {
    for (const auto& t : req.tools) {
      const bool probe_tool =
          std::find(std::begin(kProbeTools), std::end(kProbeTools), t) != std::end(kProbeTools);
      if (t == kProbesGrant || probe_tool) {
        for (std::string_view p : kProbeTools) {
          if ((t == kProbesGrant || t == p) && !contains(g.tools, p)) g.tools.emplace_back(p);
        }
        continue;
      }
      if (auto custom = req.custom_tools.find(t); custom != req.custom_tools.end()) {
        g.custom_tools[t] = custom->second;
      } else if (!contains(defaults, t)) {
        bool builtin = std::find(std::begin(kBuiltinTools), std::end(kBuiltinTools), t) !=
                       std::end(kBuiltinTools);
        *error = builtin ? "tool '" + t + "' needs " +
                               (t == "local_edit" ? std::string("write access")
                                                  : std::string("a granted command"))
                         : "unknown tool '" + t + "'";
        return std::nullopt;
      }
      if (!contains(g.tools, t)) g.tools.push_back(t);
    }
  }
  return g;
}

}  // namespace toolwarden::policy
