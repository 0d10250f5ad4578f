#include "policy/tool_folder.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "policy/path_rules.hpp"
#include "policy/worktree_fs.hpp"
#include "store/digest.hpp"

namespace toolwarden::policy {

namespace {

constexpr char kManifestFile[] = "tool.json";
constexpr char kHashHeader[] = "toolwarden-tool-hash-v1";

// A name as it may appear in a listing or reason: printable UTF-8 as is, other bytes as \xNN.
std::string printable(std::string_view name) {
  const bool plain = is_valid_utf8(name) && std::none_of(name.begin(), name.end(), [](char c) {
                       return static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\';
                     });
  if (plain) return std::string(name);
  std::string out;
  for (char c : name) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b >= 0x7f || c == '\\') {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 0xf];
    } else {
      out += c;
    }
  }
  return out;
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

struct Record {
  std::string path;
  bool dir = false;
  bool exec = false;
  std::string sha256;  // files only
};

// What went wrong in a walk: the source folder broke a rule (or could not be read), or the
// copy could not be written.
struct WalkError {
  Denial denial;
  bool copy_failed = false;
};

// One pass over a tool folder: checks every rule, digests every file and, when given a
// destination, writes the copy from the same bytes.
class FolderWalk {
 public:
  explicit FolderWalk(int dest_root_fd) : dest_root_(dest_root_fd) {}

  std::optional<WalkError> run(int src_root_fd) {
    struct stat st {};
    if (::fstat(src_root_fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
      return source_error(ErrorCode::kDeniedFile, "the tool folder is not a directory");
    }
    dev_ = st.st_dev;
    return walk_dir(src_root_fd, dest_root_, "", 0);
  }

  // The folder hash over the records (format in the header).
  std::string hash() {
    std::sort(records_.begin(), records_.end(),
              [](const Record& a, const Record& b) { return a.path < b.path; });
    store::Sha256 h;
    h.update(std::string_view(kHashHeader, sizeof kHashHeader));  // with its NUL
    for (const auto& r : records_) {
      std::string line =
          r.dir ? "d - - " : std::string("f ") + (r.exec ? "x " : "- ") + r.sha256 + " ";
      line += r.path;
      line += '\0';
      h.update(line);
    }
    return h.finish_hex();
  }

  const std::vector<Record>& records() const { return records_; }
  bool has_manifest() const { return has_manifest_; }
  const std::string& manifest_text() const { return manifest_text_; }

 private:
  static WalkError source_error(ErrorCode code, std::string reason) {
    return WalkError{deny(code, std::move(reason)), false};
  }
  static WalkError copy_error(const std::string& rel) {
    return WalkError{
        deny(ErrorCode::kLocalToolFailed, "cannot write the sealed copy of " + printable(rel) +
                                              " (" + std::strerror(errno) + ")"),
        true};
  }
  static WalkError changed(const std::string& rel) {
    return source_error(ErrorCode::kDeniedFile, printable(rel) + ": changed while being read");
  }

  std::optional<WalkError> walk_dir(int src_fd, int dest_fd, const std::string& prefix,
                                    std::size_t depth) {
    std::vector<std::string> names;
    if (!list_dir(src_fd, &names, kMaxToolEntries)) {
      return source_error(ErrorCode::kLocalToolFailed,
                          "cannot read the directory " +
                              (prefix.empty() ? "." : printable(prefix)) + " (" +
                              std::strerror(errno) + ")");
    }
    for (const auto& name : names) {
      const std::string rel = prefix.empty() ? name : prefix + "/" + name;
      if (++entries_ > kMaxToolEntries) {
        return source_error(ErrorCode::kDeniedFile, "more than " + std::to_string(kMaxToolEntries) +
                                                        " files and directories");
      }
      if (rel.size() > kMaxPathBytes) {
        return source_error(ErrorCode::kDeniedFile,
                            "a path longer than " + std::to_string(kMaxPathBytes) + " bytes");
      }
      struct stat lst {};
      if (::fstatat(src_fd, name.c_str(), &lst, AT_SYMLINK_NOFOLLOW) != 0) return changed(rel);
      std::optional<WalkError> bad;
      if (S_ISLNK(lst.st_mode)) {
        bad = source_error(ErrorCode::kDeniedSymlink, printable(rel) + ": a symlink");
      } else if (S_ISDIR(lst.st_mode)) {
        bad = walk_subdir(src_fd, dest_fd, name, rel, lst, depth + 1);
      } else if (S_ISREG(lst.st_mode)) {
        bad = read_file(src_fd, dest_fd, name, rel, lst, prefix.empty() && name == kManifestFile);
      } else {
        const char* what = S_ISFIFO(lst.st_mode)   ? "a FIFO"
                           : S_ISSOCK(lst.st_mode) ? "a socket"
                                                   : "a device";
        bad = source_error(ErrorCode::kDeniedFile,
                           printable(rel) + ": " + what + ", not a regular file or directory");
      }
      if (bad) return bad;
    }
    return std::nullopt;
  }

  std::optional<WalkError> walk_subdir(int src_fd, int dest_fd, const std::string& name,
                                       const std::string& rel, const struct stat& lst,
                                       std::size_t depth) {
    if (depth > kMaxToolDepth) {
      return source_error(ErrorCode::kDeniedFile, "directories nested deeper than " +
                                                      std::to_string(kMaxToolDepth) + " levels");
    }
    UniqueFd sub(::openat(src_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub) {
      if (errno == ELOOP || errno == ENOTDIR || errno == ENOENT) return changed(rel);
      return source_error(ErrorCode::kLocalToolFailed,
                          "cannot open " + printable(rel) + " (" + std::strerror(errno) + ")");
    }
    struct stat st {};
    if (::fstat(sub.get(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_ino != lst.st_ino) {
      return changed(rel);
    }
    if (st.st_dev != dev_) {
      return source_error(ErrorCode::kDeniedFile, printable(rel) + ": a mount point");
    }
    records_.push_back(Record{rel, true, false, {}});
    UniqueFd dsub;
    if (dest_fd >= 0) {
      if (::mkdirat(dest_fd, name.c_str(), 0700) != 0) return copy_error(rel);
      dsub.reset(::openat(dest_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!dsub) return copy_error(rel);
    }
    if (auto bad = walk_dir(sub.get(), dest_fd >= 0 ? dsub.get() : -1, rel, depth)) return bad;
    if (dsub && ::fchmod(dsub.get(), 0500) != 0) return copy_error(rel);
    return std::nullopt;
  }

  std::optional<WalkError> read_file(int src_fd, int dest_fd, const std::string& name,
                                     const std::string& rel, const struct stat& lst,
                                     bool is_manifest) {
    const std::string shown = printable(rel);
    const std::string too_big =
        shown + ": larger than " + std::to_string(kMaxToolFileBytes >> 20) + " MiB";
    if (lst.st_nlink != 1) {
      return source_error(ErrorCode::kDeniedHardlink, shown + ": has more than one link");
    }
    if (static_cast<std::uint64_t>(lst.st_size) > kMaxToolFileBytes) {
      return source_error(ErrorCode::kDeniedSize, too_big);
    }
    // O_NONBLOCK and O_NOCTTY: an entry swapped for a FIFO or terminal must not block or attach.
    UniqueFd in(
        ::openat(src_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!in) {
      if (errno == ELOOP) return source_error(ErrorCode::kDeniedSymlink, shown + ": a symlink");
      if (errno == ENOENT) return changed(rel);
      return source_error(ErrorCode::kLocalToolFailed,
                          "cannot open " + shown + " (" + std::strerror(errno) + ")");
    }
    // The rules again on the opened fd: this is the file whose bytes are hashed.
    struct stat st {};
    if (::fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_ino != lst.st_ino ||
        st.st_dev != dev_) {
      return changed(rel);
    }
    if (st.st_nlink != 1) {
      return source_error(ErrorCode::kDeniedHardlink, shown + ": has more than one link");
    }
    const bool exec = (st.st_mode & S_IXUSR) != 0;
    UniqueFd out;
    if (dest_fd >= 0) {
      out.reset(::openat(dest_fd, name.c_str(),
                         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!out) return copy_error(rel);
    }
    store::Sha256 digest;
    std::uint64_t size = 0;
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(in.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        return source_error(ErrorCode::kLocalToolFailed,
                            "cannot read " + shown + " (" + std::strerror(errno) + ")");
      }
      if (n == 0) break;
      const std::string_view chunk(buf, static_cast<std::size_t>(n));
      size += chunk.size();
      total_ += chunk.size();
      if (size > kMaxToolFileBytes) return source_error(ErrorCode::kDeniedSize, too_big);
      if (total_ > kMaxToolBytes) {
        return source_error(ErrorCode::kDeniedSize,
                            "more than " + std::to_string(kMaxToolBytes >> 20) + " MiB of files");
      }
      digest.update(chunk);
      if (out && !write_all(out.get(), chunk)) return copy_error(rel);
      // One byte past the manifest limit is enough for the parser to refuse it.
      if (is_manifest && manifest_text_.size() <= kMaxManifestBytes) {
        manifest_text_.append(chunk.substr(0, kMaxManifestBytes + 1 - manifest_text_.size()));
      }
    }
    if (out && ::fchmod(out.get(), exec ? 0500 : 0400) != 0) return copy_error(rel);
    has_manifest_ = has_manifest_ || is_manifest;
    records_.push_back(Record{rel, false, exec, digest.finish_hex()});
    return std::nullopt;
  }

  int dest_root_ = -1;
  dev_t dev_ = 0;
  std::size_t entries_ = 0;
  std::uint64_t total_ = 0;
  std::vector<Record> records_;
  bool has_manifest_ = false;
  std::string manifest_text_;
};

// The manifest's run entries against the files the walk saw; nullopt when they all fit.
std::optional<std::string> check_run_files(const ToolManifest& m,
                                           const std::vector<Record>& records) {
  for (std::size_t i = 0; i < m.run.size(); ++i) {
    auto rel = run_entry_path(m.run[i]);
    if (!rel || rel->empty()) continue;  // absolute, an option, or the folder itself
    const auto it = std::find_if(records.begin(), records.end(),
                                 [&](const Record& r) { return r.path == *rel; });
    const std::string where = "run[" + std::to_string(i) + "]: \"" + printable(m.run[i]) + "\" ";
    if (it == records.end()) {
      return where +
             "is not in the tool folder (relative entries name files there; write options "
             "as -x or --name=value)";
    }
    if (i == 0 && (it->dir || !it->exec)) {
      return where + "is not an executable file (set its owner-execute bit)";
    }
  }
  return std::nullopt;
}

DiscoveredTool invalid_tool(const std::string& name, ToolScope scope, std::string reason) {
  DiscoveredTool t;
  t.name = printable(name);
  t.scope = scope;
  t.invalid_reason = std::move(reason);
  return t;
}

DiscoveredTool examine(int dir_fd, const std::string& name, ToolScope scope) {
  DiscoveredTool t = invalid_tool(name, scope, {});
  FolderWalk walk(-1);
  if (auto bad = walk.run(dir_fd)) {
    t.invalid_reason = bad->denial.reason;
    return t;
  }
  t.hash = walk.hash();
  if (!walk.has_manifest()) {
    t.invalid_reason = "tool.json changed while being read";
    return t;
  }
  auto manifest = parse_tool_manifest(walk.manifest_text());
  if (!manifest) {
    t.invalid_reason = manifest.denial().reason;
    return t;
  }
  if (manifest->name != name) {
    t.invalid_reason =
        "name: \"" + manifest->name + "\" is not the folder's name \"" + t.name + "\"";
    return t;
  }
  if (auto bad = check_run_files(manifest.value(), walk.records())) {
    t.invalid_reason = *bad;
    return t;
  }
  t.manifest = std::move(manifest.value());
  return t;
}

}  // namespace

std::string_view to_string(ToolScope s) { return s == ToolScope::user ? "user" : "project"; }

Result<UniqueFd> open_tool_folder(int tools_dir_fd, std::string_view name) {
  const std::string n(name);
  if (n.empty() || n == "." || n == ".." || n.find('/') != std::string::npos) {
    return deny(ErrorCode::kNotFound, "is not a folder name");
  }
  UniqueFd fd(::openat(tools_dir_fd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd) return fd;
  if (errno == ENOENT) return deny(ErrorCode::kNotFound, "does not exist");
  struct stat st {};
  if (::fstatat(tools_dir_fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
    return deny(ErrorCode::kDeniedSymlink, "is a symlink");
  }
  if (errno == ENOTDIR) return deny(ErrorCode::kDeniedFile, "is not a directory");
  return deny(ErrorCode::kLocalToolFailed,
              std::string("cannot be opened (") + std::strerror(errno) + ")");
}

std::vector<DiscoveredTool> discover_tools(int tools_dir_fd, ToolScope scope) {
  std::vector<DiscoveredTool> tools;
  std::vector<std::string> names;
  if (!list_dir(tools_dir_fd, &names)) return tools;
  for (const auto& name : names) {
    struct stat st {};
    if (::fstatat(tools_dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      tools.push_back(
          invalid_tool(name, scope, "the tool folder is a symlink, which is never followed"));
      continue;
    }
    if (!S_ISDIR(st.st_mode)) continue;
    auto dir = open_tool_folder(tools_dir_fd, name);
    if (!dir) {
      tools.push_back(invalid_tool(name, scope, "the tool folder " + dir.denial().reason));
      continue;
    }
    // Without a tool.json (of any type: a symlinked one is listed as invalid) it is no tool.
    if (::fstatat(dir->get(), kManifestFile, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    tools.push_back(examine(dir->get(), name, scope));
  }
  return tools;
}

Result<std::string> hash_tool_folder(int tool_dir_fd) {
  FolderWalk walk(-1);
  if (auto bad = walk.run(tool_dir_fd)) return bad->denial;
  return walk.hash();
}

SealedCopy::SealedCopy(SealedCopy&& o) noexcept
    : dir_(std::exchange(o.dir_, {})), hash_(std::exchange(o.hash_, {})) {}

SealedCopy& SealedCopy::operator=(SealedCopy&& o) noexcept {
  if (this != &o) {
    if (!dir_.empty()) remove_tree(dir_);
    dir_ = std::exchange(o.dir_, {});
    hash_ = std::exchange(o.hash_, {});
  }
  return *this;
}

SealedCopy::~SealedCopy() {
  if (!dir_.empty()) remove_tree(dir_);
}

std::string SealedCopy::release() { return std::exchange(dir_, {}); }

Result<SealedCopy> seal_tool(int tool_dir_fd, const std::string& expected_hash,
                             const std::string& dest_dir) {
  if (dest_dir.size() < 2 || dest_dir.front() != '/' || dest_dir.back() == '/') {
    return deny(ErrorCode::kLocalToolFailed, "the sealed copy needs an absolute directory path");
  }
  if (::mkdir(dest_dir.c_str(), 0700) != 0) {
    return deny(ErrorCode::kLocalToolFailed,
                std::string("cannot create the sealed copy (") + std::strerror(errno) + ")");
  }
  SealedCopy guard(dest_dir, {});  // from here on, every failure removes the partial copy
  UniqueFd dest(::open(dest_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!dest || ::fstat(dest.get(), &st) != 0 || st.st_uid != ::geteuid()) {
    return deny(ErrorCode::kLocalToolFailed, "cannot open the sealed copy");
  }
  FolderWalk walk(dest.get());
  if (auto bad = walk.run(tool_dir_fd)) {
    if (bad->copy_failed) return bad->denial;
    return deny(ErrorCode::kDeniedIntegrity,
                "the tool folder changed since it was checked: " + bad->denial.reason);
  }
  std::string hash = walk.hash();
  if (hash != expected_hash) {
    return deny(ErrorCode::kDeniedIntegrity,
                "the tool's files changed since they were checked (hash mismatch)");
  }
  if (::fchmod(dest.get(), 0500) != 0) {
    return deny(ErrorCode::kLocalToolFailed,
                std::string("cannot seal the copy (") + std::strerror(errno) + ")");
  }
  return SealedCopy(guard.release(), std::move(hash));
}

bool remove_tree_at(int dir_fd, const std::string& name) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT;
  if (S_ISDIR(st.st_mode)) {
    if ((st.st_mode & 0700) != 0700) {
      // A directory we may not read or write (a sealed copy's 0500, overlayfs' 000 work dir)
      // is made ours to empty first: through an O_PATH descriptor of that very directory,
      // never through a name that could have become a symlink since the look.
      UniqueFd self(::openat(dir_fd, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (self) ::chmod(("/proc/self/fd/" + std::to_string(self.get())).c_str(), 0700);
    }
    UniqueFd dir(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (dir) {
      std::vector<std::string> names;
      if (list_dir(dir.get(), &names)) {
        for (const auto& n : names) remove_tree_at(dir.get(), n);
      }
    }
    if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) == 0) return true;
    // Swapped for a non-directory after the look: remove what is there now.
    if (errno != ENOTDIR) return errno == ENOENT;
  }
  return ::unlinkat(dir_fd, name.c_str(), 0) == 0 || errno == ENOENT;
}

bool remove_tree(const std::string& path) {
  const auto slash = path.rfind('/');
  if (path.empty() || path.front() != '/' || slash == std::string::npos) return false;
  const std::string parent = slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") return false;
  UniqueFd dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return errno == ENOENT;
  return remove_tree_at(dir.get(), name);
}

}  // namespace toolwarden::policy
