#include "store/probe_store.hpp"

#include <SQLiteCpp/Statement.h>

#include "store/bind.hpp"

namespace toolwarden::store {

namespace {

std::optional<std::string> optional_text(const SQLite::Column& c) {
  if (c.isNull()) return std::nullopt;
  return c.getString();
}

std::string blob_text(const SQLite::Column& c) {
  // sqlite3_column_bytes after sqlite3_column_blob: the length of what the blob call returned.
  const void* data = c.getBlob();
  const int n = c.getBytes();
  if (data == nullptr || n <= 0) return {};
  return std::string(static_cast<const char*>(data), static_cast<std::size_t>(n));
}

Reservation read_reservation(SQLite::Statement& q) {
  Reservation r;
  r.run_id = q.getColumn(0).getString();
  r.probe_id = q.getColumn(1).getString();
  r.job_id = optional_text(q.getColumn(2));
  r.bytes = q.getColumn(3).getInt64();
  r.created_at = q.getColumn(4).getInt64();
  return r;
}

}  // namespace

void insert_snapshot(Store& s, const SnapshotRecord& snap, const std::vector<SnapshotFile>& files) {
  SQLite::Statement q(s.db(),
                      "INSERT INTO snapshots (id, worktree, job_id, files, bytes, new_bytes, "
                      "manifest_sha256, created_at) VALUES (?,?,?,?,?,?,?,?)");
  bind_all(q, snap.id, snap.worktree, snap.job_id, snap.files, snap.bytes, snap.new_bytes,
           snap.manifest_sha256, snap.created_at);
  q.exec();
  SQLite::Statement f(s.db(),
                      "INSERT INTO snapshot_files (snapshot_id, path, kind, mode, size, sha256) "
                      "VALUES (?,?,?,?,?,?)");
  for (const auto& file : files) {
    f.reset();
    // A symlink has no content digest: NULL.
    bind_all(f, snap.id, file.path, file.symlink ? "symlink" : "file",
             static_cast<std::int64_t>(file.mode), file.size,
             file.symlink ? std::nullopt : std::optional<std::string>(file.sha256));
    f.exec();
  }
}

std::optional<SnapshotRecord> find_snapshot(Store& s, const std::string& id) {
  SQLite::Statement q(s.db(),
                      "SELECT id, worktree, job_id, files, bytes, new_bytes, manifest_sha256, "
                      "created_at FROM snapshots WHERE id = ?");
  q.bind(1, id);
  if (!q.executeStep()) return std::nullopt;
  SnapshotRecord r;
  r.id = q.getColumn(0).getString();
  r.worktree = q.getColumn(1).getString();
  r.job_id = optional_text(q.getColumn(2));
  r.files = q.getColumn(3).getInt64();
  r.bytes = q.getColumn(4).getInt64();
  r.new_bytes = q.getColumn(5).getInt64();
  r.manifest_sha256 = q.getColumn(6).getString();
  r.created_at = q.getColumn(7).getInt64();
  return r;
}

std::vector<SnapshotFile> snapshot_files(Store& s, const std::string& snapshot_id) {
  SQLite::Statement q(s.db(),
                      "SELECT path, kind, mode, size, sha256 FROM snapshot_files "
                      "WHERE snapshot_id = ? ORDER BY path");
  q.bind(1, snapshot_id);
  std::vector<SnapshotFile> out;
  while (q.executeStep()) {
    SnapshotFile f;
    f.path = q.getColumn(0).getString();
    f.symlink = q.getColumn(1).getString() == "symlink";
    f.mode = static_cast<std::uint32_t>(q.getColumn(2).getInt64());
    f.size = q.getColumn(3).getInt64();
    if (!q.getColumn(4).isNull()) f.sha256 = q.getColumn(4).getString();
    out.push_back(std::move(f));
  }
  return out;
}

void insert_probe(Store& s, const ProbeRecord& probe) {
  SQLite::Statement q(s.db(),
                      "INSERT INTO probes (id, snapshot_id, job_id, plan_json, plan_sha256, "
                      "created_at) VALUES (?,?,?,?,?,?)");
  bind_all(q, probe.id, probe.snapshot_id, probe.job_id, probe.plan_json, probe.plan_sha256,
           probe.created_at);
  q.exec();
}

std::optional<ProbeRecord> find_probe(Store& s, const std::string& id) {
  SQLite::Statement q(s.db(),
                      "SELECT id, snapshot_id, job_id, plan_json, plan_sha256, created_at "
                      "FROM probes WHERE id = ?");
  q.bind(1, id);
  if (!q.executeStep()) return std::nullopt;
  ProbeRecord r;
  r.id = q.getColumn(0).getString();
  r.snapshot_id = q.getColumn(1).getString();
  r.job_id = optional_text(q.getColumn(2));
  r.plan_json = q.getColumn(3).getString();
  r.plan_sha256 = q.getColumn(4).getString();
  r.created_at = q.getColumn(5).getInt64();
  return r;
}

void insert_probe_run(Store& s, const ProbeRunRecord& run) {
  SQLite::Statement q(s.db(),
                      "INSERT INTO probe_runs (id, probe_id, run_json, stdout, stderr, created_at) "
                      "VALUES (?,?,?,?,?,?)");
  // Output bytes as BLOBs: kept exactly as the program wrote them, whatever their encoding.
  bind_all(q, run.id, run.probe_id, run.run_json, Blob{run.stdout_data}, Blob{run.stderr_data},
           run.created_at);
  q.exec();
}

std::vector<ProbeRunRecord> probe_runs(Store& s, const std::string& probe_id) {
  SQLite::Statement q(s.db(),
                      "SELECT id, probe_id, run_json, stdout, stderr, created_at FROM probe_runs "
                      "WHERE probe_id = ? ORDER BY created_at, rowid");
  q.bind(1, probe_id);
  std::vector<ProbeRunRecord> out;
  while (q.executeStep()) {
    ProbeRunRecord r;
    r.id = q.getColumn(0).getString();
    r.probe_id = q.getColumn(1).getString();
    r.run_json = q.getColumn(2).getString();
    r.stdout_data = blob_text(q.getColumn(3));
    r.stderr_data = blob_text(q.getColumn(4));
    r.created_at = q.getColumn(5).getInt64();
    out.push_back(std::move(r));
  }
  return out;
}

void insert_reservation(Store& s, const Reservation& r) {
  SQLite::Statement q(s.db(),
                      "INSERT INTO probe_reservations (run_id, probe_id, job_id, bytes, "
                      "created_at) VALUES (?,?,?,?,?)");
  bind_all(q, r.run_id, r.probe_id, r.job_id, r.bytes, r.created_at);
  q.exec();
}

bool delete_reservation(Store& s, const std::string& run_id) {
  SQLite::Statement q(s.db(), "DELETE FROM probe_reservations WHERE run_id = ?");
  q.bind(1, run_id);
  return q.exec() == 1;
}

std::vector<Reservation> reservations(Store& s) {
  SQLite::Statement q(s.db(),
                      "SELECT run_id, probe_id, job_id, bytes, created_at FROM probe_reservations "
                      "ORDER BY created_at, run_id");
  std::vector<Reservation> out;
  while (q.executeStep()) out.push_back(read_reservation(q));
  return out;
}

std::int64_t reserved_bytes(Store& s) {
  return s.db().execAndGet("SELECT COALESCE(SUM(bytes), 0) FROM probe_reservations").getInt64();
}

}  // namespace toolwarden::store
