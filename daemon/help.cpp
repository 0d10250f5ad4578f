#include "daemon/help.hpp"

#include <array>

namespace toolwarden::daemon {
namespace {

constexpr std::string_view kCommon =
    "Common options:\n"
    "  --runtime-dir DIR  runtime dir (default $TOOLWARDEN_RUNTIME_DIR, "
    "$XDG_RUNTIME_DIR/toolwarden,\n"
    "                     /tmp/toolwarden-UID)\n"
    "  --state-dir DIR    state dir (default $TOOLWARDEN_STATE_DIR, $XDG_STATE_HOME/toolwarden,\n"
    "                     ~/.local/state/toolwarden)\n"
    "  --config FILE      config file (default $TOOLWARDEN_CONFIG, "
    "$XDG_CONFIG_HOME/toolwarden/config.json,\n"
    "                     ~/.config/toolwarden/config.json)\n"
    "  --help             this text\n"
    "Exit status: 0 success, 1 refused or failed, 2 bad usage.\n";

constexpr std::array<HelpTopic, 21> kTopics = {{
    {"",
     "Usage: toolwarden COMMAND [OPTIONS]\n\n"
     "A per-user daemon that lets AI agents (over MCP) act on a worktree under a policy,\n"
     "with every call audited.\n\n"
     "Commands:\n"
     "  serve           run the daemon in the foreground\n"
     "  job create      create a job and print its bearer token\n"
     "  job revoke      revoke a job's token at once\n"
     "  job renew       issue a new token (the old one dies)\n"
     "  job list        list jobs\n"
     "  job show        show one job\n"
     "  tools list      list custom tools (the user's, and a worktree's)\n"
     "  tools trust     trust a worktree's custom tool at its current content\n"
     "  snapshot capture  capture a worktree's files as an immutable snapshot\n"
     "  probe plan      plan a probe: command, snapshot, oracle, policy\n"
     "  probe run       run a planned probe and record its verdict\n"
     "  probe show      show a probe's plan and runs\n"
     "  audit           print audit events\n"
     "  audit verify    verify the audit hash chain\n"
     "  run             run one command in the sandbox, without a daemon\n"
     "  doctor          check the kernel features the sandbox needs, and the canary\n"
     "  mcp-config      print the set-up of an MCP client (Claude Code, VS Code, Cursor)\n"
     "  --version       print the version\n\n"
     "Run `toolwarden COMMAND --help` for a command's options.\n"},
    {"serve",
     "Usage: toolwarden serve [--listen 127.0.0.1:PORT] [--log-level debug|info|warn|error]\n\n"
     "Runs the daemon in the foreground: MCP on http://127.0.0.1:PORT/mcp (port 0 = ephemeral,\n"
     "unless the config sets `listen`), admin API on RUNTIME_DIR/admin.sock. Writes\n"
     "RUNTIME_DIR/endpoint.json once both listen. A non-loopback address is refused (exit 2).\n"
     "SIGTERM/SIGINT: stop accepting, cancel calls, flush the store, exit 0. Sends READY=1 to\n"
     "$NOTIFY_SOCKET when set. Logs one line per event to stderr.\n"
     "Socket activation (toolwarden.socket, or $LISTEN_PID/$LISTEN_FDS as sd_listen_fds(3)\n"
     "passes them): MCP is served on the one passed socket, which must be a listening TCP\n"
     "socket bound to 127.0.0.1 or [::1] (anything else: exit 2); --listen and the config's\n"
     "`listen` are then ignored.\n"},
    {"job",
     "Usage: toolwarden job create|revoke|renew|list|show ...\n\n"
     "Manage jobs through the running daemon's admin socket. See `toolwarden job SUB --help`.\n"},
    {"job create",
     "Usage: toolwarden job create --worktree DIR [--access read|write] [--allow SCOPE]...\n"
     "                             [--block SCOPE]... [--command ID]... [--tool NAME]...\n"
     "                             [--ttl SECONDS] [--mcp-config CLIENT]\n\n"
     "Creates a job and prints "
     "{\"job_id\",\"generation\",\"token\",\"mcp_url\",\"expires_at\",\"tools\"}.\n"
     "With --mcp-config CLIENT it prints, instead, the set-up that connects CLIENT to the job\n"
     "(see `toolwarden mcp-config --help`) and the job id on stderr.\n"
     "Defaults: access read, allow **, no blocks, no commands, ttl 86400. Tools default to\n"
     "local_read local_list local_search, plus local_edit with write access, plus local_test\n"
     "when commands are granted; --tool narrows that set.\n"
     "SCOPE is ** (everything), dir/**, dir/ or dir (a subtree), or an exact file.\n"},
    {"job revoke",
     "Usage: toolwarden job revoke JOB_ID\n\n"
     "The job's token dies at once; its in-flight calls are cancelled and answer 401.\n"},
    {"job renew",
     "Usage: toolwarden job renew JOB_ID [--mcp-config CLIENT]\n\n"
     "Bumps the job's generation and prints a new token as `job create` does (--mcp-config\n"
     "too); the old token dies as with revoke.\n"},
    {"job list",
     "Usage: toolwarden job list [--json]\n\nLists jobs with their state (live, revoked, "
     "expired).\n"},
    {"job show", "Usage: toolwarden job show JOB_ID\n\nPrints one job as JSON.\n"},
    {"tools",
     "Usage: toolwarden tools list|trust ...\n\n"
     "Custom tools: a folder with tool.json and an entry file, in\n"
     "$XDG_CONFIG_HOME/toolwarden/tools/NAME (the user's; trusted) or\n"
     "WORKTREE/.toolwarden/tools/NAME (the worktree's; unusable until trusted). A job gets one\n"
     "with `job create --tool NAME`. See `toolwarden tools SUB --help`.\n"},
    {"tools list",
     "Usage: toolwarden tools list [--worktree DIR] [--json]\n\n"
     "Lists the user's custom tools and, with --worktree, the worktree's: name, scope (user or\n"
     "project), content hash, trust (trusted, untrusted, changed since trusted, invalid) and\n"
     "the description, or why the manifest is invalid.\n"},
    {"tools trust",
     "Usage: toolwarden tools trust WORKTREE NAME\n\n"
     "Records that you trust the worktree's tool NAME with its current content hash. Review it\n"
     "first: it runs with the capabilities its manifest declares. Any later change of the\n"
     "tool's folder makes it untrusted again.\n"},
    // Snapshots and probes (SPEC §12).
    {"snapshot",
     "Usage: toolwarden snapshot capture --worktree DIR\n\n"
     "Snapshots are immutable copies of a worktree that probes run on. See\n"
     "`toolwarden snapshot capture --help`.\n"},
    {"snapshot capture",
     "Usage: toolwarden snapshot capture --worktree DIR\n\n"
     "Captures the worktree's regular files into content-addressed blobs under\n"
     "STATE_DIR/blobs (deduplicated across snapshots) and prints\n"
     "{\"snapshot_id\",\"files\",\"bytes\",\"new_bytes\",\"manifest_sha256\",\"skipped\"}.\n"
     "Symlinks are never followed nor captured; FIFOs, devices, files with several links,\n"
     "files over max_file_bytes, mount points and sensitive names (.git, .env*, ...) are\n"
     "skipped and counted.\n"},
    {"probe",
     "Usage: toolwarden probe plan|run|show ...\n\n"
     "Probes check a claim about a repository reproducibly: a planned command run on an\n"
     "immutable snapshot in the sandbox, judged by a declared oracle, recorded with a verdict\n"
     "(supports, refutes, inconclusive) and its provenance. Policies (what may run, for how\n"
     "long, which hosts) come only from the config's probe_policies. See\n"
     "`toolwarden probe SUB --help`.\n"},
    {"probe plan",
     "Usage: toolwarden probe plan --file PLAN.json|-\n\n"
     "Validates a plan and records it, immutable; prints {\"probe_id\",\"plan_sha256\",\"plan\"}.\n"
     "PLAN: {\"snapshot_id\", \"hypothesis\", \"command\":[...], \"working_directory\",\n"
     "\"oracle\":{\"type\": exit_code|stdout_contains|file_sha256, \"expected\", \"path\"?,\n"
     "\"source\", \"reference\"?, \"pass_verdict\"?, \"fail_verdict\"?}, \"fixture\"?,\n"
     "\"intervention\"?, \"policy_id\", \"claim_id\"?}. command[0] is a bare name found in\n"
     "/usr/bin, /bin, /usr/sbin, /sbin, /usr/local/bin, or an absolute path the policy lists;\n"
     "never a file of the snapshot. Sources differential_reference, historical_regression,\n"
     "published_specification and user_requirement are independent (they need a reference);\n"
     "any other source makes every verdict inconclusive. intervention files are written onto\n"
     "the snapshot, fixture files into the scratch dir (/scratch, where file_sha256 reads).\n"},
    {"probe run",
     "Usage: toolwarden probe run PROBE_ID\n\n"
     "Runs the probe in the sandbox from its snapshot (mounted read-only at /snapshot; the\n"
     "scratch dir writable at /scratch) and prints the recorded run: state, verdict, reason,\n"
     "exit_code, stdout, stderr and their SHA-256, elapsed_ms and provenance. Refused\n"
     "(DENIED_SIZE) when the run's worst case does not fit the state dir's free disk space.\n"
     "On a terminal, stderr shows a status line (elapsed time, output bytes so far, from the\n"
     "admin method probe.progress) while the probe runs; piped, only the JSON is printed.\n"},
    {"probe show",
     "Usage: toolwarden probe show PROBE_ID\n\n"
     "Prints the probe's plan, its digest and every recorded run as JSON.\n"},
    {"audit",
     "Usage: toolwarden audit [--job JOB_ID] [--limit N] [--json]\n"
     "       toolwarden audit verify [--json]\n\n"
     "Prints the newest N (default 100) audit events, oldest first. `audit verify` walks the\n"
     "event hash chain: exit 0 intact, 1 broken (prints the first bad event id). Without a\n"
     "running daemon both read the store directly.\n"},
    {"run",
     "Usage: toolwarden run [--worktree DIR] [--writable] [--timeout S] [--memory MB]\n"
     "                      [--output-bytes N] -- PROGRAM [ARG]...\n\n"
     "Runs one command in the sandbox without a daemon, streaming its output. The worktree\n"
     "(default: the current directory) is mounted read-only at its own path unless --writable;\n"
     "no network; a private scratch is $HOME and $TMPDIR. Defaults: 60 s, 512 MB, 1000000\n"
     "output bytes. Exit status: the program's; 124 on timeout; 125 when the sandbox refused\n"
     "or failed to start; 137 when a resource limit killed it. On a terminal, stderr shows a\n"
     "status line (elapsed time, output bytes) while the program runs.\n"},
    {"doctor",
     "Usage: toolwarden doctor [--json]\n\n"
     "Checks the kernel features the sandbox uses (user namespaces, Landlock ABI, seccomp,\n"
     "the mount API of Linux 5.12, cgroup v2 delegation, overlayfs in a user namespace,\n"
     "openat2) and runs the canary self-test. Exit status: 0 full enforcement, 1 degraded\n"
     "(names what is missing), 2 no sandbox.\n"},
    {"mcp-config",
     "Usage: toolwarden mcp-config JOB_ID --client claude-code|vscode|cursor|json\n"
     "                             [--token-file FILE]\n\n"
     "Prints what connects an MCP client to the job: its mcp_url with the header\n"
     "`Authorization: Bearer TOKEN`.\n"
     "  claude-code  a `claude mcp add --transport http toolwarden URL --header ...` command\n"
     "  vscode       .vscode/mcp.json: {\"servers\":{\"toolwarden\":{\"type\":\"http\",...}}}\n"
     "  cursor       ~/.cursor/mcp.json: {\"mcpServers\":{\"toolwarden\":{\"url\",...}}}\n"
     "  json         {\"name\",\"type\":\"http\",\"url\",\"headers\"}, for scripts\n"
     "The daemon keeps only a digest of each token, so the token is read from $TOOLWARDEN_TOKEN\n"
     "or --token-file (- for standard input); it is never taken from the command line, where\n"
     "other users' `ps` would see it. `job create --mcp-config CLIENT` and `job renew JOB_ID\n"
     "--mcp-config CLIENT` print the snippet with the new token directly. A job that is not\n"
     "live is refused (exit 1).\n"},
}};

}  // namespace

std::span<const HelpTopic> help_topics() { return kTopics; }

std::string_view common_options_help() { return kCommon; }

std::string help_text(std::string_view topic) {
  if (topic == "audit verify") topic = "audit";
  for (const auto& t : kTopics) {
    if (t.name == topic) {
      std::string out(t.text);
      out += "\n";
      out += kCommon;
      return out;
    }
  }
  return "toolwarden: no help for '" + std::string(topic) + "'\n";
}

}  // namespace toolwarden::daemon
