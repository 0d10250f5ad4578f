#include "daemon/tools/probe_tools.hpp"

#include <boost/json/parse.hpp>

namespace toolwarden::daemon {
namespace json = boost::json;
using policy::ErrorCode;

namespace {

constexpr const char* kPlanInput = R"json({"type":"object","properties":{
  "snapshot_id":{"type":"string","description":"A snapshot this job captured (from an earlier probe_plan); omit it to capture the worktree now"},
  "hypothesis":{"type":"string","minLength":1,"maxLength":4096,"description":"The claim this probe checks"},
  "claim_id":{"type":"string","maxLength":256},
  "command":{"type":"array","minItems":1,"maxItems":256,"items":{"type":"string"},
    "description":"argv; command[0] is a bare name found in /usr/bin, /bin, /usr/sbin, /sbin or /usr/local/bin, or an absolute path the probe policy lists, never a file of the worktree"},
  "working_directory":{"type":"string","description":"Relative to the snapshot's root (\".\" for the root)"},
  "oracle":{"type":"object","properties":{
    "type":{"enum":["exit_code","stdout_contains","file_sha256"]},
    "expected":{"type":["integer","string"],"description":"exit status, text, or SHA-256 hex"},
    "path":{"type":"string","description":"file_sha256: a file in the scratch directory (/scratch)"},
    "source":{"type":"string","description":"differential_reference, historical_regression, published_specification or user_requirement are independent of the model; anything else (e.g. model_assertion) makes every verdict inconclusive"},
    "reference":{"type":"string","description":"Where the expectation comes from (required for independent sources)"},
    "pass_verdict":{"enum":["supports","refutes"]},
    "fail_verdict":{"enum":["supports","refutes"]}},
    "required":["type","expected","source"],"additionalProperties":false},
  "fixture":{"type":"object","additionalProperties":{"type":"string"},"description":"Files written into the scratch directory: relative path → content"},
  "intervention":{"type":"object","additionalProperties":{"type":"string"},"description":"Files written onto the snapshot before the run: relative path → content"},
  "policy_id":{"type":"string","description":"A probe policy of the user's config"}},
  "required":["hypothesis","command","working_directory","oracle","policy_id"],
  "additionalProperties":false})json";

constexpr const char* kPlanOutput = R"json({"type":"object","properties":{
  "probe_id":{"type":"string"},"plan_sha256":{"type":"string"},"plan":{"type":"object"},
  "created_at":{"type":"string"},
  "snapshot":{"type":"object","description":"The snapshot captured for this plan, when none was named"}},
  "required":["probe_id","plan_sha256","plan","created_at"]})json";

constexpr const char* kProbeIdInput = R"json({"type":"object","properties":{
  "probe_id":{"type":"string","minLength":1,"maxLength":256}},
  "required":["probe_id"],"additionalProperties":false})json";

constexpr const char* kRunOutput = R"json({"type":"object","properties":{
  "run_id":{"type":"string"},"probe_id":{"type":"string"},"plan_sha256":{"type":"string"},
  "state":{"type":"string","enum":["completed","timeout","output_limit","resource_limit","setup_failed","unsupported"]},
  "verdict":{"type":"string","enum":["supports","refutes","inconclusive"]},
  "reason":{"type":"string"},
  "oracle":{"type":"object"},
  "exit_code":{"type":"integer"},
  "stdout":{"type":"string"},"stderr":{"type":"string"},
  "stdout_cut":{"type":"boolean"},"stderr_cut":{"type":"boolean"},
  "stdout_sha256":{"type":"string"},"stderr_sha256":{"type":"string"},
  "truncated":{"type":"boolean"},"elapsed_ms":{"type":"integer"},
  "provenance":{"type":"object","properties":{
    "policy_id":{"type":"string"},"policy_sha256":{"type":"string"},"plan_sha256":{"type":"string"},
    "snapshot_id":{"type":"string"},"snapshot_sha256":{"type":"string"},
    "executable":{"type":"object"},"sandbox_sha256":{"type":"string"},"canary":{"type":"object"}}}},
  "required":["run_id","probe_id","plan_sha256","state","verdict","exit_code","stdout","stderr",
    "stdout_sha256","stderr_sha256","truncated","elapsed_ms","provenance"]})json";

constexpr const char* kShowOutput = R"json({"type":"object","properties":{
  "probe_id":{"type":"string"},"plan_sha256":{"type":"string"},"plan":{"type":"object"},
  "created_at":{"type":"string"},"runs":{"type":"array","items":{"type":"object"}},
  "running":{"type":"array","items":{"type":"object"}}},
  "required":["probe_id","plan_sha256","plan","runs"]})json";

ProbeCaller caller_of(const ToolContext& ctx) {
  return ProbeCaller{ctx.job_id, ctx.seq, &ctx.grant};
}

std::string probe_id_of(const json::object& args) {
  const auto* v = args.if_contains("probe_id");
  return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
}

class ProbeTool : public Tool {
 public:
  ProbeTool(std::shared_ptr<const ProbeService> probes, std::string name, std::string title,
            std::string description, const char* input, const char* output)
      : probes_(std::move(probes)) {
    d_.name = std::move(name);
    d_.title = std::move(title);
    d_.description = std::move(description);
    d_.input_schema = json::parse(input).as_object();
    d_.output_schema = json::parse(output).as_object();
  }
  const protocol::ToolDescriptor& descriptor() const override { return d_; }

 protected:
  std::shared_ptr<const ProbeService> probes_;
  protocol::ToolDescriptor d_;
};

class ProbePlanTool final : public ProbeTool {
 public:
  explicit ProbePlanTool(std::shared_ptr<const ProbeService> probes)
      : ProbeTool(std::move(probes), "probe_plan", "Plan a reproducible probe",
                  "Plan a probe of a claim about this worktree: a command run on an immutable "
                  "snapshot, judged by an oracle that is not the model. Without snapshot_id the "
                  "worktree is captured now (files in the job's scopes). Returns the immutable "
                  "plan and its digest; run it with probe_run.",
                  kPlanInput, kPlanOutput) {
    // It records a snapshot and a plan (not effect-free), but never touches the worktree.
    d_.annotations.read_only = false;
    d_.annotations.destructive = false;
    d_.annotations.idempotent = false;
    d_.annotations.open_world = false;
  }
  ToolOutcome run(const ToolContext& ctx, const json::object& args) const override {
    return probes_->plan(args, caller_of(ctx));
  }
};

class ProbeRunTool final : public ProbeTool {
 public:
  explicit ProbeRunTool(std::shared_ptr<const ProbeService> probes)
      : ProbeTool(std::move(probes), "probe_run", "Run a planned probe",
                  "Run a planned probe in the sandbox from its snapshot (the worktree as it is "
                  "now does not matter), check its oracle and record the run: state, verdict "
                  "(supports, refutes or inconclusive), exit code, output with digests and "
                  "provenance.",
                  kProbeIdInput, kRunOutput) {
    d_.annotations.read_only = true;  // the worktree is never written; the run is recorded
    d_.annotations.destructive = false;
    d_.annotations.idempotent = false;
    bool network = false;
    for (const auto& p : probes_->env().policies) network = network || !p.allowed_domains.empty();
    d_.annotations.open_world = network;
  }
  bool sandboxed() const override { return true; }
  ToolOutcome run(const ToolContext&, const json::object&) const override {
    return ToolOutcome{
        policy::deny(ErrorCode::kLocalToolFailed, "probe_run runs through the sandbox"), {}};
  }
  Preparation prepare(const ToolContext& ctx, const json::object& args) const override {
    return probes_->prepare_run(probe_id_of(args), caller_of(ctx), kProbeMcpOutputChars);
  }
};

class ProbeShowTool final : public ProbeTool {
 public:
  explicit ProbeShowTool(std::shared_ptr<const ProbeService> probes)
      : ProbeTool(std::move(probes), "probe_show", "Show a probe and its runs",
                  "Show a probe this job planned: the plan, its digest and every recorded run "
                  "with its verdict and provenance.",
                  kProbeIdInput, kShowOutput) {
    d_.annotations.read_only = true;
    d_.annotations.destructive = false;
    d_.annotations.idempotent = true;
    d_.annotations.open_world = false;
  }
  ToolOutcome run(const ToolContext& ctx, const json::object& args) const override {
    return probes_->show(probe_id_of(args), caller_of(ctx), kProbeMcpOutputChars);
  }
};

}  // namespace

void register_probe_tools(ToolRegistry& registry, std::shared_ptr<const ProbeService> probes) {
  registry.add(std::make_unique<ProbePlanTool>(probes));
  registry.add(std::make_unique<ProbeRunTool>(probes));
  registry.add(std::make_unique<ProbeShowTool>(std::move(probes)));
}

}  // namespace toolwarden::daemon
