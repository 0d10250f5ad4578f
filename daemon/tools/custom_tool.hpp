// User-authored tools (SPEC §11) as tools of the job that was granted them: described from the
// manifest pinned at job creation, run from a sealed copy whose hash must equal the pin, with
// capabilities turned into a sandbox Profile (the kernel enforces them, not the tool's
// language), and a sanitized result.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "daemon/tools/local_test.hpp"
#include "daemon/tools/tool.hpp"
#include "policy/grant.hpp"
#include "policy/path_rules.hpp"

namespace toolwarden::daemon {

/// What every custom tool of this daemon shares.
struct CustomToolEnv {
  std::filesystem::path state_dir;  // runs/ (sealed copies, overlays) and artifacts/ live here
  std::shared_ptr<const policy::SensitiveNames> sensitive;
  std::shared_ptr<const SandboxReadiness> readiness;
};

/// The mount point of the sealed copy inside the sandbox.
inline constexpr const char* kToolDirInside = "/toolwarden/tool";

/// A tool for `pin` (its manifest parsed again); null with `*error` when the pin's manifest is
/// not a valid manifest for `name`.
std::shared_ptr<const Tool> make_custom_tool(const std::string& name,
                                             const policy::CustomToolPin& pin,
                                             const CustomToolEnv& env, std::string* error);

/// The custom tools of a grant by name; a pin that cannot become a tool is left out (with a
/// logged reason) and its calls are then refused as unknown.
std::map<std::string, std::shared_ptr<const Tool>, std::less<>> make_custom_tools(
    const policy::Grant& grant, const CustomToolEnv& env);

}  // namespace toolwarden::daemon
