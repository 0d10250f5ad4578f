// Snapshots of a worktree (SPEC §12) on disk: the capture walk that turns the policy-allowed
// regular files into content-addressed blobs and a manifest, and the materialization that turns
// a manifest back into a private directory tree. Blocking file work: call it on the pool.
//
// The capture walks relative to directory fds, opening every entry with O_NOFOLLOW and checking
// the fstat of the very fd it reads. It records regular files with one link, at most
// `max_file_bytes` long, whose path passes the SPEC §7 syntax and names nothing sensitive (so
// `.git/` is never captured: it is a sensitive name, and its hooks, config and objects are
// neither needed by a probe nor safe to hand to one) and, for a job, lies in the job's scopes.
// Symlinks are never followed nor captured, but listed in the manifest so that an overlay
// through one can be refused; FIFOs, sockets, devices, hard-linked files, files too large and
// mount points are skipped and counted.
//
// The manifest digest, 64 lowercase hex digits, is SHA-256 over
//   "toolwarden-snapshot-v1" NUL, then per entry in bytewise path order:
//     file:    "f" SP MODE SP SIZE SP SHA256 SP PATH NUL   (MODE: 4 octal digits, 0777 bits)
//     symlink: "l" SP "-" SP "-" SP "-" SP PATH NUL
#pragma once

#include <sys/types.h>

#include <boost/json/object.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "policy/error_code.hpp"
#include "policy/grant.hpp"
#include "policy/path_rules.hpp"
#include "policy/probe_plan.hpp"
#include "store/blobs.hpp"
#include "store/probe_store.hpp"

namespace toolwarden::daemon {

inline constexpr std::size_t kMaxSnapshotFiles = 200'000;

struct CaptureRules {
  const policy::SensitiveNames& sensitive;
  const policy::Grant* scope = nullptr;  // a job's scopes; null: the whole worktree
  std::uint64_t max_file_bytes = 1 << 20;
  std::size_t max_files = kMaxSnapshotFiles;
  std::uint64_t byte_budget = 0;  // new blob bytes the capture may write
  /// Directories never entered, by identity: the daemon's own state (blobs, materialized
  /// snapshots, the store) when it lies inside the worktree.
  std::vector<std::pair<dev_t, ino_t>> excluded_dirs;
};

struct CaptureSkips {
  std::int64_t symlinks = 0, special = 0, hardlinked = 0, too_large = 0, sensitive = 0,
               bad_name = 0, out_of_scope = 0, mount_points = 0, daemon_state = 0;
  boost::json::object to_json() const;
};

struct Capture {
  std::vector<store::SnapshotFile> entries;  // files and symlinks, in path order
  std::int64_t files = 0;
  std::int64_t bytes = 0;
  std::int64_t new_bytes = 0;
  std::string manifest_sha256;
  CaptureSkips skipped;
};

/// Walks `worktree` (a realpath) and stages the content of every captured file in `batch`
/// (the caller commits it before recording the manifest). → DENIED_SYMLINK when the worktree
/// itself is not a real directory, DENIED_SIZE past max_files or the byte budget,
/// LOCAL_TOOL_FAILED when reading or staging fails.
policy::Result<Capture> capture_worktree(const std::string& worktree, const CaptureRules& rules,
                                         store::BlobBatch& batch);

std::string manifest_digest(const std::vector<store::SnapshotFile>& entries);

/// Writes every file of `entries` below `dest_fd` (an empty directory only the daemon writes),
/// creating each directory and file exclusively relative to its parent's fd without following
/// a symlink, copying each blob while hashing it → DENIED_INTEGRITY when a blob is missing or
/// its bytes do not match the manifest; LOCAL_TOOL_FAILED when writing fails. Modes are kept
/// (permission bits only).
policy::Check materialize_snapshot(const std::vector<store::SnapshotFile>& entries,
                                   const store::BlobStore& blobs, int dest_fd);

/// Writes fixture or intervention files below `dir_fd`: missing directories are created, an
/// existing regular file is replaced (its mode kept; new files 0644), and nothing is ever
/// followed: a symlink on the way → DENIED_SYMLINK, any other non-directory or non-regular
/// entry → DENIED_FILE.
policy::Check write_overlay(int dir_fd, const std::map<std::string, std::string>& files);

/// Checks a plan against the snapshot's manifest: the working directory is a directory of it,
/// and no intervention path passes through (or replaces) a symlink the worktree held
/// (DENIED_SYMLINK) or passes through a file (DENIED_FILE).
policy::Check check_plan_against_manifest(const policy::ProbePlan& plan,
                                          const std::vector<store::SnapshotFile>& entries);

/// The oracle's witness file `path` below `dir_fd`, read without following a symlink: a regular
/// file with one link of at most `max_bytes`, else unusable; missing when absent.
policy::FileWitness read_witness(int dir_fd, const std::string& path, std::uint64_t max_bytes);

/// Bytes held by regular files below `dir_fd` (never following a symlink), stopping early once
/// past `limit`.
std::uint64_t tree_bytes(int dir_fd, std::uint64_t limit);

/// Removes `name` below `parent_fd` and everything in it, never following a symlink, making
/// read-only directories writable first, and with bounded recursion however deep the tree (a
/// probe's scratch is the probe's to shape). True when nothing is left.
bool remove_tree_bounded(int parent_fd, const std::string& name);

}  // namespace toolwarden::daemon
