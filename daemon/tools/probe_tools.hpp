// The MCP tools of SPEC §12 for a job granted `probes`: probe_plan, probe_run, probe_show.
// A job plans on its own worktree: without a snapshot_id, probe_plan captures the worktree in
// the job's scopes first, and a snapshot_id is accepted only when this job captured it (a
// snapshot the user took may hold files outside the job's scopes). probe_run goes through the
// dispatcher's sandbox path like local_test: audited as a tool call, cancellable, killed with
// the job.
#pragma once

#include <memory>

#include "daemon/probes/probe_service.hpp"
#include "daemon/tools/tool.hpp"

namespace toolwarden::daemon {

void register_probe_tools(ToolRegistry& registry, std::shared_ptr<const ProbeService> probes);

}  // namespace toolwarden::daemon
