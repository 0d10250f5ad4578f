#include "daemon/tools/local_test.hpp"

#include <boost/json/parse.hpp>

#include "daemon/config.hpp"
#include "protocol/mcp.hpp"

namespace toolwarden::daemon {
namespace json = boost::json;
using policy::ErrorCode;

namespace {

bool under_system_dirs(const std::string& path) {
  for (const char* dir : {"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/"}) {
    if (path.rfind(dir, 0) == 0) return true;
  }
  return false;
}

// Both pins of SPEC §9: the executable against the config-time pin, the read paths against
// the job-time pins.
policy::Check verify_integrity(const policy::RegisteredCommand& cmd, const policy::Grant& grant,
                               std::size_t max_bytes) {
  if (auto exe = policy::CommandRegistry::verify_executable(cmd); !exe) return exe;
  if (cmd.spec.read_paths.empty()) return policy::Allowed{};
  auto fs = policy::WorktreeFs::open(grant.worktree);
  if (!fs) return policy::deny(ErrorCode::kDeniedIntegrity, "the worktree is gone");
  for (const auto& rp : cmd.spec.read_paths) {
    auto path = policy::parse_request_path(rp, false);
    auto pinned = grant.read_pins.find(rp);
    if (!path || pinned == grant.read_pins.end()) {
      return policy::deny(ErrorCode::kDeniedIntegrity, "read path " + rp + " was not pinned");
    }
    auto now = policy::pin_worktree_file(fs.value(), path.value(), max_bytes);
    if (!now || !(now.value() == pinned->second)) {
      return policy::deny(ErrorCode::kDeniedIntegrity,
                          "read path " + rp + " changed since the job was created");
    }
  }
  return policy::Allowed{};
}

class LocalTest final : public Tool {
 public:
  LocalTest(std::shared_ptr<const policy::CommandRegistry> commands,
            std::shared_ptr<const SandboxReadiness> ready)
      : commands_(std::move(commands)), ready_(std::move(ready)) {
    d_.name = "local_test";
    d_.title = "Run a registered test command";
    d_.description =
        "Run one of the job's registered commands (by id) in the sandbox: worktree read-only, no "
        "network, bounded time, memory and output. Returns the outcome state, exit code and "
        "output.";
    d_.input_schema = json::parse(R"({"type":"object","properties":{"command":{"type":"string",
        "description":"A command id granted to this job"}},"required":["command"],"additionalProperties":false})")
                          .as_object();
    d_.output_schema = json::parse(R"({"type":"object","properties":{"command":{"type":"string"},
        "state":{"type":"string","enum":["completed","timeout","output_limit","resource_limit","setup_failed","unsupported"]},
        "exit_code":{"type":"integer"},"stdout":{"type":"string"},"stderr":{"type":"string"},
        "stdout_sha256":{"type":"string"},"stderr_sha256":{"type":"string"},"truncated":{"type":"boolean"},
        "elapsed_ms":{"type":"integer"}},
        "required":["command","state","exit_code","stdout","stderr","stdout_sha256","stderr_sha256","truncated","elapsed_ms"]})")
                           .as_object();
    d_.annotations.read_only = true;
    d_.annotations.destructive = false;
    d_.annotations.idempotent = false;
    d_.annotations.open_world = false;
  }

  const protocol::ToolDescriptor& descriptor() const override { return d_; }
  bool sandboxed() const override { return true; }

  ToolOutcome run(const ToolContext&, const json::object&) const override {
    return ToolOutcome{
        policy::deny(ErrorCode::kLocalToolFailed, "local_test runs through the sandbox"), {}};
  }

  Preparation prepare(const ToolContext& ctx, const json::object& args) const override {
    const auto* idv = args.if_contains("command");
    const std::string id =
        idv != nullptr && idv->is_string() ? std::string(idv->get_string()) : std::string();
    const auto& granted = ctx.grant.commands;
    const auto* cmd = commands_->find(id);
    if (cmd == nullptr || std::find(granted.begin(), granted.end(), id) == granted.end()) {
      return ToolOutcome{policy::deny(ErrorCode::kDeniedCommand,
                                      "command '" + id + "' is not granted to this job"),
                         {}};
    }
    if (!ready_->ready)
      return ToolOutcome{policy::deny(ErrorCode::kSandboxUnavailable, ready_->reason), {}};
    if (auto ok = verify_integrity(*cmd, ctx.grant, ctx.config.max_file_bytes); !ok)
      return ToolOutcome{ok.denial(), {}};

    auto cwd = policy::parse_request_path(cmd->spec.cwd, true);
    sandbox::Profile p;
    p.argv = cmd->spec.argv;
    p.argv[0] = cmd->executable;
    p.env = sandbox::build_environment(cmd->spec.env);
    p.worktree = ctx.grant.worktree;
    p.worktree_writable = false;
    p.cwd = cwd->segments.empty() ? ctx.grant.worktree : ctx.grant.worktree + "/" + cwd->text();
    p.limits.wall = std::chrono::seconds(cmd->spec.timeout_s);
    if (!under_system_dirs(cmd->executable))
      p.extra_binds.push_back(sandbox::Bind{cmd->executable, false});

    const policy::Grant grant = ctx.grant;  // immutable; copied for the finish step
    const std::size_t max_bytes = ctx.config.max_file_bytes;
    SandboxRequest req;
    req.profile = std::move(p);
    req.finish = [cmd, grant, max_bytes, id](const sandbox::RunResult& r) -> ToolOutcome {
      if (r.cancelled)
        return ToolOutcome{policy::deny(ErrorCode::kCancelled, "the run was cancelled"), {}};
      if (r.state == sandbox::State::unsupported) {
        return ToolOutcome{
            policy::deny(ErrorCode::kSandboxUnavailable, "the sandbox is unavailable"), {}};
      }
      // Checked again after the run: a run whose inputs changed under it is not reported.
      if (auto ok = verify_integrity(*cmd, grant, max_bytes); !ok)
        return ToolOutcome{ok.denial(), {}};
      if (r.state == sandbox::State::setup_failed) {
        return ToolOutcome{policy::deny(ErrorCode::kLocalToolFailed,
                                        "the sandbox failed to start (" + r.detail + ")"),
                           {}};
      }
      json::object o;
      o["command"] = id;
      o["state"] = sandbox::to_string(r.state);
      o["exit_code"] = r.exit_code;
      o["stdout"] = protocol::valid_utf8(r.stdout_data);
      o["stderr"] = protocol::valid_utf8(r.stderr_data);
      o["stdout_sha256"] = r.stdout_sha256;
      o["stderr_sha256"] = r.stderr_sha256;
      o["truncated"] = r.truncated;
      o["elapsed_ms"] = r.elapsed_ms;
      if (!r.limit.empty()) o["limit"] = r.limit;
      o["limit_mode"] = r.limit_mode;
      return ToolOutcome{std::nullopt, std::move(o)};
    };
    return req;
  }

 private:
  std::shared_ptr<const policy::CommandRegistry> commands_;
  std::shared_ptr<const SandboxReadiness> ready_;
  protocol::ToolDescriptor d_;
};

}  // namespace

std::unique_ptr<Tool> make_local_test(std::shared_ptr<const policy::CommandRegistry> commands,
                                      std::shared_ptr<const SandboxReadiness> readiness) {
  return std::make_unique<LocalTest>(std::move(commands), std::move(readiness));
}

std::optional<std::string> pin_read_paths(const policy::CommandRegistry& commands,
                                          policy::Grant& grant, std::size_t max_file_bytes) {
  auto fs = policy::WorktreeFs::open(grant.worktree);
  if (!fs) return "the worktree cannot be opened";
  for (const auto& id : grant.commands) {
    const auto* cmd = commands.find(id);
    if (cmd == nullptr) return "command '" + id + "' is not registered";
    const std::string& exe = cmd->executable;
    if (exe == grant.worktree || exe.rfind(grant.worktree + "/", 0) == 0) {
      return "command '" + id + "': its executable lies inside the worktree";
    }
    for (const auto& rp : cmd->spec.read_paths) {
      auto path = policy::parse_request_path(rp, false);
      if (!path) return "command '" + id + "': read path '" + rp + "' is invalid";
      auto pin = policy::pin_worktree_file(fs.value(), path.value(), max_file_bytes);
      if (!pin) {
        return "command '" + id + "': read path '" + rp + "' cannot be pinned (" +
               std::string(to_string(pin.denial().code)) + ")";
      }
      grant.read_pins[rp] = pin.value();
    }
  }
  return std::nullopt;
}

}  // namespace toolwarden::daemon
