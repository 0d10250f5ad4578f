// Every tools/call passes here (SPEC §5): the job's next sequence number is persisted with the
// `tool.requested` event before a tool with effects runs, the (job, generation) binding is
// checked before the tool and again on the writer thread as `tool.completed` closes the pair
// (so the audit chain's order decides), and at most max_concurrent_calls run per job.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>
#include <functional>
#include <memory>
#include <string>
#include <variant>

#include "daemon/egress_proxy.hpp"
#include "daemon/jobs.hpp"
#include "daemon/metrics.hpp"
#include "daemon/tools/tool.hpp"
#include "sandbox/supervisor.hpp"
#include "store/writer.hpp"

namespace toolwarden::daemon {

struct Config;

/// The job was revoked, renewed or expired around the call: answer HTTP 401.
struct Unauthorized {};
/// A JSON-RPC error instead of a result.
struct RpcFailure {
  int code;
  std::string message;
};

/// A tool's MCP result (the `tools/call` result object) serialized off the I/O thread, its
/// code, and the SHA-256 of exactly those bytes for the audit.
struct Answer {
  std::string text;
  std::string code;  // "OK" or the SPEC error code
  std::string digest;
  /// The job's concurrency slot, held until the answer has been written to the client: an
  /// answer its client does not read keeps its slot (until the write times out), so a job's
  /// unread answers in the daemon's memory are at most max_concurrent_calls.
  std::shared_ptr<void> slot;

  static Answer from(ToolOutcome outcome);
};

using CallOutcome = std::variant<Answer, Unauthorized, RpcFailure>;

class Dispatcher {
 public:
  Dispatcher(store::Writer& writer, boost::asio::thread_pool& pool, sandbox::Supervisor& supervisor,
             JobRegistry& jobs, Metrics& metrics, const ToolRegistry& tools, const Config& config,
             EgressResolveOverrides egress_overrides = {})
      : writer_(writer),
        pool_(pool),
        supervisor_(supervisor),
        jobs_(jobs),
        metrics_(metrics),
        tools_(tools),
        config_(config),
        egress_overrides_(std::move(egress_overrides)) {}

  boost::asio::awaitable<CallOutcome> call(std::shared_ptr<JobState> job, std::int64_t generation,
                                           boost::json::value request_id,
                                           const boost::json::value& params);

  /// Runs a prepared sandbox request under the supervisor (its profile is consumed). A network
  /// capability is served by a CONNECT proxy limited to request.egress_hosts whose decisions
  /// go to `audit`; `on_start` receives the function that kills the run's whole tree;
  /// `on_output` (may be empty) sees the output as it arrives, on the supervisor's thread. Used
  /// by every sandboxed tool call and by probes run over the admin API.
  boost::asio::awaitable<sandbox::RunResult> run_sandbox(
      SandboxRequest& request, const std::function<void(const EgressEvent&)>& audit,
      const std::function<void(std::function<void()>)>& on_start,
      const sandbox::Supervisor::OutputFn& on_output = {});

 private:
  /// Runs a tool to its MCP result: on the pool, or through the sandbox supervisor. The result
  /// object and its digest are built on the pool too, keeping the I/O thread light.
  boost::asio::awaitable<Answer> execute(const Tool& tool, std::shared_ptr<JobState> job,
                                         std::shared_ptr<CallState> call, boost::json::object args,
                                         std::int64_t seq);

  /// Calls the tool's prepare step (on a pool thread): its answer, or the sandbox run it asks for.
  std::variant<Answer, SandboxRequest> prepare(const Tool& tool, const JobState& job,
                                               CallState& call, const boost::json::object& args,
                                               std::int64_t seq) const;
  /// The network capability's proxy for one run; touched on the I/O thread only.
  struct EgressRun {
    EgressProxyConfig config;
    std::shared_ptr<EgressProxy> proxy;
    bool finished = false;
  };
  /// Egress decisions are audit events of the call (its job and sequence number).
  void record_egress(const std::string& job_id, std::int64_t seq, const std::string& tool,
                     const EgressEvent& e);

  store::Writer& writer_;
  boost::asio::thread_pool& pool_;
  sandbox::Supervisor& supervisor_;
  JobRegistry& jobs_;
  Metrics& metrics_;
  const ToolRegistry& tools_;
  const Config& config_;
  EgressResolveOverrides egress_overrides_;
};

}  // namespace toolwarden::daemon
