// Pure path decisions of SPEC §7: request path syntax, sensitive names, scopes.
// Nothing here touches the filesystem.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/error_code.hpp"

namespace toolwarden::policy {

inline constexpr std::size_t kMaxPathBytes = 4096;

/// A request path split into checked segments; empty `segments` names the worktree root.
struct RelativePath {
  std::vector<std::string> segments;
  std::string text() const;  // "a/b/c", or "." for the root
};

/// Checks syntax: relative, valid UTF-8, no NUL or backslash, ≤ 4096 bytes, no empty, "." or
/// ".." segment. A lone "." (the root) is accepted only when `allow_root`. → DENIED_PATH
Result<RelativePath> parse_request_path(std::string_view path, bool allow_root);

bool is_valid_utf8(std::string_view s);

/// Sensitive names (SPEC §7) plus extra literal names from config, matched per segment and
/// case-insensitively. Patterns ending in '*' match by prefix.
class SensitiveNames {
 public:
  SensitiveNames();  // the SPEC's built-in list
  void add(std::string_view pattern);
  bool matches(std::string_view segment) const;
  /// The first sensitive segment of `path`, if any.
  std::optional<std::string> first_match(const RelativePath& path) const;

 private:
  struct Pattern {
    std::string lowered;
    bool prefix = false;
  };
  std::vector<Pattern> patterns_;
};

/// A grant scope: the worktree ("**"), a subtree ("dir", "dir/", "dir/**") or an exact file,
/// normalised to its segments (empty = everything).
struct Scope {
  std::vector<std::string> segments;
  bool everything() const { return segments.empty(); }
  std::string text() const;  // "**", or "dir/sub"
  /// True when `path` is the scope itself or lies beneath it.
  bool covers(const RelativePath& path) const;
  /// True when every path this scope covers is covered by `outer`.
  bool within(const Scope& outer) const;
  bool operator==(const Scope&) const = default;
};

/// Parses a scope; an invalid one refuses the job, so the error is a message, not a code.
std::optional<Scope> parse_scope(std::string_view text, std::string* error);

}  // namespace toolwarden::policy
