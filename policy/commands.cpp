#include "policy/commands.hpp"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "store/digest.hpp"

namespace toolwarden::policy {

namespace {

FilePin pin_of(const struct stat& st) {
  FilePin p;
  p.dev = st.st_dev;
  p.ino = st.st_ino;
  p.size = st.st_size;
  p.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return p;
}

bool digest_fd(int fd, std::string* out) {
  store::Sha256 h;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    h.update(std::string_view(buf, static_cast<std::size_t>(n)));
  }
  *out = h.finish_hex();
  return true;
}

}  // namespace

std::optional<FilePin> pin_host_file(const std::string& path, std::string* error) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    *error = path + ": cannot open (" + std::strerror(errno) + ")";
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = path + ": not a regular file";
    return std::nullopt;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    *error = path + ": writable by group or others";
    return std::nullopt;
  }
  FilePin p = pin_of(st);
  if (!digest_fd(fd.get(), &p.sha256)) {
    *error = path + ": cannot read";
    return std::nullopt;
  }
  return p;
}

Result<FilePin> pin_worktree_file(const WorktreeFs& fs, const RelativePath& path,
                                  std::size_t max_bytes) {
  auto f = fs.open_regular(path, max_bytes);
  if (!f) return f.denial();
  FilePin p = pin_of(f->st);
  if (!digest_fd(f->fd.get(), &p.sha256))
    return deny(ErrorCode::kLocalToolFailed, "cannot read a pinned file");
  return p;
}

std::optional<CommandRegistry> CommandRegistry::load(const std::vector<CommandSpec>& specs,
                                                     std::string* error) {
  CommandRegistry reg;
  for (const auto& spec : specs) {
    const std::string& exe = spec.argv.empty() ? std::string() : spec.argv[0];
    if (exe.empty() || exe.front() != '/') {
      *error = "command '" + spec.id + "': argv[0] must be an absolute path";
      return std::nullopt;
    }
    char real[PATH_MAX];
    if (::realpath(exe.c_str(), real) == nullptr) {
      *error = "command '" + spec.id + "': " + exe + " does not exist";
      return std::nullopt;
    }
    std::string why;
    auto pin = pin_host_file(real, &why);
    if (!pin) {
      *error = "command '" + spec.id + "': " + why;
      return std::nullopt;
    }
    for (const auto& rp : spec.read_paths) {
      if (!parse_request_path(rp, false)) {
        *error = "command '" + spec.id + "': read path '" + rp + "' must be worktree-relative";
        return std::nullopt;
      }
    }
    if (!parse_request_path(spec.cwd, true)) {
      *error = "command '" + spec.id + "': cwd must be worktree-relative";
      return std::nullopt;
    }
    reg.commands_[spec.id] = RegisteredCommand{spec, real, *pin};
  }
  return reg;
}

const RegisteredCommand* CommandRegistry::find(std::string_view id) const {
  auto it = commands_.find(id);
  return it == commands_.end() ? nullptr : &it->second;
}

std::vector<std::string> CommandRegistry::ids() const {
  std::vector<std::string> out;
  for (const auto& [id, c] : commands_) out.push_back(id);
  return out;
}

Check CommandRegistry::verify_executable(const RegisteredCommand& cmd) {
  std::string why;
  auto now = pin_host_file(cmd.executable, &why);
  if (!now || !(*now == cmd.pin)) {
    return deny(ErrorCode::kDeniedIntegrity,
                "the command's executable changed since the config was loaded");
  }
  return Allowed{};
}

}  // namespace toolwarden::policy
