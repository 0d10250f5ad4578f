#include "daemon/tools/tool.hpp"

namespace toolwarden::daemon {

void ToolRegistry::add(std::unique_ptr<Tool> tool) {
  std::string name = tool->descriptor().name;
  tools_[std::move(name)] = std::move(tool);
}

const Tool* ToolRegistry::find(std::string_view name) const {
  auto it = tools_.find(name);
  return it == tools_.end() ? nullptr : it->second.get();
}

}  // namespace toolwarden::daemon
