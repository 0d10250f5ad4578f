#include "daemon/tool_catalog.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <set>

#include "policy/tool_manifest.hpp"
#include "policy/worktree_fs.hpp"

namespace toolwarden::daemon {
namespace {

std::string read_manifest(int tools_dir_fd, const std::string& name) {
  auto folder = policy::open_tool_folder(tools_dir_fd, name);
  if (!folder) return {};
  UniqueFd m(::openat(folder->get(), "tool.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  std::string text;
  if (!m || !policy::read_all(m.get(), policy::kMaxManifestBytes, &text)) return {};
  return text;
}

void add_scope(std::vector<CatalogEntry>& out, int dir_fd, policy::ToolScope scope,
               const std::string& dir_path) {
  for (auto& t : policy::discover_tools(dir_fd, scope)) {
    CatalogEntry e;
    e.folder = dir_path + "/" + t.name;
    if (t.valid()) e.manifest_text = read_manifest(dir_fd, t.name);
    e.tool = std::move(t);
    out.push_back(std::move(e));
  }
}

}  // namespace

std::vector<CatalogEntry> discover_catalog(const std::filesystem::path& user_tools,
                                           const std::string& worktree) {
  std::vector<CatalogEntry> out;
  std::set<std::string> user_names;
  // The user's own folder may sit behind symlinks (dotfile managers do that); nothing inside
  // a tool folder is ever followed.
  if (!user_tools.empty()) {
    UniqueFd dir(::open(user_tools.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir) add_scope(out, dir.get(), policy::ToolScope::user, user_tools.string());
    for (const auto& e : out) user_names.insert(e.tool.name);
  }
  if (!worktree.empty()) {
    auto fs = policy::WorktreeFs::open(worktree);
    if (fs) {
      auto dir = fs->open_directory(policy::RelativePath{{".toolwarden", "tools"}});
      if (dir) {
        const std::size_t first = out.size();
        add_scope(out, dir->fd.get(), policy::ToolScope::project, worktree + "/.toolwarden/tools");
        for (std::size_t i = first; i < out.size(); ++i)
          out[i].shadowed = user_names.count(out[i].tool.name) != 0;
      }
    }
  }
  return out;
}

const CatalogEntry* find_in_catalog(const std::vector<CatalogEntry>& catalog,
                                    std::string_view name) {
  for (const auto& e : catalog) {
    if (e.tool.name == name && !e.shadowed) return &e;
  }
  return nullptr;
}

policy::CustomToolPin pin_of(const CatalogEntry& entry) {
  return policy::CustomToolPin{std::string(policy::to_string(entry.tool.scope)), entry.folder,
                               entry.tool.hash, entry.manifest_text};
}

}  // namespace toolwarden::daemon
