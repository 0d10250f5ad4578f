// The built-in tools of SPEC §6.
#pragma once

#include "daemon/tools/local_test.hpp"
#include "daemon/tools/tool.hpp"
#include "policy/path_rules.hpp"

namespace toolwarden::daemon {

void register_builtin_tools(ToolRegistry& registry,
                            std::shared_ptr<const policy::SensitiveNames> sensitive,
                            std::shared_ptr<const policy::CommandRegistry> commands,
                            std::shared_ptr<const SandboxReadiness> readiness);

}  // namespace toolwarden::daemon
