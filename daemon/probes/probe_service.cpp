#include "daemon/probes/probe_service.hpp"

#include <SQLiteCpp/Transaction.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>

#include "daemon/log.hpp"
#include "daemon/probes/probe_common.hpp"
#include "daemon/probes/snapshot.hpp"
#include "daemon/probes/store_sync.hpp"
#include "daemon/token.hpp"
#include "store/clock.hpp"
#include "store/digest.hpp"
#include "store/probe_store.hpp"

namespace toolwarden::daemon {
namespace json = boost::json;
using policy::deny;
using policy::ErrorCode;

namespace {

// The worktree a user names: absolute, resolved to its realpath, a directory.
policy::Result<std::string> resolve_worktree(const std::string& given) {
  if (given.empty() || given.front() != '/')
    return deny(ErrorCode::kDeniedArguments, "worktree must be an absolute path");
  char buf[PATH_MAX];
  if (::realpath(given.c_str(), buf) == nullptr)
    return deny(ErrorCode::kNotFound, "the worktree does not exist");
  struct stat st {};
  if (::stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
    return deny(ErrorCode::kDeniedFile, "the worktree is not a directory");
  return std::string(buf);
}

struct LoadedSnapshot {
  std::optional<store::SnapshotRecord> record;
  std::vector<store::SnapshotFile> files;
};

}  // namespace

ProbeService::ProbeService(ProbeEnv env, store::Writer& writer, boost::asio::thread_pool& pool)
    : env_(std::move(env)), writer_(writer), pool_(pool) {
  blobs_ = std::make_unique<store::BlobStore>(env_.state_dir / "blobs");
}

ProbeService::~ProbeService() = default;

ToolOutcome ProbeService::capture(const std::string& worktree, const ProbeCaller& caller) const {
  std::string root;
  if (caller.grant != nullptr) {
    root = caller.grant->worktree;  // a job captures its own worktree, in its scopes
  } else {
    auto resolved = resolve_worktree(worktree);
    if (!resolved) return ToolOutcome{resolved.denial(), {}};
    root = resolved.value();
  }
  auto reserved_now = [](store::Store& s) { return store::reserved_bytes(s); };
  const std::int64_t reserved = store_sync(writer_, std::move(reserved_now));
  const std::uint64_t free_bytes = free_disk_bytes(env_.state_dir);
  CaptureRules rules{*env_.sensitive,
                     caller.grant,
                     env_.max_file_bytes,
                     kMaxSnapshotFiles,
                     free_bytes > static_cast<std::uint64_t>(reserved)
                         ? free_bytes - static_cast<std::uint64_t>(reserved)
                         : 0,
                     {}};
  // The daemon's own state never goes into a snapshot, wherever the worktree is.
  struct stat state_st {};
  if (::stat(env_.state_dir.c_str(), &state_st) == 0)
    rules.excluded_dirs.emplace_back(state_st.st_dev, state_st.st_ino);
  store::BlobBatch batch(*blobs_);
  auto captured = capture_worktree(root, rules, batch);
  if (!captured) return ToolOutcome{captured.denial(), {}};
  if (!batch.commit()) {
    return ToolOutcome{deny(ErrorCode::kLocalToolFailed, "cannot store the snapshot's content"),
                       {}};
  }
  Capture& c = captured.value();
  store::SnapshotRecord rec;
  rec.id = new_record_id("snap_");
  rec.worktree = root;
  rec.job_id = caller.job_id;
  rec.files = c.files;
  rec.bytes = c.bytes;
  rec.new_bytes = c.new_bytes;
  rec.manifest_sha256 = c.manifest_sha256;
  rec.created_at = store::unix_now();
  auto record = [rec, entries = std::move(c.entries), caller](store::Store& s) {
    store::insert_snapshot(s, rec, entries);
    json::object data{{"snapshot_id", rec.id},      {"worktree", rec.worktree},
                      {"files", rec.files},         {"bytes", rec.bytes},
                      {"new_bytes", rec.new_bytes}, {"manifest_sha256", rec.manifest_sha256}};
    s.append_event(
        store::NewEvent{caller.job_id, caller.seq, "snapshot.captured", std::move(data)});
    return true;
  };
  store_sync(writer_, std::move(record));
  log_info("snapshot.captured", {{"job", caller.job_id.value_or("-")},
                                 {"seq", caller.seq ? std::to_string(*caller.seq) : "-"},
                                 {"snapshot", rec.id},
                                 {"files", std::to_string(rec.files)},
                                 {"new_bytes", std::to_string(rec.new_bytes)}});
  json::object out{{"snapshot_id", rec.id},
                   {"files", rec.files},
                   {"bytes", rec.bytes},
                   {"new_bytes", rec.new_bytes},
                   {"manifest_sha256", rec.manifest_sha256},
                   {"created_at", store::rfc3339(rec.created_at)},
                   {"skipped", c.skipped.to_json()}};
  if (caller.grant == nullptr) out["worktree"] = rec.worktree;
  return ToolOutcome{std::nullopt, std::move(out)};
}

ToolOutcome ProbeService::plan(const json::object& params, const ProbeCaller& caller) const {
  auto parsed = policy::parse_probe_plan(params, *env_.sensitive, env_.max_file_bytes,
                                         caller.job_id.has_value());
  if (!parsed) return ToolOutcome{parsed.denial(), {}};
  policy::ProbePlan plan = std::move(parsed.value());
  const policy::ProbePolicy* pol = policy::find_probe_policy(env_.policies, plan.policy_id);
  if (pol == nullptr) {
    return ToolOutcome{deny(ErrorCode::kDeniedArguments,
                            "no probe policy '" + plan.policy_id + "' in the user's config"),
                       {}};
  }
  if (auto ok = policy::check_probe_command(plan.command.front(), *pol); !ok)
    return ToolOutcome{ok.denial(), {}};

  json::object captured;
  if (plan.snapshot_id.empty()) {
    // A job's plan without a snapshot: the job's worktree as it is now, in its scopes.
    ToolOutcome snap = capture({}, caller);
    if (snap.denial) return snap;
    plan.snapshot_id = std::string(snap.result.at("snapshot_id").as_string());
    captured = std::move(snap.result);
  }
  auto load = [id = plan.snapshot_id](store::Store& s) {
    LoadedSnapshot l;
    l.record = store::find_snapshot(s, id);
    if (l.record) l.files = store::snapshot_files(s, id);
    return l;
  };
  LoadedSnapshot snap = store_sync(writer_, std::move(load));
  if (!snap.record || !visible_to(caller, snap.record->job_id)) {
    return ToolOutcome{deny(ErrorCode::kNotFound, "no snapshot " + plan.snapshot_id), {}};
  }
  if (manifest_digest(snap.files) != snap.record->manifest_sha256) {
    return ToolOutcome{deny(ErrorCode::kDeniedIntegrity,
                            "the snapshot's stored manifest does not match its digest"),
                       {}};
  }
  if (auto ok = check_plan_against_manifest(plan, snap.files); !ok)
    return ToolOutcome{ok.denial(), {}};
  auto exe = policy::resolve_probe_executable(
      plan.command.front(), *pol, forbidden_roots(snap.record->worktree, env_.state_dir));
  if (!exe) return ToolOutcome{exe.denial(), {}};
  plan.snapshot_sha256 = snap.record->manifest_sha256;
  plan.policy_sha256 = pol->sha256;
  plan.executable_path = exe->path;
  plan.executable_sha256 = exe->pin.sha256;

  const json::object plan_json = plan.to_json();
  store::ProbeRecord rec;
  rec.id = new_record_id("probe_");
  rec.snapshot_id = plan.snapshot_id;
  rec.job_id = caller.job_id;
  rec.plan_json = store::canonical_json(plan_json);
  rec.plan_sha256 = store::sha256_hex(rec.plan_json);
  rec.created_at = store::unix_now();
  auto record = [rec, caller, policy_id = plan.policy_id](store::Store& s) {
    store::insert_probe(s, rec);
    json::object data{{"probe_id", rec.id},
                      {"plan_sha256", rec.plan_sha256},
                      {"snapshot_id", rec.snapshot_id},
                      {"policy_id", policy_id}};
    s.append_event(store::NewEvent{caller.job_id, caller.seq, "probe.planned", std::move(data)});
    return true;
  };
  store_sync(writer_, std::move(record));
  log_info("probe.planned", {{"job", caller.job_id.value_or("-")},
                             {"seq", caller.seq ? std::to_string(*caller.seq) : "-"},
                             {"probe", rec.id},
                             {"plan_sha256", rec.plan_sha256}});
  json::object out{{"probe_id", rec.id},
                   {"plan_sha256", rec.plan_sha256},
                   {"plan", plan_json},
                   {"created_at", store::rfc3339(rec.created_at)}};
  if (!captured.empty()) out["snapshot"] = std::move(captured);
  return ToolOutcome{std::nullopt, std::move(out)};
}

ToolOutcome ProbeService::show(const std::string& probe_id, const ProbeCaller& caller,
                               std::size_t output_chars) const {
  struct Loaded {
    std::optional<store::ProbeRecord> probe;
    std::vector<store::ProbeRunRecord> runs;
    std::vector<store::Reservation> running;
  };
  auto load = [probe_id](store::Store& s) {
    Loaded l;
    l.probe = store::find_probe(s, probe_id);
    if (!l.probe) return l;
    l.runs = store::probe_runs(s, probe_id);
    for (auto& r : store::reservations(s))
      if (r.probe_id == probe_id) l.running.push_back(std::move(r));
    return l;
  };
  Loaded l = store_sync(writer_, std::move(load));
  if (!l.probe || !visible_to(caller, l.probe->job_id))
    return ToolOutcome{deny(ErrorCode::kNotFound, "no probe " + probe_id), {}};
  json::error_code ec;
  json::value plan = json::parse(l.probe->plan_json, ec);
  if (ec)
    return ToolOutcome{deny(ErrorCode::kLocalToolFailed, "the stored plan is unreadable"), {}};
  json::array runs;
  for (const auto& r : l.runs) runs.push_back(run_view(r, output_chars));
  json::array running;
  for (const auto& r : l.running) {
    running.push_back(json::object{{"run_id", r.run_id},
                                   {"reserved_bytes", r.bytes},
                                   {"started_at", store::rfc3339(r.created_at)}});
  }
  json::object out{{"probe_id", l.probe->id}, {"plan_sha256", l.probe->plan_sha256},
                   {"plan", std::move(plan)}, {"created_at", store::rfc3339(l.probe->created_at)},
                   {"runs", std::move(runs)}, {"running", std::move(running)}};
  return ToolOutcome{std::nullopt, std::move(out)};
}

std::size_t ProbeService::recover(store::Store& store, const std::filesystem::path& state_dir) {
  auto left = store::reservations(store);
  if (!left.empty()) {
    try {
      SQLite::Transaction tx(store.db(), SQLite::TransactionBehavior::IMMEDIATE);
      for (const auto& r : left) {
        store::delete_reservation(store, r.run_id);
        json::object data{{"probe_id", r.probe_id},
                          {"run_id", r.run_id},
                          {"reserved_bytes", r.bytes},
                          {"why", "the daemon stopped before the run completed"}};
        store.append_event(store::NewEvent{r.job_id, std::nullopt, "probe.abandoned", data});
      }
      tx.commit();
    } catch (...) {
      store.reload_chain_head();
      throw;
    }
    for (const auto& r : left) {
      log_warn("probe.abandoned",
               {{"job", r.job_id.value_or("-")}, {"probe", r.probe_id}, {"run", r.run_id}});
    }
  }
  // What runs and captures left on disk is of no use to anyone now.
  UniqueFd runs(::open((state_dir / "probes" / "runs").c_str(),
                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (runs) {
    for (const auto& name : list_entry_names(runs.get())) remove_tree_bounded(runs.get(), name);
  }
  if (std::filesystem::exists(state_dir / "blobs")) {
    store::BlobStore(state_dir / "blobs").remove_temporaries();
  }
  return left.size();
}

std::uint64_t ProbeService::track_admin_run(AdminRun run) {
  const auto id = ++next_admin_run_;
  admin_runs_.emplace(id, std::move(run));
  return id;
}

void ProbeService::untrack_admin_run(std::uint64_t id) { admin_runs_.erase(id); }

void ProbeService::cancel_admin_runs() {
  std::vector<std::function<void()>> cancels;
  for (const auto& [id, run] : admin_runs_) cancels.push_back(run.cancel);
  for (auto& cancel : cancels)
    if (cancel) cancel();
}

json::object ProbeService::admin_progress(const std::string& probe_id) const {
  const auto now = std::chrono::steady_clock::now();
  json::array runs;
  for (const auto& [id, run] : admin_runs_) {
    if (run.probe_id != probe_id) continue;
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - run.started).count();
    runs.push_back(
        json::object{{"elapsed_ms", elapsed},
                     {"output_bytes",
                      run.output_bytes ? run.output_bytes->load(std::memory_order_relaxed) : 0}});
  }
  return json::object{{"probe_id", probe_id}, {"runs", std::move(runs)}};
}

}  // namespace toolwarden::daemon
