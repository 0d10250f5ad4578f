// One line per event on stderr: `<time> <LEVEL> <event> key=value ...`. Callers pass ids and
// numbers, never tokens or file contents. Thread-safe: each line is one write(2).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace toolwarden::daemon {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };

bool parse_log_level(std::string_view text, LogLevel* out);
void set_log_level(LogLevel level);

using LogField = std::pair<std::string_view, std::string>;

void log_event(LogLevel level, std::string_view event, std::initializer_list<LogField> fields = {});

inline void log_debug(std::string_view e, std::initializer_list<LogField> f = {}) {
  log_event(LogLevel::debug, e, f);
}
inline void log_info(std::string_view e, std::initializer_list<LogField> f = {}) {
  log_event(LogLevel::info, e, f);
}
inline void log_warn(std::string_view e, std::initializer_list<LogField> f = {}) {
  log_event(LogLevel::warn, e, f);
}
inline void log_error(std::string_view e, std::initializer_list<LogField> f = {}) {
  log_event(LogLevel::error, e, f);
}

}  // namespace toolwarden::daemon
