#include "daemon/tools/builtin.hpp"

#include "daemon/tools/file_tools.hpp"

namespace toolwarden::daemon {

void register_builtin_tools(ToolRegistry& registry,
                            std::shared_ptr<const policy::SensitiveNames> sensitive,
                            std::shared_ptr<const policy::CommandRegistry> commands,
                            std::shared_ptr<const SandboxReadiness> readiness) {
  registry.add(make_local_read(sensitive));
  registry.add(make_local_list(sensitive));
  registry.add(make_local_search(sensitive));
  registry.add(make_local_edit(sensitive));
  registry.add(make_local_test(std::move(commands), std::move(readiness)));
}

}  // namespace toolwarden::daemon
