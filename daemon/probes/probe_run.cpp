// probe.run (SPEC §12): the run of one plan, from its checks to its recorded verdict. The order
// of the steps and why is in probe_service.hpp.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <cerrno>
#include <cstring>

#include "daemon/log.hpp"
#include "daemon/probes/probe_common.hpp"
#include "daemon/probes/probe_service.hpp"
#include "daemon/probes/snapshot.hpp"
#include "daemon/probes/store_sync.hpp"
#include "daemon/token.hpp"
#include "policy/probe_plan.hpp"
#include "sandbox/features.hpp"
#include "store/clock.hpp"
#include "store/digest.hpp"
#include "store/probe_store.hpp"

namespace toolwarden::daemon {
namespace json = boost::json;
namespace fs = std::filesystem;
using policy::deny;
using policy::ErrorCode;

namespace {

// Bytes a stored run may take beyond its output: the record, indexes, the event.
constexpr std::int64_t kRunRecordOverhead = 256 * 1024;

std::string seq_text(const std::optional<std::int64_t>& seq) {
  return seq ? std::to_string(*seq) : "-";
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

UniqueFd private_dir_at(int parent_fd, const char* name, bool exclusive) {
  if (::mkdirat(parent_fd, name, 0700) != 0 && (exclusive || errno != EEXIST)) return {};
  UniqueFd fd(::openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)
    return {};
  return fd;
}

// The executable's private copy: read once from a descriptor whose identity is the pin's, the
// very bytes written hashed, and the copy used only when they hash to the pinned digest.
policy::Check copy_executable(const policy::ProbeExecutable& exe, int dest_dir_fd,
                              const char* name) {
  UniqueFd in(::open(exe.path.c_str(), O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC));
  struct stat st {};
  if (!in || ::fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != exe.pin.dev ||
      st.st_ino != exe.pin.ino || st.st_size != exe.pin.size ||
      static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec !=
          exe.pin.mtime_ns) {
    return deny(ErrorCode::kDeniedIntegrity, "the executable changed since it was pinned");
  }
  UniqueFd out(
      ::openat(dest_dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700));
  if (!out) return deny(ErrorCode::kLocalToolFailed, "cannot copy the executable");
  store::Sha256 digest;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(in.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return deny(ErrorCode::kLocalToolFailed, "cannot read the executable");
    if (n == 0) break;
    const std::string_view chunk(buf, static_cast<std::size_t>(n));
    digest.update(chunk);
    if (!write_all(out.get(), chunk))
      return deny(ErrorCode::kLocalToolFailed, "cannot copy the executable");
  }
  if (digest.finish_hex() != exe.pin.sha256)
    return deny(ErrorCode::kDeniedIntegrity, "the executable's bytes changed while copied");
  if (::fchmod(out.get(), 0500) != 0)
    return deny(ErrorCode::kLocalToolFailed, "cannot seal the executable's copy");
  return policy::Allowed{};
}

json::object limits_json(const sandbox::Limits& l) {
  return json::object{{"wall_ms", l.wall.count()},
                      {"cpu_seconds", l.cpu_seconds},
                      {"memory_bytes", l.memory_bytes},
                      {"max_processes", l.max_processes},
                      {"max_open_files", l.max_open_files},
                      {"tmp_bytes", l.scratch_bytes},
                      {"file_size_bytes", l.file_size_bytes},
                      {"output_bytes", l.output_bytes}};
}

}  // namespace

// Everything of one run between its reservation and its record. The reservation is settled
// exactly once: recorded with the run, or released as abandoned. When the request is dropped
// without a finish (the daemon stopping hard), the destructor releases it through the writer
// and removes the run's directory.
struct ProbeService::RunContext {
  explicit RunContext(store::Writer& w) : writer(w) {}
  ~RunContext() {
    if (!settled) {
      json::object data{{"probe_id", probe_id},
                        {"run_id", run_id},
                        {"reserved_bytes", reserved},
                        {"why", "the run was dropped before it finished"}};
      auto work = [run = run_id,
                   ev = store::NewEvent{job_id, seq, "probe.abandoned", data}](store::Store& s) {
        store::delete_reservation(s, run);
        s.append_event(ev);
      };
      writer.submit(std::move(work), [](std::exception_ptr) {});
    }
    remove_dir();
  }
  RunContext(const RunContext&) = delete;
  RunContext& operator=(const RunContext&) = delete;

  void remove_dir() {
    if (runs_fd) remove_tree_bounded(runs_fd.get(), run_id);
    runs_fd.reset();
  }

  store::Writer& writer;
  std::string run_id;
  std::string probe_id;
  std::optional<std::string> job_id;
  std::optional<std::int64_t> seq;
  policy::ProbePlan plan;
  std::string plan_sha256;
  const policy::ProbePolicy* policy = nullptr;
  std::string snapshot_id;
  policy::ProbeExecutable exe;
  std::int64_t reserved = 0;
  bool settled = false;
  std::string started_at;
  UniqueFd runs_fd;     // <state>/probes/runs: the run's directory is `run_id` in it
  UniqueFd scratch_fd;  // the scratch, for the oracle and the byte count after the run
  json::object sandbox_settings;
  std::string sandbox_sha256;
  bool canary_passed = false;
  std::string canary_detail;
};

Preparation ProbeService::prepare_run(const std::string& probe_id, const ProbeCaller& caller,
                                      std::size_t output_chars) const {
  struct Loaded {
    std::optional<store::ProbeRecord> probe;
    std::optional<store::SnapshotRecord> snapshot;
    std::vector<store::SnapshotFile> files;
  };
  auto load = [probe_id](store::Store& s) {
    Loaded l;
    l.probe = store::find_probe(s, probe_id);
    if (!l.probe) return l;
    l.snapshot = store::find_snapshot(s, l.probe->snapshot_id);
    if (l.snapshot) l.files = store::snapshot_files(s, l.snapshot->id);
    return l;
  };
  Loaded l = store_sync(writer_, std::move(load));
  if (!l.probe || !visible_to(caller, l.probe->job_id))
    return ToolOutcome{deny(ErrorCode::kNotFound, "no probe " + probe_id), {}};
  json::error_code ec;
  json::value stored = json::parse(l.probe->plan_json, ec);
  std::optional<policy::ProbePlan> plan;
  if (!ec && stored.is_object())
    plan = policy::plan_from_json(stored.get_object(), *env_.sensitive);
  if (!plan) {
    return ToolOutcome{deny(ErrorCode::kLocalToolFailed, "the stored plan cannot be read"), {}};
  }

  // Refusals before anything is reserved: an event says why, nothing else is left behind.
  auto refuse = [&](policy::Denial why, json::object extra = {}) -> Preparation {
    json::object data = std::move(extra);
    data["probe_id"] = probe_id;
    data["code"] = to_string(why.code);
    data["reason"] = why.reason;
    auto work =
        [ev = store::NewEvent{caller.job_id, caller.seq, "probe.refused", data}](store::Store& s) {
          s.append_event(ev);
          return true;
        };
    try {
      store_sync(writer_, std::move(work));
    } catch (const std::exception&) {
      log_error("probe.refusal_unrecorded", {{"probe", probe_id}});
    }
    log_info("probe.refused", {{"job", caller.job_id.value_or("-")},
                               {"seq", seq_text(caller.seq)},
                               {"probe", probe_id},
                               {"code", std::string(to_string(why.code))}});
    return ToolOutcome{std::move(why), {}};
  };
  // The stored plan is the one its digest (also in the chained probe.planned event) names.
  if (store::sha256_hex(l.probe->plan_json) != l.probe->plan_sha256) {
    return refuse(deny(ErrorCode::kDeniedIntegrity, "the stored plan does not match its digest"));
  }
  const policy::ProbePolicy* pol = policy::find_probe_policy(env_.policies, plan->policy_id);
  if (pol == nullptr || pol->sha256 != plan->policy_sha256) {
    return refuse(deny(ErrorCode::kDeniedIntegrity,
                       "probe policy '" + plan->policy_id +
                           "' is gone or changed since the plan was made; plan again"));
  }
  if (!env_.readiness->ready)
    return refuse(deny(ErrorCode::kSandboxUnavailable, env_.readiness->reason));
  if (!l.snapshot || l.snapshot->manifest_sha256 != plan->snapshot_sha256 ||
      manifest_digest(l.files) != plan->snapshot_sha256) {
    return refuse(deny(ErrorCode::kDeniedIntegrity,
                       "the snapshot's stored manifest no longer matches the plan"));
  }
  auto exe = policy::resolve_probe_executable(
      plan->command.front(), *pol, forbidden_roots(l.snapshot->worktree, env_.state_dir));
  if (!exe) return refuse(exe.denial());
  if (exe->path != plan->executable_path || exe->pin.sha256 != plan->executable_sha256) {
    return refuse(deny(ErrorCode::kDeniedIntegrity,
                       "the executable changed since the plan was made; plan again"));
  }

  // The worst case on disk: the output twice (the store's WAL, then its database), the record,
  // the materialized snapshot and overlays, the scratch, and the executable's copy.
  std::int64_t overlay = 0;
  for (const auto* files : {&plan->fixture, &plan->intervention})
    for (const auto& [p, c] : *files) overlay += static_cast<std::int64_t>(c.size());
  const std::int64_t need =
      2 * (static_cast<std::int64_t>(pol->max_output_bytes) + kRunRecordOverhead) +
      l.snapshot->bytes + overlay + static_cast<std::int64_t>(kProbeScratchBytes) +
      static_cast<std::int64_t>(exe->pin.size);
  const auto free_bytes = static_cast<std::int64_t>(
      std::min<std::uint64_t>(free_disk_bytes(env_.state_dir), INT64_MAX / 2));

  auto run = std::make_shared<RunContext>(writer_);
  run->run_id = new_record_id("run_");
  run->probe_id = probe_id;
  run->job_id = caller.job_id;
  run->seq = caller.seq;
  run->plan = std::move(*plan);
  run->plan_sha256 = l.probe->plan_sha256;
  run->policy = pol;
  run->snapshot_id = l.snapshot->id;
  run->exe = std::move(exe.value());
  run->started_at = store::rfc3339_now();
  run->settled = true;  // nothing to release until the reservation exists
  struct Reserved {
    bool ok = false;
    std::int64_t others = 0;
  };
  auto reserve = [r = store::Reservation{run->run_id, probe_id, caller.job_id, need,
                                         store::unix_now()},
                  free_bytes, caller, plan_sha = run->plan_sha256](store::Store& s) {
    Reserved out;
    out.others = store::reserved_bytes(s);
    if (out.others + r.bytes > free_bytes) {
      json::object data{{"probe_id", r.probe_id},   {"code", "DENIED_SIZE"},
                        {"reason", "disk budget"},  {"needed_bytes", r.bytes},
                        {"free_bytes", free_bytes}, {"reserved_bytes", out.others}};
      s.append_event(store::NewEvent{caller.job_id, caller.seq, "probe.refused", std::move(data)});
      return out;
    }
    store::insert_reservation(s, r);
    json::object data{{"probe_id", r.probe_id},
                      {"run_id", r.run_id},
                      {"plan_sha256", plan_sha},
                      {"reserved_bytes", r.bytes}};
    s.append_event(store::NewEvent{caller.job_id, caller.seq, "probe.started", std::move(data)});
    out.ok = true;
    return out;
  };
  Reserved reserved = store_sync(writer_, std::move(reserve));
  if (!reserved.ok) {
    log_info("probe.refused", {{"job", caller.job_id.value_or("-")},
                               {"seq", seq_text(caller.seq)},
                               {"probe", probe_id},
                               {"code", "DENIED_SIZE"},
                               {"needed_bytes", std::to_string(need)}});
    return ToolOutcome{
        deny(ErrorCode::kDeniedSize,
             "the run's worst case (" + std::to_string(need) +
                 " bytes: output, snapshot, scratch) does not fit the state dir's free space (" +
                 std::to_string(free_bytes) + " bytes, " + std::to_string(reserved.others) +
                 " of them reserved by runs in progress)"),
        {}};
  }
  run->reserved = need;
  run->settled = false;
  log_info("probe.started", {{"job", caller.job_id.value_or("-")},
                             {"seq", seq_text(caller.seq)},
                             {"probe", probe_id},
                             {"run", run->run_id},
                             {"reserved_bytes", std::to_string(need)}});

  // The run's private directory: the materialized snapshot, the scratch, the executable.
  UniqueFd probes = private_dir_at(AT_FDCWD, (env_.state_dir / "probes").c_str(), false);
  if (probes) run->runs_fd = private_dir_at(probes.get(), "runs", false);
  UniqueFd dir;
  if (run->runs_fd) dir = private_dir_at(run->runs_fd.get(), run->run_id.c_str(), true);
  UniqueFd snapshot_fd, exe_fd;
  if (dir) {
    snapshot_fd = private_dir_at(dir.get(), "snapshot", true);
    run->scratch_fd = private_dir_at(dir.get(), "scratch", true);
    exe_fd = private_dir_at(dir.get(), "exe", true);
  }
  if (!snapshot_fd || !run->scratch_fd || !exe_fd) {
    return record_failed_start(
        run, deny(ErrorCode::kLocalToolFailed, "cannot create the run's directory"), output_chars);
  }
  if (auto ok = materialize_snapshot(l.files, *blobs_, snapshot_fd.get()); !ok)
    return record_failed_start(run, ok.denial(), output_chars);
  if (auto ok = write_overlay(snapshot_fd.get(), run->plan.intervention); !ok)
    return record_failed_start(run, ok.denial(), output_chars);
  if (auto ok = write_overlay(run->scratch_fd.get(), run->plan.fixture); !ok)
    return record_failed_start(run, ok.denial(), output_chars);
  if (auto ok = copy_executable(run->exe, exe_fd.get(), "program"); !ok)
    return record_failed_start(run, ok.denial(), output_chars);
  // The snapshot is read-only inside; on the host it is the daemon's alone (0700 parents).

  const fs::path run_dir = env_.state_dir / "probes" / "runs" / run->run_id;
  sandbox::Profile p;
  p.argv = run->plan.command;
  p.argv[0] = run->exe.path;  // the copy is bound over it: argv[0] and /proc/self/exe match
  std::map<std::string, std::string> env = pol->environment;
  env["TOOLWARDEN_SNAPSHOT"] = kProbeSnapshotInside;
  env["TOOLWARDEN_SCRATCH"] = kProbeScratchInside;
  p.env = sandbox::build_environment(env);
  p.cwd = run->plan.working_directory == "."
              ? std::string(kProbeSnapshotInside)
              : std::string(kProbeSnapshotInside) + "/" + run->plan.working_directory;
  p.extra_binds.push_back(
      sandbox::Bind{(run_dir / "snapshot").string(), false, kProbeSnapshotInside});
  p.extra_binds.push_back(sandbox::Bind{(run_dir / "scratch").string(), true, kProbeScratchInside});
  p.extra_binds.push_back(
      sandbox::Bind{(run_dir / "exe" / "program").string(), false, run->exe.path});
  p.limits.wall = std::chrono::seconds(pol->timeout_s);
  p.limits.cpu_seconds = pol->timeout_s;
  p.limits.output_bytes = pol->max_output_bytes;
  p.limits.file_size_bytes = kProbeScratchBytes;
  SandboxRequest req;
  if (!pol->allowed_domains.empty()) {
    p.network_proxy = true;
    req.egress_hosts = pol->allowed_domains;
  }

  // The settings' digest: what the sandbox was asked for, without anything run-specific, so
  // two runs of one plan on one machine share it.
  json::array argv, envs, domains;
  for (const auto& a : p.argv) argv.emplace_back(a);
  for (const auto& e : p.env) envs.emplace_back(e);
  for (const auto& d : pol->allowed_domains) domains.emplace_back(d);
  const auto& features = sandbox::probe_run_features();
  run->sandbox_settings = json::object{
      {"argv", std::move(argv)},
      {"env", std::move(envs)},
      {"cwd", p.cwd},
      {"mounts", json::array{json::object{{"target", kProbeSnapshotInside},
                                          {"writable", false},
                                          {"content", run->plan.snapshot_sha256}},
                             json::object{{"target", kProbeScratchInside}, {"writable", true}},
                             json::object{{"target", run->exe.path},
                                          {"writable", false},
                                          {"sha256", run->exe.pin.sha256}}}},
      {"limits", limits_json(p.limits)},
      {"scratch_bytes", kProbeScratchBytes},
      {"network",
       json::object{{"mode", p.network_proxy ? "proxy" : "none"}, {"hosts", std::move(domains)}}},
      {"landlock_abi", features.landlock_abi},
      {"seccomp", features.seccomp_filter},
      {"cgroup", features.cgroup_v2_delegated}};
  run->sandbox_sha256 = store::sha256_hex(store::canonical_json(run->sandbox_settings));
  run->canary_passed = env_.readiness->ready;
  run->canary_detail = env_.readiness->ready ? "passed at daemon start" : env_.readiness->reason;
  req.profile = std::move(p);
  req.finish = [this, run, output_chars](const sandbox::RunResult& r) {
    return finish_run(*run, r, output_chars);
  };
  return req;
}

namespace {

json::object provenance_of(const std::string& policy_id, const std::string& policy_sha256,
                           const std::string& plan_sha256, const std::string& snapshot_id,
                           const std::string& snapshot_sha256, const policy::ProbeExecutable& exe,
                           const std::string& sandbox_sha256, bool canary_passed,
                           const std::string& canary_detail) {
  return json::object{
      {"policy_id", policy_id},
      {"policy_sha256", policy_sha256},
      {"plan_sha256", plan_sha256},
      {"snapshot_id", snapshot_id},
      {"snapshot_sha256", snapshot_sha256},
      {"executable", json::object{{"path", exe.path}, {"sha256", exe.pin.sha256}}},
      {"sandbox_sha256", sandbox_sha256},
      {"canary", json::object{{"passed", canary_passed}, {"detail", canary_detail}}}};
}

}  // namespace

ToolOutcome ProbeService::record_failed_start(std::shared_ptr<RunContext> run, policy::Denial why,
                                              std::size_t output_chars) const {
  sandbox::RunResult r;
  r.state = sandbox::State::setup_failed;
  r.detail = std::string(to_string(why.code)) + ": " + why.reason;
  r.stdout_sha256 = r.stderr_sha256 = store::sha256_hex("");
  return finish_run(*run, r, output_chars);
}

void ProbeService::abandon(RunContext& run, const std::string& why) const {
  json::object data{{"probe_id", run.probe_id},
                    {"run_id", run.run_id},
                    {"reserved_bytes", run.reserved},
                    {"why", why}};
  auto work = [id = run.run_id, ev = store::NewEvent{run.job_id, run.seq, "probe.abandoned", data}](
                  store::Store& s) {
    store::delete_reservation(s, id);
    s.append_event(ev);
    return true;
  };
  try {
    store_sync(writer_, std::move(work));
    run.settled = true;
  } catch (const std::exception&) {
    log_error("probe.unreleased", {{"probe", run.probe_id}, {"run", run.run_id}});
  }
  log_info("probe.abandoned", {{"job", run.job_id.value_or("-")},
                               {"seq", seq_text(run.seq)},
                               {"probe", run.probe_id},
                               {"run", run.run_id},
                               {"why", why}});
}

ToolOutcome ProbeService::finish_run(RunContext& run, const sandbox::RunResult& r,
                                     std::size_t output_chars) const {
  if (r.cancelled) {
    run.remove_dir();
    abandon(run, "cancelled");
    return ToolOutcome{deny(ErrorCode::kCancelled, "the run was cancelled"), {}};
  }
  std::string state(sandbox::to_string(r.state));
  std::string limit = r.limit;
  // The scratch lives on the host's disk: a run that filled it past its allowance is a run
  // that hit a resource limit, whatever it printed.
  if (r.state == sandbox::State::completed && run.scratch_fd &&
      tree_bytes(run.scratch_fd.get(), kProbeScratchBytes) > kProbeScratchBytes) {
    state = "resource_limit";
    limit = "scratch";
  }
  policy::RunFacts facts;
  facts.state = state;
  facts.exit_code = r.exit_code;
  facts.stdout_data = r.stdout_data;
  facts.truncated = r.truncated;
  if (run.plan.oracle.type == policy::OracleType::file_sha256 && state == "completed")
    facts.file = read_witness(run.scratch_fd.get(), run.plan.oracle.path, env_.max_file_bytes);
  run.remove_dir();

  const policy::Judgement j = policy::judge(run.plan.oracle, facts);
  json::object rec;
  rec["run_id"] = run.run_id;
  rec["probe_id"] = run.probe_id;
  rec["plan_sha256"] = run.plan_sha256;
  rec["state"] = state;
  rec["verdict"] = to_string(j.verdict);
  rec["reason"] = j.reason;
  rec["oracle"] = json::object{
      {"type", to_string(run.plan.oracle.type)},
      {"source", run.plan.oracle.source},
      {"independent", run.plan.oracle.independent()},
      {"passed", j.oracle_passed ? json::value(*j.oracle_passed) : json::value(nullptr)},
      {"observed", j.observed}};
  rec["exit_code"] = r.exit_code;
  if (!limit.empty()) rec["limit"] = limit;
  if (!r.detail.empty()) rec["detail"] = r.detail;
  rec["stdout_sha256"] = r.stdout_sha256;
  rec["stderr_sha256"] = r.stderr_sha256;
  rec["stdout_bytes"] = r.stdout_data.size();
  rec["stderr_bytes"] = r.stderr_data.size();
  rec["truncated"] = r.truncated;
  rec["elapsed_ms"] = r.elapsed_ms;
  rec["started_at"] = run.started_at;
  rec["finished_at"] = store::rfc3339_now();
  rec["provenance"] = provenance_of(run.policy->id, run.policy->sha256, run.plan_sha256,
                                    run.snapshot_id, run.plan.snapshot_sha256, run.exe,
                                    run.sandbox_sha256, run.canary_passed, run.canary_detail);
  rec["sandbox"] = run.sandbox_settings;

  store::ProbeRunRecord stored;
  stored.id = run.run_id;
  stored.probe_id = run.probe_id;
  stored.run_json = store::canonical_json(rec);
  stored.stdout_data = r.stdout_data;
  stored.stderr_data = r.stderr_data;
  stored.created_at = store::unix_now();
  json::object data{{"probe_id", run.probe_id},
                    {"run_id", run.run_id},
                    {"state", state},
                    {"verdict", to_string(j.verdict)},
                    {"exit_code", r.exit_code},
                    {"elapsed_ms", r.elapsed_ms},
                    {"stdout_sha256", r.stdout_sha256},
                    {"stderr_sha256", r.stderr_sha256},
                    {"run_sha256", store::sha256_hex(stored.run_json)}};
  auto work = [stored, ev = store::NewEvent{run.job_id, run.seq, "probe.completed", data}](
                  store::Store& s) {
    // One transaction: the run, the release of its reservation and its event.
    store::insert_probe_run(s, stored);
    store::delete_reservation(s, stored.id);
    s.append_event(ev);
    return true;
  };
  try {
    store_sync(writer_, std::move(work));
  } catch (const std::exception&) {
    log_error("probe.unrecorded", {{"probe", run.probe_id}, {"run", run.run_id}});
    return ToolOutcome{deny(ErrorCode::kLocalToolFailed, "the store cannot record the run"), {}};
  }
  run.settled = true;
  log_info("probe.completed", {{"job", run.job_id.value_or("-")},
                               {"seq", seq_text(run.seq)},
                               {"probe", run.probe_id},
                               {"run", run.run_id},
                               {"state", state},
                               {"verdict", std::string(to_string(j.verdict))},
                               {"ms", std::to_string(r.elapsed_ms)}});
  return ToolOutcome{std::nullopt, run_view(stored, output_chars)};
}

}  // namespace toolwarden::daemon
