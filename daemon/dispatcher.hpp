// Every tools/call passes here (SPEC §5): the job's next sequence number is persisted with the
// `tool.requested` event before the tool runs, the (job, generation) binding is checked before
// and after, at most max_concurrent_calls run per job, and `tool.completed` closes the pair.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>
#include <memory>
#include <string>
#include <variant>

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

using CallOutcome = std::variant<boost::json::object, Unauthorized, RpcFailure>;

class Dispatcher {
 public:
  Dispatcher(store::Writer& writer, boost::asio::thread_pool& pool, sandbox::Supervisor& supervisor,
             JobRegistry& jobs, Metrics& metrics, const ToolRegistry& tools, const Config& config)
      : writer_(writer),
        pool_(pool),
        supervisor_(supervisor),
        jobs_(jobs),
        metrics_(metrics),
        tools_(tools),
        config_(config) {}

  boost::asio::awaitable<CallOutcome> call(std::shared_ptr<JobState> job, std::int64_t generation,
                                           boost::json::value request_id,
                                           const boost::json::value& params);

 private:
  /// Runs a prepared tool to its outcome: on the pool, or through the sandbox supervisor.
  boost::asio::awaitable<ToolOutcome> execute(const Tool& tool, std::shared_ptr<JobState> job,
                                              std::shared_ptr<CallState> call,
                                              boost::json::object args, std::int64_t seq);

  store::Writer& writer_;
  boost::asio::thread_pool& pool_;
  sandbox::Supervisor& supervisor_;
  JobRegistry& jobs_;
  Metrics& metrics_;
  const ToolRegistry& tools_;
  const Config& config_;
};

}  // namespace toolwarden::daemon
