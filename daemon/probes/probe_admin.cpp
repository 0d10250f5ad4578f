#include "daemon/probes/probe_admin.hpp"

#include <limits>

#include "daemon/async.hpp"
#include "daemon/log.hpp"
#include "daemon/probes/probe_service.hpp"

namespace toolwarden::daemon {
namespace json = boost::json;

namespace {

using ProbeAnswer = std::variant<json::value, std::string>;

// The user sees a run's whole stored output.
constexpr std::size_t kAllOutput = std::numeric_limits<std::size_t>::max();

ProbeAnswer answer_of(ToolOutcome out) {
  if (out.denial) return std::string(to_string(out.denial->code)) + ": " + out.denial->reason;
  return json::value(std::move(out.result));
}

std::optional<std::string> string_param(const json::object& p, std::string_view key) {
  const auto* v = p.if_contains(key);
  if (v == nullptr || !v->is_string() || v->get_string().empty()) return std::nullopt;
  return std::string(v->get_string());
}

// Egress decisions of a user's run are audit events without a job (SPEC §12 allowed_domains).
void record_admin_egress(store::Writer& writer, const std::string& probe_id, const EgressEvent& e) {
  json::object data{{"tool", "probe_run"},
                    {"probe_id", probe_id},
                    {"host", e.host},
                    {"port", e.port},
                    {"decision", to_string(e.decision)},
                    {"reason", e.reason},
                    {"bytes_up", e.bytes_up},
                    {"bytes_down", e.bytes_down},
                    {"duration_ms", e.duration.count()}};
  if (!e.address.empty()) data["address"] = e.address;
  const std::string type = e.decision == EgressEvent::Decision::denied   ? "egress.denied"
                           : e.decision == EgressEvent::Decision::failed ? "egress.failed"
                                                                         : "egress.allowed";
  log_info(type, {{"probe", probe_id}, {"host", e.host}, {"port", std::to_string(e.port)}});
  auto work = [ev = store::NewEvent{std::nullopt, std::nullopt, type, std::move(data)}](
                  store::Store& st) { st.append_event(ev); };
  writer.submit(std::move(work), [probe_id](std::exception_ptr err) {
    if (err) log_error("egress.unrecorded", {{"probe", probe_id}});
  });
}

asio::awaitable<ProbeAnswer> run_probe(Services& s, ProbeService& probes, const std::string& id) {
  auto prepare = [&probes, id] { return probes.prepare_run(id, ProbeCaller{}, kAllOutput); };
  auto [prep_err, prep] = co_await off_loop(s.pool, std::move(prepare));
  if (prep_err) co_return std::string("LOCAL_TOOL_FAILED: the run could not be prepared");
  if (auto* early = std::get_if<ToolOutcome>(&prep)) co_return answer_of(std::move(*early));
  auto request = std::get<SandboxRequest>(std::move(prep));

  // Cancelled at shutdown like a job's call: the sandbox's whole tree dies. Its output is
  // counted for probe.progress.
  auto cancel = std::make_shared<std::function<void()>>();
  auto output_bytes = std::make_shared<std::atomic<std::uint64_t>>(0);
  const std::uint64_t tracked =
      probes.track_admin_run(ProbeService::AdminRun{id, std::chrono::steady_clock::now(),
                                                    [cancel] {
                                                      if (*cancel) (*cancel)();
                                                    },
                                                    output_bytes});
  const sandbox::Supervisor::OutputFn on_output = [output_bytes](int, std::string_view data) {
    output_bytes->fetch_add(data.size(), std::memory_order_relaxed);
  };
  const std::function<void(const EgressEvent&)> audit =
      [&writer = s.writer, id](const EgressEvent& e) { record_admin_egress(writer, id, e); };
  const std::function<void(std::function<void()>)> on_start = [cancel](std::function<void()> f) {
    *cancel = std::move(f);
  };
  sandbox::RunResult result =
      co_await s.dispatcher.run_sandbox(request, audit, on_start, on_output);
  probes.untrack_admin_run(tracked);
  auto finish = [&request, result] { return request.finish(result); };
  auto [fin_err, out] = co_await off_loop(s.pool, std::move(finish));
  if (fin_err) co_return std::string("LOCAL_TOOL_FAILED: the run could not be recorded");
  co_return answer_of(std::move(out));
}

}  // namespace

bool is_probe_admin_method(std::string_view method) {
  return method == "snapshot.capture" || method == "probe.plan" || method == "probe.run" ||
         method == "probe.get" || method == "probe.progress";
}

asio::awaitable<ProbeAnswer> handle_probe_admin(Services& s, std::string method,
                                                json::object params) {
  if (s.probes == nullptr) co_return std::string("probes are not available in this daemon");
  ProbeService& probes = *s.probes;
  if (method == "snapshot.capture") {
    for (const auto& kv : params) {
      if (kv.key() != "worktree")
        co_return "DENIED_ARGUMENTS: unknown key \"" + std::string(kv.key()) + "\"";
    }
    auto worktree = string_param(params, "worktree");
    if (!worktree) co_return std::string("DENIED_ARGUMENTS: worktree is required");
    auto work = [&probes, w = *worktree] { return probes.capture(w, ProbeCaller{}); };
    auto [err, out] = co_await off_loop(s.pool, std::move(work));
    if (err) co_return std::string("LOCAL_TOOL_FAILED: the snapshot could not be captured");
    co_return answer_of(std::move(out));
  }
  if (method == "probe.plan") {
    auto work = [&probes, p = std::move(params)] { return probes.plan(p, ProbeCaller{}); };
    auto [err, out] = co_await off_loop(s.pool, std::move(work));
    if (err) co_return std::string("LOCAL_TOOL_FAILED: the plan could not be recorded");
    co_return answer_of(std::move(out));
  }
  auto id = string_param(params, "probe_id");
  if (!id) co_return std::string("DENIED_ARGUMENTS: probe_id is required");
  for (const auto& kv : params) {
    if (kv.key() != "probe_id")
      co_return "DENIED_ARGUMENTS: unknown key \"" + std::string(kv.key()) + "\"";
  }
  if (method == "probe.progress") co_return json::value(probes.admin_progress(*id));
  if (method == "probe.get") {
    auto work = [&probes, i = *id] { return probes.show(i, ProbeCaller{}, kAllOutput); };
    auto [err, out] = co_await off_loop(s.pool, std::move(work));
    if (err) co_return std::string("LOCAL_TOOL_FAILED: the probe could not be read");
    co_return answer_of(std::move(out));
  }
  co_return co_await run_probe(s, probes, *id);
}

}  // namespace toolwarden::daemon
