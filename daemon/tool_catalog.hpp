// Where custom tools are found (SPEC §11): the user's own folder (trusted) and a worktree's
// `.toolwarden/tools/` (untrusted until `toolwarden tools trust` records its hash). Blocking
// file work: call it on the pool.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "policy/grant.hpp"
#include "policy/tool_folder.hpp"

namespace toolwarden::daemon {

struct CatalogEntry {
  policy::DiscoveredTool tool;
  std::string folder;         // absolute path of the tool's folder
  std::string manifest_text;  // tool.json as read at discovery ("" when unreadable)
  bool shadowed = false;      // a project tool hidden by a user tool of the same name
};

/// The user's tools, then, when `worktree` (a realpath) is given, the worktree's. Project
/// folders are reached without following any symlink below the worktree.
std::vector<CatalogEntry> discover_catalog(const std::filesystem::path& user_tools,
                                           const std::string& worktree);

/// The tool a job may be granted under `name`: the user's, else the worktree's (shadowed ones
/// never); nullptr when there is none.
const CatalogEntry* find_in_catalog(const std::vector<CatalogEntry>& catalog,
                                    std::string_view name);

/// The pin a job records for `entry`.
policy::CustomToolPin pin_of(const CatalogEntry& entry);

}  // namespace toolwarden::daemon
