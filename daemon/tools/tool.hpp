// The interface every tool implements. Tools run on the blocking pool, never on the I/O
// thread; they read the job's grant (immutable once the job exists) and report denials as
// values with SPEC codes.
#pragma once

#include <atomic>
#include <boost/json/object.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "policy/error_code.hpp"
#include "policy/grant.hpp"
#include "protocol/mcp.hpp"
#include "sandbox/profile.hpp"

namespace toolwarden::daemon {

struct Config;

struct ToolContext {
  const policy::Grant& grant;
  const Config& config;
  const std::atomic<int>& cancel;  // non-zero once the call is cancelled
  std::string job_id;
  std::int64_t seq = 0;
  bool cancelled() const { return cancel.load(std::memory_order_relaxed) != 0; }
};

struct ToolOutcome {
  std::optional<policy::Denial> denial;  // set: the call was denied or failed
  boost::json::object result;  // structuredContent; with a denial, details added to {"error"}
};

/// A sandboxed tool's run, prepared on the pool: the profile to run and what to make of the
/// result (`finish` runs on the pool too, after the sandbox is gone).
struct SandboxRequest {
  sandbox::Profile profile;
  std::function<ToolOutcome(const sandbox::RunResult&)> finish;
  /// With profile.network_proxy: the hosts the daemon's CONNECT proxy may reach (SPEC §11).
  std::vector<std::string> egress_hosts;
};

/// Either an early answer (denied before anything ran) or a run to start.
using Preparation = std::variant<ToolOutcome, SandboxRequest>;

class Tool {
 public:
  virtual ~Tool() = default;
  virtual const protocol::ToolDescriptor& descriptor() const = 0;
  /// In-process tools: blocking; runs on the pool. Arguments already passed the input schema.
  virtual ToolOutcome run(const ToolContext& ctx, const boost::json::object& args) const = 0;
  /// Tools that spawn: prepare() runs on the pool, the sandbox runs under the supervisor
  /// (cancellable), and SandboxRequest::finish maps its result.
  virtual bool sandboxed() const { return false; }
  virtual Preparation prepare(const ToolContext& ctx, const boost::json::object& args) const {
    return run(ctx, args);
  }
};

class ToolRegistry {
 public:
  void add(std::unique_ptr<Tool> tool);
  const Tool* find(std::string_view name) const;

 private:
  std::map<std::string, std::unique_ptr<Tool>, std::less<>> tools_;
};

}  // namespace toolwarden::daemon
