#include "daemon/admin_api.hpp"

#include <stdlib.h>
#include <sys/stat.h>

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <climits>

#include "daemon/async.hpp"
#include "daemon/log.hpp"
#include "daemon/probes/probe_admin.hpp"
#include "daemon/sandbox_cli.hpp"
#include "daemon/token.hpp"
#include "daemon/tool_catalog.hpp"
#include "daemon/tools/local_test.hpp"
#include "store/clock.hpp"
#include "store/digest.hpp"

namespace toolwarden::daemon {
namespace json = boost::json;

namespace {

constexpr std::int64_t kDefaultTtl = 86400;
constexpr std::int64_t kMaxTtl = 366LL * 86400;

struct Refusal {
  std::string message;
};

json::object job_summary(const JobState& j, std::int64_t now) {
  json::object o = j.grant.to_json();
  o["job_id"] = j.record.id;
  o["generation"] = j.record.generation;
  o["state"] = j.state(now);
  o["created_at"] = store::rfc3339(j.record.created_at);
  o["expires_at"] = store::rfc3339(j.record.expires_at);
  return o;
}

json::object token_result(const Services& s, const JobState& j, const std::string& token) {
  json::object o;
  o["job_id"] = j.record.id;
  o["generation"] = j.record.generation;
  o["token"] = token;
  o["mcp_url"] = s.mcp_url;
  o["expires_at"] = store::rfc3339(j.record.expires_at);
  json::array tools;
  for (const auto& t : j.grant.tools) tools.emplace_back(t);
  o["tools"] = std::move(tools);
  return o;
}

std::optional<std::string> opt_string(const json::object& p, std::string_view key,
                                      std::string* err) {
  const auto* v = p.if_contains(key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_string()) {
    *err = std::string(key) + " must be a string";
    return std::nullopt;
  }
  return std::string(v->get_string());
}

bool string_list(const json::object& p, std::string_view key, std::vector<std::string>* out,
                 std::string* err) {
  const auto* v = p.if_contains(key);
  if (v == nullptr || v->is_null()) return true;
  if (!v->is_array()) {
    *err = std::string(key) + " must be an array of strings";
    return false;
  }
  for (const auto& e : v->get_array()) {
    if (!e.is_string()) {
      *err = std::string(key) + " must be an array of strings";
      return false;
    }
    out->emplace_back(e.get_string());
  }
  return true;
}

// Resolves the worktree to its realpath and checks it is a directory (blocking: pool only).
std::variant<std::string, Refusal> resolve_worktree(const std::string& given) {
  if (given.empty() || given.front() != '/') return Refusal{"worktree must be an absolute path"};
  char buf[PATH_MAX];
  if (::realpath(given.c_str(), buf) == nullptr)
    return Refusal{"worktree " + given + " does not exist"};
  struct stat st {};
  if (::stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
    return Refusal{"worktree " + given + " is not a directory"};
  return std::string(buf);
}

using Outcome = std::variant<json::value, Refusal>;

bool is_builtin(std::string_view name) {
  return std::find(std::begin(policy::kBuiltinTools), std::end(policy::kBuiltinTools), name) !=
         std::end(policy::kBuiltinTools);
}

// The trusted hash of each project tool in `catalog` (SPEC §11), read in one transaction.
asio::awaitable<std::optional<std::map<std::string, std::string>>> trusted_hashes(
    Services& s, const std::string& worktree, const std::vector<CatalogEntry>& catalog) {
  std::vector<std::string> names;
  for (const auto& e : catalog)
    if (e.tool.scope == policy::ToolScope::project) names.push_back(e.tool.name);
  std::map<std::string, std::string> out;
  if (names.empty() || worktree.empty()) co_return out;
  auto read = [worktree, names](store::Store& st) {
    std::map<std::string, std::string> found;
    for (const auto& n : names)
      if (auto h = st.tool_trust(worktree, n)) found[n] = *h;
    return found;
  };
  auto [err, found] = co_await in_store(s.writer, std::move(read));
  if (err) co_return std::nullopt;
  co_return found;
}

std::string trust_of(const CatalogEntry& e, const std::map<std::string, std::string>& trusted) {
  if (e.tool.scope == policy::ToolScope::user) return "trusted";
  auto it = trusted.find(e.tool.name);
  if (it == trusted.end()) return "untrusted";
  return it->second == e.tool.hash ? "trusted" : "changed";
}

// The custom tools a job.create names (every requested tool that is not built in): found,
// valid, trusted when they come from the worktree, and pinned into `req`.
asio::awaitable<std::optional<Refusal>> pin_custom_tools(Services& s, policy::JobRequest& req) {
  std::vector<std::string> wanted;
  for (const auto& t : req.tools)
    if (!is_builtin(t)) wanted.push_back(t);
  if (wanted.empty()) co_return std::nullopt;
  auto find = [user = s.dirs.user_tools, wt = req.worktree] { return discover_catalog(user, wt); };
  auto [derr, catalog] = co_await off_loop(s.pool, std::move(find));
  if (derr) co_return Refusal{"cannot look for custom tools"};
  auto trusted = co_await trusted_hashes(s, req.worktree, catalog);
  if (!trusted) co_return Refusal{"the store cannot read tool trust"};
  for (const auto& name : wanted) {
    const CatalogEntry* e = find_in_catalog(catalog, name);
    if (e == nullptr) continue;  // build_grant names it an unknown tool
    if (!e->tool.valid())
      co_return Refusal{"tool '" + name + "' is invalid: " + e->tool.invalid_reason};
    if (e->manifest_text.empty())
      co_return Refusal{"tool '" + name + "': its manifest cannot be read"};
    const std::string trust = trust_of(*e, *trusted);
    if (trust == "untrusted") {
      co_return Refusal{"tool '" + name +
                        "' comes from the worktree and is not trusted; review it, then run "
                        "`toolwarden tools trust " +
                        req.worktree + " " + name + "`"};
    }
    if (trust == "changed") {
      co_return Refusal{"tool '" + name +
                        "' changed since it was trusted; review it and trust it again"};
    }
    req.custom_tools[name] = pin_of(*e);
  }
  co_return std::nullopt;
}

json::object catalog_json(const CatalogEntry& e, const std::string& trust) {
  json::object o;
  o["name"] = e.tool.name;
  o["scope"] = policy::to_string(e.tool.scope);
  o["hash"] = e.tool.hash;
  o["trust"] = e.tool.valid() ? trust : "invalid";
  o["valid"] = e.tool.valid();
  if (e.tool.valid()) {
    o["description"] = e.tool.manifest->description;
  } else {
    o["reason"] = e.tool.invalid_reason;
  }
  if (e.shadowed) o["shadowed"] = true;
  o["folder"] = e.folder;
  return o;
}

asio::awaitable<std::variant<std::string, Refusal>> optional_worktree(Services& s,
                                                                      const json::object& p) {
  std::string err;
  auto given = opt_string(p, "worktree", &err);
  if (!err.empty()) co_return Refusal{err};
  if (!given) co_return std::string();
  auto work = [w = *given] { return resolve_worktree(w); };
  auto [rerr, resolved] = co_await off_loop(s.pool, std::move(work));
  if (rerr) co_return Refusal{"cannot resolve the worktree"};
  co_return resolved;
}

asio::awaitable<Outcome> tools_list(Services& s, const json::object& p) {
  auto wt = co_await optional_worktree(s, p);
  if (auto* r = std::get_if<Refusal>(&wt)) co_return *r;
  const std::string worktree = std::get<std::string>(wt);
  auto find = [user = s.dirs.user_tools, worktree] { return discover_catalog(user, worktree); };
  auto [derr, catalog] = co_await off_loop(s.pool, std::move(find));
  if (derr) co_return Refusal{"cannot look for custom tools"};
  auto trusted = co_await trusted_hashes(s, worktree, catalog);
  if (!trusted) co_return Refusal{"the store cannot read tool trust"};
  json::array list;
  for (const auto& e : catalog) list.push_back(catalog_json(e, trust_of(e, *trusted)));
  co_return json::value(json::object{{"tools", std::move(list)}});
}

asio::awaitable<Outcome> tools_trust(Services& s, const json::object& p) {
  auto wt = co_await optional_worktree(s, p);
  if (auto* r = std::get_if<Refusal>(&wt)) co_return *r;
  const std::string worktree = std::get<std::string>(wt);
  if (worktree.empty()) co_return Refusal{"worktree is required"};
  std::string err;
  auto name = opt_string(p, "name", &err);
  if (!err.empty()) co_return Refusal{err};
  if (!name) co_return Refusal{"name is required"};
  auto find = [user = s.dirs.user_tools, worktree] { return discover_catalog({}, worktree); };
  auto [derr, catalog] = co_await off_loop(s.pool, std::move(find));
  if (derr) co_return Refusal{"cannot look for custom tools"};
  const CatalogEntry* e = nullptr;
  for (const auto& c : catalog)
    if (c.tool.name == *name) e = &c;
  if (e == nullptr) co_return Refusal{"the worktree has no tool '" + *name + "'"};
  if (!e->tool.valid())
    co_return Refusal{"tool '" + *name + "' is invalid: " + e->tool.invalid_reason};
  auto record = [worktree, n = *name, hash = e->tool.hash](store::Store& st) {
    st.set_tool_trust(worktree, n, hash, store::unix_now());
    json::object data{{"worktree", worktree}, {"name", n}, {"sha256", hash}};
    st.append_event(store::NewEvent{std::nullopt, std::nullopt, "tool.trusted", std::move(data)});
    return true;
  };
  auto [serr, ok] = co_await in_store(s.writer, std::move(record));
  if (serr) co_return Refusal{"the store cannot record the trust"};
  log_info("tool.trusted", {{"tool", *name}, {"sha256", e->tool.hash}});
  co_return json::value(catalog_json(*e, "trusted"));
}

asio::awaitable<Outcome> job_create(Services& s, const json::object& p) {
  std::string err;
  policy::JobRequest req;
  auto worktree = opt_string(p, "worktree", &err);
  if (!err.empty()) co_return Refusal{err};
  if (!worktree) co_return Refusal{"worktree is required"};
  req.access = opt_string(p, "access", &err);
  if (!err.empty()) co_return Refusal{err};
  if (!string_list(p, "allowed_paths", &req.allowed_paths, &err) ||
      !string_list(p, "blocked_paths", &req.blocked_paths, &err) ||
      !string_list(p, "commands", &req.commands, &err) ||
      !string_list(p, "tools", &req.tools, &err)) {
    co_return Refusal{err};
  }
  if (const auto* t = p.if_contains("task"); t != nullptr && !t->is_null()) {
    if (!t->is_object()) co_return Refusal{"task must be an object"};
    req.task = t->get_object();
  }
  std::int64_t ttl = kDefaultTtl;
  if (const auto* t = p.if_contains("ttl_s"); t != nullptr && !t->is_null()) {
    if (!t->is_int64() && !t->is_uint64()) co_return Refusal{"ttl_s must be an integer"};
    ttl = t->is_int64()
              ? t->get_int64()
              : static_cast<std::int64_t>(std::min<std::uint64_t>(t->get_uint64(), kMaxTtl + 1));
    if (ttl < 1 || ttl > kMaxTtl)
      co_return Refusal{"ttl_s must be between 1 and " + std::to_string(kMaxTtl)};
  }

  auto work = [w = *worktree] { return resolve_worktree(w); };
  auto [rerr, resolved] = co_await off_loop(s.pool, std::move(work));
  if (rerr) co_return Refusal{"cannot resolve the worktree"};
  if (auto* r = std::get_if<Refusal>(&resolved)) co_return *r;
  req.worktree = std::get<std::string>(resolved);
  if (auto refused = co_await pin_custom_tools(s, req)) co_return *refused;

  auto grant = policy::build_grant(req, s.commands.ids(), &err);
  if (!grant) co_return Refusal{err};
  if (!grant->commands.empty()) {
    // Pin the commands' read_paths in this worktree now (SPEC §9): later changes are refused.
    auto pin = [&commands = s.commands, g = *grant, max = s.config.max_file_bytes]() mutable {
      auto problem = pin_read_paths(commands, g, max);
      return std::make_pair(problem, g);
    };
    auto [perr, pinned] = co_await off_loop(s.pool, std::move(pin));
    if (perr) co_return Refusal{"cannot pin the commands' read paths"};
    if (pinned.first) co_return Refusal{*pinned.first};
    grant = std::move(pinned.second);
  }

  auto job = std::make_shared<JobState>();
  job->grant = std::move(*grant);
  job->custom_tools = make_custom_tools(job->grant, s.custom_tools);
  const std::string token = new_token();
  auto& r = job->record;
  r.id = new_job_id();
  r.generation = 1;
  r.token_sha256 = store::sha256_hex(token);
  r.worktree = job->grant.worktree;
  r.grant_json = store::canonical_json(job->grant.to_json());
  r.created_at = store::unix_now();
  r.expires_at = r.created_at + ttl;

  auto work2 = [rec = r, grant = job->grant.to_json()](store::Store& st) {
    st.insert_job(rec);
    json::object data = grant;
    data["generation"] = rec.generation;
    data["expires_at"] = store::rfc3339(rec.expires_at);
    st.append_event(store::NewEvent{rec.id, std::nullopt, "job.created", std::move(data)});
    return true;
  };
  auto [serr, ok] = co_await in_store(s.writer, std::move(work2));
  if (serr) co_return Refusal{"the store cannot record the job"};
  s.jobs.add(job);
  log_info("job.created", {{"job", r.id},
                           {"access", std::string(to_string(job->grant.access))},
                           {"ttl_s", std::to_string(ttl)}});
  co_return json::value(token_result(s, *job, token));
}

std::shared_ptr<JobState> find_job(Services& s, const json::object& p, std::string* err) {
  const auto* id = p.if_contains("job_id");
  if (id == nullptr || !id->is_string()) {
    *err = "job_id is required";
    return nullptr;
  }
  auto job = s.jobs.find(std::string(id->get_string()));
  if (!job) *err = "no job " + std::string(id->get_string());
  return job;
}

asio::awaitable<Outcome> job_revoke(Services& s, const json::object& p) {
  std::string err;
  auto job = find_job(s, p, &err);
  if (!job) co_return Refusal{err};
  // Memory first: the token dies at once, even if the store write below fails.
  const bool already = job->record.revoked;
  s.jobs.revoke(*job);
  if (!already) {
    auto work3 = [id = job->record.id](store::Store& st) {
      st.mark_revoked(id);
      st.append_event(store::NewEvent{id, std::nullopt, "job.revoked", {}});
      return true;
    };
    auto [serr, ok] = co_await in_store(s.writer, std::move(work3));
    if (serr) co_return Refusal{"revoked in memory, but the store cannot record it"};
    log_info("job.revoked", {{"job", job->record.id}});
  }
  co_return json::value(job_summary(*job, store::unix_now()));
}

asio::awaitable<Outcome> job_renew(Services& s, const json::object& p) {
  std::string err;
  auto job = find_job(s, p, &err);
  if (!job) co_return Refusal{err};
  if (job->record.revoked) co_return Refusal{"job " + job->record.id + " is revoked"};
  const std::int64_t ttl =
      std::max<std::int64_t>(1, job->record.expires_at - job->record.created_at);
  const std::string token = new_token();
  const std::int64_t generation = job->record.generation + 1;
  const std::int64_t expires_at = store::unix_now() + ttl;
  const std::string digest = store::sha256_hex(token);
  auto work4 = [id = job->record.id, generation, digest, expires_at](store::Store& st) {
    st.replace_token(id, generation, digest, expires_at);
    json::object data;
    data["generation"] = generation;
    data["expires_at"] = store::rfc3339(expires_at);
    st.append_event(store::NewEvent{id, std::nullopt, "job.renewed", std::move(data)});
    return true;
  };
  auto [serr, ok] = co_await in_store(s.writer, std::move(work4));
  if (serr) co_return Refusal{"the store cannot record the renewal; the old token stays valid"};
  s.jobs.renew(*job, generation, digest, expires_at);
  log_info("job.renewed", {{"job", job->record.id}, {"generation", std::to_string(generation)}});
  co_return json::value(token_result(s, *job, token));
}

asio::awaitable<Outcome> audit_list(Services& s, const json::object& p) {
  std::optional<std::string> job_id;
  std::int64_t limit = 100;
  if (const auto* j = p.if_contains("job_id"); j != nullptr && !j->is_null()) {
    if (!j->is_string()) co_return Refusal{"job_id must be a string"};
    job_id = std::string(j->get_string());
  }
  if (const auto* l = p.if_contains("limit"); l != nullptr && !l->is_null()) {
    if (!l->is_int64() || l->get_int64() < 1 || l->get_int64() > 100000) {
      co_return Refusal{"limit must be an integer between 1 and 100000"};
    }
    limit = l->get_int64();
  }
  // On a read-only connection off the loop, not in the writer's batch: reading the log must
  // work while commits fail (a full disk) or an outside process holds the write lock.
  auto work5 = [file = s.dirs.store_file(), job_id, limit] {
    store::Store reader(file, store::Store::ReadOnly{});
    return reader.list_events(job_id, limit);
  };
  auto [serr, events] = co_await off_loop(s.pool, std::move(work5));
  if (serr) co_return Refusal{"the store cannot be read"};
  json::array out;
  for (const auto& e : events) out.push_back(event_to_json(e));
  co_return json::value(std::move(out));
}

asio::awaitable<Outcome> audit_verify(Services& s) {
  // Like audit_list; the walk sees one snapshot and does not stall the writer meanwhile.
  auto work6 = [file = s.dirs.store_file()] {
    store::Store reader(file, store::Store::ReadOnly{});
    return reader.read_snapshot([](store::Store& st) { return st.verify_chain(); });
  };
  auto [serr, report] = co_await off_loop(s.pool, std::move(work6));
  if (serr) co_return Refusal{"the store cannot be read"};
  json::object o;
  o["ok"] = report.ok;
  o["events"] = report.events;
  if (!report.ok) {
    o["first_bad_event"] = *report.first_bad_event;
    o["reason"] = report.reason;
  }
  co_return json::value(std::move(o));
}

}  // namespace

json::object event_to_json(const store::Event& e) {
  json::object o;
  o["id"] = e.id;
  o["job_id"] = e.job_id ? json::value(*e.job_id) : json::value(nullptr);
  o["seq"] = e.seq ? json::value(*e.seq) : json::value(nullptr);
  o["type"] = e.type;
  o["ts"] = e.ts;
  json::error_code ec;
  json::value data = json::parse(e.data, ec);
  o["data"] = ec ? json::value(e.data) : std::move(data);
  o["prev_hash"] = e.prev_hash;
  o["hash"] = e.hash;
  return o;
}

void restore_jobs(store::Store& store, JobRegistry& jobs, const CustomToolEnv& custom_tools) {
  for (auto& rec : store.load_jobs()) {
    std::string err;
    json::error_code ec;
    json::value v = json::parse(rec.grant_json, ec);
    std::optional<policy::Grant> grant;
    if (!ec && v.is_object()) grant = policy::Grant::from_json(v.get_object(), &err);
    if (!grant) {
      // An unreadable grant grants nothing: keep the job listed, but revoked.
      log_error("job.unreadable", {{"job", rec.id}, {"why", err.empty() ? "bad grant JSON" : err}});
      rec.revoked = true;
      grant = policy::Grant{};
    }
    auto job = std::make_shared<JobState>();
    job->record = std::move(rec);
    job->grant = std::move(*grant);
    job->custom_tools = make_custom_tools(job->grant, custom_tools);
    jobs.add(std::move(job));
  }
}

asio::awaitable<json::object> handle_admin(Services& s, protocol::Message msg) {
  if (msg.kind != protocol::MessageKind::request) {
    co_return protocol::make_error(nullptr, protocol::rpc_code::kInvalidRequest,
                                   "admin calls must be requests");
  }
  static const json::object kEmpty;
  const json::object& p = msg.params.is_object() ? msg.params.get_object() : kEmpty;
  if (!msg.params.is_null() && !msg.params.is_object()) {
    co_return protocol::make_error(msg.id, protocol::rpc_code::kInvalidParams,
                                   "params must be an object");
  }
  Outcome out = Refusal{};
  const auto& m = msg.method;
  if (m == "job.create") {
    out = co_await job_create(s, p);
  } else if (m == "job.revoke") {
    out = co_await job_revoke(s, p);
  } else if (m == "job.renew") {
    out = co_await job_renew(s, p);
  } else if (m == "job.list") {
    json::array list;
    const auto now = store::unix_now();
    for (const auto& j : s.jobs.all()) list.push_back(job_summary(*j, now));
    out = json::value(std::move(list));
  } else if (m == "job.get") {
    std::string err;
    auto job = find_job(s, p, &err);
    if (job) {
      // Where the job's agent connects: `mcp-config` builds the client's set-up from it.
      json::object o = job_summary(*job, store::unix_now());
      o["mcp_url"] = s.mcp_url;
      out = json::value(std::move(o));
    } else {
      out = Refusal{err};
    }
  } else if (m == "tools.list") {
    out = co_await tools_list(s, p);
  } else if (m == "tools.trust") {
    out = co_await tools_trust(s, p);
  } else if (m == "audit.list") {
    out = co_await audit_list(s, p);
  } else if (m == "audit.verify") {
    out = co_await audit_verify(s);
  } else if (is_probe_admin_method(m)) {
    auto probe_answer = co_await handle_probe_admin(s, m, p);
    if (auto* refused = std::get_if<std::string>(&probe_answer)) {
      out = Refusal{std::move(*refused)};
    } else {
      out = std::move(std::get<json::value>(probe_answer));
    }
  } else if (m == "doctor") {
    auto probe = [] {
      int status = 2;
      json::object report = doctor_report(&status);
      report["exit_status"] = status;
      return report;
    };
    auto [derr, report] = co_await off_loop(s.pool, std::move(probe));
    out = derr ? Outcome{Refusal{"the doctor checks failed to run"}}
               : Outcome{json::value(std::move(report))};
  } else {
    co_return protocol::make_error(msg.id, protocol::rpc_code::kMethodNotFound,
                                   "Method not found: " + m);
  }
  if (auto* r = std::get_if<Refusal>(&out))
    co_return protocol::make_error(msg.id, kAdminRefused, r->message);
  co_return protocol::make_result(msg.id, std::move(std::get<json::value>(out)));
}

}  // namespace toolwarden::daemon
