#include "daemon/tools/atomic_write.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "sandbox/unique_fd.hpp"
#include "store/digest.hpp"

namespace toolwarden::daemon {
namespace {

using policy::ErrorCode;

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

std::string temp_name_for(const std::string& target) {
  return ".toolwarden-edit-" + store::sha256_hex(target).substr(0, 16) + ".tmp";
}

std::optional<policy::Denial> replace_file(int dfd, const std::string& name,
                                           std::string_view content, mode_t mode) {
  // O_TMPFILE first: a crash leaves a named temp file only in the instant between linkat and
  // renameat. Where it is unsupported, a named O_EXCL temp file is used from the start.
  const std::string tmp = temp_name_for(name);
  ::unlinkat(dfd, tmp.c_str(), 0);  // a leftover of a crashed edit of this file, if any
  bool named = false;
  UniqueFd out(::openat(dfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600));
  if (!out) {
    out.reset(
        ::openat(dfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    named = true;
  }
  if (!out) return policy::deny(ErrorCode::kLocalToolFailed, "cannot create a temporary file");
  auto fail = [&](std::string why) {
    if (named) ::unlinkat(dfd, tmp.c_str(), 0);
    return policy::deny(ErrorCode::kLocalToolFailed, std::move(why));
  };
  if (!write_all(out.get(), content)) return fail("cannot write the file (disk full?)");
  if (::fchmod(out.get(), mode) != 0) return fail("cannot set the file mode");
  if (::fsync(out.get()) != 0) return fail("cannot flush the file to disk");
  if (!named) {
    // linkat(AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH; the /proc magic link does not.
    const std::string self = "/proc/self/fd/" + std::to_string(out.get());
    if (::linkat(AT_FDCWD, self.c_str(), dfd, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0) {
      return fail("cannot name the temporary file");
    }
    named = true;
  }
  out.reset();
  if (::renameat(dfd, tmp.c_str(), dfd, name.c_str()) != 0) {
    const bool is_dir = errno == EISDIR;
    ::unlinkat(dfd, tmp.c_str(), 0);
    return is_dir ? policy::deny(ErrorCode::kDeniedFile, "the path is a directory")
                  : policy::deny(ErrorCode::kLocalToolFailed, "cannot replace the file");
  }
  ::fsync(dfd);
  return std::nullopt;
}

}  // namespace toolwarden::daemon
