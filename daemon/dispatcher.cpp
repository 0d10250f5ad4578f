#include "daemon/dispatcher.hpp"

#include <boost/json/serialize.hpp>
#include <chrono>

#include "daemon/async.hpp"
#include "daemon/log.hpp"
#include "protocol/json_schema.hpp"
#include "protocol/jsonrpc.hpp"
#include "store/clock.hpp"
#include "store/digest.hpp"

namespace toolwarden::daemon {
namespace json = boost::json;
using policy::ErrorCode;

namespace {

// Releases the job's concurrency slot and forgets the call on every path out.
class CallScope {
 public:
  CallScope(JobRegistry& jobs, std::shared_ptr<JobState> job, std::shared_ptr<CallState> call)
      : jobs_(jobs), job_(std::move(job)), call_(std::move(call)) {}
  ~CallScope() {
    jobs_.end_call(*job_, call_);
    jobs_.release_slot(*job_);
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  JobRegistry& jobs_;
  std::shared_ptr<JobState> job_;
  std::shared_ptr<CallState> call_;
};

std::string id_text(const json::value& id) { return json::serialize(id); }

}  // namespace

asio::awaitable<ToolOutcome> Dispatcher::execute(const Tool& tool, std::shared_ptr<JobState> job,
                                                 std::shared_ptr<CallState> call, json::object args,
                                                 std::int64_t seq) {
  const std::string job_id = job->record.id;
  auto failed = [] {
    return ToolOutcome{policy::deny(ErrorCode::kLocalToolFailed, "the tool failed unexpectedly"),
                       {}};
  };
  // The grant is immutable once the job exists, so pool threads may read it without a lock.
  auto prepare = [&tool, job, call, this, args, job_id, seq] {
    ToolContext ctx{job->grant, config_, call->cancel, job_id, seq};
    return tool.prepare(ctx, args);
  };
  auto [prep_err, prep] = co_await off_loop(pool_, std::move(prepare));
  if (prep_err) co_return failed();
  if (auto* early = std::get_if<ToolOutcome>(&prep)) co_return std::move(*early);

  auto request = std::get<SandboxRequest>(std::move(prep));
  if (call->cancelled())
    co_return ToolOutcome{policy::deny(ErrorCode::kCancelled, "cancelled"), {}};
  auto ex = co_await asio::this_coro::executor;
  auto initiate = [this, call, ex, &request](auto handler) {
    auto h = std::make_shared<decltype(handler)>(std::move(handler));
    const auto id =
        supervisor_.start(std::move(request.profile), {}, [h, ex](sandbox::RunResult r) {
          asio::post(ex, [h, r = std::move(r)]() mutable { std::move (*h)(std::move(r)); });
        });
    // Revocation, client cancellation and shutdown kill the sandbox's whole tree.
    call->on_cancel = [this, id] { supervisor_.cancel(id); };
  };
  auto token = asio::use_awaitable;
  sandbox::RunResult result =
      co_await asio::async_initiate<decltype(token), void(sandbox::RunResult)>(initiate, token);
  call->on_cancel = nullptr;
  auto finish = [&request, result] { return request.finish(result); };
  auto [fin_err, out] = co_await off_loop(pool_, std::move(finish));
  if (fin_err) co_return failed();
  co_return out;
}

asio::awaitable<CallOutcome> Dispatcher::call(std::shared_ptr<JobState> job,
                                              std::int64_t generation, json::value request_id,
                                              const json::value& params) {
  if (!params.is_object())
    co_return RpcFailure{protocol::rpc_code::kInvalidParams, "params must be an object"};
  const auto& p = params.get_object();
  const auto* name_v = p.if_contains("name");
  if (name_v == nullptr || !name_v->is_string()) {
    co_return RpcFailure{protocol::rpc_code::kInvalidParams, "params.name must be a string"};
  }
  const std::string name(name_v->get_string());
  const Tool* tool = tools_.find(name);
  if (tool == nullptr)
    co_return RpcFailure{protocol::rpc_code::kInvalidParams, "Unknown tool: " + name};
  json::object args;
  if (const auto* a = p.if_contains("arguments"); a != nullptr && !a->is_null()) {
    if (!a->is_object())
      co_return RpcFailure{protocol::rpc_code::kInvalidParams, "arguments must be an object"};
    args = a->get_object();
  }
  if (auto bad = protocol::validate(tool->descriptor().input_schema, args)) {
    co_return RpcFailure{
        protocol::rpc_code::kInvalidParams,
        "Invalid arguments for " + name + " at " + bad->path + ": " + bad->message};
  }

  if (!co_await jobs_.acquire_slot(job)) {
    co_return Unauthorized{};
  }
  auto call = jobs_.begin_call(*job, request_id);
  CallScope scope(jobs_, job, call);

  const std::string job_id = job->record.id;
  const std::string args_digest = store::sha256_hex(store::canonical_json(args));
  const auto started = std::chrono::steady_clock::now();

  auto work = [&](store::Store& s) {
    std::int64_t n = s.next_sequence(job_id);
    json::object data;
    data["tool"] = name;
    data["args_sha256"] = args_digest;
    data["request_id"] = request_id;
    data["generation"] = generation;
    s.append_event(store::NewEvent{job_id, n, "tool.requested", std::move(data)});
    return n;
  };
  auto [begin_err, seq] = co_await in_store(writer_, std::move(work));
  if (begin_err) {
    log_error("tool.refused", {{"job", job_id}, {"tool", name}, {"why", "store unavailable"}});
    co_return RpcFailure{protocol::rpc_code::kInternalError,
                         "the audit store cannot record the call; nothing was run"};
  }
  log_debug("tool.requested", {{"job", job_id}, {"seq", std::to_string(seq)}, {"tool", name}});

  ToolOutcome outcome;
  bool revoked = !JobRegistry::binding_holds(*job, generation, store::unix_now());
  if (!revoked) {
    if (auto allowed = job->grant.authorize_tool(name); !allowed) {
      outcome.denial = allowed.denial();
    } else {
      // The grant is immutable once the job exists, so the worker may read it without a lock.
      outcome = co_await execute(*tool, job, call, args, seq);
    }
    auto why = static_cast<CancelReason>(call->cancel.load());
    if (why == CancelReason::client || why == CancelReason::shutdown) {
      outcome.denial = policy::deny(ErrorCode::kCancelled, why == CancelReason::shutdown
                                                               ? "the daemon is shutting down"
                                                               : "cancelled by the client");
    }
    revoked = !JobRegistry::binding_holds(*job, generation, store::unix_now());
  }

  json::object result = outcome.denial ? protocol::tool_failure(to_string(outcome.denial->code),
                                                                outcome.denial->reason)
                                       : protocol::tool_success(std::move(outcome.result));
  const std::string code = revoked          ? "REVOKED"
                           : outcome.denial ? std::string(to_string(outcome.denial->code))
                                            : "OK";
  const auto elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - started)
                              .count();
  const std::string result_digest = store::sha256_hex(store::canonical_json(result));

  auto work3 = [&](store::Store& s) {
    json::object data;
    data["tool"] = name;
    data["code"] = code;
    data["elapsed_ms"] = elapsed_ms;
    data["args_sha256"] = args_digest;
    data["result_sha256"] = result_digest;
    s.append_event(store::NewEvent{job_id, seq, "tool.completed", std::move(data)});
    return 0;
  };
  auto [end_err, ignored] = co_await in_store(writer_, std::move(work3));
  (void)ignored;
  metrics_.count_call(name, code);
  log_info("tool.completed", {{"job", job_id},
                              {"seq", std::to_string(seq)},
                              {"tool", name},
                              {"code", code},
                              {"ms", std::to_string(elapsed_ms)},
                              {"request", id_text(request_id)}});
  if (end_err) {
    // The tool ran but its completion is not on record: do not hand out an unaudited result.
    co_return RpcFailure{protocol::rpc_code::kInternalError,
                         "the audit store cannot record the result"};
  }
  if (revoked) co_return Unauthorized{};
  co_return result;
}

}  // namespace toolwarden::daemon
