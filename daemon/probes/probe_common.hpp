// Small pieces the probe service's files share. Internal to daemon/probes.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "daemon/probes/probe_service.hpp"
#include "store/probe_store.hpp"

namespace toolwarden::daemon {

/// Bytes an unprivileged writer may still use on the filesystem of `dir` (statvfs f_bavail);
/// 0 when it cannot be asked, so that a budget check fails closed.
std::uint64_t free_disk_bytes(const std::filesystem::path& dir);

/// The user sees every record; a job only the records it made.
bool visible_to(const ProbeCaller& caller, const std::optional<std::string>& owner);

/// Where a probe's executable must never come from: the snapshot's worktree and the daemon's
/// state dir (which holds every materialized snapshot), as realpaths.
std::vector<std::string> forbidden_roots(const std::string& worktree,
                                         const std::filesystem::path& state_dir);

/// A stored run as the API shows it: its record plus stdout and stderr as text (invalid UTF-8
/// replaced), each cut to its last `output_chars` characters (`stdout_cut` says so).
boost::json::object run_view(const store::ProbeRunRecord& run, std::size_t output_chars);

/// The names in a directory (no "." or ".."), unsorted; empty when it cannot be read.
std::vector<std::string> list_entry_names(int dir_fd);

}  // namespace toolwarden::daemon
