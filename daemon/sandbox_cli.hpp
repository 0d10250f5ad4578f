// `toolwarden run` and `toolwarden doctor` (SPEC §3): the sandbox without a daemon.
#pragma once

#include <boost/json/object.hpp>
#include <string>
#include <vector>

namespace toolwarden::daemon {

struct RunOptions {
  std::string worktree;  // empty = the current directory
  bool writable = false;
  int timeout_s = 60;
  std::uint64_t memory_mb = 512;
  std::uint64_t output_bytes = 1'000'000;
  std::vector<std::string> argv;
};

/// Runs one command in the sandbox, streaming its output; returns the exit status of SPEC §3
/// (the program's; 124 timeout; 125 refused or failed to start; 137 killed by a limit).
int run_sandboxed(const RunOptions& options);

/// The doctor report as JSON ({status, features, canary}) and its exit status (0 full
/// enforcement, 1 degraded, 2 no sandbox).
boost::json::object doctor_report(int* exit_status);

/// Human-readable form of doctor_report.
std::string format_doctor(const boost::json::object& report);

}  // namespace toolwarden::daemon
