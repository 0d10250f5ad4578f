#include "daemon/cli.hpp"

#include <unistd.h>

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/admin_api.hpp"
#include "daemon/admin_client.hpp"
#include "daemon/help.hpp"
#include "daemon/mcp_config.hpp"
#include "daemon/paths.hpp"
#include "daemon/sandbox_cli.hpp"
#include "daemon/serve.hpp"
#include "daemon/status_line.hpp"
#include "daemon/version.hpp"
#include "store/store.hpp"

namespace toolwarden::daemon {
namespace json = boost::json;

namespace {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Options of one subcommand: flags take a value unless listed as switches; repeatable ones
// collect every value.
struct Parsed {
  std::map<std::string, std::vector<std::string>> values;
  std::map<std::string, bool> switches;
  std::vector<std::string> positional;
  std::vector<std::string> rest;  // after "--"
  bool help = false;

  std::optional<std::string> one(const std::string& k) const {
    auto it = values.find(k);
    if (it == values.end() || it->second.empty()) return std::nullopt;
    if (it->second.size() > 1) throw UsageError("--" + k + " given more than once");
    return it->second.front();
  }
  std::vector<std::string> all(const std::string& k) const {
    auto it = values.find(k);
    return it == values.end() ? std::vector<std::string>{} : it->second;
  }
  bool on(const std::string& k) const { return switches.count(k) > 0; }
};

const std::vector<std::string> kDirFlags = {"runtime-dir", "state-dir", "config"};

Parsed parse(int argc, char** argv, int start, const std::vector<std::string>& flags,
             const std::vector<std::string>& switch_names) {
  Parsed p;
  auto is = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  for (int i = start; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      for (++i; i < argc; ++i) p.rest.emplace_back(argv[i]);
      break;
    }
    if (a == "--help" || a == "-h") {
      p.help = true;
      continue;
    }
    if (a.rfind("--", 0) == 0) {
      std::string name = a.substr(2);
      std::optional<std::string> value;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      if (is(switch_names, name)) {
        if (value) throw UsageError("--" + name + " takes no value");
        p.switches[name] = true;
      } else if (is(flags, name) || is(kDirFlags, name)) {
        if (!value) {
          if (i + 1 >= argc) throw UsageError("--" + name + " needs a value");
          value = argv[++i];
        }
        p.values[name].push_back(*value);
      } else {
        throw UsageError("unknown option --" + name);
      }
      continue;
    }
    p.positional.push_back(a);
  }
  return p;
}

DirOverrides dirs_of(const Parsed& p) {
  return DirOverrides{p.one("runtime-dir"), p.one("state-dir"), p.one("config")};
}

std::filesystem::path admin_socket(const Parsed& p) {
  return resolve_dirs(dirs_of(p)).admin_socket();
}

void print_json(const json::value& v) { std::cout << json::serialize(v) << "\n"; }

std::int64_t parse_int(const std::string& flag, const std::string& text, std::int64_t lo,
                       std::int64_t hi) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos ||
      text.size() > 12) {
    throw UsageError("--" + flag + " needs a whole number");
  }
  std::int64_t n = std::stoll(text);
  if (n < lo || n > hi)
    throw UsageError("--" + flag + " must be between " + std::to_string(lo) + " and " +
                     std::to_string(hi));
  return n;
}

void expect_positionals(const Parsed& p, std::size_t n, const char* what) {
  if (p.positional.size() != n) throw UsageError(std::string("expected ") + what);
}

json::array to_array(const std::vector<std::string>& v) {
  json::array a;
  for (const auto& s : v) a.emplace_back(s);
  return a;
}

std::optional<McpClient> mcp_client_of(const Parsed& p, const std::string& flag) {
  auto name = p.one(flag);
  if (!name) return std::nullopt;
  auto client = parse_mcp_client(*name);
  if (!client) throw UsageError("--" + flag + " must be " + std::string(kMcpClientNames));
  return client;
}

// `job create|renew --mcp-config CLIENT`: the client's set-up on stdout (so it can go straight
// into a file or a shell), what was made on stderr.
void print_mcp_config(McpClient client, const json::value& created) {
  const auto& o = created.as_object();
  std::cout << mcp_config_snippet(client, o.at("mcp_url").as_string(), o.at("token").as_string());
  std::string tools;
  for (const auto& t : o.at("tools").as_array()) tools += " " + std::string(t.as_string());
  std::cerr << "toolwarden: job " << o.at("job_id").as_string().c_str() << " (generation "
            << o.at("generation").as_int64() << ", tools" << tools << ", expires "
            << o.at("expires_at").as_string().c_str() << "); `toolwarden job revoke "
            << o.at("job_id").as_string().c_str() << "` ends it\n";
}

int job_command(int argc, char** argv) {
  if (argc < 3 || std::strcmp(argv[2], "--help") == 0 || std::strcmp(argv[2], "-h") == 0) {
    std::cout << help_text("job");
    return argc < 3 ? 2 : 0;
  }
  const std::string sub = argv[2];
  const std::string topic = "job " + sub;
  if (sub == "create") {
    auto p =
        parse(argc, argv, 3,
              {"worktree", "access", "allow", "block", "command", "tool", "ttl", "mcp-config"}, {});
    if (p.help) return std::cout << help_text(topic), 0;
    expect_positionals(p, 0, "no positional arguments");
    const auto client = mcp_client_of(p, "mcp-config");
    auto worktree = p.one("worktree");
    if (!worktree) throw UsageError("--worktree DIR is required");
    json::object params;
    params["worktree"] = std::filesystem::absolute(*worktree).lexically_normal().string();
    if (auto a = p.one("access")) {
      if (*a != "read" && *a != "write") throw UsageError("--access must be read or write");
      params["access"] = *a;
    }
    params["allowed_paths"] = to_array(p.all("allow"));
    params["blocked_paths"] = to_array(p.all("block"));
    params["commands"] = to_array(p.all("command"));
    params["tools"] = to_array(p.all("tool"));
    if (auto t = p.one("ttl")) params["ttl_s"] = parse_int("ttl", *t, 1, 366LL * 86400);
    json::value created = admin_call(admin_socket(p), "job.create", params);
    client ? print_mcp_config(*client, created) : print_json(created);
    return 0;
  }
  if (sub == "revoke" || sub == "renew" || sub == "show") {
    auto p =
        parse(argc, argv, 3,
              sub == "renew" ? std::vector<std::string>{"mcp-config"} : std::vector<std::string>{},
              {"json"});
    if (p.help) return std::cout << help_text(topic), 0;
    expect_positionals(p, 1, "one JOB_ID");
    const auto client = mcp_client_of(p, "mcp-config");
    json::object params{{"job_id", p.positional[0]}};
    const char* method = sub == "revoke" ? "job.revoke" : sub == "renew" ? "job.renew" : "job.get";
    json::value result = admin_call(admin_socket(p), method, params);
    client ? print_mcp_config(*client, result) : print_json(result);
    return 0;
  }
  if (sub == "list") {
    auto p = parse(argc, argv, 3, {}, {"json"});
    if (p.help) return std::cout << help_text(topic), 0;
    expect_positionals(p, 0, "no positional arguments");
    json::value jobs = admin_call(admin_socket(p), "job.list", {});
    if (p.on("json")) {
      print_json(jobs);
      return 0;
    }
    std::printf("%-21s %-8s %-6s %-21s %s\n", "JOB_ID", "STATE", "ACCESS", "EXPIRES", "WORKTREE");
    for (const auto& j : jobs.as_array()) {
      const auto& o = j.as_object();
      std::printf("%-21s %-8s %-6s %-21s %s\n", o.at("job_id").as_string().c_str(),
                  o.at("state").as_string().c_str(), o.at("access").as_string().c_str(),
                  o.at("expires_at").as_string().c_str(), o.at("worktree").as_string().c_str());
    }
    return 0;
  }
  throw UsageError("unknown job subcommand '" + sub + "'");
}

// Custom tools (SPEC §11): what is found where, and trust in a worktree's tools.
int tools_command(int argc, char** argv) {
  if (argc < 3 || std::strcmp(argv[2], "--help") == 0 || std::strcmp(argv[2], "-h") == 0) {
    std::cout << help_text("tools");
    return argc < 3 ? 2 : 0;
  }
  const std::string sub = argv[2];
  const std::string topic = "tools " + sub;
  if (sub == "list") {
    auto p = parse(argc, argv, 3, {"worktree"}, {"json"});
    if (p.help) return std::cout << help_text(topic), 0;
    expect_positionals(p, 0, "no positional arguments");
    json::object params;
    if (auto w = p.one("worktree"))
      params["worktree"] = std::filesystem::absolute(*w).lexically_normal().string();
    json::value r = admin_call(admin_socket(p), "tools.list", params);
    if (p.on("json")) {
      print_json(r);
      return 0;
    }
    std::printf("%-24s %-8s %-10s %-16s %s\n", "NAME", "SCOPE", "TRUST", "HASH", "DESCRIPTION");
    for (const auto& t : r.as_object().at("tools").as_array()) {
      const auto& o = t.as_object();
      const auto* desc = o.if_contains("description");
      const auto* why = o.if_contains("reason");
      std::string text = desc != nullptr  ? std::string(desc->as_string())
                         : why != nullptr ? "invalid: " + std::string(why->as_string())
                                          : std::string();
      if (o.contains("shadowed")) text = "(shadowed by the user's tool) " + text;
      std::printf("%-24s %-8s %-10s %-16s %s\n", o.at("name").as_string().c_str(),
                  o.at("scope").as_string().c_str(), o.at("trust").as_string().c_str(),
                  std::string(o.at("hash").as_string()).substr(0, 16).c_str(), text.c_str());
    }
    return 0;
  }
  if (sub == "trust") {
    auto p = parse(argc, argv, 3, {}, {"json"});
    if (p.help) return std::cout << help_text(topic), 0;
    expect_positionals(p, 2, "WORKTREE NAME");
    json::object params{
        {"worktree", std::filesystem::absolute(p.positional[0]).lexically_normal().string()},
        {"name", p.positional[1]}};
    print_json(admin_call(admin_socket(p), "tools.trust", params));
    return 0;
  }
  throw UsageError("unknown tools subcommand '" + sub + "'");
}

// Snapshots (SPEC §12): `snapshot capture --worktree DIR`, a client of snapshot.capture.
int snapshot_command(int argc, char** argv) {
  if (argc < 3 || std::strcmp(argv[2], "--help") == 0 || std::strcmp(argv[2], "-h") == 0) {
    std::cout << help_text("snapshot");
    return argc < 3 ? 2 : 0;
  }
  const std::string sub = argv[2];
  if (sub != "capture") throw UsageError("unknown snapshot subcommand '" + sub + "'");
  auto p = parse(argc, argv, 3, {"worktree"}, {});
  if (p.help) return std::cout << help_text("snapshot capture"), 0;
  expect_positionals(p, 0, "no positional arguments");
  auto worktree = p.one("worktree");
  if (!worktree) throw UsageError("--worktree DIR is required");
  json::object params{
      {"worktree", std::filesystem::absolute(*worktree).lexically_normal().string()}};
  print_json(admin_call(admin_socket(p), "snapshot.capture", params));
  return 0;
}

// Probes (SPEC §12): `probe plan --file PLAN.json|-`, `probe run ID`, `probe show ID`.
int probe_command(int argc, char** argv) {
  if (argc < 3 || std::strcmp(argv[2], "--help") == 0 || std::strcmp(argv[2], "-h") == 0) {
    std::cout << help_text("probe");
    return argc < 3 ? 2 : 0;
  }
  const std::string sub = argv[2];
  const std::string topic = "probe " + sub;
  if (sub == "plan") {
    auto p = parse(argc, argv, 3, {"file"}, {});
    if (p.help) return std::cout << help_text(topic), 0;
    expect_positionals(p, 0, "no positional arguments");
    auto file = p.one("file");
    if (!file) throw UsageError("--file PLAN.json (or - for standard input) is required");
    std::string text;
    std::ifstream in;
    std::istream* src = &std::cin;
    if (*file != "-") {
      in.open(*file, std::ios::binary);
      if (!in) throw UsageError("cannot read " + *file);
      src = &in;
    }
    char buf[65536];
    while (src->read(buf, sizeof buf) || src->gcount() > 0) {
      text.append(buf, static_cast<std::size_t>(src->gcount()));
      if (text.size() > (16u << 20)) throw UsageError("the plan is larger than 16 MiB");
    }
    json::error_code ec;
    json::value plan = json::parse(text, ec);
    if (ec || !plan.is_object()) throw UsageError("the plan must be one JSON object");
    print_json(admin_call(admin_socket(p), "probe.plan", plan.get_object()));
    return 0;
  }
  if (sub == "run" || sub == "show") {
    auto p = parse(argc, argv, 3, {}, {});
    if (p.help) return std::cout << help_text(topic), 0;
    expect_positionals(p, 1, "one PROBE_ID");
    const auto socket = admin_socket(p);
    json::object params{{"probe_id", p.positional[0]}};
    if (sub == "show") {
      print_json(admin_call(socket, "probe.get", params));
      return 0;
    }
    // On a terminal, a status line from probe.progress on a second connection while the run's
    // own call blocks; erased before the result is printed.
    json::value result;
    {
      PolledStatusLine status(
          ::isatty(STDERR_FILENO) == 1, "toolwarden probe run",
          [&socket, &params]() -> std::optional<StatusSample> {
            const auto progress = admin_call(socket, "probe.progress", params);
            const auto& runs = progress.at("runs").as_array();
            if (runs.empty()) return std::nullopt;
            const auto& run = runs.front().as_object();
            return StatusSample{
                std::chrono::milliseconds(run.at("elapsed_ms").to_number<std::int64_t>()),
                run.at("output_bytes").to_number<std::uint64_t>()};
          });
      result = admin_call(socket, "probe.run", params);
    }
    print_json(result);
    return 0;
  }
  throw UsageError("unknown probe subcommand '" + sub + "'");
}

// Audit runs through the daemon when it is up; otherwise it reads the store directly, so a
// stopped daemon's log can still be inspected and verified.
int audit_command(int argc, char** argv) {
  const bool verify = argc >= 3 && std::strcmp(argv[2], "verify") == 0;
  auto p = verify ? parse(argc, argv, 3, {}, {"json"})
                  : parse(argc, argv, 2, {"job", "limit"}, {"json"});
  if (p.help) return std::cout << help_text(verify ? "audit verify" : "audit"), 0;
  expect_positionals(p, 0, "no positional arguments");
  Dirs dirs = resolve_dirs(dirs_of(p));
  json::object params;
  if (auto j = p.one("job")) params["job_id"] = *j;
  if (auto l = p.one("limit")) params["limit"] = parse_int("limit", *l, 1, 100000);
  json::value result;
  const char* method = verify ? "audit.verify" : "audit.list";
  try {
    result = admin_call(dirs.admin_socket(), method, params);
  } catch (const DaemonUnreachable&) {
    if (!std::filesystem::exists(dirs.store_file())) throw;
    store::Store st(dirs.store_file());
    if (verify) {
      auto r = st.verify_chain();
      json::object o{{"ok", r.ok}, {"events", r.events}};
      if (!r.ok) {
        o["first_bad_event"] = *r.first_bad_event;
        o["reason"] = r.reason;
      }
      result = std::move(o);
    } else {
      json::array out;
      std::optional<std::string> job;
      if (auto j = p.one("job")) job = *j;
      std::int64_t limit = params.contains("limit") ? params["limit"].as_int64() : 100;
      for (const auto& e : st.list_events(job, limit)) out.push_back(event_to_json(e));
      result = std::move(out);
    }
  }
  if (verify) {
    print_json(result);
    const bool ok = result.as_object().at("ok").as_bool();
    if (!ok) {
      std::cerr << "audit chain broken at event "
                << json::serialize(result.as_object().at("first_bad_event")) << ": "
                << result.as_object().at("reason").as_string().c_str() << "\n";
    }
    return ok ? 0 : 1;
  }
  if (p.on("json")) {
    print_json(result);
    return 0;
  }
  for (const auto& e : result.as_array()) {
    const auto& o = e.as_object();
    std::cout << o.at("id").as_int64() << " " << o.at("ts").as_string().c_str() << " "
              << (o.at("job_id").is_null() ? std::string("-")
                                           : std::string(o.at("job_id").as_string()))
              << " "
              << (o.at("seq").is_null() ? std::string("-") : std::to_string(o.at("seq").as_int64()))
              << " " << o.at("type").as_string().c_str() << " " << json::serialize(o.at("data"))
              << "\n";
  }
  return 0;
}

// The token is not recoverable from the job (the daemon keeps a digest), and a command-line
// argument would show in other users' `ps`: it comes from $TOOLWARDEN_TOKEN or a file.
std::string token_for_mcp_config(const Parsed& p) {
  std::string token;
  if (auto file = p.one("token-file")) {
    if (*file == "-") {
      std::getline(std::cin, token);
    } else {
      std::ifstream in(*file);
      if (!in) throw std::runtime_error("cannot read " + *file);
      std::getline(in, token);
    }
  } else if (const char* env = std::getenv("TOOLWARDEN_TOKEN"); env != nullptr) {
    token = env;
  } else {
    throw UsageError(
        "no token: set $TOOLWARDEN_TOKEN or pass --token-file FILE (the daemon keeps only a "
        "digest; `job create --mcp-config` and `job renew --mcp-config` print it with a new one)");
  }
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (!looks_like_token(token))
    throw UsageError("that is not a toolwarden job token (43 characters of A-Z a-z 0-9 - _)");
  return token;
}

int mcp_config_command(int argc, char** argv) {
  auto p = parse(argc, argv, 2, {"client", "token-file"}, {});
  if (p.help) return std::cout << help_text("mcp-config"), 0;
  expect_positionals(p, 1, "one JOB_ID");
  const auto client = mcp_client_of(p, "client");
  if (!client) throw UsageError("--client " + std::string(kMcpClientNames) + " is required");
  const std::string token = token_for_mcp_config(p);
  json::value job = admin_call(admin_socket(p), "job.get", {{"job_id", p.positional[0]}});
  const auto& o = job.as_object();
  if (o.at("state").as_string() != "live") {
    throw std::runtime_error("job " + p.positional[0] + " is " +
                             std::string(o.at("state").as_string()) +
                             ": no token of it is accepted any more");
  }
  std::cout << mcp_config_snippet(*client, o.at("mcp_url").as_string(), token);
  return 0;
}

int serve_command(int argc, char** argv) {
  auto p = parse(argc, argv, 2, {"listen", "log-level"}, {});
  if (p.help) return std::cout << help_text("serve"), 0;
  expect_positionals(p, 0, "no positional arguments");
  return serve(ServeOptions{dirs_of(p), p.one("listen"), p.one("log-level")});
}

int run_command(int argc, char** argv) {
  auto p = parse(argc, argv, 2, {"worktree", "timeout", "memory", "output-bytes"}, {"writable"});
  if (p.help) return std::cout << help_text("run"), 0;
  if (!p.positional.empty()) throw UsageError("put the program after `--`");
  if (p.rest.empty())
    throw UsageError("no program given: toolwarden run [OPTIONS] -- PROGRAM [ARG]...");
  RunOptions o;
  o.worktree = p.one("worktree").value_or("");
  o.writable = p.on("writable");
  if (auto t = p.one("timeout")) o.timeout_s = static_cast<int>(parse_int("timeout", *t, 1, 86400));
  if (auto m = p.one("memory"))
    o.memory_mb = static_cast<std::uint64_t>(parse_int("memory", *m, 16, 1 << 20));
  if (auto b = p.one("output-bytes"))
    o.output_bytes = static_cast<std::uint64_t>(parse_int("output-bytes", *b, 1, 1LL << 32));
  o.argv = p.rest;
  return run_sandboxed(o);
}

int doctor_command(int argc, char** argv) {
  auto p = parse(argc, argv, 2, {}, {"json"});
  if (p.help) return std::cout << help_text("doctor"), 0;
  expect_positionals(p, 0, "no positional arguments");
  int status = 2;
  auto report = doctor_report(&status);
  if (p.on("json")) {
    print_json(report);
  } else {
    std::cout << format_doctor(report);
  }
  return status;
}

}  // namespace

int run_cli(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << help_text("");
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::cout << help_text(argc >= 3 ? argv[2] : "");
    return 0;
  }
  if (cmd == "--version" || cmd == "version") {
    std::cout << "toolwarden " TOOLWARDEN_VERSION "\n";
    return 0;
  }
  try {
    if (cmd == "serve") return serve_command(argc, argv);
    if (cmd == "job") return job_command(argc, argv);
    if (cmd == "tools") return tools_command(argc, argv);
    if (cmd == "snapshot") return snapshot_command(argc, argv);
    if (cmd == "probe") return probe_command(argc, argv);
    if (cmd == "audit") return audit_command(argc, argv);
    if (cmd == "run") return run_command(argc, argv);
    if (cmd == "doctor") return doctor_command(argc, argv);
    if (cmd == "mcp-config") return mcp_config_command(argc, argv);
    throw UsageError("unknown command '" + cmd + "'");
  } catch (const UsageError& e) {
    std::cerr << "toolwarden: " << e.what() << "\n(see `toolwarden " << cmd << " --help`)\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "toolwarden " << cmd << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace toolwarden::daemon
