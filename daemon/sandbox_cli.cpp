#include "daemon/sandbox_cli.hpp"

#include <malloc.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json/array.hpp>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "daemon/status_line.hpp"
#include "sandbox/canary.hpp"
#include "sandbox/features.hpp"
#include "sandbox/supervisor.hpp"

namespace toolwarden::daemon {
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

// The program as the sandbox's PATH would find it (its system dirs are the host's).
std::string resolve_program(const std::string& name, const std::string& worktree) {
  if (name.empty() || name.front() == '/') return name;
  if (name.find('/') != std::string::npos)
    return (fs::path(worktree) / name).lexically_normal().string();
  for (const char* dir : {"/usr/local/bin", "/usr/bin", "/bin"}) {
    std::string candidate = std::string(dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n <= 0) return;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Copies the run's output to our stdout/stderr on a thread of its own: the supervisor thread
// must never block on a slow reader, or it would stop enforcing timeouts and limits. The
// queue is bounded by the run's output budget. On a terminal it also keeps a status line
// (elapsed time, output bytes) on stderr, erased before any output and at the end; when
// stderr is not a terminal it prints nothing of its own.
class OutputPump {
 public:
  // The thread starts with the first output, or at once when a status line is to be kept: a
  // run that prints nothing to a pipe (say `toolwarden run -- true` in a script) never pays
  // for a thread.
  OutputPump() : status_(::isatty(STDERR_FILENO) == 1) {
    if (status_) thread_ = std::thread([this] { loop(); });
  }
  ~OutputPump() { finish(); }

  void push(int stream, std::string_view data) {
    std::lock_guard lock(mu_);
    bytes_ += data.size();
    chunks_.emplace_back(stream, std::string(data));
    if (!thread_.joinable() && !done_) thread_ = std::thread([this] { loop(); });
    cv_.notify_one();
  }

  /// Drains everything queued, then stops. Returns whether stderr ended mid-line.
  bool finish() {
    std::thread pump;
    {
      std::lock_guard lock(mu_);
      done_ = true;
      cv_.notify_one();
      pump = std::move(thread_);
    }
    if (pump.joinable()) pump.join();
    return stderr_mid_line_;
  }

 private:
  static constexpr auto kTick = std::chrono::seconds(1);

  void loop() {
    for (;;) {
      std::pair<int, std::string> chunk;
      std::uint64_t bytes = 0;
      bool tick = false;
      {
        std::unique_lock lock(mu_);
        auto ready = [&] { return done_ || !chunks_.empty(); };
        if (status_) {
          tick = !cv_.wait_for(lock, kTick, ready);
        } else {
          cv_.wait(lock, ready);
        }
        bytes = bytes_;
        if (!tick) {
          if (chunks_.empty()) {
            erase_status();
            return;
          }
          chunk = std::move(chunks_.front());
          chunks_.pop_front();
        }
      }
      if (tick) {
        draw_status(bytes);
        continue;
      }
      erase_status();
      const int fd = chunk.first == 1 ? STDOUT_FILENO : STDERR_FILENO;
      write_all(fd, chunk.second);
      if (!chunk.second.empty()) {
        any_mid_line_ = chunk.second.back() != '\n';
        if (fd == STDERR_FILENO) stderr_mid_line_ = any_mid_line_;
      }
    }
  }

  void draw_status(std::uint64_t bytes) {
    // Only on a line of its own: never over a partial line the program wrote.
    if (any_mid_line_) return;
    const auto s = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::steady_clock::now() - started_)
                       .count();
    const std::string line = "\r\033[K" + status_text("toolwarden run", s, bytes);
    write_all(STDERR_FILENO, line);
    status_shown_ = true;
  }

  void erase_status() {
    if (!status_shown_) return;
    write_all(STDERR_FILENO, "\r\033[K");
    status_shown_ = false;
  }

  const bool status_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  bool status_shown_ = false;  // pump thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int, std::string>> chunks_;
  std::uint64_t bytes_ = 0;
  bool done_ = false;
  bool stderr_mid_line_ = false;
  bool any_mid_line_ = false;  // pump thread only
  std::thread thread_;         // guarded by mu_ once constructed
};

}  // namespace

int run_sandboxed(const RunOptions& o) {
  // One malloc arena for this short-lived process: the supervisor and output threads would
  // each reserve and trim an arena of their own (mmap, munmap, fresh page faults), about 3% of
  // a `toolwarden run -- /bin/true`, for allocations that never contend.
  ::mallopt(M_ARENA_MAX, 1);
  std::error_code ec;
  const std::string worktree =
      fs::canonical(o.worktree.empty() ? fs::current_path() : fs::path(o.worktree), ec).string();
  if (ec || !fs::is_directory(worktree)) {
    std::cerr << "toolwarden run: the worktree is not a directory\n";
    return 125;
  }
  sandbox::Profile p;
  p.argv = o.argv;
  p.argv[0] = resolve_program(o.argv[0], worktree);
  p.env = sandbox::build_environment({});
  p.worktree = worktree;
  p.worktree_writable = o.writable;
  p.limits.wall = std::chrono::seconds(o.timeout_s);
  p.limits.memory_bytes = o.memory_mb << 20;
  p.limits.output_bytes = o.output_bytes;
  OutputPump pump;
  sandbox::Supervisor supervisor(sandbox::Supervisor::Loop::caller);
  auto r = supervisor.run(std::move(p),
                          [&pump](int stream, std::string_view data) { pump.push(stream, data); });
  if (pump.finish()) std::cerr << "\n";  // our reason starts on a line of its own
  using sandbox::State;
  switch (r.state) {
    case State::completed:
      return r.exit_code;
    case State::timeout:
      std::cerr << "toolwarden run: timed out after " << o.timeout_s
                << " s; the whole process tree was killed\n";
      return 124;
    case State::output_limit:
      std::cerr << "toolwarden run: output exceeded " << o.output_bytes << " bytes; killed\n";
      return 137;
    case State::resource_limit:
      std::cerr << "toolwarden run: the " << r.limit << " limit was reached; killed\n";
      return 137;
    case State::setup_failed:
    case State::unsupported:
      std::cerr << "toolwarden run: the sandbox "
                << (r.state == State::unsupported ? "is unavailable" : "failed to start") << ": "
                << r.detail << " (see `toolwarden doctor`)\n";
      return 125;
  }
  return 125;
}

json::object doctor_report(int* exit_status) {
  const auto& f = sandbox::probe_features();
  json::array features;
  std::string missing;
  for (const auto& item : f.list) {
    features.push_back(json::object{{"name", item.name},
                                    {"available", item.available},
                                    {"required", item.required},
                                    {"detail", item.detail}});
    if (!item.available) missing += (missing.empty() ? "" : ", ") + item.name;
  }
  json::object canary{{"passed", false}, {"detail", "not run: the sandbox is unavailable"}};
  if (f.sandbox_available()) {
    char tmpl[] = "/tmp/toolwarden-doctor-XXXXXX";
    if (char* dir = ::mkdtemp(tmpl)) {
      sandbox::Supervisor supervisor(sandbox::Supervisor::Loop::caller);
      auto c = sandbox::run_canary(supervisor, dir);
      std::error_code ec;
      fs::remove_all(dir, ec);
      canary = json::object{{"passed", c.passed}, {"detail", c.detail}};
    }
  }
  const bool canary_ok = canary["passed"].as_bool();
  std::string status = !f.sandbox_available() || !canary_ok ? "unavailable"
                       : missing.empty()                    ? "full"
                                                            : "degraded";
  *exit_status = status == "full" ? 0 : status == "degraded" ? 1 : 2;
  json::object report;
  report["status"] = status;
  report["missing"] = missing;
  report["features"] = std::move(features);
  report["canary"] = std::move(canary);
  return report;
}

std::string format_doctor(const json::object& report) {
  std::string out = "toolwarden doctor\n";
  char line[512];
  for (const auto& v : report.at("features").as_array()) {
    const auto& o = v.as_object();
    std::snprintf(
        line, sizeof line, "  %-22s %-8s %s\n", o.at("name").as_string().c_str(),
        o.at("available").as_bool() ? "ok" : (o.at("required").as_bool() ? "MISSING" : "missing"),
        o.at("detail").as_string().c_str());
    out += line;
  }
  const auto& c = report.at("canary").as_object();
  std::snprintf(line, sizeof line, "  %-22s %-8s %s\n", "canary",
                c.at("passed").as_bool() ? "passed" : "FAILED", c.at("detail").as_string().c_str());
  out += line;
  const std::string status(report.at("status").as_string());
  out += "status: " + status;
  if (status == "degraded")
    out += " (missing: " + std::string(report.at("missing").as_string()) + ")";
  if (status == "unavailable") out += " — sandboxed tools are refused with SANDBOX_UNAVAILABLE";
  out += "\n";
  return out;
}

}  // namespace toolwarden::daemon
