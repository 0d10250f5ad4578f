#include "daemon/status_line.hpp"

#include <unistd.h>

namespace toolwarden::daemon {

namespace {

void write_stderr(std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
    if (n <= 0) return;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

std::string status_text(std::string_view label, std::int64_t seconds, std::uint64_t bytes) {
  return std::string(label) + ": running " + std::to_string(seconds) + " s, " +
         std::to_string(bytes) + " bytes of output";
}

PolledStatusLine::PolledStatusLine(bool enabled, std::string label, Sample sample)
    : label_(std::move(label)), sample_(std::move(sample)) {
  if (enabled) thread_ = std::thread([this] { loop(); });
}

PolledStatusLine::~PolledStatusLine() { stop(); }

void PolledStatusLine::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  if (shown_) {
    write_stderr("\r\033[K");
    shown_ = false;
  }
}

void PolledStatusLine::loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; })) return;
    }
    std::optional<StatusSample> s;
    try {
      s = sample_();
    } catch (...) {
      // A failed poll draws nothing; the blocking call reports what went wrong.
    }
    if (!s) continue;
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(s->elapsed).count();
    write_stderr("\r\033[K" + status_text(label_, secs, s->output_bytes));
    shown_ = true;
  }
}

}  // namespace toolwarden::daemon
