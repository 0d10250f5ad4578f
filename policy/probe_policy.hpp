// Probe policies (SPEC §12): what a probe may run, for how long, with how much output, which
// hosts it may reach and with which environment. They come only from the user's config, never
// from a repository, and are validated when the daemon starts.
//
// A probe's executable is resolved here: a bare name through /usr/bin, /bin, /usr/sbin, /sbin
// and /usr/local/bin (in that order); an absolute path only in one of those directories or when
// the policy lists it exactly; a relative path with a slash never (it would name a file of the
// snapshot). The file reached must be a regular file, not writable by group or others, owned by
// root or the daemon's user, and outside every forbidden root (the worktree, the state dir).
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/error_code.hpp"
#include "policy/file_pin.hpp"

namespace toolwarden::policy {

inline constexpr std::string_view kProbeExecutableDirs[] = {"/usr/bin", "/bin", "/usr/sbin",
                                                            "/sbin", "/usr/local/bin"};
inline constexpr int kMaxProbeTimeoutS = 3600;
inline constexpr std::uint64_t kMaxProbeOutputBytes = 64ull << 20;

struct ProbePolicy {
  std::string id;
  std::vector<std::string> allowed_executables;  // absolute, normalized paths
  int timeout_s = 60;
  std::uint64_t max_output_bytes = 1'000'000;  // stdout + stderr together
  std::vector<std::string> allowed_domains;    // the only hosts reachable (CONNECT proxy)
  std::map<std::string, std::string> environment;
  std::string sha256;  // of the canonical JSON of to_json(), set by parse_probe_policies

  /// The policy with every default filled in: what its digest covers.
  boost::json::object to_json() const;
};

/// Validates config `probe_policies`. On refusal returns nullopt and a message naming the key,
/// e.g. `probe_policies[1].timeout_s must be between 1 and 3600`.
std::optional<std::vector<ProbePolicy>> parse_probe_policies(const boost::json::array& policies,
                                                             std::string* error);

const ProbePolicy* find_probe_policy(const std::vector<ProbePolicy>& policies, std::string_view id);

struct ProbeExecutable {
  std::string requested;  // command[0] as the plan names it
  std::string path;       // realpath of the file that runs
  FilePin pin;            // its identity and SHA-256 when resolved
};

/// Checks command[0] without touching the filesystem → DENIED_COMMAND (relative with a slash,
/// not normalized, or absolute outside the trusted directories and not listed).
Check check_probe_command(std::string_view command0, const ProbePolicy& policy);

/// Resolves and pins command[0] (rules in the header comment) → DENIED_COMMAND, NOT_FOUND,
/// DENIED_FILE.
Result<ProbeExecutable> resolve_probe_executable(std::string_view command0,
                                                 const ProbePolicy& policy,
                                                 const std::vector<std::string>& forbidden_roots);

}  // namespace toolwarden::policy
