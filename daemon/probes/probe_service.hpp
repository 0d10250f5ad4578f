// Probes (SPEC §12): snapshots, immutable plans, runs with verdicts and provenance. One
// service behind both doors: the admin API (the user) and the MCP tools probe_plan, probe_run
// and probe_show (a job granted `probes`). The user sees every snapshot and probe; a job only
// those it made, and its captures hold only files in its scopes.
//
// Every method here blocks (file work, hashing, waiting for the store's writer): call them on
// the blocking pool, never on the I/O thread or the writer's.
//
// A run, step by step: the plan's pins are checked again (the policy's digest, the snapshot's
// manifest digest, the executable's path and SHA-256 — a change refuses the run with
// DENIED_INTEGRITY and a `probe.refused` event); the run's worst case on disk is reserved
// against the state dir's free space minus what other runs reserved (else DENIED_SIZE and
// `probe.refused`), in the same transaction as the `probe.started` event, which is durable
// before anything runs; the snapshot is materialized (every blob re-verified), the
// intervention written onto it and the fixture into a fresh scratch directory; the executable
// is copied privately from a descriptor and the copy's bytes must hash to the pin; the sandbox
// runs that copy, bound over the executable's own path, with the snapshot read-only at
// /snapshot, the scratch writable at /scratch, the policy's environment, time and output
// budget, and no network unless the policy lists domains (then only those, through the
// daemon's CONNECT proxy); the oracle is checked, the verdict decided, and the run recorded
// with its provenance in the same transaction as `probe.completed` and the release of the
// reservation. Reservations left by a crash are released at the next start (`probe.abandoned`).
#pragma once

#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/tools/local_test.hpp"
#include "daemon/tools/tool.hpp"
#include "policy/path_rules.hpp"
#include "policy/probe_policy.hpp"
#include "store/blobs.hpp"
#include "store/writer.hpp"

namespace toolwarden::daemon {

/// Where the probe sees its files inside the sandbox: the same in every run, so outputs do not
/// depend on where a run's directory happened to be.
inline constexpr const char* kProbeSnapshotInside = "/snapshot";
inline constexpr const char* kProbeScratchInside = "/scratch";
/// What the probe's scratch may hold on disk (also the per-file size limit of the run).
inline constexpr std::uint64_t kProbeScratchBytes = 16ull << 20;
/// Output shown per stream in an MCP result (the stored run keeps all of it).
inline constexpr std::size_t kProbeMcpOutputChars = 4000;

struct ProbeEnv {
  std::filesystem::path state_dir;
  std::vector<policy::ProbePolicy> policies;
  std::shared_ptr<const policy::SensitiveNames> sensitive;
  std::shared_ptr<const SandboxReadiness> readiness;
  std::size_t max_file_bytes = 1 << 20;
};

/// Who asks. The user (admin API) has no job; a job's calls carry its id, the tools/call's
/// sequence number (for the events) and its grant (for captures).
struct ProbeCaller {
  std::optional<std::string> job_id;
  std::optional<std::int64_t> seq;
  const policy::Grant* grant = nullptr;
};

class ProbeService {
 public:
  /// Throws std::runtime_error when <state>/blobs cannot be opened.
  ProbeService(ProbeEnv env, store::Writer& writer, boost::asio::thread_pool& pool);
  ~ProbeService();
  ProbeService(const ProbeService&) = delete;
  ProbeService& operator=(const ProbeService&) = delete;

  const ProbeEnv& env() const { return env_; }

  /// snapshot.capture: {snapshot_id, files, bytes, new_bytes, manifest_sha256, skipped}.
  ToolOutcome capture(const std::string& worktree, const ProbeCaller& caller) const;
  /// probe.plan: {probe_id, plan_sha256, plan, created_at}. A job's plan without a snapshot_id
  /// captures the job's worktree first (its result then also names the snapshot).
  ToolOutcome plan(const boost::json::object& params, const ProbeCaller& caller) const;
  /// probe.get: the plan and its runs; each stream cut to its last `output_chars` characters.
  ToolOutcome show(const std::string& probe_id, const ProbeCaller& caller,
                   std::size_t output_chars) const;
  /// probe.run up to the sandbox: an early outcome (a refusal, or a run recorded as
  /// setup_failed), or the sandbox request whose finish records the run. Stream output in the
  /// outcome is cut to `output_chars`.
  Preparation prepare_run(const std::string& probe_id, const ProbeCaller& caller,
                          std::size_t output_chars) const;

  /// At start-up, on the store before the writer owns it: reservations of runs that never
  /// completed are released, each with a `probe.abandoned` event; leftover run directories and
  /// blob temp files are removed. Returns how many runs were abandoned.
  static std::size_t recover(store::Store& store, const std::filesystem::path& state_dir);

  // Admin runs in flight (I/O thread only): shutdown cancels them, and probe.progress reports
  // them (the CLI's status line on a terminal).
  struct AdminRun {
    std::string probe_id;
    std::chrono::steady_clock::time_point started;
    std::function<void()> cancel;
    /// Bytes of both output streams so far, counted on the supervisor's thread.
    std::shared_ptr<const std::atomic<std::uint64_t>> output_bytes;
  };
  std::uint64_t track_admin_run(AdminRun run);
  void untrack_admin_run(std::uint64_t id);
  void cancel_admin_runs();
  /// probe.progress: {probe_id, runs: [{elapsed_ms, output_bytes}]} of the probe's runs that
  /// the admin API has in flight, oldest first (empty when none runs).
  boost::json::object admin_progress(const std::string& probe_id) const;

 private:
  struct RunContext;
  friend struct RunContext;

  /// Runs `fn(Store&)` in the writer's next transaction and waits for its commit.
  template <class Fn>
  auto in_store_sync(Fn fn) const;

  ToolOutcome record_failed_start(std::shared_ptr<RunContext> run, policy::Denial why,
                                  std::size_t output_chars) const;
  ToolOutcome finish_run(RunContext& run, const sandbox::RunResult& r,
                         std::size_t output_chars) const;
  void abandon(RunContext& run, const std::string& why) const;

  ProbeEnv env_;
  store::Writer& writer_;
  boost::asio::thread_pool& pool_;
  std::unique_ptr<store::BlobStore> blobs_;
  std::map<std::uint64_t, AdminRun> admin_runs_;
  std::uint64_t next_admin_run_ = 0;
};

}  // namespace toolwarden::daemon
