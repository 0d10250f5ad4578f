#include "store/store.hpp"

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/serializer.hpp>
#include <boost/json/value.hpp>

#include "store/bind.hpp"
#include "store/clock.hpp"
#include "store/digest.hpp"

namespace toolwarden::store {
namespace json = boost::json;

namespace {

// Forward-only migrations; index i moves the schema from version i to i+1.
constexpr const char* kMigrations[] = {
    R"sql(
CREATE TABLE jobs (
  id           TEXT PRIMARY KEY,
  generation   INTEGER NOT NULL,
  token_sha256 TEXT NOT NULL,
  worktree     TEXT NOT NULL,
  grant_json   TEXT NOT NULL,
  created_at   INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL,
  revoked      INTEGER NOT NULL DEFAULT 0,
  last_seq     INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE events (
  id        INTEGER PRIMARY KEY,
  job_id    TEXT,
  seq       INTEGER,
  type      TEXT NOT NULL,
  ts        TEXT NOT NULL,
  data      TEXT NOT NULL,
  prev_hash TEXT NOT NULL,
  hash      TEXT NOT NULL
);
CREATE INDEX events_by_job ON events(job_id, id);
CREATE TABLE chain_head (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  event_id  INTEGER NOT NULL,
  hash      TEXT NOT NULL
);
INSERT INTO chain_head VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
-- Append-only: the daemon never updates or deletes events; the chain proves it.
CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
)sql",
    // 2: trust in project-scope custom tools (SPEC §11), one hash per (worktree, tool).
    R"sql(
CREATE TABLE tool_trust (
  worktree   TEXT NOT NULL,
  name       TEXT NOT NULL,
  sha256     TEXT NOT NULL,
  trusted_at INTEGER NOT NULL,
  PRIMARY KEY (worktree, name)
);
)sql",
    // 3: probes (SPEC §12): snapshots and their manifests, immutable plans, recorded runs and the
    // byte reservations of runs in progress. Rows of the first four are never changed.
    R"sql(
CREATE TABLE snapshots (
  id              TEXT PRIMARY KEY,
  worktree        TEXT NOT NULL,
  job_id          TEXT,
  files           INTEGER NOT NULL,
  bytes           INTEGER NOT NULL,
  new_bytes       INTEGER NOT NULL,
  manifest_sha256 TEXT NOT NULL,
  created_at      INTEGER NOT NULL
);
CREATE TABLE snapshot_files (
  snapshot_id TEXT NOT NULL REFERENCES snapshots(id),
  path        TEXT NOT NULL,
  kind        TEXT NOT NULL CHECK (kind IN ('file', 'symlink')),
  mode        INTEGER NOT NULL,
  size        INTEGER NOT NULL,
  sha256      TEXT,
  PRIMARY KEY (snapshot_id, path)
) WITHOUT ROWID;
CREATE TABLE probes (
  id          TEXT PRIMARY KEY,
  snapshot_id TEXT NOT NULL REFERENCES snapshots(id),
  job_id      TEXT,
  plan_json   TEXT NOT NULL,
  plan_sha256 TEXT NOT NULL,
  created_at  INTEGER NOT NULL
);
CREATE TABLE probe_runs (
  id         TEXT PRIMARY KEY,
  probe_id   TEXT NOT NULL REFERENCES probes(id),
  run_json   TEXT NOT NULL,
  stdout     BLOB NOT NULL,
  stderr     BLOB NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX probe_runs_by_probe ON probe_runs(probe_id, created_at);
CREATE TABLE probe_reservations (
  run_id     TEXT PRIMARY KEY,
  probe_id   TEXT NOT NULL REFERENCES probes(id),
  job_id     TEXT,
  bytes      INTEGER NOT NULL CHECK (bytes >= 0),
  created_at INTEGER NOT NULL
);
CREATE TRIGGER snapshots_immutable BEFORE UPDATE ON snapshots BEGIN SELECT RAISE(ABORT, 'snapshots are immutable'); END;
CREATE TRIGGER snapshot_files_immutable BEFORE UPDATE ON snapshot_files BEGIN SELECT RAISE(ABORT, 'snapshots are immutable'); END;
CREATE TRIGGER probes_immutable BEFORE UPDATE ON probes BEGIN SELECT RAISE(ABORT, 'probe plans are immutable'); END;
CREATE TRIGGER probe_runs_immutable BEFORE UPDATE ON probe_runs BEGIN SELECT RAISE(ABORT, 'probe runs are immutable'); END;
CREATE TRIGGER probes_kept BEFORE DELETE ON probes BEGIN SELECT RAISE(ABORT, 'probe plans are kept'); END;
CREATE TRIGGER probe_runs_kept BEFORE DELETE ON probe_runs BEGIN SELECT RAISE(ABORT, 'probe runs are kept'); END;
)sql",
};
constexpr int kMigrationCount = static_cast<int>(std::size(kMigrations));
static_assert(kMigrationCount == Store::kSchemaVersion);

// Appends JSON text through one serializer and a stack buffer: no std::string per scalar or key.
template <class T>
void append_serialized(json::serializer& sr, const T& what, std::string& out) {
  sr.reset(what);
  char buf[512];
  while (!sr.done()) out.append(sr.read(buf));
}

void serialize_canonical(const json::value& v, std::string& out, json::serializer& sr) {
  if (v.is_object()) {
    const auto& obj = v.get_object();
    std::vector<const json::key_value_pair*> items;
    items.reserve(obj.size());
    for (const auto& kv : obj) items.push_back(&kv);
    std::sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->key() < b->key(); });
    out.push_back('{');
    bool first = true;
    for (const auto* kv : items) {
      if (!first) out.push_back(',');
      first = false;
      append_serialized(sr, kv->key(), out);
      out.push_back(':');
      serialize_canonical(kv->value(), out, sr);
    }
    out.push_back('}');
  } else if (v.is_array()) {
    out.push_back('[');
    bool first = true;
    for (const auto& e : v.get_array()) {
      if (!first) out.push_back(',');
      first = false;
      serialize_canonical(e, out, sr);
    }
    out.push_back(']');
  } else {
    append_serialized(sr, &v, out);
  }
}

Job read_job(SQLite::Statement& q) {
  Job j;
  j.id = q.getColumn(0).getString();
  j.generation = q.getColumn(1).getInt64();
  j.token_sha256 = q.getColumn(2).getString();
  j.worktree = q.getColumn(3).getString();
  j.grant_json = q.getColumn(4).getString();
  j.created_at = q.getColumn(5).getInt64();
  j.expires_at = q.getColumn(6).getInt64();
  j.revoked = q.getColumn(7).getInt() != 0;
  j.last_seq = q.getColumn(8).getInt64();
  return j;
}

constexpr const char* kJobColumns =
    "id, generation, token_sha256, worktree, grant_json, created_at, expires_at, revoked, "
    "last_seq";

Event read_event(SQLite::Statement& q) {
  Event e;
  e.id = q.getColumn(0).getInt64();
  if (!q.getColumn(1).isNull()) e.job_id = q.getColumn(1).getString();
  if (!q.getColumn(2).isNull()) e.seq = q.getColumn(2).getInt64();
  e.type = q.getColumn(3).getString();
  e.ts = q.getColumn(4).getString();
  e.data = q.getColumn(5).getString();
  e.prev_hash = q.getColumn(6).getString();
  e.hash = q.getColumn(7).getString();
  return e;
}

constexpr const char* kEventColumns = "id, job_id, seq, type, ts, data, prev_hash, hash";

}  // namespace

std::string canonical_json(const json::value& v) {
  std::string out;
  json::serializer sr;
  serialize_canonical(v, out, sr);
  return out;
}

std::string event_hash(const Event& e) {
  // prev_hash, a newline, then the canonical JSON of the row's fields — keys sorted: data, id,
  // job_id, seq, ts, type — written directly (the store's unit test checks it byte for byte
  // against canonical_json of the same object). The stored data text is hashed as stored, as a
  // JSON string: any edit of it changes the hash.
  std::string text;
  text.reserve(e.prev_hash.size() + e.data.size() + e.type.size() + 160);
  json::serializer sr;
  text += e.prev_hash;
  text += "\n{\"data\":";
  append_serialized(sr, json::string_view(e.data), text);
  text += ",\"id\":";
  text += std::to_string(e.id);
  text += ",\"job_id\":";
  if (e.job_id) {
    append_serialized(sr, json::string_view(*e.job_id), text);
  } else {
    text += "null";
  }
  text += ",\"seq\":";
  text += e.seq ? std::to_string(*e.seq) : std::string("null");
  text += ",\"ts\":";
  append_serialized(sr, json::string_view(e.ts), text);
  text += ",\"type\":";
  append_serialized(sr, json::string_view(e.type), text);
  text += '}';
  return sha256_hex(text);
}

Store::Store(const std::filesystem::path& file) try
    : db_(file.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE | SQLite::OPEN_NOMUTEX) {
  configure();
  migrate();
  reload_chain_head();
} catch (const SQLite::Exception& e) {
  throw StoreError("store " + file.string() + ": " + e.what());
}

Store::Store(const std::filesystem::path& file, ReadOnly) try
    : db_(file.string(), SQLite::OPEN_READONLY | SQLite::OPEN_NOMUTEX) {
  db_.setBusyTimeout(5000);
  const int version = db_.execAndGet("PRAGMA user_version").getInt();
  if (version != kSchemaVersion) {
    throw StoreError("store " + file.string() + ": schema version " + std::to_string(version) +
                     ", expected " + std::to_string(kSchemaVersion));
  }
  reload_chain_head();
} catch (const SQLite::Exception& e) {
  throw StoreError("store " + file.string() + ": " + e.what());
}

void Store::configure() {
  // The busy timeout must be in place before the journal-mode switch, which itself locks.
  db_.setBusyTimeout(5000);
  std::string mode = db_.execAndGet("PRAGMA journal_mode=WAL").getString();
  if (mode != "wal") throw StoreError("SQLite refused WAL mode (got '" + mode + "')");
  db_.exec("PRAGMA synchronous=FULL");
  db_.exec("PRAGMA foreign_keys=ON");
}

void Store::migrate() {
  int version = db_.execAndGet("PRAGMA user_version").getInt();
  if (version > kSchemaVersion) {
    throw StoreError("schema version " + std::to_string(version) +
                     " is newer than this toolwarden understands (" +
                     std::to_string(kSchemaVersion) + ")");
  }
  while (version < kSchemaVersion) {
    SQLite::Transaction tx(db_, SQLite::TransactionBehavior::IMMEDIATE);
    // Re-read inside the write lock: another process may have migrated meanwhile.
    version = db_.execAndGet("PRAGMA user_version").getInt();
    if (version >= kSchemaVersion) break;
    db_.exec(kMigrations[version]);
    db_.exec("PRAGMA user_version=" + std::to_string(version + 1));
    tx.commit();
    ++version;
  }
}

void Store::reload_chain_head() {
  head_dirty_ = false;
  SQLite::Statement q(db_, "SELECT event_id, hash FROM chain_head WHERE singleton = 1");
  if (q.executeStep()) {
    head_id_ = q.getColumn(0).getInt64();
    head_hash_ = q.getColumn(1).getString();
  } else {
    head_id_ = 0;
    head_hash_ = kGenesisHash;
  }
}

void Store::insert_job(const Job& job) {
  SQLite::Statement q(db_,
                      "INSERT INTO jobs (id, generation, token_sha256, worktree, grant_json, "
                      "created_at, expires_at, revoked, last_seq) VALUES (?,?,?,?,?,?,?,?,?)");
  bind_all(q, job.id, job.generation, job.token_sha256, job.worktree, job.grant_json,
           job.created_at, job.expires_at, job.revoked, job.last_seq);
  q.exec();
}

void Store::replace_token(const std::string& job_id, std::int64_t generation,
                          const std::string& token_sha256, std::int64_t expires_at) {
  SQLite::Statement q(
      db_, "UPDATE jobs SET generation = ?, token_sha256 = ?, expires_at = ? WHERE id = ?");
  bind_all(q, generation, token_sha256, expires_at, job_id);
  if (q.exec() != 1) throw std::runtime_error("no such job: " + job_id);
}

void Store::mark_revoked(const std::string& job_id) {
  SQLite::Statement q(db_, "UPDATE jobs SET revoked = 1 WHERE id = ?");
  q.bind(1, job_id);
  if (q.exec() != 1) throw std::runtime_error("no such job: " + job_id);
}

SQLite::Statement& Store::cached(std::optional<SQLite::Statement>& slot, const char* sql) {
  if (!slot) {
    slot.emplace(db_, sql);
  } else {
    slot->reset();
    slot->clearBindings();
  }
  return *slot;
}

std::int64_t Store::next_sequence(const std::string& job_id) {
  auto& q = cached(next_seq_stmt_,
                   "UPDATE jobs SET last_seq = last_seq + 1 WHERE id = ? RETURNING last_seq");
  q.bind(1, job_id);
  if (!q.executeStep()) throw std::runtime_error("no such job: " + job_id);
  const std::int64_t n = q.getColumn(0).getInt64();
  q.reset();  // finish the statement so the UPDATE is complete before anything else runs
  return n;
}

Event Store::append_event(const NewEvent& ne) {
  Event e;
  e.id = head_id_ + 1;
  e.job_id = ne.job_id;
  e.seq = ne.seq;
  e.type = ne.type;
  e.ts = rfc3339_now();
  e.data = canonical_json(ne.data);
  e.prev_hash = head_hash_;
  e.hash = event_hash(e);

  static const std::string insert_sql =
      "INSERT INTO events (" + std::string(kEventColumns) + ") VALUES (?,?,?,?,?,?,?,?)";
  auto& ins = cached(insert_event_stmt_, insert_sql.c_str());
  bind_all(ins, e.id, e.job_id, e.seq, e.type, e.ts, e.data, e.prev_hash, e.hash);
  ins.exec();
  head_id_ = e.id;
  head_hash_ = e.hash;
  head_dirty_ = true;
  if (!defer_head_) flush_chain_head();
  return e;
}

void Store::flush_chain_head() {
  if (!head_dirty_) return;
  auto& head =
      cached(update_head_stmt_, "UPDATE chain_head SET event_id = ?, hash = ? WHERE singleton = 1");
  bind_all(head, head_id_, head_hash_);
  head.exec();
  head_dirty_ = false;
}

void Store::restore_chain(ChainMark mark) {
  head_id_ = mark.id;
  head_hash_ = std::move(mark.hash);
}

std::vector<Job> Store::load_jobs() {
  SQLite::Statement q(db_,
                      "SELECT " + std::string(kJobColumns) + " FROM jobs ORDER BY created_at, id");
  std::vector<Job> out;
  while (q.executeStep()) out.push_back(read_job(q));
  return out;
}

std::optional<Job> Store::find_job(const std::string& job_id) {
  SQLite::Statement q(db_, "SELECT " + std::string(kJobColumns) + " FROM jobs WHERE id = ?");
  q.bind(1, job_id);
  if (!q.executeStep()) return std::nullopt;
  return read_job(q);
}

std::vector<Event> Store::list_events(const std::optional<std::string>& job_id,
                                      std::int64_t limit) {
  std::string sql = "SELECT " + std::string(kEventColumns) + " FROM events";
  if (job_id) sql += " WHERE job_id = ?";
  sql += " ORDER BY id DESC LIMIT ?";
  SQLite::Statement q(db_, sql);
  int i = 1;
  if (job_id) q.bind(i++, *job_id);
  q.bind(i, limit);
  std::vector<Event> out;
  while (q.executeStep()) out.push_back(read_event(q));
  std::reverse(out.begin(), out.end());
  return out;
}

ChainReport Store::verify_chain() {
  ChainReport r;
  // Rows in storage order (rowid), so a reordering of ids is seen as a break, too.
  SQLite::Statement q(db_, "SELECT " + std::string(kEventColumns) + " FROM events ORDER BY rowid");
  std::int64_t expect_id = 1;
  std::string prev = kGenesisHash;
  auto fail = [&](std::int64_t id, std::string why) {
    r.ok = false;
    r.first_bad_event = id;
    r.reason = std::move(why);
    return r;
  };
  while (q.executeStep()) {
    Event e = read_event(q);
    if (e.id != expect_id) {
      return fail(e.id, "event id " + std::to_string(e.id) + " follows " +
                            std::to_string(expect_id - 1) + " (a row is missing or moved)");
    }
    if (e.prev_hash != prev) return fail(e.id, "prev_hash does not match the previous event");
    if (!constant_time_equal(event_hash(e), e.hash)) {
      return fail(e.id, "hash does not match the row's contents (edited)");
    }
    prev = e.hash;
    ++expect_id;
    ++r.events;
  }
  SQLite::Statement head(db_, "SELECT event_id, hash FROM chain_head WHERE singleton = 1");
  if (!head.executeStep()) return fail(expect_id - 1, "chain head record is missing");
  std::int64_t head_id = head.getColumn(0).getInt64();
  if (head_id != expect_id - 1 || head.getColumn(1).getString() != prev) {
    return fail(std::min(head_id, expect_id - 1) + (head_id > expect_id - 1 ? 1 : 0),
                "chain head names event " + std::to_string(head_id) + " but the log ends at " +
                    std::to_string(expect_id - 1) + " (rows deleted at the end)");
  }
  return r;
}

void Store::set_tool_trust(const std::string& worktree, const std::string& name,
                           const std::string& sha256, std::int64_t now) {
  SQLite::Statement q(
      db_,
      "INSERT INTO tool_trust (worktree, name, sha256, trusted_at) VALUES (?,?,?,?) "
      "ON CONFLICT (worktree, name) DO UPDATE SET sha256 = excluded.sha256, "
      "trusted_at = excluded.trusted_at");
  bind_all(q, worktree, name, sha256, now);
  q.exec();
}

std::optional<std::string> Store::tool_trust(const std::string& worktree, const std::string& name) {
  SQLite::Statement q(db_, "SELECT sha256 FROM tool_trust WHERE worktree = ? AND name = ?");
  bind_all(q, worktree, name);
  if (!q.executeStep()) return std::nullopt;
  return q.getColumn(0).getString();
}

}  // namespace toolwarden::store
