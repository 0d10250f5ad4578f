// What a job may do (SPEC §3 `job create`, §4 `task`): access, scopes, commands and tools.
// Pure decisions; the worktree's realpath is resolved by the caller.
#pragma once

#include <boost/json/object.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "policy/error_code.hpp"
#include "policy/file_pin.hpp"
#include "policy/path_rules.hpp"

namespace toolwarden::policy {

enum class Access { read, write };
std::string_view to_string(Access a);

/// The built-in tools a job can be granted, and the grant name `probes`.
inline constexpr std::string_view kBuiltinTools[] = {"local_read", "local_list", "local_search",
                                                     "local_edit", "local_test", "probes",
                                                     "probe_plan", "probe_run",  "probe_show"};

/// `--tool probes` grants the three probe tools of SPEC §12 (never granted by default).
inline constexpr std::string_view kProbesGrant = "probes";
inline constexpr std::string_view kProbeTools[] = {"probe_plan", "probe_run", "probe_show"};

/// A custom tool granted to a job (SPEC §11), pinned when the job was created: the folder it
/// was found in and the hash of its content then. Execution re-checks the hash.
struct CustomToolPin {
  std::string scope;   // "user" or "project"
  std::string folder;  // absolute path of the tool's folder
  std::string sha256;
  std::string manifest;  // tool.json as found, for tools/list; the run re-reads the sealed one
};

struct Grant {
  std::string worktree;  // absolute realpath of a directory
  Access access = Access::read;
  std::vector<Scope> allowed;
  std::vector<Scope> blocked;
  std::vector<std::string> commands;
  std::vector<std::string> tools;
  /// Identity and SHA-256 of each granted command's read_paths, pinned when the job was
  /// created (SPEC §9).
  std::map<std::string, FilePin> read_pins;
  /// The granted custom tools by name (each also listed in `tools`).
  std::map<std::string, CustomToolPin> custom_tools;

  bool grants_tool(std::string_view name) const;
  /// The tool may run for this job → else DENIED_READ_ONLY (an editing tool without write
  /// access) or DENIED_TOOL (not granted).
  Check authorize_tool(std::string_view name) const;
  /// SPEC §7 in order: syntax and sensitive names → DENIED_PATH, then scopes → DENIED_SCOPE.
  /// A lone "." (the root) only when `allow_root`; the root passes the scope check when some
  /// allowed scope lies below it, and callers then filter what they show.
  Result<RelativePath> authorize_path(std::string_view path, const SensitiveNames& sensitive,
                                      bool allow_root) const;
  /// True when some allowed scope lies at or below `dir` (so listing `dir` can show a way in).
  bool leads_into_scope(const RelativePath& dir) const;
  /// Path in an allowed scope and in no blocked scope → else DENIED_SCOPE.
  Check authorize_scope(const RelativePath& path) const;

  boost::json::object to_json() const;
  static std::optional<Grant> from_json(const boost::json::object& o, std::string* error);
};

/// What the agent's task package asks for (SPEC §4).
struct TaskRequest {
  std::vector<Scope> allowed;
  Access access = Access::read;
  std::vector<std::string> required_commands;
};

/// The request of `job.create` before it becomes a grant.
struct JobRequest {
  std::string worktree;  // realpath, resolved by the caller
  std::optional<std::string> access;
  std::vector<std::string> allowed_paths;
  std::vector<std::string> blocked_paths;
  std::vector<std::string> commands;
  std::vector<std::string> tools;
  std::optional<boost::json::object> task;
  /// The custom tools found for the names in `tools` that are not built in (the caller
  /// discovers them; a requested name missing here is an unknown tool).
  std::map<std::string, CustomToolPin> custom_tools;
};

/// Validates a job request into its effective grant, intersected with `task` when given.
/// `known_commands` are the command ids the config registers. On refusal returns nullopt and
/// a message naming what is wrong.
std::optional<Grant> build_grant(const JobRequest& req,
                                 const std::vector<std::string>& known_commands,
                                 std::string* error);

/// The tools a job gets by default: read/list/search, edit with write, test with commands.
std::vector<std::string> default_tools(Access access, bool has_commands);

}  // namespace toolwarden::policy
