// Starts sandboxed runs and watches them: one long-lived thread that clones every sandbox
// (so PR_SET_PDEATHSIG ties each sandbox to a thread that lives as long as the daemon) and
// supervises them with epoll over pidfds, pipes and timerfds — exits and output arrive as
// events; no SIGCHLD handler, no sleeps. Thread-safe entry points.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "sandbox/profile.hpp"

namespace toolwarden::sandbox {

class Supervisor {
 public:
  /// Output as it arrives (stream 1 = stdout, 2 = stderr), within the output budget. Runs on
  /// the supervisor thread: must not block.
  using OutputFn = std::function<void(int stream, std::string_view data)>;
  /// The outcome. Runs on the supervisor thread: must not block.
  using DoneFn = std::function<void(RunResult)>;
  /// A run with Profile::network_proxy: the listening socket made inside its network
  /// namespace (the callee owns the descriptor). Runs on the supervisor thread: must not block.
  using ListenerFn = std::function<void(int listening_fd)>;

  Supervisor();
  /// Kills every running sandbox and joins the thread.
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  /// Starts a run; `on_done` is called exactly once.
  std::uint64_t start(Profile profile, OutputFn on_output, DoneFn on_done,
                      ListenerFn on_listener = {});
  /// Kills the run's whole process tree; its result has `cancelled` set. Unknown ids are ignored.
  void cancel(std::uint64_t id);
  /// Blocking convenience for the CLI and tests.
  RunResult run(Profile profile, OutputFn on_output = {});

  /// Runs currently alive (a figure for metrics and tests).
  std::size_t active() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace toolwarden::sandbox
