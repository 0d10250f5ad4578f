// The built-in tools of SPEC §6.
#pragma once

#include "daemon/config.hpp"
#include "daemon/tools/local_test.hpp"
#include "daemon/tools/tool.hpp"

namespace toolwarden::daemon {

void register_builtin_tools(ToolRegistry& registry, const Config& config,
                            std::shared_ptr<const policy::CommandRegistry> commands,
                            std::shared_ptr<const SandboxReadiness> readiness);

}  // namespace toolwarden::daemon
