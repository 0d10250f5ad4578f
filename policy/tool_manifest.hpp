// A custom tool's manifest, `tool.json` (SPEC §11), parsed strictly: every key is known, every
// value checked, and an invalid manifest is refused with a reason that names the key, e.g.
// "capabilities.network.hosts[2]: not a host name". Pure: nothing here touches the filesystem.
//
// Network hosts: see policy/network_host.hpp (no ":port": the proxy connects to 443 and 80).
//
// Run entries: an entry starting with '/' is an absolute path and one starting with '-' an
// option, both passed as they are; every other entry is a path in the tool's folder ("tool.py",
// "./bin/run", "." for the folder itself), without empty, "." or ".." segments, rewritten to the
// absolute path of the sealed copy when the tool runs. argv[0] is absolute or in the folder.
#pragma once

#include <boost/json/object.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/error_code.hpp"
#include "policy/network_host.hpp"

namespace toolwarden::policy {

inline constexpr std::size_t kMaxManifestBytes = 1 << 20;
inline constexpr std::size_t kMaxDescriptionChars = 1024;  // code points
inline constexpr std::size_t kMaxRunEntryBytes = 4096;
inline constexpr int kDefaultToolTimeoutS = 15;
inline constexpr int kMaxToolTimeoutS = 300;
inline constexpr std::size_t kMaxEnvNames = 64;
inline constexpr std::size_t kMaxNetworkHosts = 64;
inline constexpr std::size_t kMaxSchemaDepth = 16;  // the root schema is depth 1

enum class FilesystemWrite { none, tool_dir, workspace };
std::string_view to_string(FilesystemWrite w);

struct ToolCapabilities {
  FilesystemWrite filesystem_write = FilesystemWrite::none;
  std::vector<std::string> network_hosts;  // empty = "none"; normalised, in manifest order
  bool process_spawn = true;
  std::vector<std::string> secrets;  // env-var names, passed by name from the daemon
};

struct ToolManifest {
  std::string name;
  std::string description;
  boost::json::object input_schema;
  std::vector<std::string> run;
  int timeout_s = kDefaultToolTimeoutS;
  std::vector<std::string> required_env;
  ToolCapabilities capabilities;
};

/// Parses and checks a manifest → DENIED_ARGUMENTS with the offending key's path. Duplicate
/// keys are refused too: a reviewer must see the manifest that takes effect.
Result<ToolManifest> parse_tool_manifest(std::string_view json_text);

/// `[a-z][a-z0-9_]{0,63}`, not starting with "local_" or "probe_" and not "probes" (the
/// grant name of the probe tools, SPEC §12).
bool is_valid_tool_name(std::string_view name);

/// `[A-Z_][A-Z0-9_]*` and none the sandbox sets itself or refuses to pass: PATH, HOME, TMPDIR,
/// LANG, TERM, the proxy variables, TOOLWARDEN_*, and injection variables (LD_*, BASH_FUNC_*,
/// PYTHONPATH, ...). On refusal `*why` says which rule.
bool is_allowed_env_name(std::string_view name, std::string* why);

/// True when the run entry names a path in the tool's folder (neither absolute nor an option).
bool is_relative_run_entry(std::string_view entry);

/// For a relative run entry, the path inside the tool's folder it names: "./a/b" → "a/b",
/// "." → "" (the folder). nullopt for absolute entries, options and bad paths.
std::optional<std::string> run_entry_path(std::string_view entry);

/// The argv to execute: every relative entry becomes `tool_dir` + "/" + its path.
std::vector<std::string> resolve_run(const std::vector<std::string>& run,
                                     std::string_view tool_dir);

}  // namespace toolwarden::policy
