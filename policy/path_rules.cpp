#include "policy/path_rules.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace toolwarden::policy {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    std::size_t slash = s.find('/', start);
    parts.push_back(s.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return parts;
}

std::string join(const std::vector<std::string>& segments) {
  std::string out;
  for (const auto& s : segments) {
    if (!out.empty()) out.push_back('/');
    out += s;
  }
  return out;
}

}  // namespace

std::string RelativePath::text() const { return segments.empty() ? "." : join(segments); }

bool is_valid_utf8(std::string_view s) {
  std::size_t i = 0;
  const auto n = s.size();
  while (i < n) {
    // Eight ASCII bytes at a time: most text file tools read (and every path) is ASCII.
    if (std::uint64_t word; i + sizeof word <= n) {
      std::memcpy(&word, s.data() + i, sizeof word);
      if ((word & 0x8080808080808080ULL) == 0) {
        i += sizeof word;
        continue;
      }
    }
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (std::size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

Result<RelativePath> parse_request_path(std::string_view path, bool allow_root) {
  if (path.empty()) return deny(ErrorCode::kDeniedPath, "path is empty");
  if (path.size() > kMaxPathBytes) return deny(ErrorCode::kDeniedPath, "path is too long");
  if (path.find('\0') != std::string_view::npos) {
    return deny(ErrorCode::kDeniedPath, "path contains NUL");
  }
  if (path.find('\\') != std::string_view::npos) {
    return deny(ErrorCode::kDeniedPath, "path contains a backslash");
  }
  if (!is_valid_utf8(path)) return deny(ErrorCode::kDeniedPath, "path is not valid UTF-8");
  if (path.front() == '/') return deny(ErrorCode::kDeniedPath, "path must be relative");
  if (path == ".") {
    if (allow_root) return RelativePath{};
    return deny(ErrorCode::kDeniedPath, "path names the root, not a file");
  }
  RelativePath out;
  for (auto seg : split(path)) {
    if (seg.empty()) return deny(ErrorCode::kDeniedPath, "path has an empty segment");
    if (seg == "." || seg == "..") {
      return deny(ErrorCode::kDeniedPath, "path has a '.' or '..' segment");
    }
    out.segments.emplace_back(seg);
  }
  return out;
}

SensitiveNames::SensitiveNames() {
  for (const char* p : {".git",       ".mcp*",      ".npmrc",    ".netrc",       "id_rsa",
                        "id_ed25519", ".env",       ".env.*",    ".codex",       ".claude",
                        ".ssh",       ".aws",       ".config",   ".toolwarden",  "auth.json*",
                        "auth.toml*", "auth.yaml*", "auth.yml*", "credentials*", "agents.md",
                        "claude.md",  "mcp.json*",  "mcp.toml*", "mcp.yaml*",    "mcp.yml*"}) {
    add(p);
  }
}

void SensitiveNames::add(std::string_view pattern) {
  Pattern p;
  p.lowered = lower(pattern);
  if (!p.lowered.empty() && p.lowered.back() == '*') {
    p.lowered.pop_back();
    p.prefix = true;
  }
  if (!p.lowered.empty()) patterns_.push_back(std::move(p));
}

bool SensitiveNames::matches(std::string_view segment) const {
  std::string s = lower(segment);
  return std::any_of(patterns_.begin(), patterns_.end(), [&](const Pattern& p) {
    return p.prefix ? s.compare(0, p.lowered.size(), p.lowered) == 0 : s == p.lowered;
  });
}

std::optional<std::string> SensitiveNames::first_match(const RelativePath& path) const {
  for (const auto& seg : path.segments) {
    if (matches(seg)) return seg;
  }
  return std::nullopt;
}

std::string Scope::text() const { return segments.empty() ? "**" : join(segments); }

bool Scope::covers(const RelativePath& path) const {
  if (path.segments.size() < segments.size()) return false;
  return std::equal(segments.begin(), segments.end(), path.segments.begin());
}

bool Scope::within(const Scope& outer) const { return outer.covers(RelativePath{segments}); }

std::optional<Scope> parse_scope(std::string_view text, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<Scope> {
    if (error != nullptr) *error = "scope '" + std::string(text) + "': " + why;
    return std::nullopt;
  };
  if (text == "**") return Scope{};
  std::string_view body = text;
  if (body.size() >= 3 && body.substr(body.size() - 3) == "/**") {
    body.remove_suffix(3);
  } else if (!body.empty() && body.back() == '/') {
    body.remove_suffix(1);
  }
  if (body.empty()) return fail("is empty");
  if (body.find_first_of("*?[]{}") != std::string_view::npos) {
    return fail("only '**' or a trailing '/**' may use glob characters");
  }
  auto parsed = parse_request_path(body, false);
  if (!parsed) return fail(parsed.denial().reason);
  return Scope{std::move(parsed.value().segments)};
}

}  // namespace toolwarden::policy
