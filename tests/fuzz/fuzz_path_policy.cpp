// Fuzzes the path policy of SPEC §7 and the grant that applies it (SPEC §3, §4): request path
// syntax, sensitive names, scopes, task intersection, and Grant::authorize_path.
//
// Input, one field per line: the request path first, then any of
//   +SCOPE  an allowed scope of the job      -SCOPE  a blocked scope
//   ~SCOPE  a scope of the task package      !NAME   an extra sensitive name (config)
//   w       the job has write access         W       the task asks for write access
//   t       a task package is given (implied by ~ and W)
#include <algorithm>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <string>
#include <vector>

#include "policy/grant.hpp"
#include "policy/path_rules.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace {
namespace json = boost::json;
namespace pol = toolwarden::policy;
using toolwarden::fuzz::lines;

struct Input {
  std::string_view path;
  std::vector<std::string> allowed, blocked, task, sensitive;
  bool write = false, task_given = false, task_write = false;
};

Input decode(std::string_view text) {
  Input in;
  auto fields = lines(text);
  in.path = fields.front();
  for (std::size_t i = 1; i < fields.size() && i < 16; ++i) {
    std::string_view f = fields[i];
    if (f.empty()) continue;
    const std::string rest(f.substr(1));
    switch (f.front()) {
      case '+':
        in.allowed.push_back(rest);
        break;
      case '-':
        in.blocked.push_back(rest);
        break;
      case '~':
        in.task.push_back(rest), in.task_given = true;
        break;
      case '!':
        in.sensitive.push_back(rest);
        break;
      case 'w':
        in.write = true;
        break;
      case 'W':
        in.task_write = in.task_given = true;
        break;
      case 't':
        in.task_given = true;
        break;
      default:
        break;
    }
  }
  return in;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return out;
}
std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  return out;
}

// SPEC §7's list written out again from the SPEC text (not from path_rules.cpp): the oracle
// the built-in SensitiveNames must agree with in both directions.
bool spec_sensitive(std::string_view segment) {
  const std::string s = ascii_lower(segment);
  for (std::string_view exact :
       {".git", ".npmrc", ".netrc", "id_rsa", "id_ed25519", ".env", ".codex", ".claude", ".ssh",
        ".aws", ".config", ".toolwarden", "agents.md", "claude.md"}) {
    if (s == exact) return true;
  }
  for (std::string_view prefix :
       {".mcp", ".env.", "auth.json", "auth.toml", "auth.yaml", "auth.yml", "credentials",
        "mcp.json", "mcp.toml", "mcp.yaml", "mcp.yml"}) {
    if (s.compare(0, prefix.size(), prefix) == 0) return true;
  }
  return false;
}

bool has_segment(std::string_view path, std::string_view want) {
  std::size_t start = 0;
  for (;;) {
    const auto slash = path.find('/', start);
    if (path.substr(start, slash == std::string_view::npos ? slash : slash - start) == want) {
      return true;
    }
    if (slash == std::string_view::npos) return false;
    start = slash + 1;
  }
}

std::string show(std::string_view s) { return json::serialize(json::string(s)); }

// Request path syntax: what is accepted is exactly what SPEC §7 allows, unchanged.
void check_path_syntax(std::string_view p) {
  auto strict = pol::parse_request_path(p, false);
  auto rooted = pol::parse_request_path(p, true);
  for (const auto* r : {&strict, &rooted}) {
    if (!*r) {
      FUZZ_CHECK(r->denial().code == pol::ErrorCode::kDeniedPath, show(p));
      FUZZ_CHECK(!r->denial().reason.empty(), show(p));
      continue;
    }
    const auto& segs = r->value().segments;
    FUZZ_CHECK(!p.empty() && p.size() <= pol::kMaxPathBytes, show(p));
    FUZZ_CHECK(p.find('\0') == std::string_view::npos, show(p));
    FUZZ_CHECK(p.find('\\') == std::string_view::npos, show(p));
    FUZZ_CHECK(p.front() != '/', show(p));
    FUZZ_CHECK(pol::is_valid_utf8(p), show(p));
    if (segs.empty()) {
      FUZZ_CHECK(r == &rooted && p == ".", show(p));
      continue;
    }
    for (const auto& s : segs) {
      FUZZ_CHECK(!s.empty() && s != "." && s != "..", show(p));
      FUZZ_CHECK(s.find('/') == std::string::npos, show(p));
    }
    // Nothing was normalised away: the accepted path names exactly what the client sent.
    FUZZ_CHECK(r->value().text() == p, show(p) + " became " + show(r->value().text()));
  }
  if (strict) {
    FUZZ_CHECK(rooted && rooted.value().segments == strict.value().segments, show(p));
  }
  if (has_segment(p, "..") || has_segment(p, ".") || has_segment(p, "")) {
    FUZZ_CHECK(!rooted || p == ".", "traversal or empty segment accepted: " + show(p));
  }
}

void check_sensitive(const pol::SensitiveNames& names, bool only_builtin,
                     std::string_view segment) {
  const bool hit = names.matches(segment);
  FUZZ_CHECK(hit == names.matches(ascii_upper(segment)), show(segment));
  FUZZ_CHECK(hit == names.matches(ascii_lower(segment)), show(segment));
  if (spec_sensitive(segment)) FUZZ_CHECK(hit, "SPEC-sensitive name passes: " + show(segment));
  if (only_builtin) FUZZ_CHECK(hit == spec_sensitive(segment), "not in SPEC: " + show(segment));
}

std::optional<pol::Scope> check_scope(std::string_view text) {
  std::string error;
  auto s = pol::parse_scope(text, &error);
  if (!s) {
    FUZZ_CHECK(!error.empty(), show(text));
    return s;
  }
  FUZZ_CHECK(s->everything() == (text == "**"), show(text));
  for (const auto& seg : s->segments) {
    FUZZ_CHECK(!seg.empty() && seg != "." && seg != "..", show(text));
    FUZZ_CHECK(seg.find_first_of(std::string_view("*?[]{}/\\\0", 9)) == std::string::npos,
               show(text));
  }
  std::string again_error;
  auto again = pol::parse_scope(s->text(), &again_error);
  FUZZ_CHECK(again && *again == *s, show(text) + " -> " + show(s->text()));
  FUZZ_CHECK(s->covers(pol::RelativePath{s->segments}), show(text));
  FUZZ_CHECK(s->within(pol::Scope{}) && s->within(*s), show(text));
  return s;
}

bool covered_by(const std::vector<pol::Scope>& scopes, const pol::RelativePath& p) {
  for (const auto& s : scopes)
    if (s.covers(p)) return true;
  return false;
}

// Grant::authorize_path against its definition (SPEC §7 order: syntax and sensitive names →
// DENIED_PATH, then blocked and allowed scopes → DENIED_SCOPE).
void check_authorize(const pol::Grant& g, const pol::SensitiveNames& names, std::string_view p) {
  bool ok_strict = false;
  for (bool allow_root : {false, true}) {
    auto r = g.authorize_path(p, names, allow_root);
    auto parsed = pol::parse_request_path(p, allow_root);
    const bool sensitive = parsed && names.first_match(parsed.value()).has_value();
    if (!r) {
      const auto code = r.denial().code;
      FUZZ_CHECK(code == pol::ErrorCode::kDeniedPath || code == pol::ErrorCode::kDeniedScope,
                 show(p));
      FUZZ_CHECK((code == pol::ErrorCode::kDeniedPath) == (!parsed || sensitive), show(p));
      if (parsed && !sensitive && !covered_by(g.blocked, parsed.value())) {
        // Denied for scope although allowed: only when no allowed scope covers it.
        FUZZ_CHECK(!covered_by(g.allowed, parsed.value()), "wrongly denied: " + show(p));
      }
      FUZZ_CHECK(!(allow_root && ok_strict), "denied with allow_root only: " + show(p));
      continue;
    }
    FUZZ_CHECK(parsed && parsed.value().segments == r.value().segments, show(p));
    FUZZ_CHECK(!sensitive, "sensitive path authorized: " + show(p));
    FUZZ_CHECK(!covered_by(g.blocked, r.value()), "blocked path authorized: " + show(p));
    const bool covered = covered_by(g.allowed, r.value());
    FUZZ_CHECK(covered || (allow_root && g.leads_into_scope(r.value())),
               "path outside the scopes authorized: " + show(p));
    if (!allow_root) {
      ok_strict = true;
      FUZZ_CHECK(g.authorize_scope(r.value()).ok(), show(p));
    }
  }
}

json::array strings(const std::vector<std::string>& v) {
  json::array a;
  for (const auto& s : v) a.emplace_back(s);
  return a;
}

void check_grants(const Input& in, const pol::SensitiveNames& names) {
  pol::JobRequest req;
  req.worktree = "/w";
  req.access = in.write ? "write" : "read";
  req.allowed_paths = in.allowed;
  req.blocked_paths = in.blocked;
  std::string error;
  auto approved = pol::build_grant(req, {}, &error);

  std::vector<pol::Scope> allowed, blocked, task;
  bool all_parse = true;
  for (const auto& t : in.allowed) {
    auto s = check_scope(t);
    all_parse = all_parse && s.has_value();
    if (s) allowed.push_back(*s);
  }
  for (const auto& t : in.blocked) {
    auto s = check_scope(t);
    all_parse = all_parse && s.has_value();
    if (s) blocked.push_back(*s);
  }
  FUZZ_CHECK(approved.has_value() == all_parse, error);
  if (!approved) return;
  if (in.allowed.empty()) allowed.push_back(pol::Scope{});
  for (const auto& s : allowed)
    FUZZ_CHECK(
        std::find(approved->allowed.begin(), approved->allowed.end(), s) != approved->allowed.end(),
        s.text());
  FUZZ_CHECK(approved->tools == pol::default_tools(approved->access, false), "tools");
  check_authorize(*approved, names, in.path);

  // The stored form of a grant reads back as the same grant (jobs survive restarts).
  const auto stored = approved->to_json();
  std::string back_error;
  auto back = pol::Grant::from_json(stored, &back_error);
  FUZZ_CHECK(back && back->allowed == approved->allowed && back->blocked == approved->blocked &&
                 back->tools == approved->tools && back->access == approved->access &&
                 back->worktree == approved->worktree,
             json::serialize(stored) + " " + back_error);

  if (!in.task_given) return;
  bool task_parse = true;
  for (const auto& t : in.task) {
    auto s = check_scope(t);
    task_parse = task_parse && s.has_value();
    if (s) task.push_back(*s);
  }
  if (in.task.empty()) task.push_back(pol::Scope{});
  req.task = json::object{{"allowed_paths", strings(in.task)},
                          {"access", in.task_write ? "write" : "read"},
                          {"required_commands", json::array{}}};
  std::string task_error;
  auto effective = pol::build_grant(req, {}, &task_error);
  if (!task_parse) {
    FUZZ_CHECK(!effective, "a task scope that does not parse was accepted");
    return;
  }
  if (!effective) {
    // Refused only when nothing is left in common.
    for (const auto& a : allowed)
      for (const auto& t : task)
        FUZZ_CHECK(!a.within(t) && !t.within(a), task_error + ": " + a.text() + " / " + t.text());
    return;
  }
  // SPEC §4: the effective grant is the intersection: never more than either side allows...
  for (const auto& s : effective->allowed) {
    FUZZ_CHECK(covered_by(approved->allowed, pol::RelativePath{s.segments}) &&
                   covered_by(task, pol::RelativePath{s.segments}),
               "effective scope beyond the intersection: " + s.text());
  }
  FUZZ_CHECK((effective->access == pol::Access::write) == (in.write && in.task_write), "access");
  FUZZ_CHECK(effective->blocked == approved->blocked, "blocked scopes changed");
  // ... and exactly the paths both sides cover.
  if (auto p = pol::parse_request_path(in.path, false)) {
    const bool both = covered_by(approved->allowed, p.value()) && covered_by(task, p.value());
    FUZZ_CHECK(covered_by(effective->allowed, p.value()) == both,
               "intersection differs at " + show(in.path));
  }
  check_authorize(*effective, names, in.path);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Input in = decode(toolwarden::fuzz::as_text(data, size));
  check_path_syntax(in.path);

  static const pol::SensitiveNames builtin;
  pol::SensitiveNames names;
  for (const auto& extra : in.sensitive) names.add(extra);
  if (auto parsed = pol::parse_request_path(in.path, true)) {
    // The first segments suffice for the oracle; a 2,000-segment path would spend the run here.
    const auto& segs = parsed.value().segments;
    for (std::size_t i = 0; i < segs.size() && i < 32; ++i) {
      check_sensitive(builtin, true, segs[i]);
      check_sensitive(names, in.sensitive.empty(), segs[i]);
    }
  }
  for (const auto& extra : in.sensitive) {
    std::string_view name = extra;
    if (!name.empty() && name.back() == '*') name.remove_suffix(1);
    if (!name.empty()) FUZZ_CHECK(names.matches(name), "extra name not denied: " + show(extra));
  }
  check_grants(in, names);
  return 0;
}
