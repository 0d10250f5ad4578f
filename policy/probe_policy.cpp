#include "policy/probe_policy.hpp"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "policy/commands.hpp"
#include "policy/egress.hpp"
#include "sandbox/profile.hpp"
#include "store/digest.hpp"
#include "store/store.hpp"

namespace toolwarden::policy {
namespace json = boost::json;

namespace {

constexpr std::size_t kMaxPathText = 4096;
constexpr std::size_t kMaxEnvValue = 4096;

bool valid_policy_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (std::size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    (i > 0 && (c == '_' || c == '-' || c == '.'));
    if (!ok) return false;
  }
  return true;
}

bool valid_env_name(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
                    (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// Absolute, no empty, "." or ".." segment, no trailing slash, no NUL.
bool normalized_absolute(std::string_view p) {
  if (p.size() < 2 || p.size() > kMaxPathText || p.front() != '/' || p.back() == '/') return false;
  if (p.find('\0') != std::string_view::npos) return false;
  std::size_t start = 1;
  while (start <= p.size()) {
    std::size_t slash = p.find('/', start);
    if (slash == std::string_view::npos) slash = p.size();
    const auto seg = p.substr(start, slash - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    start = slash + 1;
  }
  return true;
}

bool in_trusted_dir(std::string_view path) {
  const auto slash = path.rfind('/');
  const auto dir = path.substr(0, slash);
  return std::any_of(std::begin(kProbeExecutableDirs), std::end(kProbeExecutableDirs),
                     [&](std::string_view d) { return d == dir; });
}

bool beneath(const std::string& path, const std::string& root) {
  if (root.empty()) return false;
  if (root == "/") return true;
  return path == root || path.rfind(root + "/", 0) == 0;
}

struct Bad {
  std::string message;
};

std::int64_t int_of(const json::value& v, const std::string& key, std::int64_t lo,
                    std::int64_t hi) {
  if (!v.is_int64() && !v.is_uint64()) throw Bad{key + " must be an integer"};
  const std::int64_t n = v.is_int64() ? v.get_int64()
                                      : static_cast<std::int64_t>(std::min<std::uint64_t>(
                                            v.get_uint64(), static_cast<std::uint64_t>(hi) + 1));
  if (n < lo || n > hi)
    throw Bad{key + " must be between " + std::to_string(lo) + " and " + std::to_string(hi)};
  return n;
}

std::vector<std::string> strings_of(const json::value& v, const std::string& key) {
  if (!v.is_array()) throw Bad{key + " must be an array of strings"};
  std::vector<std::string> out;
  for (const auto& e : v.get_array()) {
    if (!e.is_string()) throw Bad{key + " must be an array of strings"};
    out.emplace_back(e.get_string());
  }
  return out;
}

ProbePolicy parse_one(const json::value& v, const std::string& where) {
  if (!v.is_object()) throw Bad{where + " must be an object"};
  const auto& o = v.get_object();
  ProbePolicy p;
  bool has_id = false;
  for (const auto& kv : o) {
    const std::string key(kv.key());
    const std::string name = where + "." + key;
    const auto& val = kv.value();
    if (key == "id") {
      if (!val.is_string() || !valid_policy_id(val.get_string()))
        throw Bad{name + " must be 1-64 characters of a-z, 0-9, _ - . (starting a-z or 0-9)"};
      p.id = std::string(val.get_string());
      has_id = true;
    } else if (key == "allowed_executables") {
      p.allowed_executables = strings_of(val, name);
      for (const auto& e : p.allowed_executables) {
        if (!normalized_absolute(e))
          throw Bad{name + " entries must be absolute, normalized paths (\"" + e + "\")"};
      }
    } else if (key == "timeout_s") {
      p.timeout_s = static_cast<int>(int_of(val, name, 1, kMaxProbeTimeoutS));
    } else if (key == "max_output_bytes") {
      p.max_output_bytes = static_cast<std::uint64_t>(
          int_of(val, name, 1, static_cast<std::int64_t>(kMaxProbeOutputBytes)));
    } else if (key == "allowed_domains") {
      p.allowed_domains = strings_of(val, name);
      std::string why;
      if (!EgressAllowlist::from_hosts(p.allowed_domains, &why)) throw Bad{name + ": " + why};
    } else if (key == "environment") {
      if (!val.is_object()) throw Bad{name + " must be an object of strings"};
      for (const auto& e : val.get_object()) {
        const std::string var(e.key());
        const std::string ename = name + "." + var;
        if (!valid_env_name(var)) throw Bad{ename + ": not a valid variable name"};
        if (sandbox::is_injection_variable(var))
          throw Bad{ename + ": an injection variable, never passed to a sandbox"};
        if (var.rfind("TOOLWARDEN_", 0) == 0) throw Bad{ename + ": TOOLWARDEN_* is reserved"};
        if (!e.value().is_string()) throw Bad{ename + " must be a string"};
        const auto text = e.value().get_string();
        if (text.size() > kMaxEnvValue || text.find('\0') != json::string::npos)
          throw Bad{ename + " must be at most 4096 bytes without NUL"};
        p.environment[var] = std::string(text);
      }
    } else {
      throw Bad{"unknown key \"" + name + "\""};
    }
  }
  if (!has_id) throw Bad{where + ": missing \"id\""};
  p.sha256 = store::sha256_hex(store::canonical_json(p.to_json()));
  return p;
}

}  // namespace

json::object ProbePolicy::to_json() const {
  json::object o;
  o["id"] = id;
  json::array exes;
  for (const auto& e : allowed_executables) exes.emplace_back(e);
  o["allowed_executables"] = std::move(exes);
  o["timeout_s"] = timeout_s;
  o["max_output_bytes"] = max_output_bytes;
  json::array domains;
  for (const auto& d : allowed_domains) domains.emplace_back(d);
  o["allowed_domains"] = std::move(domains);
  json::object env;
  for (const auto& [k, v] : environment) env[k] = v;
  o["environment"] = std::move(env);
  return o;
}

std::optional<std::vector<ProbePolicy>> parse_probe_policies(const json::array& policies,
                                                             std::string* error) {
  std::vector<ProbePolicy> out;
  try {
    for (std::size_t i = 0; i < policies.size(); ++i) {
      out.push_back(parse_one(policies[i], "probe_policies[" + std::to_string(i) + "]"));
      for (std::size_t k = 0; k + 1 < out.size(); ++k) {
        if (out[k].id == out.back().id)
          throw Bad{"probe_policies[" + std::to_string(i) + "].id \"" + out.back().id +
                    "\" is used twice"};
      }
    }
  } catch (const Bad& b) {
    *error = b.message;
    return std::nullopt;
  }
  return out;
}

const ProbePolicy* find_probe_policy(const std::vector<ProbePolicy>& policies,
                                     std::string_view id) {
  for (const auto& p : policies)
    if (p.id == id) return &p;
  return nullptr;
}

Check check_probe_command(std::string_view command0, const ProbePolicy& policy) {
  if (command0.empty() || command0.size() > kMaxPathText ||
      command0.find('\0') != std::string_view::npos) {
    return deny(ErrorCode::kDeniedCommand, "command[0] must name an executable");
  }
  if (command0.find('/') == std::string_view::npos) {
    if (command0 == "." || command0 == "..")
      return deny(ErrorCode::kDeniedCommand, "command[0] must name an executable");
    return Allowed{};  // a bare name: looked up in the trusted directories only
  }
  if (command0.front() != '/') {
    return deny(ErrorCode::kDeniedCommand,
                "command[0] is a relative path, which would name a file of the snapshot; "
                "executables come from /usr/bin, /bin, /usr/sbin, /sbin, /usr/local/bin or the "
                "policy's allowed_executables");
  }
  if (!normalized_absolute(command0))
    return deny(ErrorCode::kDeniedCommand, "command[0] must be a normalized absolute path");
  const bool listed =
      std::find(policy.allowed_executables.begin(), policy.allowed_executables.end(), command0) !=
      policy.allowed_executables.end();
  if (!in_trusted_dir(command0) && !listed) {
    return deny(ErrorCode::kDeniedCommand,
                "command[0] is neither in /usr/bin, /bin, /usr/sbin, /sbin, /usr/local/bin nor "
                "listed in probe policy '" +
                    policy.id + "'");
  }
  return Allowed{};
}

Result<ProbeExecutable> resolve_probe_executable(std::string_view command0,
                                                 const ProbePolicy& policy,
                                                 const std::vector<std::string>& forbidden_roots) {
  if (auto ok = check_probe_command(command0, policy); !ok) return ok.denial();
  std::string candidate;
  if (command0.front() == '/') {
    candidate = std::string(command0);
  } else {
    for (std::string_view dir : kProbeExecutableDirs) {
      std::string c = std::string(dir) + "/" + std::string(command0);
      struct stat st {};
      if (::lstat(c.c_str(), &st) == 0) {
        candidate = std::move(c);
        break;
      }
    }
    if (candidate.empty()) {
      return deny(ErrorCode::kNotFound, "'" + std::string(command0) +
                                            "' is not in /usr/bin, /bin, /usr/sbin, /sbin or "
                                            "/usr/local/bin");
    }
  }
  char real[PATH_MAX];
  if (::realpath(candidate.c_str(), real) == nullptr)
    return deny(ErrorCode::kNotFound, "the executable does not exist");
  ProbeExecutable out;
  out.requested = std::string(command0);
  out.path = real;
  for (const auto& root : forbidden_roots) {
    if (beneath(out.path, root)) {
      return deny(ErrorCode::kDeniedCommand,
                  "the executable lies in the worktree or the daemon's state; probes never run "
                  "a file of the snapshot");
    }
  }
  // Reasons name no host path (SPEC §5): the plan shows what was asked for.
  std::string why;
  auto pin = pin_host_file(out.path, &why);
  if (!pin) {
    return deny(ErrorCode::kDeniedFile,
                "the executable is not a readable regular file, or is writable by group or others");
  }
  struct stat st {};
  if (::stat(out.path.c_str(), &st) != 0 || st.st_ino != pin->ino || st.st_dev != pin->dev ||
      (st.st_uid != 0 && st.st_uid != ::geteuid())) {
    return deny(ErrorCode::kDeniedFile, "the executable is owned by another user");
  }
  out.pin = std::move(*pin);
  return out;
}

}  // namespace toolwarden::policy
