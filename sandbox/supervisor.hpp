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

  /// Where the supervision loop runs. `own_thread` (the daemon): on a thread of its own,
  /// started here; every method may be called from any thread. `caller` (a process that runs
  /// one sandbox and waits for it: `toolwarden run`, doctor): only inside run() and the
  /// destructor, on the calling thread — no thread to start, no hand-off to it and back. Such
  /// a supervisor is used from one thread and through run() alone; the callbacks then run on
  /// that thread, and must not block it either.
  ///
  /// A run is over when its init reports that every other process of the sandbox is gone
  /// (init is then killed too); the kernel finishes tearing init's namespaces down after that.
  /// An own-thread supervisor reaps each such init as it goes; a caller-mode one does not wait
  /// for them in its destructor: when this process exits (which for its users follows at
  /// once) they are re-parented and reaped like any orphan, and die with it if still alive.
  enum class Loop { own_thread, caller };

  explicit Supervisor(Loop loop = Loop::own_thread);
  /// Kills every running sandbox and waits for them (and joins the thread).
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
