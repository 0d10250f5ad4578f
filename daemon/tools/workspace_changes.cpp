#include "daemon/tools/workspace_changes.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <memory>

#include "daemon/tools/atomic_write.hpp"
#include "policy/worktree_fs.hpp"
#include "sandbox/unique_fd.hpp"

namespace toolwarden::daemon {
namespace {

using policy::Denial;
using policy::ErrorCode;

enum class Kind { make_dir, write_file, remove_file };

struct Planned {
  Kind kind;
  policy::RelativePath path;
  mode_t mode = 0644;
  std::string change;
};

constexpr std::size_t kMaxChanges = 10'000;
constexpr int kMaxDepth = 64;

class Planner {
 public:
  Planner(const policy::Grant& grant, const policy::SensitiveNames& sensitive,
          const policy::WorktreeFs& worktree, std::uint64_t max_file_bytes,
          std::uint64_t max_total_bytes)
      : grant_(grant),
        sensitive_(sensitive),
        worktree_(worktree),
        max_(max_file_bytes),
        max_total_(max_total_bytes) {}

  std::optional<Denial> walk(int dirfd, const std::vector<std::string>& prefix, int depth) {
    if (depth > kMaxDepth) return policy::deny(ErrorCode::kDeniedFile, "changes nest too deep");
    // Sorted: a stable order for the report. A read error refuses the changes (it used to end
    // the listing silently, so a change could have been left out).
    std::vector<std::string> names;
    if (!policy::list_dir(dirfd, &names))
      return policy::deny(ErrorCode::kLocalToolFailed, "cannot read the changes");
    for (const auto& name : names) {
      auto segments = prefix;
      segments.push_back(name);
      if (auto d = visit(dirfd, name, segments, depth)) return d;
    }
    return std::nullopt;
  }

  std::vector<Planned> take() { return std::move(planned_); }

 private:
  std::optional<Denial> visit(int dirfd, const std::string& name,
                              const std::vector<std::string>& segments, int depth) {
    policy::RelativePath rel{segments};
    // The same checks as a local_edit of this path (SPEC §7), then write access.
    auto allowed = grant_.authorize_path(rel.text(), sensitive_, false);
    if (!allowed) return allowed.denial();
    if (grant_.access != policy::Access::write)
      return policy::deny(ErrorCode::kDeniedReadOnly, "the job has read access only");
    if (planned_.size() >= kMaxChanges)
      return policy::deny(ErrorCode::kDeniedSize, "the run changed too many files");
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return policy::deny(ErrorCode::kLocalToolFailed, "cannot read the changes");
    auto existing = worktree_.open_beneath(rel, O_PATH);
    const bool exists = existing.ok();
    if (!exists && existing.denial().code != ErrorCode::kNotFound) return existing.denial();
    const bool exists_as_dir = exists && S_ISDIR(existing->st.st_mode);
    // What is there now gets local_edit's checks too: never through a symlink (a directory
    // may have been swapped for one since the run), never a file with another hard link.
    if (exists && S_ISLNK(existing->st.st_mode))
      return policy::deny(ErrorCode::kDeniedSymlink, rel.text() + ": is a symlink in the worktree");
    if (exists && S_ISREG(existing->st.st_mode) && existing->st.st_nlink != 1)
      return policy::deny(ErrorCode::kDeniedHardlink,
                          rel.text() + ": the worktree file has more than one link");
    if (exists && !exists_as_dir && !S_ISREG(existing->st.st_mode))
      return policy::deny(ErrorCode::kDeniedFile, rel.text() + ": not a regular file");

    if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {  // an overlayfs whiteout
      if (!exists) return std::nullopt;                        // made and removed within the run
      if (exists_as_dir)
        return policy::deny(ErrorCode::kDeniedFile, rel.text() + ": removing a directory");
      planned_.push_back(Planned{Kind::remove_file, rel, 0, "deleted"});
      return std::nullopt;
    }
    if (S_ISLNK(st.st_mode))
      return policy::deny(ErrorCode::kDeniedSymlink, rel.text() + ": the run made a symlink");
    if (S_ISDIR(st.st_mode)) {
      if (exists && !exists_as_dir)
        return policy::deny(ErrorCode::kDeniedFile, rel.text() + ": a file became a directory");
      char opaque[8];
      if (exists && ::getxattr(proc_path(dirfd, name).c_str(), "user.overlay.opaque", opaque,
                               sizeof opaque) > 0) {
        return policy::deny(ErrorCode::kDeniedFile, rel.text() + ": a directory was replaced");
      }
      if (!exists) planned_.push_back(Planned{Kind::make_dir, rel, 0755, "created"});
      UniqueFd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) return policy::deny(ErrorCode::kLocalToolFailed, "cannot read the changes");
      return walk(sub.get(), segments, depth + 1);
    }
    if (!S_ISREG(st.st_mode))
      return policy::deny(ErrorCode::kDeniedFile, rel.text() + ": not a regular file");
    if (st.st_nlink != 1)
      return policy::deny(ErrorCode::kDeniedHardlink, rel.text() + ": more than one link");
    if (static_cast<std::uint64_t>(st.st_size) > max_)
      return policy::deny(ErrorCode::kDeniedSize, rel.text() + ": larger than the size limit");
    if (exists_as_dir)
      return policy::deny(ErrorCode::kDeniedFile, rel.text() + ": a directory became a file");
    total_ += static_cast<std::uint64_t>(st.st_size);
    if (total_ > max_total_)
      return policy::deny(ErrorCode::kDeniedSize,
                          "the run changed more than " + std::to_string(max_total_ >> 20) + " MiB");
    // The content is read when applied, one file at a time, not held for the whole plan.
    planned_.push_back(
        Planned{Kind::write_file, rel, st.st_mode & 0777, exists ? "modified" : "created"});
    return std::nullopt;
  }

  static std::string proc_path(int dirfd, const std::string& name) {
    return "/proc/self/fd/" + std::to_string(dirfd) + "/" + name;
  }

  const policy::Grant& grant_;
  const policy::SensitiveNames& sensitive_;
  const policy::WorktreeFs& worktree_;
  std::uint64_t max_;
  std::uint64_t max_total_;
  std::uint64_t total_ = 0;
  std::vector<Planned> planned_;
};

std::optional<Denial> apply(const policy::WorktreeFs& worktree, int upper_fd, const Planned& p,
                            std::uint64_t max_file_bytes) {
  policy::RelativePath parent = p.path;
  const std::string name = parent.segments.back();
  parent.segments.pop_back();
  auto dir = worktree.open_beneath(parent, O_RDONLY | O_DIRECTORY);
  if (!dir) return dir.denial();
  const int dfd = dir->fd.get();
  switch (p.kind) {
    case Kind::make_dir:
      if (::mkdirat(dfd, name.c_str(), p.mode) != 0 && errno != EEXIST)
        return policy::deny(ErrorCode::kLocalToolFailed, "cannot create " + p.path.text());
      return std::nullopt;
    case Kind::write_file: {
      UniqueFd f(policy::open_beneath_fd(upper_fd, p.path.text(), O_RDONLY));
      std::string content;
      struct stat st {};
      if (!f || ::fstat(f.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
          !policy::read_all(f.get(), max_file_bytes, &content)) {
        return policy::deny(ErrorCode::kLocalToolFailed,
                            "cannot read the change of " + p.path.text());
      }
      return replace_file(dfd, name, content, p.mode);
    }
    case Kind::remove_file:
      if (::unlinkat(dfd, name.c_str(), 0) != 0 && errno != ENOENT)
        return policy::deny(ErrorCode::kLocalToolFailed, "cannot remove " + p.path.text());
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

policy::Result<std::vector<WorkspaceChange>> apply_workspace_changes(
    const std::string& upper_dir, const policy::Grant& grant,
    const policy::SensitiveNames& sensitive, std::uint64_t max_file_bytes,
    std::uint64_t max_total_bytes) {
  auto worktree = policy::WorktreeFs::open(grant.worktree);
  if (!worktree) return worktree.denial();
  UniqueFd upper(::open(upper_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!upper) return policy::deny(ErrorCode::kLocalToolFailed, "cannot read the changes");
  Planner planner(grant, sensitive, worktree.value(), max_file_bytes, max_total_bytes);
  if (auto refused = planner.walk(upper.get(), {}, 0)) return *refused;
  std::vector<WorkspaceChange> done;
  for (const auto& p : planner.take()) {
    if (auto failed = apply(worktree.value(), upper.get(), p, max_file_bytes)) return *failed;
    done.push_back(WorkspaceChange{p.path.text(), p.change});
  }
  return done;
}

}  // namespace toolwarden::daemon
