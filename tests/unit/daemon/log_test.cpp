// The log sink against a real pipe on fd 2: lines arrive whole and in order from many threads,
// and a reader that stops reading costs counted, dropped lines — never a blocked caller.
#include "daemon/log.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tw = toolwarden;
using tw::daemon::log_flush;
using tw::daemon::log_info;

namespace {

using namespace std::chrono_literals;

// Points fd 2 at a pipe for the test's lifetime; read() collects everything written.
class StderrPipe {
 public:
  StderrPipe() {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    read_end_ = fds[0];
    saved_ = ::dup(STDERR_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[1]);
  }
  ~StderrPipe() {
    restore();
    if (reader_.joinable()) reader_.join();
    ::close(read_end_);
  }
  /// Starts reading the pipe on a thread of its own.
  void start_reading() {
    reader_ = std::thread([this] {
      char buf[65536];
      for (;;) {
        ssize_t n = ::read(read_end_, buf, sizeof buf);
        if (n <= 0) return;
        text_.append(buf, static_cast<std::size_t>(n));
      }
    });
  }
  /// Puts the real stderr back (the pipe's last writer goes, so the reader sees its end) and
  /// returns what was read.
  std::string finish() {
    restore();
    if (reader_.joinable()) reader_.join();
    return text_;
  }

 private:
  void restore() {
    if (saved_ >= 0) {
      ::dup2(saved_, STDERR_FILENO);
      ::close(saved_);
      saved_ = -1;
    }
  }
  int read_end_ = -1;
  int saved_ = -1;
  std::thread reader_;
  std::string text_;
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(LogSink, LinesFromManyThreadsArriveWholeAndInOrder) {
  StderrPipe pipe;
  pipe.start_reading();
  // 3,200 lines of about 50 bytes fit the sink's 256 KiB queue even if its thread did not run
  // at all meanwhile, so none may be dropped however the machine schedules.
  constexpr int kThreads = 4, kEach = 800;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kEach; ++i) {
        log_info("test.line", {{"t", std::to_string(t)}, {"i", std::to_string(i)}});
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(log_flush(10s));
  const auto lines = lines_of(pipe.finish());
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(kThreads * kEach));
  const std::regex shape(R"(^\S+ INFO test\.line t=(\d) i=(\d+)$)");
  std::vector<int> next(kThreads, 0);
  for (const auto& line : lines) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, shape)) << line;
    const int t = std::stoi(m[1]);
    EXPECT_EQ(std::stoi(m[2]), next[t]) << "thread " << t << " out of order";
    next[t] = std::stoi(m[2]) + 1;
  }
}

TEST(LogSink, AReaderThatStopsCostsCountedDroppedLinesNotABlockedCaller) {
  StderrPipe pipe;  // nobody reads it yet: it takes 64 KiB, the queue 256 KiB more
  constexpr int kLines = 6000;
  const std::string filler(150, 'x');
  // A sink that wrote on the caller's thread would block here for good once the pipe is full.
  for (int i = 0; i < kLines; ++i) {
    log_info("test.flood", {{"i", std::to_string(i)}, {"pad", filler}});
  }
  pipe.start_reading();
  ASSERT_TRUE(log_flush(10s));
  const auto lines = lines_of(pipe.finish());

  const std::regex flood(R"(^\S+ INFO test\.flood i=(\d+) pad=x{150}$)");
  const std::regex dropped(R"(^\S+ WARN log\.dropped lines=(\d+) why="stderr did not keep up"$)");
  long written = 0, counted = 0;
  int last = -1;
  for (const auto& line : lines) {
    std::smatch m;
    if (std::regex_match(line, m, flood)) {
      EXPECT_GT(std::stoi(m[1]), last) << "lines out of order";
      last = std::stoi(m[1]);
      ++written;
    } else if (std::regex_match(line, m, dropped)) {
      counted += std::stol(m[1]);
    } else {
      ADD_FAILURE() << "not a whole log line: " << line;
    }
  }
  EXPECT_GT(counted, 0) << "the reader's stall never filled the queue";
  EXPECT_GT(written, 0);
  EXPECT_EQ(written + counted, kLines) << "every line is either written or counted";
}

}  // namespace
