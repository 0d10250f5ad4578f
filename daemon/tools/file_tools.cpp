#include "daemon/tools/file_tools.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <condition_variable>
#include <mutex>
#include <set>

#include "daemon/config.hpp"
#include "daemon/tools/atomic_write.hpp"
#include "daemon/tools/search.hpp"
#include "policy/worktree_fs.hpp"
#include "store/digest.hpp"

namespace toolwarden::daemon {
namespace json = boost::json;
using policy::Denial;
using policy::ErrorCode;
using policy::RelativePath;

namespace {

json::object schema(std::string_view text) { return json::parse(text).as_object(); }

ToolOutcome denied(const Denial& d) { return ToolOutcome{d, {}}; }

std::string str_arg(const json::object& args, std::string_view key) {
  const auto* v = args.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
}

class FileTool : public Tool {
 public:
  FileTool(std::shared_ptr<const policy::SensitiveNames> sensitive, protocol::ToolDescriptor d)
      : sensitive_(std::move(sensitive)), descriptor_(std::move(d)) {}
  const protocol::ToolDescriptor& descriptor() const override { return descriptor_; }

 protected:
  const policy::SensitiveNames& sensitive() const { return *sensitive_; }
  std::shared_ptr<const policy::SensitiveNames> sensitive_;
  protocol::ToolDescriptor descriptor_;
};

// ---------------------------------------------------------------------------------------------
class LocalRead final : public FileTool {
 public:
  using FileTool::FileTool;
  ToolOutcome run(const ToolContext& ctx, const json::object& args) const override {
    auto path = ctx.grant.authorize_path(str_arg(args, "path"), sensitive(), false);
    if (!path) return denied(path.denial());
    auto fs = policy::WorktreeFs::open(ctx.grant.worktree);
    if (!fs) return denied(fs.denial());
    auto file = fs->open_regular(path.value(), ctx.config.max_file_bytes);
    if (!file) return denied(file.denial());
    std::string content;
    // The size was checked on the fd; a file growing meanwhile is cut off by the same cap.
    if (!policy::read_all(file->fd.get(), ctx.config.max_file_bytes, &content)) {
      return denied(
          policy::deny(ErrorCode::kDeniedSize, "the file grew past the size limit while read"));
    }
    if (!policy::is_text(content))
      return denied(policy::deny(ErrorCode::kDeniedBinary, "the file is not UTF-8 text"));
    json::object r;
    r["path"] = path->text();
    r["size"] = content.size();
    r["sha256"] = store::sha256_hex(content);
    r["content"] = std::move(content);
    return ToolOutcome{std::nullopt, std::move(r)};
  }
};

// ---------------------------------------------------------------------------------------------
class LocalList final : public FileTool {
 public:
  using FileTool::FileTool;
  static constexpr std::size_t kMaxEntries = 10000;

  ToolOutcome run(const ToolContext& ctx, const json::object& args) const override {
    auto path = ctx.grant.authorize_path(str_arg(args, "path"), sensitive(), true);
    if (!path) return denied(path.denial());
    auto fs = policy::WorktreeFs::open(ctx.grant.worktree);
    if (!fs) return denied(fs.denial());
    auto dir = fs->open_directory(path.value());
    if (!dir) return denied(dir.denial());
    int dfd = dir->fd.release();
    std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(dfd), &::closedir);
    if (!d) {
      ::close(dfd);
      return denied(policy::deny(ErrorCode::kLocalToolFailed, "cannot read the directory"));
    }
    struct Entry {
      std::string name;
      std::string type;
      std::uint64_t size;
    };
    std::vector<Entry> entries;
    bool truncated = false;
    while (dirent* e = ::readdir(d.get())) {
      std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      RelativePath child = path.value();
      child.segments.emplace_back(name);
      // Denied names are left out: sensitive, blocked, or outside every scope.
      if (sensitive().matches(name) || !policy::is_valid_utf8(name)) continue;
      if (!ctx.grant.authorize_scope(child) && !ctx.grant.leads_into_scope(child)) continue;
      struct stat st {};
      if (::fstatat(::dirfd(d.get()), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (entries.size() >= kMaxEntries) {
        truncated = true;
        break;
      }
      std::string type = S_ISREG(st.st_mode)   ? "file"
                         : S_ISDIR(st.st_mode) ? "dir"
                         : S_ISLNK(st.st_mode) ? "symlink"
                                               : "other";
      entries.push_back(Entry{std::string(name), std::move(type),
                              S_ISREG(st.st_mode) ? static_cast<std::uint64_t>(st.st_size) : 0});
    }
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.name < b.name; });
    json::array out;
    for (auto& e : entries) {
      out.push_back(
          json::object{{"name", std::move(e.name)}, {"type", std::move(e.type)}, {"size", e.size}});
    }
    json::object r;
    r["path"] = path->text();
    r["entries"] = std::move(out);
    r["truncated"] = truncated;
    return ToolOutcome{std::nullopt, std::move(r)};
  }
};

// ---------------------------------------------------------------------------------------------
class LocalSearch final : public FileTool {
 public:
  using FileTool::FileTool;
  ToolOutcome run(const ToolContext& ctx, const json::object& args) const override {
    auto path = ctx.grant.authorize_path(str_arg(args, "path"), sensitive(), true);
    if (!path) return denied(path.denial());
    SearchRequest req;
    req.query = str_arg(args, "query");
    if (const auto* r = args.if_contains("regex"); r != nullptr && r->is_bool())
      req.regex = r->get_bool();
    // Validated against the input schema (an integer in 1..10000), which JSON Schema lets be
    // written 5.0 as well as 5: both must bound the results (fuzz_tool_input found 5.0 ignored).
    if (const auto* m = args.if_contains("max_results"); m != nullptr) {
      boost::system::error_code ec;
      const auto n = m->to_number<std::int64_t>(ec);
      if (!ec && n >= 1) req.max_results = static_cast<std::size_t>(n);
    }
    req.max_file_bytes = ctx.config.max_file_bytes;
    auto fs = policy::WorktreeFs::open(ctx.grant.worktree);
    if (!fs) return denied(fs.denial());
    auto result = search_tree(fs.value(), path.value(), ctx.grant, sensitive(), req, ctx.cancel);
    if (!result) return denied(result.denial());
    json::array matches;
    for (auto& m : result->matches) {
      matches.push_back(
          json::object{{"path", std::move(m.path)}, {"line", m.line}, {"text", std::move(m.text)}});
    }
    json::object r;
    r["matches"] = std::move(matches);
    r["truncated"] = result->truncated;
    r["files_searched"] = result->files_searched;
    return ToolOutcome{std::nullopt, std::move(r)};
  }
};

// ---------------------------------------------------------------------------------------------
// Edits of one path are serialized (SPEC §5); different paths proceed in parallel.
class PathLocks {
 public:
  class Hold {
   public:
    Hold(PathLocks& locks, std::string key) : locks_(locks), key_(std::move(key)) {
      std::unique_lock lock(locks_.mu_);
      locks_.cv_.wait(lock, [&] { return locks_.held_.count(key_) == 0; });
      locks_.held_.insert(key_);
    }
    ~Hold() {
      std::lock_guard lock(locks_.mu_);
      locks_.held_.erase(key_);
      locks_.cv_.notify_all();
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    PathLocks& locks_;
    std::string key_;
  };

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> held_;
};

class LocalEdit final : public FileTool {
 public:
  using FileTool::FileTool;

  ToolOutcome run(const ToolContext& ctx, const json::object& args) const override {
    if (auto ok = ctx.grant.authorize_tool("local_edit"); !ok) return denied(ok.denial());
    auto path = ctx.grant.authorize_path(str_arg(args, "path"), sensitive(), false);
    if (!path) return denied(path.denial());
    const std::string content = str_arg(args, "content");
    if (content.size() > ctx.config.max_file_bytes) {
      return denied(
          policy::deny(ErrorCode::kDeniedSize, "content is larger than the file size limit"));
    }
    if (content.find('\0') != std::string::npos) {
      return denied(policy::deny(ErrorCode::kDeniedContent, "content contains NUL bytes"));
    }
    const std::string expected = str_arg(args, "expected_sha256");

    auto fs = policy::WorktreeFs::open(ctx.grant.worktree);
    if (!fs) return denied(fs.denial());
    RelativePath parent = path.value();
    const std::string name = parent.segments.back();
    parent.segments.pop_back();
    auto dir = fs->open_beneath(parent, O_RDONLY | O_DIRECTORY);
    if (!dir) return denied(dir.denial());
    const int dfd = dir->fd.get();

    PathLocks::Hold hold(locks_, ctx.grant.worktree + "\n" + path->text());

    mode_t mode = 0644;
    auto existing = policy::open_beneath_fd(dfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (existing >= 0) {
      UniqueFd f(existing);
      struct stat st {};
      if (::fstat(f.get(), &st) != 0)
        return denied(policy::deny(ErrorCode::kLocalToolFailed, "cannot stat the file"));
      if (!S_ISREG(st.st_mode))
        return denied(policy::deny(ErrorCode::kDeniedFile, "not a regular file"));
      if (st.st_nlink != 1)
        return denied(policy::deny(ErrorCode::kDeniedHardlink, "the file has more than one link"));
      if (static_cast<std::uint64_t>(st.st_size) > ctx.config.max_file_bytes) {
        return denied(
            policy::deny(ErrorCode::kDeniedSize, "the file is larger than the size limit"));
      }
      mode = st.st_mode & 07777;
      if (!expected.empty()) {
        std::string old;
        if (!policy::read_all(f.get(), ctx.config.max_file_bytes, &old) ||
            store::sha256_hex(old) != expected) {
          return denied(policy::deny(ErrorCode::kDeniedConflict,
                                     "the file changed: expected_sha256 does not match"));
        }
      }
    } else if (errno == ENOENT) {
      if (!expected.empty()) {
        return denied(policy::deny(ErrorCode::kDeniedConflict,
                                   "the file does not exist: expected_sha256 does not match"));
      }
    } else if (errno == ELOOP) {
      return denied(policy::deny(ErrorCode::kDeniedSymlink, "the file is a symlink"));
    } else {
      return denied(policy::deny(ErrorCode::kDeniedFile, "the file cannot be opened"));
    }

    if (auto failed = replace_file(dfd, name, content, mode)) return denied(*failed);
    json::object r;
    r["path"] = path->text();
    r["size"] = content.size();
    r["sha256"] = store::sha256_hex(content);
    return ToolOutcome{std::nullopt, std::move(r)};
  }

 private:
  mutable PathLocks locks_;
};

protocol::ToolDescriptor describe(std::string name, std::string title, std::string description,
                                  std::string_view input, std::string_view output, bool read_only) {
  protocol::ToolDescriptor d;
  d.name = std::move(name);
  d.title = std::move(title);
  d.description = std::move(description);
  d.input_schema = schema(input);
  d.output_schema = schema(output);
  d.annotations.read_only = read_only;
  d.annotations.destructive = !read_only;
  d.annotations.idempotent = true;
  d.annotations.open_world = false;
  return d;
}

}  // namespace

std::unique_ptr<Tool> make_local_read(std::shared_ptr<const policy::SensitiveNames> s) {
  return std::make_unique<LocalRead>(
      std::move(s),
      describe("local_read", "Read a file",
               "Read one UTF-8 text file of the worktree (path relative to the worktree root).",
               R"({"type":"object","properties":{"path":{"type":"string",
                  "description":"File path relative to the worktree root"}},
                  "required":["path"],"additionalProperties":false})",
               R"({"type":"object","properties":{"path":{"type":"string"},"size":{"type":"integer"},
                  "sha256":{"type":"string"},"content":{"type":"string"}},
                  "required":["path","size","sha256","content"]})",
               true));
}

std::unique_ptr<Tool> make_local_list(std::shared_ptr<const policy::SensitiveNames> s) {
  return std::make_unique<LocalList>(
      std::move(s),
      describe(
          "local_list", "List a directory",
          "List the entries of a worktree directory ('.' for the root); denied names are left out.",
          R"({"type":"object","properties":{"path":{"type":"string",
                  "description":"Directory path relative to the worktree root, '.' for the root"}},
                  "required":["path"],"additionalProperties":false})",
          R"({"type":"object","properties":{"path":{"type":"string"},"truncated":{"type":"boolean"},
                  "entries":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},
                  "type":{"type":"string","enum":["file","dir","symlink","other"]},"size":{"type":"integer"}},
                  "required":["name","type","size"]}}},"required":["path","entries"]})",
          true));
}

std::unique_ptr<Tool> make_local_search(std::shared_ptr<const policy::SensitiveNames> s) {
  return std::make_unique<LocalSearch>(
      std::move(s),
      describe(
          "local_search", "Search files",
          "Search the regular text files below a worktree path for a literal string, or an RE2 "
          "regular expression with regex:true (linear time). Results are capped.",
          R"({"type":"object","properties":{"path":{"type":"string"},
                  "query":{"type":"string","description":"Literal text (or RE2 with regex:true), at most 4096 characters"},
                  "regex":{"type":"boolean"},"max_results":{"type":"integer","minimum":1,"maximum":10000}},
                  "required":["path","query"],"additionalProperties":false})",
          R"({"type":"object","properties":{"truncated":{"type":"boolean"},"files_searched":{"type":"integer"},
                  "matches":{"type":"array","items":{"type":"object","properties":{"path":{"type":"string"},
                  "line":{"type":"integer"},"text":{"type":"string"}},"required":["path","line","text"]}}},
                  "required":["matches","truncated"]})",
          true));
}

std::unique_ptr<Tool> make_local_edit(std::shared_ptr<const policy::SensitiveNames> s) {
  auto d =
      describe("local_edit", "Replace a file",
               "Atomically replace (or create, when its directory exists) one worktree text file. "
               "Pass expected_sha256 to refuse the edit if the file changed since it was read.",
               R"({"type":"object","properties":{"path":{"type":"string"},
                       "content":{"type":"string"},
                       "expected_sha256":{"type":"string","minLength":64,"maxLength":64}},
                       "required":["path","content"],"additionalProperties":false})",
               R"({"type":"object","properties":{"path":{"type":"string"},"size":{"type":"integer"},
                       "sha256":{"type":"string"}},"required":["path","size","sha256"]})",
               false);
  d.annotations.destructive = true;
  return std::make_unique<LocalEdit>(std::move(s), std::move(d));
}

}  // namespace toolwarden::daemon
