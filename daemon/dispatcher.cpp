#include "daemon/dispatcher.hpp"

#include <boost/json/serialize.hpp>
#include <chrono>

#include "daemon/async.hpp"
#include "daemon/egress_proxy.hpp"
#include "daemon/log.hpp"
#include "protocol/json_schema.hpp"
#include "protocol/jsonrpc.hpp"
#include "store/clock.hpp"
#include "store/digest.hpp"

namespace toolwarden::daemon {
namespace json = boost::json;
using policy::ErrorCode;

namespace {

// Forgets the call on every path out.
class CallScope {
 public:
  CallScope(JobRegistry& jobs, std::shared_ptr<JobState> job, std::shared_ptr<CallState> call)
      : jobs_(jobs), job_(std::move(job)), call_(std::move(call)) {}
  ~CallScope() { jobs_.end_call(*job_, call_); }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  JobRegistry& jobs_;
  std::shared_ptr<JobState> job_;
  std::shared_ptr<CallState> call_;
};

// The job's concurrency slot, released when the last holder lets go: the call itself, and
// with an answer its Answer::slot, so the slot is free only once the answer is written.
class SlotHold {
 public:
  SlotHold(JobRegistry& jobs, std::shared_ptr<JobState> job) : jobs_(jobs), job_(std::move(job)) {}
  ~SlotHold() { jobs_.release_slot(*job_); }
  SlotHold(const SlotHold&) = delete;
  SlotHold& operator=(const SlotHold&) = delete;

 private:
  JobRegistry& jobs_;
  std::shared_ptr<JobState> job_;
};

std::string id_text(const json::value& id) { return json::serialize(id); }

Answer tool_failed() {
  return Answer::from(
      ToolOutcome{policy::deny(ErrorCode::kLocalToolFailed, "the tool failed unexpectedly"), {}});
}

}  // namespace

Answer Answer::from(ToolOutcome outcome) {
  Answer a;
  if (outcome.denial) {
    a.code = std::string(to_string(outcome.denial->code));
    a.text = json::serialize(
        protocol::tool_failure(a.code, outcome.denial->reason, std::move(outcome.result)));
  } else {
    a.code = "OK";
    a.text = protocol::tool_success_text(outcome.result);
  }
  a.digest = store::sha256_hex(a.text);
  return a;
}

void Dispatcher::record_egress(const std::string& job_id, std::int64_t seq, const std::string& tool,
                               const EgressEvent& e) {
  json::object data;
  data["tool"] = tool;
  data["host"] = e.host;
  data["port"] = e.port;
  data["decision"] = to_string(e.decision);
  data["reason"] = e.reason;
  if (!e.address.empty()) data["address"] = e.address;
  data["bytes_up"] = e.bytes_up;
  data["bytes_down"] = e.bytes_down;
  data["duration_ms"] = e.duration.count();
  const std::string type = e.decision == EgressEvent::Decision::denied   ? "egress.denied"
                           : e.decision == EgressEvent::Decision::failed ? "egress.failed"
                                                                         : "egress.allowed";
  log_info(type, {{"job", job_id},
                  {"seq", std::to_string(seq)},
                  {"host", e.host},
                  {"port", std::to_string(e.port)}});
  auto work = [ev = store::NewEvent{job_id, seq, type, std::move(data)}](store::Store& st) {
    st.append_event(ev);
  };
  writer_.submit(std::move(work), [job_id](std::exception_ptr err) {
    if (err) log_error("egress.unrecorded", {{"job", job_id}});
  });
}

asio::awaitable<sandbox::RunResult> Dispatcher::run_sandbox(
    SandboxRequest& request, const std::function<void(const EgressEvent&)>& audit,
    const std::function<void(std::function<void()>)>& on_start,
    const sandbox::Supervisor::OutputFn& on_output) {
  auto ex = co_await asio::this_coro::executor;
  // A network capability (SPEC §11, §12): the sandbox hands over a listener inside its network
  // namespace and the daemon's CONNECT proxy serves it for the run's lifetime.
  auto egress = std::make_shared<EgressRun>();
  if (request.profile.network_proxy) {
    std::string why;
    auto allowlist = policy::EgressAllowlist::from_hosts(request.egress_hosts, &why);
    if (!allowlist) {
      sandbox::RunResult refused;
      refused.state = sandbox::State::setup_failed;
      refused.detail = "the network allowlist is invalid";
      refused.stdout_sha256 = refused.stderr_sha256 = store::sha256_hex("");
      co_return refused;
    }
    egress->config.allowlist = std::move(*allowlist);
    egress->config.overrides = egress_overrides_;
    egress->config.audit = audit;
  }
  sandbox::Supervisor::ListenerFn on_listener;
  if (request.profile.network_proxy) {
    on_listener = [egress, ex](int fd) {
      asio::post(ex, [egress, ex, fd] {
        auto proxy = std::make_shared<EgressProxy>(ex, fd, egress->config);
        if (!proxy->start() && !egress->finished) {
          egress->proxy = std::move(proxy);
        } else {
          proxy->stop();  // the run is already over, or the socket is unusable
        }
      });
    };
  }
  auto initiate = [this, ex, &request, &on_listener, &on_start, &on_output](auto handler) {
    auto h = std::make_shared<decltype(handler)>(std::move(handler));
    const auto id = supervisor_.start(
        std::move(request.profile), on_output,
        [h, ex](sandbox::RunResult r) {
          asio::post(ex, [h, r = std::move(r)]() mutable { std::move (*h)(std::move(r)); });
        },
        std::move(on_listener));
    if (on_start) on_start([this, id] { supervisor_.cancel(id); });
  };
  auto token = asio::use_awaitable;
  sandbox::RunResult result =
      co_await asio::async_initiate<decltype(token), void(sandbox::RunResult)>(initiate, token);
  egress->finished = true;
  if (auto proxy = std::move(egress->proxy)) {
    // Every tunnel closed and its event handed to the store before the run is reported.
    auto drain = [proxy, ex](auto handler) {
      auto h = std::make_shared<decltype(handler)>(std::move(handler));
      proxy->stop([h, ex] { asio::post(ex, [h] { std::move (*h)(); }); });
    };
    co_await asio::async_initiate<decltype(token), void()>(drain, token);
  }
  co_return result;
}

std::variant<Answer, SandboxRequest> Dispatcher::prepare(const Tool& tool, const JobState& job,
                                                         CallState& call, const json::object& args,
                                                         std::int64_t seq) const {
  // The grant is immutable once the job exists, so pool threads may read it without a lock.
  ToolContext ctx{job.grant, config_, call.cancel, job.record.id, seq};
  Preparation prep = tool.prepare(ctx, args);
  if (auto* early = std::get_if<ToolOutcome>(&prep)) return Answer::from(std::move(*early));
  return std::get<SandboxRequest>(std::move(prep));
}

asio::awaitable<Answer> Dispatcher::execute(const Tool& tool, std::shared_ptr<JobState> job,
                                            std::shared_ptr<CallState> call, json::object args,
                                            std::int64_t seq) {
  const std::string job_id = job->record.id;
  auto on_pool = [&tool, job, call, this, args, seq] {
    return prepare(tool, *job, *call, args, seq);
  };
  auto [prep_err, prep] = co_await off_loop(pool_, std::move(on_pool));
  if (prep_err) co_return tool_failed();
  if (auto* early = std::get_if<Answer>(&prep)) co_return std::move(*early);

  auto request = std::get<SandboxRequest>(std::move(prep));
  if (call->cancelled())
    co_return Answer::from(ToolOutcome{policy::deny(ErrorCode::kCancelled, "cancelled"), {}});
  const std::function<void(const EgressEvent&)> audit =
      [this, job_id, seq, name = tool.descriptor().name](const EgressEvent& e) {
        record_egress(job_id, seq, name, e);
      };
  // Revocation, client cancellation and shutdown kill the sandbox's whole tree.
  const std::function<void(std::function<void()>)> on_start = [call](std::function<void()> cancel) {
    call->on_cancel = std::move(cancel);
  };
  // Output counted as it arrives, for the call's progress notifications.
  const sandbox::Supervisor::OutputFn on_output = [call](int, std::string_view data) {
    call->output_bytes.fetch_add(data.size(), std::memory_order_relaxed);
  };
  sandbox::RunResult result = co_await run_sandbox(request, audit, on_start, on_output);
  call->on_cancel = nullptr;
  auto finish = [&request, result] { return Answer::from(request.finish(result)); };
  auto [fin_err, out] = co_await off_loop(pool_, std::move(finish));
  if (fin_err) co_return tool_failed();
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
  std::shared_ptr<const Tool> custom;  // held for the call: the job owns its custom tools
  if (tool == nullptr) {
    if (auto it = job->custom_tools.find(name); it != job->custom_tools.end()) {
      custom = it->second;
      tool = custom.get();
    }
  }
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
  const auto slot = std::make_shared<SlotHold>(jobs_, job);
  auto call = jobs_.begin_call(*job, request_id);
  CallScope scope(jobs_, job, call);

  const std::string job_id = job->record.id;
  const std::string args_digest = store::sha256_hex(store::canonical_json(args));
  const auto started = std::chrono::steady_clock::now();
  auto requested_event = [&](std::int64_t n) {
    json::object data;
    data["tool"] = name;
    data["args_sha256"] = args_digest;
    data["request_id"] = request_id;
    data["generation"] = generation;
    return store::NewEvent{job_id, n, "tool.requested", std::move(data)};
  };

  // A tool with effects (an edit, a sandbox) gets its sequence number and tool.requested
  // durable before it acts, so a crash mid-call leaves the request on record. A tool without
  // effects runs first and both events are committed together afterwards (one fsync, shared
  // with other calls by group commit): a crash before that commit leaves nothing to record,
  // and the caller hears nothing before it. Either way the number is assigned in the same
  // transaction as tool.requested and is never reused.
  const bool effect_free = tool->descriptor().annotations.read_only && !tool->sandboxed();
  std::int64_t seq = 0;
  if (!effect_free) {
    auto begin = [&](store::Store& s) {
      std::int64_t n = s.next_sequence(job_id);
      s.append_event(requested_event(n));
      return n;
    };
    auto [begin_err, n] = co_await in_store(writer_, std::move(begin));
    if (begin_err) {
      log_error("tool.refused", {{"job", job_id}, {"tool", name}, {"why", "store unavailable"}});
      co_return RpcFailure{protocol::rpc_code::kInternalError,
                           "the audit store cannot record the call; nothing was run"};
    }
    seq = n;
  }

  // The binding now; from here on a revoke or renewal shows as call->binding_lost, and the
  // expiry is this generation's.
  const bool bound = JobRegistry::binding_holds(*job, generation, store::unix_now());
  const std::int64_t expires_at = job->record.expires_at;
  Answer answer;
  std::int64_t elapsed_ms = 0;
  // After the tool ran (on whichever thread it ran): a client's or the daemon's cancellation
  // replaces its answer.
  auto settle = [&] {
    auto why = static_cast<CancelReason>(call->cancel.load());
    if (bound && (why == CancelReason::client || why == CancelReason::shutdown)) {
      answer = Answer::from(
          ToolOutcome{policy::deny(ErrorCode::kCancelled, why == CancelReason::shutdown
                                                              ? "the daemon is shutting down"
                                                              : "cancelled by the client"),
                      {}});
    }
    elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - started)
                     .count();
  };
  // The completion, on the writer thread. The binding is judged here, in the chain's order: a
  // completion recorded after its job's `job.revoked` is recorded, and answered, as revoked.
  struct Recorded {
    std::int64_t seq = 0;
    bool revoked = false;
    std::string code;
  };
  auto end = [&](store::Store& s) {
    Recorded r;
    r.revoked = !bound || call->binding_lost.load() || store::unix_now() >= expires_at;
    r.code = r.revoked ? "REVOKED" : answer.code;
    r.seq = seq;
    if (effect_free) {
      r.seq = s.next_sequence(job_id);
      s.append_event(requested_event(r.seq));
    }
    json::object data;
    data["tool"] = name;
    data["code"] = r.code;
    data["elapsed_ms"] = elapsed_ms;
    data["args_sha256"] = args_digest;
    data["result_sha256"] = answer.digest;
    s.append_event(store::NewEvent{job_id, r.seq, "tool.completed", std::move(data)});
    return r;
  };

  std::tuple<std::exception_ptr, Recorded> recorded;
  auto allowed = job->grant.authorize_tool(name);
  if (bound && allowed && effect_free) {
    // A tool without effects runs on the pool, which hands its answer straight to the writer.
    // Such a tool never asks for a sandbox (sandboxed() is false); if it did, it fails.
    auto run = [&]() noexcept {
      try {
        auto prep = prepare(*tool, *job, *call, args, seq);
        auto* early = std::get_if<Answer>(&prep);
        answer = early ? std::move(*early) : tool_failed();
      } catch (...) {
        answer = tool_failed();
      }
      settle();
    };
    recorded = co_await off_loop_then_store(pool_, writer_, std::move(run), end);
  } else {
    // A call whose binding is already gone runs nothing and is recorded as revoked.
    if (bound && allowed) {
      answer = co_await execute(*tool, job, call, args, seq);
    } else if (bound) {
      answer = Answer::from(ToolOutcome{allowed.denial(), {}});
    }
    settle();
    recorded = co_await in_store(writer_, end);
  }
  auto& [end_err, rec] = recorded;
  if (!end_err) seq = rec.seq;
  const std::string code = end_err ? std::string("UNRECORDED") : rec.code;
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
  if (rec.revoked) co_return Unauthorized{};
  answer.slot = slot;
  co_return std::move(answer);
}

}  // namespace toolwarden::daemon
