// The interface every tool implements. Tools run on the blocking pool, never on the I/O
// thread; they read the job's grant (immutable once the job exists) and report denials as
// values with SPEC codes.
#pragma once

#include <atomic>
#include <boost/json/object.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "policy/error_code.hpp"
#include "policy/grant.hpp"
#include "protocol/mcp.hpp"

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
  boost::json::object result;            // structuredContent when not denied
};

class Tool {
 public:
  virtual ~Tool() = default;
  virtual const protocol::ToolDescriptor& descriptor() const = 0;
  /// Blocking; runs on the pool. Arguments already passed the input schema.
  virtual ToolOutcome run(const ToolContext& ctx, const boost::json::object& args) const = 0;
};

class ToolRegistry {
 public:
  void add(std::unique_ptr<Tool> tool);
  const Tool* find(std::string_view name) const;
  /// Descriptors of the granted tools that exist, in the grant's order.
  std::vector<const protocol::ToolDescriptor*> granted(const policy::Grant& grant) const;

 private:
  std::map<std::string, std::unique_ptr<Tool>, std::less<>> tools_;
};

}  // namespace toolwarden::daemon
