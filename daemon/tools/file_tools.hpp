// local_read, local_list, local_search, local_edit (SPEC §6) under the path policy (SPEC §7).
// In-process, no spawn: every access goes through policy::WorktreeFs.
#pragma once

#include <memory>

#include "daemon/tools/tool.hpp"
#include "policy/path_rules.hpp"

namespace toolwarden::daemon {

std::unique_ptr<Tool> make_local_read(std::shared_ptr<const policy::SensitiveNames> sensitive);
std::unique_ptr<Tool> make_local_list(std::shared_ptr<const policy::SensitiveNames> sensitive);
std::unique_ptr<Tool> make_local_search(std::shared_ptr<const policy::SensitiveNames> sensitive);
std::unique_ptr<Tool> make_local_edit(std::shared_ptr<const policy::SensitiveNames> sensitive);

}  // namespace toolwarden::daemon
