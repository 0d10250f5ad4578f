#include "daemon/serve.hpp"

#include <malloc.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/serialize.hpp>
#include <cstring>
#include <iostream>

#include "daemon/admin_api.hpp"
#include "daemon/admin_server.hpp"
#include "daemon/config.hpp"
#include "daemon/egress_routes.hpp"
#include "daemon/log.hpp"
#include "daemon/mcp_server.hpp"
#include "daemon/probes/probe_service.hpp"
#include "daemon/services.hpp"
#include "daemon/socket_activation.hpp"
#include "daemon/tools/builtin.hpp"
#include "daemon/tools/custom_tool.hpp"
#include "daemon/tools/probe_tools.hpp"
#include "sandbox/canary.hpp"
#include "sandbox/features.hpp"
#include "sandbox/supervisor.hpp"
#include "sandbox/unique_fd.hpp"
#include "store/clock.hpp"

namespace toolwarden::daemon {
namespace asio = boost::asio;
namespace json = boost::json;
using asio::ip::tcp;
using local = asio::local::stream_protocol;

bool parse_loopback_listen(const std::string& text, std::string* host, unsigned short* port) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  std::string h = text.substr(0, colon);
  std::string p = text.substr(colon + 1);
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos)
    return false;
  unsigned long n = std::stoul(p);
  if (n > 65535) return false;
  if (h == "127.0.0.1" || h == "localhost") {
    *host = "127.0.0.1";
  } else if (h == "[::1]") {
    *host = "::1";
  } else {
    return false;
  }
  *port = static_cast<unsigned short>(n);
  return true;
}

namespace {

// systemd's readiness protocol, without libsystemd: one datagram to $NOTIFY_SOCKET.
void notify_systemd(const char* message) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || (path[0] != '/' && path[0] != '@')) return;
  UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::size_t len = std::strlen(path);
  if (len >= sizeof addr.sun_path) return;
  std::memcpy(addr.sun_path, path, len);
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  ::sendto(fd.get(), message, std::strlen(message), MSG_NOSIGNAL,
           reinterpret_cast<sockaddr*>(&addr),
           static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len));
}

// A stale admin.sock of a dead daemon is removed; a live one means another daemon runs.
void claim_admin_socket(const std::filesystem::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (!S_ISSOCK(st.st_mode))
    throw std::runtime_error(path.string() + " exists and is not a socket");
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (fd && ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    throw std::runtime_error("another toolwarden daemon is serving " + path.string());
  }
  ::unlink(path.c_str());
}

}  // namespace

int serve(const ServeOptions& options) {
  // Freed memory stays with the allocator up to 8 MiB per arena. With glibc's default (128 KiB,
  // raised dynamically) a thread arena's top was handed back with madvise after many calls'
  // frees, and every madvise shot down the other threads' TLBs (IPIs): 9% of the CPU of
  // audited local_read under load. The fixed mmap threshold keeps a request's largest
  // buffers (bodies and files up to a few MiB) in the arenas too.
  ::mallopt(M_TRIM_THRESHOLD, 8 << 20);
  ::mallopt(M_MMAP_THRESHOLD, 4 << 20);
  // Before any thread exists (the egress proxy looks names up on Asio's resolver thread).
  if (!pin_host_lookups()) {
    std::cerr << "toolwarden serve: cannot restrict host lookups to /etc/hosts and DNS\n";
    return 1;
  }
  Dirs dirs;
  Config config;
  std::string host;
  unsigned short port = 0;
  try {
    dirs = resolve_dirs(options.dirs);
    config = load_config(dirs.config);
  } catch (const std::exception& e) {
    std::cerr << "toolwarden serve: " << e.what() << "\n";
    return 1;
  }
  LogLevel level = config.log_level.value_or(LogLevel::info);
  if (options.log_level && !parse_log_level(*options.log_level, &level)) {
    std::cerr << "toolwarden serve: --log-level must be debug, info, warn or error\n";
    return 2;
  }
  set_log_level(level);
  if (auto listen = options.listen ? options.listen : config.listen) {
    if (!parse_loopback_listen(*listen, &host, &port)) {
      std::cerr << "toolwarden serve: refusing to listen on '" << *listen
                << "': only 127.0.0.1:PORT, localhost:PORT or [::1]:PORT are allowed\n";
      return 2;
    }
  } else {
    host = "127.0.0.1";
  }
  // Under socket activation the passed socket is the MCP listener (and --listen is moot).
  std::string why_not_activated;
  std::optional<LoopbackListener> activated = take_activated_listener(&why_not_activated);
  if (!why_not_activated.empty()) {
    std::cerr << "toolwarden serve: refusing the socket-activated listener: " << why_not_activated
              << "\n";
    return 2;
  }

  try {
    prepare_runtime_dir(dirs.runtime);
    prepare_state_dir(dirs.state);
    claim_admin_socket(dirs.admin_socket());
  } catch (const std::exception& e) {
    std::cerr << "toolwarden serve: " << e.what() << "\n";
    return 1;
  }
  ::signal(SIGPIPE, SIG_IGN);

  JobRegistry jobs(config.max_concurrent_calls);
  auto sensitive = std::make_shared<policy::SensitiveNames>();
  for (const auto& extra : config.sensitive_names) sensitive->add(extra);
  auto readiness = std::make_shared<SandboxReadiness>();  // decided below, before serving
  const CustomToolEnv custom_env{dirs.state, sensitive, readiness};
  std::optional<store::Writer> writer;
  try {
    store::Store store(dirs.store_file());
    restore_jobs(store, jobs, custom_env);
    ProbeService::recover(store, dirs.state);  // reservations of runs a crash interrupted
    writer.emplace(std::move(store));
  } catch (const std::exception& e) {
    std::cerr << "toolwarden serve: " << e.what() << "\n";
    return 1;
  }

  std::string why;
  auto registry = policy::CommandRegistry::load(config.commands, &why);
  if (!registry) {
    std::cerr << "toolwarden serve: config " << dirs.config.string() << ": " << why << "\n";
    writer->stop();
    return 1;
  }
  auto commands = std::make_shared<const policy::CommandRegistry>(std::move(*registry));

  // The sandbox is proven before it is used (SPEC §8): missing kernel features or a canary a
  // sandboxed reader could see make every sandboxed tool answer SANDBOX_UNAVAILABLE.
  sandbox::Supervisor supervisor;
  if (const auto& f = sandbox::probe_features(); !f.sandbox_available()) {
    readiness->reason =
        "the sandbox is unavailable: missing " + f.missing_required() + " (see toolwarden doctor)";
  } else if (auto canary = sandbox::run_canary(supervisor, dirs.state); !canary.passed) {
    readiness->reason = "the sandbox failed its canary self-test: " + canary.detail;
  } else {
    readiness->ready = true;
  }
  if (readiness->ready) {
    log_info("sandbox.ready", {{"canary", "passed"}});
  } else {
    log_error("sandbox.refused", {{"why", readiness->reason}});
  }

  asio::io_context ioc(1);
  asio::thread_pool pool(2);
  Metrics metrics;
  ToolRegistry tools;
  register_builtin_tools(tools, sensitive, commands, readiness);
  std::shared_ptr<ProbeService> probes;
  try {
    probes = std::make_shared<ProbeService>(
        ProbeEnv{dirs.state, config.probe_policies, sensitive, readiness, config.max_file_bytes},
        *writer, pool);
  } catch (const std::exception& e) {
    std::cerr << "toolwarden serve: " << e.what() << "\n";
    writer->stop();
    return 1;
  }
  register_probe_tools(tools, probes);
  // Test and local-development hook: fixed answers for the egress proxy's name lookups.
  EgressResolveOverrides egress_overrides;
  if (const char* text = std::getenv(std::string(kEgressResolveEnv).c_str())) {
    std::string bad;
    auto parsed = parse_egress_resolve_overrides(text, &bad);
    if (!parsed) {
      std::cerr << "toolwarden serve: " << bad << "\n";
      writer->stop();
      return 2;
    }
    egress_overrides = std::move(*parsed);
  }
  Dispatcher dispatcher(*writer, pool, supervisor, jobs, metrics, tools, config,
                        std::move(egress_overrides));
  McpHandler mcp(dispatcher, jobs, tools);

  std::optional<McpServer> mcp_server;
  std::optional<AdminServer> admin_server;
  Services services{dirs,       config, *writer,   pool,       jobs, metrics, tools,
                    dispatcher, mcp,    *commands, custom_env, "",   0};
  services.probes = probes.get();
  try {
    tcp::acceptor acceptor(ioc);
    if (activated) {
      acceptor.assign(activated->ipv6 ? tcp::v6() : tcp::v4(), activated->fd.get());
      activated->fd.release();  // the acceptor owns it now
      host = activated->host;
      log_info("mcp.socket_activated", {{"port", std::to_string(activated->port)}});
    } else {
      tcp::endpoint ep(asio::ip::make_address(host), port);
      acceptor.open(ep.protocol());
      acceptor.set_option(tcp::acceptor::reuse_address(true));
      acceptor.bind(ep);
      acceptor.listen(asio::socket_base::max_listen_connections);
    }
    services.port = acceptor.local_endpoint().port();
    services.mcp_url = "http://" + (host == "::1" ? std::string("[::1]") : host) + ":" +
                       std::to_string(services.port) + "/mcp";
    mcp_server.emplace(services, std::move(acceptor));

    const mode_t old = ::umask(0177);  // the socket is born 0600: no window for other users
    local::acceptor admin(ioc, local::endpoint(dirs.admin_socket().string()));
    ::umask(old);
    ::chmod(dirs.admin_socket().c_str(), 0600);
    admin_server.emplace(services, std::move(admin));
  } catch (const std::exception& e) {
    std::cerr << "toolwarden serve: cannot listen: " << e.what() << "\n";
    writer->stop();
    return 1;
  }

  // Caught from here on, before endpoint.json tells anyone we are up: a SIGTERM sent right
  // after that must be the graceful kind, not the default action.
  asio::signal_set signals(ioc, SIGTERM, SIGINT);

  json::object endpoint;
  endpoint["version"] = 1;
  endpoint["pid"] = ::getpid();
  endpoint["mcp_url"] = services.mcp_url;
  endpoint["admin_socket"] = dirs.admin_socket().string();
  endpoint["started_at"] = store::rfc3339(store::unix_now());
  try {
    write_file_atomically(dirs.endpoint_file(), json::serialize(endpoint) + "\n");
  } catch (const std::exception& e) {
    std::cerr << "toolwarden serve: " << e.what() << "\n";
    writer->stop();
    return 1;
  }

  asio::co_spawn(ioc, mcp_server->run(), asio::detached);
  asio::co_spawn(ioc, admin_server->run(), asio::detached);

  // SIGTERM/SIGINT are graceful: stop accepting, cancel calls, let answers go out, then
  // leave run() when nothing is left. A second signal or 10 s more stops hard. (The signal set
  // exists since before endpoint.json was written.)
  asio::steady_timer hard_stop(ioc);
  bool stopping = false;
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        if (stopping) {
          ioc.stop();
          return;
        }
        stopping = true;
        log_info("daemon.stopping", {{"signal", std::to_string(sig)}});
        notify_systemd("STOPPING=1");
        hard_stop.expires_after(std::chrono::seconds(10));
        hard_stop.async_wait([&](const boost::system::error_code& tec) {
          if (!tec) ioc.stop();
        });
        signals.async_wait(on_signal);
        // Cancel first, so busy connections answer CANCELLED and then close.
        jobs.cancel_all();
        probes->cancel_admin_runs();
        auto drained = std::make_shared<int>(2);
        auto one_drained = [&, drained] {
          if (--*drained == 0) {
            hard_stop.cancel();
            boost::system::error_code ignored;
            signals.cancel(ignored);
          }
        };
        mcp_server->stop(one_drained);
        admin_server->stop(one_drained);
      };
  signals.async_wait(on_signal);

  log_info("daemon.ready", {{"mcp_url", services.mcp_url},
                            {"admin_socket", dirs.admin_socket().string()},
                            {"endpoint", dirs.endpoint_file().string()},
                            {"pid", std::to_string(::getpid())}});
  notify_systemd("READY=1");

  // run() returns once the acceptors, connections and calls are gone and the drain
  // callback has cancelled the signal wait and the hard-stop timer.
  ioc.run();
  pool.join();
  writer->stop();
  ::unlink(dirs.endpoint_file().c_str());
  ::unlink(dirs.admin_socket().c_str());
  log_info("daemon.stopped");
  return 0;
}

}  // namespace toolwarden::daemon
