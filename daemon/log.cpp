#include "daemon/log.hpp"

#include <unistd.h>

#include <atomic>

#include "store/clock.hpp"

namespace toolwarden::daemon {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::info)};

constexpr std::string_view name_of(LogLevel l) {
  switch (l) {
    case LogLevel::debug:
      return "DEBUG";
    case LogLevel::info:
      return "INFO";
    case LogLevel::warn:
      return "WARN";
    case LogLevel::error:
      return "ERROR";
  }
  return "INFO";
}

// Values with spaces, quotes or control characters are quoted and escaped so a line stays one
// line and stays parseable.
void append_value(std::string& out, std::string_view v) {
  bool plain = !v.empty();
  for (unsigned char c : v) plain = plain && c > 0x20 && c != '"' && c != '=' && c < 0x7f;
  if (plain) {
    out += v;
    return;
  }
  out.push_back('"');
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
}
}  // namespace

bool parse_log_level(std::string_view text, LogLevel* out) {
  for (auto l : {LogLevel::debug, LogLevel::info, LogLevel::warn, LogLevel::error}) {
    std::string lowered(name_of(l));
    for (auto& c : lowered) c = static_cast<char>(c - 'A' + 'a');
    if (text == lowered) {
      *out = l;
      return true;
    }
  }
  return false;
}

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }

void log_event(LogLevel level, std::string_view event, std::initializer_list<LogField> fields) {
  if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed)) return;
  std::string line = store::rfc3339_now();
  line.push_back(' ');
  line += name_of(level);
  line.push_back(' ');
  line += event;
  for (const auto& [k, v] : fields) {
    line.push_back(' ');
    line += k;
    line.push_back('=');
    append_value(line, v);
  }
  line.push_back('\n');
  // One write per line keeps lines whole when threads log at once.
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace toolwarden::daemon
