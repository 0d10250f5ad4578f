// What one sandboxed run is (SPEC §8): the program, its environment, what of the host it
// sees, and its limits. Built by policy/daemon code; consumed by the Supervisor.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace toolwarden::sandbox {

struct Limits {
  std::chrono::milliseconds wall{60'000};
  int cpu_seconds = 60;
  std::uint64_t memory_bytes = 512ull << 20;  // aggregate over the whole tree
  int max_processes = 64;                     // aggregate
  int max_open_files = 512;
  std::uint64_t scratch_bytes = 64ull << 20;
  std::uint64_t file_size_bytes = 64ull << 20;
  std::uint64_t output_bytes = 1'000'000;  // stdout + stderr together
};

/// A host path made visible inside the sandbox, at its own absolute path unless `target` says
/// otherwise.
struct Bind {
  std::string path;
  bool writable = false;
  std::string target;  // absolute path inside; empty = `path`
  /// Writable inside, but the writes land in a tmpfs layer of the sandbox (bounded by
  /// Limits::scratch_bytes) and vanish with it: the host path is never written.
  bool ephemeral_writes = false;
};

/// The port, inside the sandbox's own network namespace, where a run with `network_proxy`
/// finds the daemon's CONNECT proxy (127.0.0.1). Every sandbox has its own namespace, so a
/// fixed number never collides.
inline constexpr std::uint16_t kProxyPort = 3128;

struct Profile {
  std::vector<std::string> argv;  // argv[0] absolute
  std::vector<std::string> env;   // "KEY=VALUE", from build_environment()
  std::string worktree;           // absolute realpath; mounted at the same path
  bool worktree_writable = false;
  std::string cwd;                // inside the sandbox; empty = the worktree
  std::vector<Bind> extra_binds;  // e.g. a registered command's executable
  /// Non-empty: the worktree is an overlay instead of a bind — the host worktree read-only
  /// below, and every change the run makes lands in `<dir>/upper` (with `<dir>/work` as
  /// overlayfs' work dir), for the caller to inspect and apply afterwards. Both must exist,
  /// empty, on one filesystem outside the worktree.
  std::string worktree_overlay_dir;
  /// A listener on 127.0.0.1:kProxyPort inside the sandbox's network namespace, handed to the
  /// start() caller's ListenerFn; Landlock lets the payload connect to that port only.
  bool network_proxy = false;
  /// process_spawn:false — fork/vfork/clone of a process refused (seccomp), and the right to
  /// execute granted only on `executables` (Landlock), e.g. the interpreter and its loader.
  bool deny_spawn = false;
  std::vector<std::string> executables;
  Limits limits;
  std::string stdin_data;  // written to the payload's stdin pipe; empty = /dev/null
};

/// The environment allowlist (SPEC §8): PATH, HOME and TMPDIR (the scratch), LANG, TERM, plus
/// `extra`, minus every injection variable (LD_*, BASH_FUNC_*, PYTHONPATH, NODE_OPTIONS, ...).
std::vector<std::string> build_environment(const std::map<std::string, std::string>& extra);

/// True for variables that can inject code into a program and are never passed.
bool is_injection_variable(std::string_view name);

enum class State { completed, timeout, output_limit, resource_limit, setup_failed, unsupported };
std::string_view to_string(State s);

struct RunResult {
  State state = State::setup_failed;
  int exit_code = -1;  // the payload's exit status; 128+N when killed by signal N
  int signal = 0;
  std::string stdout_data;  // bounded by Limits::output_bytes together with stderr
  std::string stderr_data;
  std::string stdout_sha256;  // over the whole stream as the payload wrote it
  std::string stderr_sha256;
  bool truncated = false;
  std::int64_t elapsed_ms = 0;
  std::uint64_t peak_memory_bytes = 0;
  std::string limit;  // which limit fired: wall, cpu, memory, processes, output, file_size, scratch
  std::string limit_mode;  // how aggregate limits were enforced: "rlimit+proc" or "cgroup"
  std::string detail;      // setup failure step, never the payload's output
  bool cancelled = false;  // killed on request (cancellation, revocation, shutdown)
};

}  // namespace toolwarden::sandbox
