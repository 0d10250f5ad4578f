#include "daemon/tools/custom_tool.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cstdlib>

#include "daemon/config.hpp"
#include "daemon/log.hpp"
#include "daemon/tools/workspace_changes.hpp"
#include "policy/tool_folder.hpp"
#include "policy/tool_manifest.hpp"
#include "policy/worktree_fs.hpp"
#include "protocol/tool_output.hpp"
#include "sandbox/exec_closure.hpp"
#include "sandbox/features.hpp"

namespace toolwarden::daemon {
namespace json = boost::json;
namespace fs = std::filesystem;
using policy::ErrorCode;
using policy::FilesystemWrite;

namespace {

ToolOutcome denied(ErrorCode code, std::string reason, json::object details = {}) {
  return ToolOutcome{policy::deny(code, std::move(reason)), std::move(details)};
}

// Opens an absolute directory path without following a symlink anywhere on the way.
UniqueFd open_dir_nofollow(const std::string& path) {
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd = static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof how));
  return UniqueFd(fd);
}

// Everything of one run on disk: the sealed copy and the overlay, removed when the last holder
// (the finish step) lets go.
struct RunDir {
  std::string path;
  policy::SealedCopy sealed;
  ~RunDir() {
    sealed = policy::SealedCopy();  // removes the copy first (it is read-only)
    if (!path.empty()) policy::remove_tree(path);
  }
};

bool make_private_dir(const fs::path& dir) {
  return ::mkdir(dir.c_str(), 0700) == 0 || (errno == EEXIST && fs::is_directory(dir));
}

// The full output as artifacts (SPEC §11), 0600 under the state dir; "" when not written.
std::string write_artifact(const fs::path& dir, const std::string& name, std::string_view data) {
  if (!make_private_dir(dir.parent_path()) || !make_private_dir(dir)) return {};
  const fs::path file = dir / name;
  UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return {};
  while (!data.empty()) {
    ssize_t n = ::write(fd.get(), data.data(), data.size());
    if (n <= 0) return {};
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return file.string();
}

// For `tool_dir` the tool may change its own files: the sealed copy (ours, read-only as made)
// gets the owner's write bit, so the overlay above it lets the tool write; what it writes
// lands in the sandbox's tmpfs layer, never in the copy.
bool make_owner_writable(const std::string& dir) {
  std::error_code ec;
  fs::permissions(dir, fs::perms::owner_write, fs::perm_options::add, ec);
  if (ec) return false;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_symlink()) return false;  // a sealed copy has none
    fs::permissions(it->path(), fs::perms::owner_write, fs::perm_options::add, ec);
  }
  return !ec;
}

constexpr const char* kOutputSchema = R"({"type":"object","properties":{
  "result":{"description":"The tool's JSON output, sanitized"},
  "elapsed_ms":{"type":"integer"},
  "stdout_tail":{"type":"string"},"stderr_tail":{"type":"string"},
  "stdout_sha256":{"type":"string"},"stderr_sha256":{"type":"string"},
  "artifacts":{"type":"object","properties":{"stdout":{"type":"string"},"stderr":{"type":"string"}}},
  "side_effects":{"type":"object","properties":{"workspace_writes":{"type":"array","items":{
    "type":"object","properties":{"path":{"type":"string"},"change":{"type":"string"}}}}}}},
  "required":["result","elapsed_ms","side_effects"]})";

class CustomTool final : public Tool {
 public:
  CustomTool(std::string name, policy::CustomToolPin pin, policy::ToolManifest manifest,
             CustomToolEnv env)
      : pin_(std::move(pin)), manifest_(std::move(manifest)), env_(std::move(env)) {
    d_.name = std::move(name);
    d_.title = d_.name;
    d_.description = manifest_.description;
    d_.input_schema = manifest_.input_schema;
    d_.output_schema = json::parse(kOutputSchema).as_object();
    const auto& caps = manifest_.capabilities;
    d_.annotations.read_only = caps.filesystem_write == FilesystemWrite::none;
    d_.annotations.destructive = caps.filesystem_write == FilesystemWrite::workspace;
    d_.annotations.idempotent = false;
    d_.annotations.open_world = !caps.network_hosts.empty();
  }

  const protocol::ToolDescriptor& descriptor() const override { return d_; }
  bool sandboxed() const override { return true; }

  ToolOutcome run(const ToolContext&, const json::object&) const override {
    return denied(ErrorCode::kLocalToolFailed, "custom tools run through the sandbox");
  }

  Preparation prepare(const ToolContext& ctx, const json::object& args) const override {
    const auto& caps = manifest_.capabilities;
    if (!env_.readiness->ready)
      return denied(ErrorCode::kSandboxUnavailable, env_.readiness->reason);
    const bool workspace = caps.filesystem_write == FilesystemWrite::workspace;
    if (workspace && ctx.grant.access != policy::Access::write) {
      return denied(ErrorCode::kDeniedReadOnly,
                    "the tool writes the workspace and the job has read access");
    }
    if (workspace && !sandbox::probe_features().overlayfs_in_userns) {
      return denied(ErrorCode::kSandboxUnavailable,
                    "workspace writes need overlayfs in a user namespace (see toolwarden doctor)");
    }
    // Declared variables, by name only, from the daemon's own environment.
    std::map<std::string, std::string> extra;
    for (const auto* names : {&manifest_.required_env, &caps.secrets}) {
      for (const auto& n : *names) {
        const char* v = std::getenv(n.c_str());
        if (v == nullptr) {
          return denied(ErrorCode::kMissingEnv, n + " is not set in the daemon's environment");
        }
        extra[n] = v;
      }
    }
    extra["TOOLWARDEN_JOB_ID"] = ctx.job_id;
    extra["TOOLWARDEN_TOOL_NAME"] = d_.name;
    extra["TOOLWARDEN_TOOL_SCOPE"] = pin_.scope;
    extra["TOOLWARDEN_WORKSPACE"] = ctx.grant.worktree;

    // A private directory for this run: the sealed copy and, for workspace writes, the overlay.
    auto run = std::make_shared<RunDir>();
    const fs::path runs = env_.state_dir / "runs";
    const fs::path dir = runs / (ctx.job_id + "-" + std::to_string(ctx.seq) + "-" + d_.name);
    if (!make_private_dir(runs) || ::mkdir(dir.c_str(), 0700) != 0)
      return denied(ErrorCode::kLocalToolFailed, "cannot create the run directory");
    run->path = dir.string();

    // What runs is a copy hashed from the very bytes copied: a change after discovery, or a
    // swap after this check, cannot take effect.
    UniqueFd folder = open_dir_nofollow(pin_.folder);
    if (!folder)
      return denied(ErrorCode::kDeniedIntegrity, "the tool's folder is gone or was replaced");
    auto sealed = policy::seal_tool(folder.get(), pin_.sha256, (dir / "tool").string());
    if (!sealed) return ToolOutcome{sealed.denial(), {}};
    run->sealed = std::move(sealed.value());
    std::string sealed_manifest;
    {
      UniqueFd m(::open((dir / "tool" / "tool.json").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (!m || !policy::read_all(m.get(), policy::kMaxManifestBytes, &sealed_manifest) ||
          sealed_manifest != pin_.manifest) {
        return denied(ErrorCode::kDeniedIntegrity,
                      "the manifest changed since the job was created");
      }
    }

    sandbox::Profile p;
    p.argv = policy::resolve_run(manifest_.run, kToolDirInside);
    p.env = sandbox::build_environment(extra);
    p.worktree = ctx.grant.worktree;
    p.cwd = ctx.grant.worktree;
    p.stdin_data = json::serialize(args);
    p.limits.wall = std::chrono::seconds(manifest_.timeout_s);
    p.limits.cpu_seconds = manifest_.timeout_s;
    // tool_dir: the folder is writable inside, into a tmpfs layer bounded like the scratch;
    // the sealed copy itself is never written.
    sandbox::Bind tool_bind{run->sealed.dir(), false, kToolDirInside};
    tool_bind.ephemeral_writes = caps.filesystem_write == FilesystemWrite::tool_dir;
    if (tool_bind.ephemeral_writes && !make_owner_writable(run->sealed.dir()))
      return denied(ErrorCode::kLocalToolFailed, "cannot prepare the tool's folder");
    p.extra_binds.push_back(std::move(tool_bind));
    if (workspace) {
      const fs::path ov = dir / "overlay";
      if (!make_private_dir(ov) || !make_private_dir(ov / "upper") ||
          !make_private_dir(ov / "work")) {
        return denied(ErrorCode::kLocalToolFailed, "cannot create the overlay");
      }
      p.worktree_overlay_dir = ov.string();
    }
    if (!caps.process_spawn) {
      // Execute rights for the program, its interpreter and loader only (host paths of the
      // sealed copy mapped to where the sandbox sees it).
      std::string why;
      const auto host_argv = policy::resolve_run(manifest_.run, run->sealed.dir());
      auto files = sandbox::exec_closure(host_argv.at(0), &why);
      if (files.empty()) return denied(ErrorCode::kLocalToolFailed, "cannot run the tool: " + why);
      std::error_code ec;
      const std::string sealed_real = fs::canonical(run->sealed.dir(), ec).string();
      for (auto& f : files) {
        if (!sealed_real.empty() && f.rfind(sealed_real + "/", 0) == 0)
          f = std::string(kToolDirInside) + f.substr(sealed_real.size());
      }
      p.deny_spawn = true;
      p.executables = std::move(files);
    }
    SandboxRequest req;
    if (!caps.network_hosts.empty()) {
      p.network_proxy = true;
      req.egress_hosts = caps.network_hosts;
    }
    req.profile = std::move(p);
    req.finish = [run, grant = ctx.grant, sensitive = env_.sensitive, state = env_.state_dir,
                  job = ctx.job_id, seq = ctx.seq, name = d_.name, workspace,
                  timeout = manifest_.timeout_s,
                  max_bytes = ctx.config.max_file_bytes](const sandbox::RunResult& r) {
      return finish(r, *run, grant, *sensitive, state, job, seq, name, workspace, timeout,
                    max_bytes);
    };
    return req;
  }

 private:
  static ToolOutcome finish(const sandbox::RunResult& r, const RunDir& run,
                            const policy::Grant& grant, const policy::SensitiveNames& sensitive,
                            const fs::path& state, const std::string& job, std::int64_t seq,
                            const std::string& name, bool workspace, int timeout_s,
                            std::uint64_t max_file_bytes) {
    if (r.cancelled) return denied(ErrorCode::kCancelled, "the run was cancelled");
    if (r.state == sandbox::State::unsupported)
      return denied(ErrorCode::kSandboxUnavailable, "the sandbox is unavailable");
    if (r.state == sandbox::State::setup_failed) {
      return denied(ErrorCode::kLocalToolFailed, "the sandbox failed to start (" + r.detail + ")");
    }
    // What the agent gets either way: timing, the tails and where the whole output is.
    json::object details;
    details["state"] = sandbox::to_string(r.state);
    details["exit_code"] = r.exit_code;
    details["elapsed_ms"] = r.elapsed_ms;
    details["stdout_tail"] = protocol::tail_chars(r.stdout_data, protocol::kToolOutputPreviewChars);
    details["stderr_tail"] = protocol::tail_chars(r.stderr_data, protocol::kToolOutputPreviewChars);
    details["stdout_sha256"] = r.stdout_sha256;
    details["stderr_sha256"] = r.stderr_sha256;
    const fs::path artifacts = state / "artifacts" / job;
    const std::string stem = std::to_string(seq) + "-" + name;
    details["artifacts"] =
        json::object{{"stdout", write_artifact(artifacts, stem + ".stdout.log", r.stdout_data)},
                     {"stderr", write_artifact(artifacts, stem + ".stderr.log", r.stderr_data)}};
    switch (r.state) {
      case sandbox::State::timeout:
        return denied(ErrorCode::kLocalToolFailed,
                      "timed out after " + std::to_string(timeout_s) +
                          " s; the whole process tree was killed",
                      std::move(details));
      case sandbox::State::output_limit:
        return denied(ErrorCode::kLocalToolFailed, "the output exceeded its byte budget",
                      std::move(details));
      case sandbox::State::resource_limit:
        return denied(ErrorCode::kLocalToolFailed, "the " + r.limit + " limit was reached",
                      std::move(details));
      default:
        break;
    }
    if (r.exit_code != 0) {
      return denied(ErrorCode::kLocalToolFailed,
                    "the tool exited with status " + std::to_string(r.exit_code),
                    std::move(details));
    }
    std::string why;
    auto value = protocol::parse_tool_output(r.stdout_data, &why);
    if (!value) {
      return denied(ErrorCode::kLocalToolFailed, "the tool's output is not one JSON value: " + why,
                    std::move(details));
    }
    json::array writes;
    if (workspace) {
      // Applied only now that the run succeeded, and only if every change is allowed.
      auto applied = apply_workspace_changes(run.path + "/overlay/upper", grant, sensitive,
                                             max_file_bytes, sandbox::Limits{}.scratch_bytes);
      if (!applied) return ToolOutcome{applied.denial(), std::move(details)};
      for (const auto& c : applied.value())
        writes.push_back(json::object{{"path", c.path}, {"change", c.change}});
    }
    json::object o = std::move(details);
    o.erase("state");
    o.erase("exit_code");
    o["result"] = protocol::sanitize_tool_result(*value);
    o["side_effects"] = json::object{{"workspace_writes", std::move(writes)}};
    return ToolOutcome{std::nullopt, std::move(o)};
  }

  policy::CustomToolPin pin_;
  policy::ToolManifest manifest_;
  CustomToolEnv env_;
  protocol::ToolDescriptor d_;
};

}  // namespace

std::shared_ptr<const Tool> make_custom_tool(const std::string& name,
                                             const policy::CustomToolPin& pin,
                                             const CustomToolEnv& env, std::string* error) {
  auto manifest = policy::parse_tool_manifest(pin.manifest);
  if (!manifest) {
    *error = manifest.denial().reason;
    return nullptr;
  }
  if (manifest->name != name) {
    *error = "the manifest names another tool";
    return nullptr;
  }
  return std::make_shared<CustomTool>(name, pin, std::move(manifest.value()), env);
}

std::map<std::string, std::shared_ptr<const Tool>, std::less<>> make_custom_tools(
    const policy::Grant& grant, const CustomToolEnv& env) {
  std::map<std::string, std::shared_ptr<const Tool>, std::less<>> out;
  for (const auto& [name, pin] : grant.custom_tools) {
    std::string why;
    if (auto t = make_custom_tool(name, pin, env, &why)) {
      out.emplace(name, std::move(t));
    } else {
      log_error("tool.unusable", {{"tool", name}, {"why", why}});
    }
  }
  return out;
}

}  // namespace toolwarden::daemon
