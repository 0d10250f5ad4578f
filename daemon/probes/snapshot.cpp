#include "daemon/probes/snapshot.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "policy/worktree_fs.hpp"
#include "store/digest.hpp"

namespace toolwarden::daemon {
namespace json = boost::json;
using policy::deny;
using policy::ErrorCode;

namespace {

constexpr std::size_t kMaxDepth = 128;

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const auto slash = path.find('/', start);
    out.push_back(path.substr(start, slash == std::string::npos ? slash : slash - start));
    if (slash == std::string::npos) return out;
    start = slash + 1;
  }
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

policy::Denial write_failed(const std::string& what) {
  return deny(ErrorCode::kLocalToolFailed,
              "cannot write " + what + " (" + std::string(std::strerror(errno)) + ")");
}

enum class ReadOutcome { ok, too_large, failed };

// Reads the whole of `fd` if it holds at most `max` bytes.
ReadOutcome read_capped(int fd, std::uint64_t max, std::string* out) {
  out->clear();
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ReadOutcome::failed;
    if (n == 0) return ReadOutcome::ok;
    if (out->size() + static_cast<std::size_t>(n) > max) return ReadOutcome::too_large;
    out->append(buf, static_cast<std::size_t>(n));
  }
}

class CaptureWalk {
 public:
  CaptureWalk(const CaptureRules& rules, store::BlobBatch& batch) : rules_(rules), batch_(batch) {}

  std::optional<policy::Denial> run(int root_fd) {
    struct stat st {};
    if (::fstat(root_fd, &st) != 0) return deny(ErrorCode::kLocalToolFailed, "cannot stat");
    dev_ = st.st_dev;
    return walk(root_fd, 0);
  }

  Capture take() {
    // Bytewise path order (the walk's order is per directory: "a/b" comes before "a.txt").
    std::sort(out_.entries.begin(), out_.entries.end(),
              [](const auto& a, const auto& b) { return a.path < b.path; });
    out_.manifest_sha256 = manifest_digest(out_.entries);
    return std::move(out_);
  }

 private:
  std::string current(const std::string& name) const {
    std::string rel;
    for (const auto& s : segments_) rel += s + "/";
    return rel + name;
  }

  // SPEC §7 syntax for one segment (valid UTF-8, no backslash, not "." or "..").
  static bool valid_segment(std::string_view name) {
    return !name.empty() && name != "." && name != ".." &&
           name.find('\\') == std::string_view::npos && policy::is_valid_utf8(name);
  }

  bool in_scope_file(const std::string& name) const {
    if (rules_.scope == nullptr) return true;
    policy::RelativePath p{segments_};
    p.segments.push_back(name);
    return static_cast<bool>(rules_.scope->authorize_scope(p));
  }

  bool in_scope_dir(const std::string& name) const {
    if (rules_.scope == nullptr) return true;
    policy::RelativePath p{segments_};
    p.segments.push_back(name);
    const auto& g = *rules_.scope;
    for (const auto& b : g.blocked)
      if (b.covers(p)) return false;
    for (const auto& a : g.allowed)
      if (a.covers(p)) return true;
    return g.leads_into_scope(p);
  }

  std::optional<policy::Denial> walk(int dir_fd, std::size_t depth) {
    std::vector<std::string> names;
    if (!policy::list_dir(dir_fd, &names)) {
      return deny(ErrorCode::kLocalToolFailed,
                  "cannot list a directory (" + std::string(std::strerror(errno)) + ")");
    }
    for (const auto& name : names) {
      const std::string rel = current(name);
      if (!valid_segment(name) || rel.size() > policy::kMaxPathBytes) {
        ++out_.skipped.bad_name;
        continue;
      }
      if (rules_.sensitive.matches(name)) {
        ++out_.skipped.sensitive;
        continue;
      }
      struct stat lst {};
      if (::fstatat(dir_fd, name.c_str(), &lst, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone
      std::optional<policy::Denial> bad;
      if (S_ISLNK(lst.st_mode)) {
        if (in_scope_file(name)) {
          ++out_.skipped.symlinks;
          out_.entries.push_back(store::SnapshotFile{rel, true, 0, 0, {}});
        } else {
          ++out_.skipped.out_of_scope;
        }
      } else if (S_ISDIR(lst.st_mode)) {
        bad = enter(dir_fd, name, lst, depth);
      } else if (S_ISREG(lst.st_mode)) {
        bad = capture_file(dir_fd, name, rel, lst);
      } else {
        ++out_.skipped.special;
      }
      if (bad) return bad;
    }
    return std::nullopt;
  }

  std::optional<policy::Denial> enter(int dir_fd, const std::string& name, const struct stat& lst,
                                      std::size_t depth) {
    if (lst.st_dev != dev_) {
      ++out_.skipped.mount_points;
      return std::nullopt;
    }
    for (const auto& [dev, ino] : rules_.excluded_dirs) {
      if (lst.st_dev == dev && lst.st_ino == ino) {
        ++out_.skipped.daemon_state;
        return std::nullopt;
      }
    }
    if (!in_scope_dir(name)) {
      ++out_.skipped.out_of_scope;
      return std::nullopt;
    }
    if (depth + 1 > kMaxDepth) {
      return deny(ErrorCode::kDeniedSize,
                  "directories nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    UniqueFd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    // Swapped (for a symlink, say) since the look: left out, as it would have been then.
    if (!sub || ::fstat(sub.get(), &st) != 0 || st.st_ino != lst.st_ino || st.st_dev != dev_)
      return std::nullopt;
    segments_.push_back(name);
    auto bad = walk(sub.get(), depth + 1);
    segments_.pop_back();
    return bad;
  }

  std::optional<policy::Denial> capture_file(int dir_fd, const std::string& name,
                                             const std::string& rel, const struct stat& lst) {
    if (!in_scope_file(name)) {
      ++out_.skipped.out_of_scope;
      return std::nullopt;
    }
    if (lst.st_nlink != 1) {
      ++out_.skipped.hardlinked;
      return std::nullopt;
    }
    if (static_cast<std::uint64_t>(lst.st_size) > rules_.max_file_bytes) {
      ++out_.skipped.too_large;
      return std::nullopt;
    }
    // O_NONBLOCK and O_NOCTTY: an entry swapped for a FIFO or a terminal must not block or
    // attach; the checks below run on the opened fd, which is what is read.
    UniqueFd fd(
        ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_ino != lst.st_ino ||
        st.st_dev != dev_) {
      ++out_.skipped.special;  // changed under us; not what was looked at
      return std::nullopt;
    }
    if (st.st_nlink != 1) {
      ++out_.skipped.hardlinked;
      return std::nullopt;
    }
    switch (read_capped(fd.get(), rules_.max_file_bytes, &buf_)) {
      case ReadOutcome::ok:
        break;
      case ReadOutcome::too_large:  // grew since the look
        ++out_.skipped.too_large;
        return std::nullopt;
      case ReadOutcome::failed:
        return deny(ErrorCode::kLocalToolFailed, rel + ": cannot be read");
    }
    if (++out_.files > static_cast<std::int64_t>(rules_.max_files)) {
      return deny(ErrorCode::kDeniedSize,
                  "the worktree holds more than " + std::to_string(rules_.max_files) + " files");
    }
    const std::string sha = store::sha256_hex(buf_);
    auto staged = batch_.stage(sha, buf_);
    if (!staged) {
      return deny(ErrorCode::kLocalToolFailed,
                  "cannot store a blob (" + std::string(std::strerror(errno)) + ")");
    }
    out_.new_bytes += static_cast<std::int64_t>(*staged);
    if (static_cast<std::uint64_t>(out_.new_bytes) > rules_.byte_budget) {
      return deny(ErrorCode::kDeniedSize,
                  "the snapshot needs more new disk space than the state dir has free beyond "
                  "what running probes reserved");
    }
    out_.bytes += static_cast<std::int64_t>(buf_.size());
    out_.entries.push_back(store::SnapshotFile{rel, false,
                                               static_cast<std::uint32_t>(st.st_mode & 0777),
                                               static_cast<std::int64_t>(buf_.size()), sha});
    return std::nullopt;
  }

  const CaptureRules& rules_;
  store::BlobBatch& batch_;
  dev_t dev_ = 0;
  std::vector<std::string> segments_;
  std::string buf_;
  Capture out_;
};

// The open directories of a materialization, from the root down to the current one.
class DirStack {
 public:
  explicit DirStack(int root_fd) : root_fd_(root_fd) {}

  // Enters `dirs` (path segments below the root), creating what is missing; -1 on failure.
  int enter(const std::vector<std::string>& dirs) {
    std::size_t common = 0;
    while (common < names_.size() && common < dirs.size() && names_[common] == dirs[common])
      ++common;
    names_.resize(common);
    fds_.resize(common);
    for (std::size_t i = common; i < dirs.size(); ++i) {
      const int parent = fds_.empty() ? root_fd_ : fds_.back().get();
      if (::mkdirat(parent, dirs[i].c_str(), 0755) != 0 && errno != EEXIST) return -1;
      UniqueFd fd(
          ::openat(parent, dirs[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) return -1;
      names_.push_back(dirs[i]);
      fds_.push_back(std::move(fd));
    }
    return fds_.empty() ? root_fd_ : fds_.back().get();
  }

 private:
  int root_fd_;
  std::vector<std::string> names_;
  std::vector<UniqueFd> fds_;
};

policy::Check copy_blob(const store::SnapshotFile& f, const store::BlobStore& blobs, int dir_fd,
                        const std::string& name) {
  UniqueFd in = blobs.open(f.sha256);
  struct stat st {};
  if (!in || ::fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != f.size) {
    return deny(ErrorCode::kDeniedIntegrity,
                "the stored content of " + f.path + " is missing or damaged");
  }
  UniqueFd out(
      ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) return write_failed(f.path);
  store::Sha256 digest;
  std::int64_t copied = 0;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(in.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return deny(ErrorCode::kDeniedIntegrity,
                  "the stored content of " + f.path + " cannot be read");
    if (n == 0) break;
    const std::string_view chunk(buf, static_cast<std::size_t>(n));
    digest.update(chunk);
    copied += n;
    if (!write_all(out.get(), chunk)) return write_failed(f.path);
  }
  // Verified from the very bytes written, so what the probe sees is what was captured.
  if (copied != f.size || digest.finish_hex() != f.sha256) {
    return deny(ErrorCode::kDeniedIntegrity,
                "the stored content of " + f.path + " does not match its digest");
  }
  if (::fchmod(out.get(), static_cast<mode_t>(f.mode & 0777)) != 0) return write_failed(f.path);
  return policy::Allowed{};
}

}  // namespace

json::object CaptureSkips::to_json() const {
  return json::object{{"symlinks", symlinks},         {"special", special},
                      {"hardlinked", hardlinked},     {"too_large", too_large},
                      {"sensitive", sensitive},       {"bad_name", bad_name},
                      {"out_of_scope", out_of_scope}, {"mount_points", mount_points},
                      {"daemon_state", daemon_state}};
}

std::string manifest_digest(const std::vector<store::SnapshotFile>& entries) {
  std::vector<const store::SnapshotFile*> sorted;
  sorted.reserve(entries.size());
  for (const auto& e : entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->path < b->path; });
  store::Sha256 h;
  static constexpr char kHeader[] = "toolwarden-snapshot-v1";
  h.update(std::string_view(kHeader, sizeof kHeader));  // with its NUL
  for (const auto* e : sorted) {
    std::string line;
    if (e->symlink) {
      line = "l - - - ";
    } else {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(e->mode & 0777));
      line = std::string("f ") + mode + " " + std::to_string(e->size) + " " + e->sha256 + " ";
    }
    line += e->path;
    line += '\0';
    h.update(line);
  }
  return h.finish_hex();
}

policy::Result<Capture> capture_worktree(const std::string& worktree, const CaptureRules& rules,
                                         store::BlobBatch& batch) {
  auto fs = policy::WorktreeFs::open(worktree);
  if (!fs) return fs.denial();
  UniqueFd root(::openat(fs->root_fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) return deny(ErrorCode::kNotFound, "the worktree cannot be opened");
  CaptureWalk walk(rules, batch);
  if (auto bad = walk.run(root.get())) return *bad;
  return walk.take();
}

policy::Check materialize_snapshot(const std::vector<store::SnapshotFile>& entries,
                                   const store::BlobStore& blobs, int dest_fd) {
  std::vector<const store::SnapshotFile*> files;
  for (const auto& e : entries)
    if (!e.symlink) files.push_back(&e);
  // In path order every directory's entries are contiguous, so each is entered once.
  std::sort(files.begin(), files.end(), [](auto* a, auto* b) { return a->path < b->path; });
  DirStack dirs(dest_fd);
  for (const auto* f : files) {
    auto parts = split_path(f->path);
    const std::string name = parts.back();
    parts.pop_back();
    const int dir = dirs.enter(parts);
    if (dir < 0) return write_failed("the directory of " + f->path);
    if (auto ok = copy_blob(*f, blobs, dir, name); !ok) return ok;
  }
  return policy::Allowed{};
}

policy::Check write_overlay(int dir_fd, const std::map<std::string, std::string>& files) {
  for (const auto& [path, content] : files) {
    auto parts = split_path(path);
    const std::string name = parts.back();
    parts.pop_back();
    UniqueFd cur(::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!cur) return write_failed(path);
    for (const auto& seg : parts) {
      UniqueFd next(
          ::openat(cur.get(), seg.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!next && errno == ENOENT) {
        if (::mkdirat(cur.get(), seg.c_str(), 0755) != 0) return write_failed(path);
        next.reset(
            ::openat(cur.get(), seg.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      }
      if (!next) {
        struct stat st {};
        if (::fstatat(cur.get(), seg.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
          return deny(ErrorCode::kDeniedSymlink, path + ": a path component is a symlink");
        return deny(ErrorCode::kDeniedFile, path + ": a path component is not a directory");
      }
      cur = std::move(next);
    }
    mode_t mode = 0644;
    struct stat st {};
    if (::fstatat(cur.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (S_ISLNK(st.st_mode)) return deny(ErrorCode::kDeniedSymlink, path + ": is a symlink");
      if (!S_ISREG(st.st_mode)) return deny(ErrorCode::kDeniedFile, path + ": not a regular file");
      mode = st.st_mode & 0777;
      if (::unlinkat(cur.get(), name.c_str(), 0) != 0) return write_failed(path);
    } else if (errno != ENOENT) {
      return write_failed(path);
    }
    UniqueFd out(::openat(cur.get(), name.c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out) {
      if (errno == ELOOP || errno == EEXIST)
        return deny(ErrorCode::kDeniedSymlink, path + ": replaced while being written");
      return write_failed(path);
    }
    if (!write_all(out.get(), content) || ::fchmod(out.get(), mode) != 0) return write_failed(path);
  }
  return policy::Allowed{};
}

policy::Check check_plan_against_manifest(const policy::ProbePlan& plan,
                                          const std::vector<store::SnapshotFile>& entries) {
  // entries are in path order; look a path up exactly or as a directory prefix.
  auto find = [&](const std::string& p) -> const store::SnapshotFile* {
    auto it = std::lower_bound(
        entries.begin(), entries.end(), p,
        [](const store::SnapshotFile& e, const std::string& v) { return e.path < v; });
    return it != entries.end() && it->path == p ? &*it : nullptr;
  };
  auto is_dir = [&](const std::string& p) {
    const std::string prefix = p + "/";
    auto it = std::lower_bound(
        entries.begin(), entries.end(), prefix,
        [](const store::SnapshotFile& e, const std::string& v) { return e.path < v; });
    return it != entries.end() && it->path.rfind(prefix, 0) == 0;
  };
  // Every proper prefix and the path itself: a symlink there is refused, a file on the way too.
  auto walk = [&](const std::string& path, bool last_may_be_file) -> policy::Check {
    const auto parts = split_path(path);
    std::string prefix;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      prefix += (i == 0 ? "" : "/") + parts[i];
      const auto* e = find(prefix);
      if (e == nullptr) continue;
      if (e->symlink) {
        return deny(ErrorCode::kDeniedSymlink,
                    path + ": passes through a symlink of the worktree, which is never followed");
      }
      if (i + 1 < parts.size() || !last_may_be_file)
        return deny(ErrorCode::kDeniedFile, path + ": a path component is a file");
    }
    return policy::Allowed{};
  };
  if (plan.working_directory != ".") {
    if (auto ok = walk(plan.working_directory, false); !ok) return ok;
    if (!is_dir(plan.working_directory)) {
      return deny(ErrorCode::kNotFound,
                  "working_directory is not a directory of the snapshot (only directories "
                  "holding captured files exist)");
    }
  }
  for (const auto& [path, content] : plan.intervention) {
    if (auto ok = walk(path, true); !ok) return ok;
    if (is_dir(path))
      return deny(ErrorCode::kDeniedFile, path + ": is a directory of the snapshot");
  }
  return policy::Allowed{};
}

policy::FileWitness read_witness(int dir_fd, const std::string& path, std::uint64_t max_bytes) {
  using Kind = policy::FileWitness::Kind;
  policy::FileWitness w;
  UniqueFd fd(policy::open_beneath_fd(dir_fd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY));
  if (!fd) {
    if (errno == ENOENT || errno == ENOTDIR) {
      w.kind = Kind::missing;
    } else {
      w.kind = Kind::unusable;
      w.reason = errno == ELOOP   ? "it is or passes through a symlink"
                 : errno == EXDEV ? "it leaves the scratch directory"
                                  : "it cannot be opened";
    }
    return w;
  }
  struct stat st {};
  w.kind = Kind::unusable;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    w.reason = "it is not a regular file";
  } else if (st.st_nlink != 1) {
    w.reason = "it has more than one link";
  } else if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    w.reason = "it is larger than " + std::to_string(max_bytes) + " bytes";
  } else {
    std::string data;
    if (!policy::read_all(fd.get(), max_bytes, &data)) {
      w.reason = "it cannot be read whole";
    } else {
      w.kind = Kind::found;
      w.sha256 = store::sha256_hex(data);
    }
  }
  return w;
}

namespace {

std::uint64_t tree_bytes_at(int dir_fd, std::uint64_t limit, std::size_t depth) {
  // Deeper than any real tree: counted as over the limit rather than walked without bound.
  if (depth > kMaxDepth) return limit + 1;
  std::uint64_t total = 0;
  std::vector<std::string> names;
  if (!policy::list_dir(dir_fd, &names)) return total;
  for (const auto& n : names) {
    if (total > limit) break;
    struct stat st {};
    if (::fstatat(dir_fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      total += static_cast<std::uint64_t>(st.st_blocks) * 512;
    } else if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(::openat(dir_fd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub) total += tree_bytes_at(sub.get(), limit - std::min(limit, total), depth + 1);
    }
  }
  return total;
}

// Empties the directory `dir_fd` (at `depth` below the top), moving any directory found at the
// depth limit up to `top_fd` under a fresh name for a later pass, so no tree, however deep,
// makes this recurse without bound or run out of descriptors.
void empty_dir(int top_fd, int dir_fd, std::size_t depth, std::vector<std::string>* later,
               std::uint64_t* counter) {
  ::fchmod(dir_fd, 0700);  // a run may leave read-only directories behind
  std::vector<std::string> names;
  if (!policy::list_dir(dir_fd, &names)) return;
  for (const auto& n : names) {
    struct stat st {};
    if (::fstatat(dir_fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISDIR(st.st_mode)) {
      ::unlinkat(dir_fd, n.c_str(), 0);
      continue;
    }
    if (depth >= kMaxDepth) {
      const std::string moved = ".deep-" + std::to_string(++*counter);
      if (::renameat(dir_fd, n.c_str(), top_fd, moved.c_str()) == 0) later->push_back(moved);
      continue;
    }
    UniqueFd sub(::openat(dir_fd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (sub) empty_dir(top_fd, sub.get(), depth + 1, later, counter);
    ::unlinkat(dir_fd, n.c_str(), AT_REMOVEDIR);
  }
}

}  // namespace

std::uint64_t tree_bytes(int dir_fd, std::uint64_t limit) {
  return tree_bytes_at(dir_fd, limit, 0);
}

bool remove_tree_bounded(int parent_fd, const std::string& name) {
  std::vector<std::string> todo{name};
  std::uint64_t counter = 0;
  bool ok = true;
  while (!todo.empty()) {
    const std::string n = todo.back();
    todo.pop_back();
    struct stat st {};
    if (::fstatat(parent_fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      UniqueFd dir(::openat(parent_fd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (dir) empty_dir(parent_fd, dir.get(), 1, &todo, &counter);
      if (::unlinkat(parent_fd, n.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
        // Emptied only down to the depth limit this pass: the moved parts come first.
        if (!todo.empty() && errno == ENOTEMPTY) {
          todo.insert(todo.begin(), n);
          continue;
        }
        ok = false;
      }
    } else if (::unlinkat(parent_fd, n.c_str(), 0) != 0 && errno != ENOENT) {
      ok = false;
    }
  }
  return ok;
}

}  // namespace toolwarden::daemon
