#include "daemon/paths.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "sandbox/unique_fd.hpp"

namespace toolwarden::daemon {
namespace fs = std::filesystem;

namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

fs::path home() {
  auto h = env("HOME");
  if (!h) throw std::runtime_error("HOME is not set; pass --state-dir and --config");
  return *h;
}

[[noreturn]] void fail(const fs::path& p, const std::string& why) {
  throw std::runtime_error(p.string() + ": " + why);
}

std::string errno_text() { return std::strerror(errno); }

// mkdir -p with 0700 for every directory it creates.
void make_dirs(const fs::path& dir) {
  fs::path cur;
  for (const auto& part : dir) {
    cur /= part;
    if (::mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) {
      fail(cur, "cannot create directory: " + errno_text());
    }
  }
}

struct stat lstat_dir(const fs::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) fail(dir, "cannot stat: " + errno_text());
  if (S_ISLNK(st.st_mode)) fail(dir, "is a symlink; refusing it");
  if (!S_ISDIR(st.st_mode)) fail(dir, "is not a directory");
  if (st.st_uid != ::geteuid())
    fail(dir, "is owned by uid " + std::to_string(st.st_uid) + ", not by us");
  return st;
}

}  // namespace

Dirs resolve_dirs(const DirOverrides& o) {
  Dirs d;
  if (o.runtime_dir) {
    d.runtime = *o.runtime_dir;
  } else if (auto e = env("TOOLWARDEN_RUNTIME_DIR")) {
    d.runtime = *e;
  } else if (auto x = env("XDG_RUNTIME_DIR")) {
    d.runtime = fs::path(*x) / "toolwarden";
  } else {
    d.runtime = "/tmp/toolwarden-" + std::to_string(::geteuid());
  }

  if (o.state_dir) {
    d.state = *o.state_dir;
  } else if (auto e = env("TOOLWARDEN_STATE_DIR")) {
    d.state = *e;
  } else if (auto x = env("XDG_STATE_HOME")) {
    d.state = fs::path(*x) / "toolwarden";
  } else {
    d.state = home() / ".local/state/toolwarden";
  }

  if (o.config) {
    d.config = *o.config;
  } else if (auto e = env("TOOLWARDEN_CONFIG")) {
    d.config = *e;
  } else if (auto x = env("XDG_CONFIG_HOME")) {
    d.config = fs::path(*x) / "toolwarden/config.json";
  } else {
    d.config = home() / ".config/toolwarden/config.json";
  }
  if (auto x = env("XDG_CONFIG_HOME")) {
    d.user_tools = fs::path(*x) / "toolwarden/tools";
  } else if (auto h = env("HOME")) {
    d.user_tools = fs::path(*h) / ".config/toolwarden/tools";
  }
  if (!d.user_tools.empty()) d.user_tools = fs::absolute(d.user_tools).lexically_normal();
  d.runtime = fs::absolute(d.runtime).lexically_normal();
  d.state = fs::absolute(d.state).lexically_normal();
  d.config = fs::absolute(d.config).lexically_normal();
  return d;
}

void prepare_runtime_dir(const fs::path& dir) {
  make_dirs(dir);
  struct stat st = lstat_dir(dir);
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
    fail(dir, std::string("is group/world-accessible (mode ") + mode + "); it must be 0700");
  }
}

void prepare_state_dir(const fs::path& dir) {
  make_dirs(dir);
  struct stat st = lstat_dir(dir);
  if ((st.st_mode & 022) != 0) fail(dir, "is writable by group or others");
  make_dirs(dir / "artifacts");
}

void write_file_atomically(const fs::path& file, const std::string& content) {
  fs::path tmp = file;
  tmp += ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) fail(tmp, "cannot create: " + errno_text());
  std::size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd.get(), content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::unlink(tmp.c_str());
      fail(tmp, "cannot write: " + errno_text());
    }
    off += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0 || ::rename(tmp.c_str(), file.c_str()) != 0) {
    ::unlink(tmp.c_str());
    fail(file, "cannot replace: " + errno_text());
  }
  UniqueFd dirfd(::open(file.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dirfd) ::fsync(dirfd.get());
}

}  // namespace toolwarden::daemon
