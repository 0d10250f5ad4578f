// The embedded SQLite store (SPEC §10): jobs, token digests, per-job sequence numbers and the
// append-only, hash-chained event log. One Store is one connection, owned by one thread
// (see Writer); nothing here is thread-safe on purpose.
#pragma once

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include <boost/json/object.hpp>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace toolwarden::store {

/// Start-up failures (cannot open, newer schema, WAL refused). Raised only while opening.
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Job {
  std::string id;
  std::int64_t generation = 1;
  std::string token_sha256;  // hex digest; the token itself is never stored
  std::string worktree;
  std::string grant_json;  // the effective grant, as policy serialises it
  std::int64_t created_at = 0;
  std::int64_t expires_at = 0;
  bool revoked = false;
  std::int64_t last_seq = 0;  // high-water mark of tool-call sequence numbers
};

struct Event {
  std::int64_t id = 0;
  std::optional<std::string> job_id;
  std::optional<std::int64_t> seq;
  std::string type;
  std::string ts;
  std::string data;  // canonical JSON object
  std::string prev_hash;
  std::string hash;
};

struct NewEvent {
  std::optional<std::string> job_id;
  std::optional<std::int64_t> seq;
  std::string type;
  boost::json::object data;
};

struct ChainReport {
  bool ok = true;
  std::int64_t events = 0;
  std::optional<std::int64_t> first_bad_event;
  std::string reason;
};

/// Serialises a JSON value with object keys sorted, so equal values hash equally.
std::string canonical_json(const boost::json::value& v);

class Store {
 public:
  static constexpr int kSchemaVersion = 3;
  static constexpr const char* kGenesisHash =
      "0000000000000000000000000000000000000000000000000000000000000000";

  /// Opens (creating if needed) and migrates `file`; throws StoreError.
  explicit Store(const std::filesystem::path& file);

  /// A read-only connection to an existing store of this schema version, for readers that
  /// must not wait for (or stall) the writer: WAL readers see the last commit and take no
  /// write lock, so they work while an outside process holds it or while commits fail.
  struct ReadOnly {};
  Store(const std::filesystem::path& file, ReadOnly);

  /// Runs `fn(*this)` inside one read transaction: every statement sees the same snapshot.
  template <class Fn>
  auto read_snapshot(Fn fn) {
    SQLite::Transaction tx(db_, SQLite::TransactionBehavior::DEFERRED);
    auto out = fn(*this);
    tx.commit();
    return out;
  }

  // Writes: callers wrap them in a transaction (the Writer does).
  void insert_job(const Job& job);
  void replace_token(const std::string& job_id, std::int64_t generation,
                     const std::string& token_sha256, std::int64_t expires_at);
  void mark_revoked(const std::string& job_id);
  /// The job's next sequence number (high-water mark + 1), persisted.
  std::int64_t next_sequence(const std::string& job_id);
  Event append_event(const NewEvent& e);
  /// Records that the user trusts the project tool `name` of `worktree` with this content
  /// hash (SPEC §11); replaces an earlier hash.
  void set_tool_trust(const std::string& worktree, const std::string& name,
                      const std::string& sha256, std::int64_t now);

  // Reads.
  std::vector<Job> load_jobs();
  std::optional<Job> find_job(const std::string& job_id);
  /// The newest `limit` events (optionally of one job), returned oldest first.
  std::vector<Event> list_events(const std::optional<std::string>& job_id, std::int64_t limit);
  /// Walks the whole chain: contiguous ids, each prev_hash the previous hash, each hash
  /// recomputed from the row, and the recorded chain head matching the last row.
  ChainReport verify_chain();
  /// The hash the user trusted for this project tool, if any.
  std::optional<std::string> tool_trust(const std::string& worktree, const std::string& name);

  /// Re-reads the cached chain head; call after a rollback.
  void reload_chain_head();

  /// Batch mode (the Writer's): append_event keeps the new chain head in memory, and
  /// flush_chain_head() writes it once per transaction, before its commit. Off by default:
  /// then every append_event updates the chain_head row itself.
  void defer_chain_head(bool on) { defer_head_ = on; }
  void flush_chain_head();
  /// The chain head in memory, to go back to when a savepoint is rolled back.
  struct ChainMark {
    std::int64_t id = 0;
    std::string hash;
  };
  ChainMark chain_mark() const { return {head_id_, head_hash_}; }
  void restore_chain(ChainMark mark);

  SQLite::Database& db() { return db_; }

 private:
  void configure();
  void migrate();

  /// A statement prepared once per connection and reused (prepare costs more than the
  /// insert itself on the hot path).
  SQLite::Statement& cached(std::optional<SQLite::Statement>& slot, const char* sql);

  SQLite::Database db_;
  std::optional<SQLite::Statement> next_seq_stmt_;
  std::optional<SQLite::Statement> insert_event_stmt_;
  std::optional<SQLite::Statement> update_head_stmt_;
  std::int64_t head_id_ = 0;
  std::string head_hash_;
  bool defer_head_ = false;
  bool head_dirty_ = false;  // defer_head_: the chain_head row is behind head_id_/head_hash_
};

/// The hash of an event row: SHA-256 over prev_hash and the canonical JSON of its fields.
std::string event_hash(const Event& e);

}  // namespace toolwarden::store
