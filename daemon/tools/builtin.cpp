#include "daemon/tools/builtin.hpp"

namespace toolwarden::daemon {

void register_builtin_tools(ToolRegistry& registry) { (void)registry; }

}  // namespace toolwarden::daemon
