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

std::vector<const protocol::ToolDescriptor*> ToolRegistry::granted(
    const policy::Grant& grant) const {
  std::vector<const protocol::ToolDescriptor*> out;
  for (const auto& name : grant.tools) {
    if (const Tool* t = find(name)) out.push_back(&t->descriptor());
  }
  return out;
}

}  // namespace toolwarden::daemon
