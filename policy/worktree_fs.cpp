#include "policy/worktree_fs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>

namespace toolwarden::policy {

namespace {

constexpr std::uint64_t kResolveFlags =
    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;

int sys_openat2(int dirfd, const char* path, std::uint64_t flags, std::uint64_t resolve) {
  open_how how{};
  how.flags = flags;
  how.resolve = resolve;
  return static_cast<int>(::syscall(SYS_openat2, dirfd, path, &how, sizeof how));
}

// The fallback: one component at a time, each opened with O_NOFOLLOW relative to the last,
// refusing to change device (a mount point) on the way down.
int walk_nofollow(int dirfd, const std::string& relative, int flags) {
  struct stat top {};
  if (::fstat(dirfd, &top) != 0) return -1;
  UniqueFd cur(::fcntl(dirfd, F_DUPFD_CLOEXEC, 0));
  if (!cur) return -1;
  std::size_t start = 0;
  for (;;) {
    std::size_t slash = relative.find('/', start);
    std::string part =
        relative.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..") {
      errno = EXDEV;
      return -1;
    }
    const bool last = slash == std::string::npos;
    int f = last ? (flags | O_NOFOLLOW) : (O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int next = ::openat(cur.get(), part.c_str(), f, 0600);
    if (next < 0) {
      // O_PATH|O_NOFOLLOW on a symlink opens the link itself; without O_PATH it is ELOOP.
      if (errno == ENOTDIR) {
        struct stat st {};
        if (::fstatat(cur.get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(st.st_mode))
          errno = ELOOP;
      }
      return -1;
    }
    UniqueFd owned(next);
    struct stat st {};
    if (::fstat(next, &st) != 0) return -1;
    if (S_ISLNK(st.st_mode)) {
      errno = ELOOP;
      return -1;
    }
    if (st.st_dev != top.st_dev) {
      errno = EXDEV;
      return -1;
    }
    if (last) return owned.release();
    cur = std::move(owned);
    start = slash + 1;
  }
}

Denial errno_denial(int err) {
  switch (err) {
    case ELOOP:
      return deny(ErrorCode::kDeniedSymlink, "a path component is a symlink");
    case ENOENT:
      return deny(ErrorCode::kNotFound, "no such file or directory");
    case ENOTDIR:
      return deny(ErrorCode::kNotFound, "a path component is not a directory");
    case EXDEV:
      return deny(ErrorCode::kDeniedPath, "the path leaves the worktree");
    case EISDIR:
      return deny(ErrorCode::kDeniedFile, "the path is a directory");
    case ENXIO:
    case ENODEV:
    case EOPNOTSUPP:
      return deny(ErrorCode::kDeniedFile, "not a regular file");
    case EACCES:
    case EPERM:
      return deny(ErrorCode::kDeniedFile, "permission denied");
    default:
      return deny(ErrorCode::kLocalToolFailed, std::string("cannot open: ") + std::strerror(err));
  }
}

}  // namespace

namespace {
std::atomic<bool> g_force_walk{false};
}  // namespace

void WorktreeFs::use_walk_fallback_for_testing(bool on) { g_force_walk = on; }

bool WorktreeFs::has_openat2() {
  if (g_force_walk) return false;
  static const bool available = [] {
    int fd = sys_openat2(AT_FDCWD, "/", O_PATH | O_CLOEXEC, 0);
    if (fd >= 0) {
      ::close(fd);
      return true;
    }
    return errno != ENOSYS;
  }();
  return available;
}

int open_beneath_fd(int dirfd, const std::string& relative, int flags) {
  flags |= O_NOFOLLOW | O_CLOEXEC;
  if (WorktreeFs::has_openat2()) {
    int fd;
    do {
      fd = sys_openat2(dirfd, relative.c_str(), static_cast<std::uint64_t>(flags), kResolveFlags);
      // EAGAIN: a concurrent rename raced the lookup; the kernel asks us to retry.
    } while (fd < 0 && (errno == EAGAIN || errno == EINTR));
    return fd;
  }
  return walk_nofollow(dirfd, relative, flags);
}

Result<WorktreeFs> WorktreeFs::open(const std::string& realpath) {
  if (realpath.empty() || realpath.front() != '/')
    return deny(ErrorCode::kDeniedPath, "worktree is not absolute");
  int fd;
  if (has_openat2()) {
    fd = sys_openat2(AT_FDCWD, realpath.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC,
                     RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  } else {
    int root = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    UniqueFd r(root);
    fd = realpath == "/" ? ::dup(root)
                         : walk_nofollow(root, realpath.substr(1), O_PATH | O_DIRECTORY);
  }
  if (fd < 0) {
    if (errno == ELOOP)
      return deny(ErrorCode::kDeniedSymlink, "the worktree is no longer a real directory");
    return deny(ErrorCode::kNotFound, "the worktree is missing");
  }
  return WorktreeFs(UniqueFd(fd));
}

Result<OpenedFile> WorktreeFs::open_beneath(const RelativePath& path, int flags) const {
  OpenedFile f;
  if (path.segments.empty()) {
    f.fd = UniqueFd(::openat(root_.get(), ".", flags | O_CLOEXEC));
  } else {
    for (int attempt = 0;; ++attempt) {
      f.fd = UniqueFd(open_beneath_fd(root_.get(), path.text(), flags));
      if (f.fd || errno != ENOTDIR || (flags & O_DIRECTORY) == 0) break;
      // O_DIRECTORY on a final symlink (or file) answers ENOTDIR; look at the entry itself to
      // tell a symlink (DENIED_SYMLINK) from a file that is not a directory (DENIED_FILE).
      UniqueFd probe(open_beneath_fd(root_.get(), path.text(), O_PATH));
      struct stat st {};
      if (!probe || ::fstat(probe.get(), &st) != 0) return errno_denial(errno);
      // O_PATH|O_NOFOLLOW opens a final symlink itself rather than refusing it.
      if (S_ISLNK(st.st_mode))
        return deny(ErrorCode::kDeniedSymlink, "a path component is a symlink");
      if (!S_ISDIR(st.st_mode)) return deny(ErrorCode::kDeniedFile, "the path is not a directory");
      // A directory now: the entry was swapped between the two looks. Look again; an entry
      // that keeps flipping is treated as the symlink it keeps turning into.
      if (attempt == 3)
        return deny(ErrorCode::kDeniedSymlink, "the path keeps changing into a symlink");
    }
  }
  if (!f.fd) return errno_denial(errno);
  if (::fstat(f.fd.get(), &f.st) != 0) return errno_denial(errno);
  return f;
}

Result<OpenedFile> WorktreeFs::open_regular(const RelativePath& path, std::size_t max_bytes) const {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOCTTY: never adopt a terminal.
  auto f = open_beneath(path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!f) return f;
  const auto& st = f->st;
  if (!S_ISREG(st.st_mode)) {
    return deny(ErrorCode::kDeniedFile,
                S_ISDIR(st.st_mode) ? "the path is a directory" : "not a regular file");
  }
  if (st.st_nlink != 1) return deny(ErrorCode::kDeniedHardlink, "the file has more than one link");
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    return deny(ErrorCode::kDeniedSize,
                "the file is larger than " + std::to_string(max_bytes) + " bytes");
  }
  return f;
}

Result<OpenedFile> WorktreeFs::open_directory(const RelativePath& path) const {
  return open_beneath(path, O_RDONLY | O_DIRECTORY);
}

bool read_all(int fd, std::size_t max_bytes, std::string* out) {
  out->clear();
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) return true;
    if (out->size() + static_cast<std::size_t>(n) > max_bytes) return false;
    out->append(buf, static_cast<std::size_t>(n));
  }
}

bool is_text(std::string_view data) {
  return data.find('\0') == std::string_view::npos && is_valid_utf8(data);
}

bool list_dir(int dir_fd, std::vector<std::string>* names, std::size_t max) {
  names->clear();
  const int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::fdopendir(fd), &::closedir);
  if (!dir) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return false;
  }
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(dir.get());
    if (e == nullptr) break;
    const std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    names->emplace_back(n);
    if (names->size() > max) break;
  }
  if (errno != 0) return false;
  std::sort(names->begin(), names->end());
  return true;
}

}  // namespace toolwarden::policy
