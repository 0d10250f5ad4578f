// One line per event on stderr: `<time> <LEVEL> <event> key=value ...`. Callers pass ids and
// numbers, never tokens or file contents. Thread-safe and never blocking: lines go through a
// bounded queue to a writer thread of their own, which keeps each line whole; a reader of
// stderr that stalls costs dropped lines (counted in a `log.dropped` line), never a stalled
// caller. What is queued at exit is written within two seconds.
#pragma once

#include <chrono>
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

/// Waits until every line logged before the call is written (or counted as dropped); false when
/// `limit` passed first.
bool log_flush(std::chrono::milliseconds limit);

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
