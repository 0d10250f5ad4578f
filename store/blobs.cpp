#include "store/blobs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>

#include "store/store.hpp"

namespace toolwarden::store {

namespace {

constexpr mode_t kBlobMode = 0400;

UniqueFd open_dir_nofollow(int dir_fd, const char* name) {
  return UniqueFd(::openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

// The prefix directory of a digest ("ab"), created 0700 when `create` and missing.
UniqueFd prefix_dir(int root_fd, std::string_view sha256, bool create) {
  const std::string prefix(sha256.substr(0, 2));
  if (create && ::mkdirat(root_fd, prefix.c_str(), 0700) != 0 && errno != EEXIST) return {};
  return open_dir_nofollow(root_fd, prefix.c_str());
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

struct DirCloser {
  void operator()(DIR* d) const noexcept { ::closedir(d); }
};

std::atomic<std::uint64_t> g_temp_counter{0};

}  // namespace

BlobStore::BlobStore(const std::filesystem::path& root) : root_(root) {
  auto check = [&](const UniqueFd& fd, const std::string& what) {
    struct stat st {};
    if (!fd) {
      throw StoreError(what + ": cannot open (" + std::strerror(errno) +
                       "; a symlink is never followed)");
    }
    if (::fstat(fd.get(), &st) != 0 || !S_ISDIR(st.st_mode))
      throw StoreError(what + ": not a directory");
    if (st.st_uid != ::geteuid()) throw StoreError(what + ": owned by another user");
    if ((st.st_mode & 022) != 0) throw StoreError(what + ": writable by group or others");
  };
  if (::mkdir(root.c_str(), 0700) != 0 && errno != EEXIST)
    throw StoreError(root.string() + ": cannot create (" + std::strerror(errno) + ")");
  root_fd_ = UniqueFd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  check(root_fd_, root.string());
  if (::mkdirat(root_fd_.get(), "tmp", 0700) != 0 && errno != EEXIST)
    throw StoreError(root.string() + "/tmp: cannot create (" + std::strerror(errno) + ")");
  tmp_fd_ = open_dir_nofollow(root_fd_.get(), "tmp");
  check(tmp_fd_, root.string() + "/tmp");
}

bool BlobStore::valid_digest(std::string_view sha256) {
  if (sha256.size() != 64) return false;
  for (char c : sha256) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool BlobStore::has(std::string_view sha256, std::uint64_t size) const {
  if (!valid_digest(sha256)) return false;
  UniqueFd dir = prefix_dir(root_fd_.get(), sha256, false);
  if (!dir) return false;
  struct stat st {};
  const std::string rest(sha256.substr(2));
  return ::fstatat(dir.get(), rest.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
         static_cast<std::uint64_t>(st.st_size) == size;
}

UniqueFd BlobStore::open(std::string_view sha256) const {
  if (!valid_digest(sha256)) {
    errno = EINVAL;
    return {};
  }
  UniqueFd dir = prefix_dir(root_fd_.get(), sha256, false);
  if (!dir) return {};
  const std::string rest(sha256.substr(2));
  return UniqueFd(::openat(dir.get(), rest.c_str(), O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC));
}

void BlobStore::remove_temporaries() const {
  int fd = ::openat(tmp_fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  std::unique_ptr<DIR, DirCloser> dir(::fdopendir(fd));
  if (!dir) {
    ::close(fd);
    return;
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(dir.get())) {
    const std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  for (const auto& n : names) ::unlinkat(tmp_fd_.get(), n.c_str(), 0);
}

BlobBatch::~BlobBatch() { discard(); }

void BlobBatch::discard() {
  for (const auto& s : staged_) ::unlinkat(store_.tmp_fd(), s.temp_name.c_str(), 0);
  staged_.clear();
  digests_.clear();
  bytes_ = 0;
}

std::optional<std::uint64_t> BlobBatch::stage(std::string_view sha256, std::string_view data) {
  if (!BlobStore::valid_digest(sha256)) {
    errno = EINVAL;
    return std::nullopt;
  }
  const std::string digest(sha256);
  if (digests_.count(digest) != 0 || store_.has(digest, data.size())) return 0;
  UniqueFd fd;
  std::string name;
  for (int attempt = 0; attempt < 16 && !fd; ++attempt) {
    name = digest + "." + std::to_string(::getpid()) + "." + std::to_string(++g_temp_counter);
    // Born read-only: the one descriptor that may write it is this one.
    fd.reset(::openat(store_.tmp_fd(), name.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kBlobMode));
    if (!fd && errno != EEXIST) return std::nullopt;
  }
  if (!fd) return std::nullopt;
  if (!write_all(fd.get(), data)) {
    const int err = errno;
    ::unlinkat(store_.tmp_fd(), name.c_str(), 0);
    errno = err;
    return std::nullopt;
  }
  staged_.push_back(Staged{std::move(name), digest});
  digests_.insert(digest);
  bytes_ += data.size();
  return data.size();
}

bool BlobBatch::commit() {
  if (staged_.empty()) return true;
  // The data first: a name must never point at bytes that a crash could still take back.
  if (::syncfs(store_.tmp_fd()) != 0) {
    const int err = errno;
    discard();
    errno = err;
    return false;
  }
  for (std::size_t i = 0; i < staged_.size(); ++i) {
    const auto& s = staged_[i];
    UniqueFd dir = prefix_dir(store_.root_fd(), s.sha256, true);
    const std::string rest = s.sha256.substr(2);
    if (!dir || ::renameat(store_.tmp_fd(), s.temp_name.c_str(), dir.get(), rest.c_str()) != 0) {
      const int err = errno;
      // What is in place stays (each is whole); the rest is thrown away.
      staged_.erase(staged_.begin(), staged_.begin() + static_cast<std::ptrdiff_t>(i));
      discard();
      errno = err;
      return false;
    }
  }
  staged_.clear();
  // Then the names, before anything records them.
  return ::syncfs(store_.root_fd()) == 0;
}

}  // namespace toolwarden::store
