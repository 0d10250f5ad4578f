// The tree walk behind local_search: fd-relative, never following a symlink, skipping
// denied names, non-regular, hardlinked, binary and oversized files; literal or RE2 matching.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "policy/grant.hpp"
#include "policy/worktree_fs.hpp"

namespace toolwarden::daemon {

inline constexpr std::size_t kMaxQueryChars = 4096;
inline constexpr std::size_t kMaxMatchText = 500;

struct SearchRequest {
  std::string query;
  bool regex = false;
  std::size_t max_results = 200;
  std::size_t max_file_bytes = 1024 * 1024;
};

struct SearchMatch {
  std::string path;
  std::int64_t line = 0;
  std::string text;
};

struct SearchResult {
  std::vector<SearchMatch> matches;
  bool truncated = false;
  std::int64_t files_searched = 0;
};

/// DENIED_QUERY for an empty, over-long or invalid query; CANCELLED when `cancel` is set.
policy::Result<SearchResult> search_tree(const policy::WorktreeFs& fs,
                                         const policy::RelativePath& start,
                                         const policy::Grant& grant,
                                         const policy::SensitiveNames& sensitive,
                                         const SearchRequest& req, const std::atomic<int>& cancel);

}  // namespace toolwarden::daemon
