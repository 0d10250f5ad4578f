#include "daemon/log.hpp"

#include <limits.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

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

namespace {

std::string format_line(LogLevel level, std::string_view event,
                        std::initializer_list<LogField> fields) {
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
  return line;
}

using Clock = std::chrono::steady_clock;

/// Writes `text` to stderr in pieces of at most PIPE_BUF bytes that end at a line's end where
/// one does (a piece that size reaches a pipe whole, so other writers cannot split a line).
/// Waits for the descriptor to take more with poll, 100 ms at a time, and gives up once
/// `give_up` says so (the sink is being destroyed and its grace has run out) or the
/// descriptor fails.
void write_out(std::string_view text, const std::function<bool()>& give_up) {
  while (!text.empty()) {
    pollfd p{STDERR_FILENO, POLLOUT, 0};
    int r = ::poll(&p, 1, 100);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (r > 0 && (p.revents & (POLLERR | POLLNVAL)) != 0)) return;
    if (r == 0) {
      if (give_up()) return;
      continue;
    }
    std::size_t n = std::min<std::size_t>(text.size(), PIPE_BUF);
    if (n < text.size()) {
      auto end = text.substr(0, n).rfind('\n');
      if (end != std::string_view::npos) n = end + 1;
    }
    ssize_t w = ::write(STDERR_FILENO, text.data(), n);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w <= 0) return;
    text.remove_prefix(static_cast<std::size_t>(w));
  }
}

// The process's one log writer. Lines are queued by any thread and written by this sink's
// own thread, so no caller ever waits for stderr: when whatever reads it (journald, a pipe, a
// paused terminal) stops taking lines, the I/O threads go on answering. The queue is bounded;
// lines that do not fit are counted and dropped, and a `log.dropped lines=N` line takes their
// place once the reader catches up.
class LogSink {
 public:
  static constexpr std::size_t kQueueBytes = 256 * 1024;
  static constexpr auto kExitGrace = std::chrono::seconds(2);
  static constexpr auto kGather = std::chrono::milliseconds(1);

  LogSink() : thread_([this] { run(); }) {}
  ~LogSink() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      give_up_at_ = Clock::now() + kExitGrace;
      wake_.notify_one();
    }
    thread_.join();
  }
  LogSink(const LogSink&) = delete;
  LogSink& operator=(const LogSink&) = delete;

  void push(std::string line) {
    std::lock_guard lock(mu_);
    ++pushed_;
    if (queue_.size() + line.size() > kQueueBytes) {
      ++dropped_;
    } else {
      queue_ += line;
    }
    if (idle_) {
      idle_ = false;  // one wake-up is enough
      wake_.notify_one();
    }
  }

  bool flush(std::chrono::milliseconds limit) {
    std::unique_lock lock(mu_);
    const std::uint64_t target = pushed_;
    return written_cv_.wait_for(lock, limit, [&] { return written_ >= target; });
  }

 private:
  void run() {
    const std::function<bool()> give_up = [this] {
      std::lock_guard lock(mu_);
      return stopping_ && Clock::now() >= give_up_at_;
    };
    for (;;) {
      std::string batch;
      std::uint64_t upto = 0;
      {
        std::unique_lock lock(mu_);
        idle_ = true;
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || dropped_ > 0; });
        idle_ = false;
        if (queue_.empty() && dropped_ == 0) return;  // stopping, and all is out
        if (!stopping_) {
          // Let the lines of the next moment join this one's: under load one write (and one
          // wake-up of this thread) carries many lines instead of one each.
          lock.unlock();
          std::this_thread::sleep_for(kGather);
          lock.lock();
        }
        batch.swap(queue_);
        if (dropped_ > 0) {
          batch +=
              format_line(LogLevel::warn, "log.dropped",
                          {{"lines", std::to_string(dropped_)}, {"why", "stderr did not keep up"}});
          dropped_ = 0;
        }
        upto = pushed_;
      }
      write_out(batch, give_up);
      std::lock_guard lock(mu_);
      written_ = upto;
      written_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;        // the thread: lines queued, or stop
  std::condition_variable written_cv_;  // flush(): a batch is out
  std::string queue_;                   // whole lines, oldest first
  std::uint64_t pushed_ = 0;            // lines offered so far, dropped ones included
  std::uint64_t written_ = 0;           // of those, how many are written (or counted dropped)
  std::size_t dropped_ = 0;             // dropped since the last log.dropped line
  bool idle_ = false;                   // the thread waits for lines
  bool stopping_ = false;
  Clock::time_point give_up_at_{};
  std::thread thread_;  // last: starts once every other member exists
};

// Set when the sink has been destroyed (at exit): later lines are written directly.
std::atomic<bool> g_sink_gone{false};

LogSink& sink() {
  static struct Holder {
    LogSink sink;
    ~Holder() { g_sink_gone.store(true); }
  } holder;
  return holder.sink;
}

}  // namespace

void log_event(LogLevel level, std::string_view event, std::initializer_list<LogField> fields) {
  if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed)) return;
  std::string line = format_line(level, event, fields);
  if (!g_sink_gone.load()) {
    sink().push(std::move(line));
    return;
  }
  write_out(line, [] { return true; });
}

bool log_flush(std::chrono::milliseconds limit) {
  if (g_sink_gone.load()) return true;
  return sink().flush(limit);
}

}  // namespace toolwarden::daemon
