// The store's side of probes (SPEC §12): snapshot manifests, immutable plans, recorded runs and
// the byte reservations of runs in progress (schema 3). Writes run inside the writer's
// transaction like every other write; nothing here is thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace toolwarden::store {

struct SnapshotRecord {
  std::string id;
  std::string worktree;
  std::optional<std::string> job_id;  // captured for a job (MCP), else by the user
  std::int64_t files = 0;
  std::int64_t bytes = 0;
  std::int64_t new_bytes = 0;
  std::string manifest_sha256;
  std::int64_t created_at = 0;
};

/// One manifest entry: a regular file with its content digest, or a symlink that was seen and
/// not captured (kept so that overlays through it can be refused).
struct SnapshotFile {
  std::string path;
  bool symlink = false;
  std::uint32_t mode = 0;  // permission bits (0777)
  std::int64_t size = 0;
  std::string sha256;  // empty for a symlink
};

struct ProbeRecord {
  std::string id;
  std::string snapshot_id;
  std::optional<std::string> job_id;  // planned by a job (MCP), else by the user
  std::string plan_json;              // canonical JSON
  std::string plan_sha256;
  std::int64_t created_at = 0;
};

struct ProbeRunRecord {
  std::string id;
  std::string probe_id;
  std::string run_json;  // canonical JSON of everything but the output bytes
  std::string stdout_data;
  std::string stderr_data;
  std::int64_t created_at = 0;
};

/// Bytes set aside for a run in progress, so that runs side by side cannot overcommit the disk.
struct Reservation {
  std::string run_id;
  std::string probe_id;
  std::optional<std::string> job_id;
  std::int64_t bytes = 0;
  std::int64_t created_at = 0;
};

void insert_snapshot(Store& s, const SnapshotRecord& snap, const std::vector<SnapshotFile>& files);
std::optional<SnapshotRecord> find_snapshot(Store& s, const std::string& id);
/// The manifest ordered by path.
std::vector<SnapshotFile> snapshot_files(Store& s, const std::string& snapshot_id);

void insert_probe(Store& s, const ProbeRecord& probe);
std::optional<ProbeRecord> find_probe(Store& s, const std::string& id);

void insert_probe_run(Store& s, const ProbeRunRecord& run);
/// The probe's runs, oldest first.
std::vector<ProbeRunRecord> probe_runs(Store& s, const std::string& probe_id);

void insert_reservation(Store& s, const Reservation& r);
/// True when a reservation was removed.
bool delete_reservation(Store& s, const std::string& run_id);
std::vector<Reservation> reservations(Store& s);
/// The sum of every reservation's bytes.
std::int64_t reserved_bytes(Store& s);

}  // namespace toolwarden::store
