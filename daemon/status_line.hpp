// The CLI's status line on a terminal: "\r\e[K<label>: running N s, B bytes of output" on
// stderr, redrawn once a second and erased before anything else is printed. Nothing is drawn
// when stderr is not a terminal, so piped output stays exactly the command's.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace toolwarden::daemon {

/// The status line's text (without the leading "\r\e[K").
std::string status_text(std::string_view label, std::int64_t seconds, std::uint64_t bytes);

/// What a poll reports: how long the work has been running and its output so far; nullopt
/// when there is nothing to report (yet), which draws nothing.
struct StatusSample {
  std::chrono::milliseconds elapsed{0};
  std::uint64_t output_bytes = 0;
};

/// Polls `sample` once a second on a thread of its own while a blocking call runs, and keeps
/// the status line. stop() (or the destructor) ends the thread and erases the line.
class PolledStatusLine {
 public:
  using Sample = std::function<std::optional<StatusSample>()>;
  /// Draws only when `enabled` (pass isatty(STDERR_FILENO)).
  PolledStatusLine(bool enabled, std::string label, Sample sample);
  ~PolledStatusLine();
  PolledStatusLine(const PolledStatusLine&) = delete;
  PolledStatusLine& operator=(const PolledStatusLine&) = delete;

  void stop();

 private:
  void loop();

  const std::string label_;
  const Sample sample_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool shown_ = false;  // the polling thread's, then stop()'s after the join
  std::thread thread_;  // last: starts after every member above exists
};

}  // namespace toolwarden::daemon
