#include "daemon/tools/search.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <re2/re2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <memory>

namespace toolwarden::daemon {
using policy::ErrorCode;
using policy::RelativePath;

namespace {

std::size_t utf8_chars(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Cuts at a character boundary so the text stays valid UTF-8.
std::string clip(std::string_view line) {
  if (line.size() <= kMaxMatchText) return std::string(line);
  std::size_t end = kMaxMatchText;
  while (end > 0 && (static_cast<unsigned char>(line[end]) & 0xC0) == 0x80) --end;
  return std::string(line.substr(0, end));
}

class Searcher {
 public:
  Searcher(const policy::Grant& grant, const policy::SensitiveNames& sensitive,
           const SearchRequest& req, const std::atomic<int>& cancel, const RE2* re)
      : grant_(grant), sensitive_(sensitive), req_(req), cancel_(cancel), re_(re) {
    buffer_.reserve(64 * 1024);
  }

  bool cancelled() const { return cancel_.load(std::memory_order_relaxed) != 0; }
  SearchResult& result() { return result_; }

  // Walks the directory open as `dfd` whose path is `dir`. Returns false to stop the walk.
  bool walk(int dfd, RelativePath& dir) {
    std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(dfd), &::closedir);
    if (!d) {
      ::close(dfd);
      return true;
    }
    std::vector<std::pair<std::string, unsigned char>> names;
    while (dirent* e = ::readdir(d.get())) {
      std::string_view n = e->d_name;
      if (n == "." || n == "..") continue;
      names.emplace_back(std::string(n), e->d_type);
    }
    std::sort(names.begin(), names.end());  // deterministic results
    for (auto& [name, type] : names) {
      if (cancelled() || result_.truncated) return false;
      if (sensitive_.matches(name) || !policy::is_valid_utf8(name)) continue;
      dir.segments.push_back(name);
      bool keep_going = visit(::dirfd(d.get()), dir, name, type);
      dir.segments.pop_back();
      if (!keep_going) return false;
    }
    return true;
  }

 private:
  bool visit(int parent, RelativePath& path, const std::string& name, unsigned char type) {
    const bool in_scope = static_cast<bool>(grant_.authorize_scope(path));
    if (type == DT_LNK) return true;  // never followed
    if (type == DT_DIR || type == DT_UNKNOWN) {
      if (!in_scope && !grant_.leads_into_scope(path)) return true;
      int sub = policy::open_beneath_fd(parent, name, O_RDONLY | O_DIRECTORY);
      if (sub >= 0) return walk(sub, path);
      if (type == DT_DIR) return true;
    }
    if (!in_scope || (type != DT_REG && type != DT_UNKNOWN)) return true;
    int fd = policy::open_beneath_fd(parent, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return true;
    UniqueFd owned(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
        static_cast<std::uint64_t>(st.st_size) > req_.max_file_bytes) {
      return true;
    }
    if (!policy::read_all(fd, req_.max_file_bytes, &buffer_) || !policy::is_text(buffer_))
      return true;
    ++result_.files_searched;
    return scan(path);
  }

  bool scan(const RelativePath& path) {
    std::string_view text = buffer_;
    std::size_t pos = 0;
    std::int64_t line_no = 1;
    std::size_t counted_to = 0;
    std::string path_text;
    while (pos <= text.size()) {
      std::size_t hit;
      if (re_ != nullptr) {
        re2::StringPiece input(text.data(), text.size());
        re2::StringPiece m;
        if (!re_->Match(input, pos, text.size(), RE2::UNANCHORED, &m, 1)) break;
        hit = static_cast<std::size_t>(m.data() - text.data());
      } else {
        const void* p =
            ::memmem(text.data() + pos, text.size() - pos, req_.query.data(), req_.query.size());
        if (p == nullptr) break;
        hit = static_cast<std::size_t>(static_cast<const char*>(p) - text.data());
      }
      std::size_t line_start = text.rfind('\n', hit == 0 ? 0 : hit - 1);
      line_start = (line_start == std::string_view::npos || hit == 0) ? 0 : line_start + 1;
      if (hit > 0 && text[hit - 1] == '\n') line_start = hit;
      std::size_t line_end = text.find('\n', hit);
      if (line_end == std::string_view::npos) line_end = text.size();
      for (std::size_t i = counted_to; i < line_start; ++i) line_no += text[i] == '\n';
      counted_to = line_start;
      if (result_.matches.size() >= req_.max_results) {
        result_.truncated = true;
        return false;
      }
      if (path_text.empty()) path_text = path.text();
      std::string_view line = text.substr(line_start, line_end - line_start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      result_.matches.push_back(SearchMatch{path_text, line_no, clip(line)});
      pos = line_end + 1;  // one match per line
    }
    return true;
  }

  const policy::Grant& grant_;
  const policy::SensitiveNames& sensitive_;
  const SearchRequest& req_;
  const std::atomic<int>& cancel_;
  const RE2* re_;
  std::string buffer_;
  SearchResult result_;
};

}  // namespace

policy::Result<SearchResult> search_tree(const policy::WorktreeFs& fs, const RelativePath& start,
                                         const policy::Grant& grant,
                                         const policy::SensitiveNames& sensitive,
                                         const SearchRequest& req, const std::atomic<int>& cancel) {
  if (req.query.empty()) return policy::deny(ErrorCode::kDeniedQuery, "the query is empty");
  if (utf8_chars(req.query) > kMaxQueryChars) {
    return policy::deny(ErrorCode::kDeniedQuery, "the query is longer than 4096 characters");
  }
  if (req.query.find('\n') != std::string::npos) {
    return policy::deny(ErrorCode::kDeniedQuery, "the query spans lines; matches are per line");
  }
  std::unique_ptr<RE2> re;
  if (req.regex) {
    RE2::Options opts;
    opts.set_log_errors(false);
    opts.set_max_mem(8 << 20);  // bounds the compiled program: no pathological patterns
    opts.set_posix_syntax(false);
    opts.set_never_nl(true);
    re = std::make_unique<RE2>(req.query, opts);
    if (!re->ok())
      return policy::deny(ErrorCode::kDeniedQuery, "invalid regular expression: " + re->error());
  }
  Searcher searcher(grant, sensitive, req, cancel, re.get());
  auto root = fs.open_directory(start);
  if (!root) return root.denial();
  RelativePath path = start;
  searcher.walk(root->fd.release(), path);
  if (searcher.cancelled()) return policy::deny(ErrorCode::kCancelled, "the search was cancelled");
  return std::move(searcher.result());
}

}  // namespace toolwarden::daemon
