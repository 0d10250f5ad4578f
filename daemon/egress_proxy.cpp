#include "daemon/egress_proxy.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <exception>
#include <list>
#include <utility>
#include <vector>

#include "daemon/log.hpp"

namespace toolwarden::daemon {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;
using Strand = asio::strand<asio::any_io_executor>;
using namespace std::chrono_literals;

namespace {

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t kChunk = 64 * 1024;        // per direction and tunnel: 4 MiB at 32 tunnels
constexpr std::size_t kMaxEarlyData = 8 * 1024;  // bytes a client may send after the head
constexpr std::size_t kMaxDrain = 64 * 1024;     // read after a refusal so it is not reset
constexpr auto kDrainTime = 1s;
constexpr auto kAcceptBackoff = 50ms;

policy::IpAddress to_policy(const asio::ip::address& a) {
  if (a.is_v4()) return policy::IpAddress::from_v4(a.to_v4().to_bytes());
  return policy::IpAddress::from_v6(a.to_v6().to_bytes());
}

asio::ip::address to_asio(const policy::IpAddress& a) {
  if (a.v6) return asio::ip::address_v6(a.bytes);
  return asio::ip::address_v4({a.bytes[0], a.bytes[1], a.bytes[2], a.bytes[3]});
}

// The host of an absolute-form target (`http://host:80/x`), for the audit of a refused GET.
std::string host_of_absolute_form(std::string_view target) {
  auto scheme = target.find("://");
  if (scheme == target.npos) return "";
  auto rest = target.substr(scheme + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (auto at = rest.rfind('@'); at != rest.npos) rest.remove_prefix(at + 1);
  if (rest.starts_with('[')) return std::string(rest.substr(0, rest.find(']') + 1));
  return policy::normalize_host_name(rest.substr(0, rest.find(':')));
}

// One client connection from accept to close. Shared by its session, its watchdog and its
// two pumps; the proxy's registry holds it weakly so that stop() can close it. Strand-owned.
struct Connection {
  enum class Phase { head, connecting, replying, relaying };

  Connection(const Strand& strand, tcp::socket socket)
      : client(std::move(socket)),
        upstream(strand),
        resolver(strand),
        watchdog(strand),
        wake(strand, Clock::time_point::max()) {}

  // The one deadline of the current phase; the watchdog acts on it.
  void set_deadline(Phase p, Clock::time_point t) {
    phase = p;
    const bool sooner = t < deadline;
    deadline = t;
    if (sooner) watchdog.cancel();  // re-arm for the earlier time
  }
  // An idle tunnel's deadline moves only later, so no timer is touched per chunk.
  void touch(std::chrono::milliseconds idle) { deadline = Clock::now() + idle; }

  void close(const char* cause) {
    if (closed) return;
    closed = true;
    closed_by = cause;
    error_code ec;
    client.close(ec);
    upstream.close(ec);
    resolver.cancel();
    watchdog.cancel();
    wake.cancel();
  }
  // A connect deadline ends the attempt but keeps the client, which still gets its 502.
  void abort_connect() {
    timed_out = true;
    error_code ec;
    upstream.close(ec);
    resolver.cancel();
    wake.cancel();
  }

  tcp::socket client;
  tcp::socket upstream;
  tcp::resolver resolver;
  asio::steady_timer watchdog;
  asio::steady_timer wake;  // never expires: cancelled when a resolve or a pump finishes
  Phase phase = Phase::head;
  Clock::time_point deadline = Clock::time_point::max();
  const Clock::time_point started = Clock::now();
  bool closed = false;
  const char* closed_by = "";
  bool timed_out = false;
  int open_pumps = 0;
  bool resolved = false;
  error_code resolve_error;
  tcp::resolver::results_type results;
  EgressEvent event;
};

asio::awaitable<void> watch(std::shared_ptr<Connection> c) {
  while (!c->closed) {
    c->watchdog.expires_at(c->deadline);
    co_await c->watchdog.async_wait(tuple_awaitable);
    if (c->closed || Clock::now() < c->deadline) continue;
    switch (c->phase) {
      case Connection::Phase::head:
        c->close("request head timeout");
        break;
      case Connection::Phase::connecting:
        c->abort_connect();
        c->deadline = Clock::time_point::max();  // the session sets the next one
        break;
      case Connection::Phase::replying:
        c->close("reply timeout");
        break;
      case Connection::Phase::relaying:
        c->close("idle timeout");
        break;
    }
  }
}

// Copies one direction of a tunnel until end of stream, then half-closes the other side.
asio::awaitable<void> pump(std::shared_ptr<Connection> c, tcp::socket& from, tcp::socket& to,
                           std::uint64_t& counter, std::chrono::milliseconds idle) {
  std::vector<char> chunk(kChunk);
  for (;;) {
    auto [rec, n] = co_await from.async_read_some(asio::buffer(chunk), tuple_awaitable);
    if (n > 0) {
      auto [wec, wn] =
          co_await asio::async_write(to, asio::buffer(chunk.data(), n), tuple_awaitable);
      counter += wn;
      c->touch(idle);
      if (wec) {
        c->close("connection error");
        break;
      }
    }
    if (rec == asio::error::eof) {
      error_code ec;
      to.shutdown(tcp::socket::shutdown_send, ec);
      break;
    }
    if (rec) {
      c->close("connection error");
      break;
    }
  }
  if (--c->open_pumps == 0) c->wake.cancel();
}

struct Refusal {
  int status;
  std::string_view phrase;
  std::string body;
  std::string_view extra_headers = {};
};

}  // namespace

struct EgressProxy::State {
  State(const asio::any_io_executor& ex, EgressProxyConfig cfg)
      : strand(asio::make_strand(ex)), acceptor(strand), config(std::move(cfg)) {}

  void stop(std::function<void()> cb) {
    if (cb) on_drained.push_back(std::move(cb));
    if (!stopping) {
      stopping = true;
      error_code ec;
      acceptor.close(ec);
      for (auto& weak : connections) {
        if (auto c = weak.lock()) c->close("proxy stopped");
      }
    }
    notify_if_drained();
  }

  void notify_if_drained() {
    if (!stopping || sessions > 0) return;
    auto callbacks = std::exchange(on_drained, {});
    for (auto& cb : callbacks) cb();
  }

  void emit(Connection& c, EgressEvent::Decision decision, std::string reason) {
    c.event.decision = decision;
    c.event.reason = std::move(reason);
    c.event.duration =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - c.started);
    if (!config.audit) return;
    try {
      config.audit(c.event);
    } catch (const std::exception& e) {
      log_error("egress.audit_failed", {{"error", e.what()}});
    }
  }

  asio::awaitable<void> accept_loop(std::shared_ptr<State> self);
  // `self` keeps this State alive for as long as the session's frame exists.
  asio::awaitable<void> session(std::shared_ptr<State> self, std::shared_ptr<Connection> c);
  asio::awaitable<void> refuse(std::shared_ptr<Connection> c, const Refusal& r);

  Strand strand;
  tcp::acceptor acceptor;
  EgressProxyConfig config;
  error_code adopt_error;
  bool started = false;
  bool stopping = false;
  std::size_t sessions = 0;  // accepted connections not yet ended
  std::size_t tunnels = 0;   // past the decision: resolving, connecting or relaying
  std::list<std::weak_ptr<Connection>> connections;
  std::vector<std::function<void()>> on_drained;
};

asio::awaitable<void> EgressProxy::State::accept_loop(std::shared_ptr<State> self) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(tuple_awaitable);
    if (stopping) co_return;
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      log_warn("egress.accept_failed", {{"error", ec.message()}});
      asio::steady_timer backoff(strand, kAcceptBackoff);  // EMFILE and friends: no spinning
      co_await backoff.async_wait(tuple_awaitable);
      continue;
    }
    // Connections still reading their head may hold as many slots again as tunnels; past
    // that a flood is closed unread.
    if (sessions >= 2 * config.limits.max_tunnels) {
      log_debug("egress.connection_dropped", {{"sessions", std::to_string(sessions)}});
      continue;
    }
    auto c = std::make_shared<Connection>(strand, std::move(socket));
    auto it = connections.insert(connections.end(), c);
    ++sessions;
    asio::co_spawn(strand, watch(c), asio::detached);
    asio::co_spawn(strand, session(self, c), [self, it](std::exception_ptr e) {
      self->connections.erase(it);
      --self->sessions;
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          log_error("egress.session_failed", {{"error", ex.what()}});
        }
      }
      self->notify_if_drained();
    });
  }
}

asio::awaitable<void> EgressProxy::State::refuse(std::shared_ptr<Connection> c, const Refusal& r) {
  std::string res = "HTTP/1.1 " + std::to_string(r.status) + " " + std::string(r.phrase) +
                    "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                    std::to_string(r.body.size()) + "\r\nConnection: close\r\n" +
                    std::string(r.extra_headers) + "\r\n" + r.body;
  c->set_deadline(Connection::Phase::replying, Clock::now() + config.limits.head_timeout);
  auto [wec, wn] = co_await asio::async_write(c->client, asio::buffer(res), tuple_awaitable);
  if (!wec) {
    // Half-close, then read what the client still sends, so that closing with unread bytes
    // does not reset the connection before the client has read the reply.
    error_code ec;
    c->client.shutdown(tcp::socket::shutdown_send, ec);
    c->set_deadline(Connection::Phase::replying, Clock::now() + kDrainTime);
    std::vector<char> sink(4096);
    std::size_t drained = 0;
    while (!c->closed && drained < kMaxDrain) {
      auto [rec, n] = co_await c->client.async_read_some(asio::buffer(sink), tuple_awaitable);
      drained += n;
      if (rec) break;
    }
  }
  c->close("refused");
}

asio::awaitable<void> EgressProxy::State::session([[maybe_unused]] std::shared_ptr<State> self,
                                                  std::shared_ptr<Connection> c) {
  using Decision = EgressEvent::Decision;
  const EgressLimits& limits = config.limits;
  c->set_deadline(Connection::Phase::head, Clock::now() + limits.head_timeout);

  beast::flat_buffer buffer(limits.max_head_bytes + kMaxEarlyData);
  http::request_parser<http::empty_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(limits.max_head_bytes));
  auto [hec, hn] = co_await http::async_read_header(c->client, buffer, parser, tuple_awaitable);
  if (c->closed) co_return;  // head timeout or stop(): no request to answer
  if (hec == http::error::header_limit || hec == http::error::buffer_overflow) {
    Refusal r{431, "Request Header Fields Too Large",
              "request head exceeds " + std::to_string(limits.max_head_bytes) + " bytes\n"};
    emit(*c, Decision::denied, "request head too large");
    co_await refuse(c, r);
    co_return;
  }
  if (hec == http::error::end_of_stream || hec == asio::error::eof ||
      hec == asio::error::connection_reset) {
    co_return;  // the client went away without asking anything
  }
  if (hec) {
    Refusal r{400, "Bad Request", "malformed request head\n"};
    emit(*c, Decision::denied, "malformed request head");
    co_await refuse(c, r);
    co_return;
  }

  const auto& req = parser.get();
  if (req.method() != http::verb::connect) {
    c->event.host = host_of_absolute_form(req.target());
    Refusal r{405, "Method Not Allowed",
              "only CONNECT is served by this proxy: use an https:// URL\n", "Allow: CONNECT\r\n"};
    emit(*c, Decision::denied, "method " + std::string(req.method_string()) + " is not served");
    co_await refuse(c, r);
    co_return;
  }
  auto target = policy::parse_connect_target(req.target());
  const bool has_body =
      req.count(http::field::content_length) > 0 || req.count(http::field::transfer_encoding) > 0;
  if (!target || has_body || (req.version() != 10 && req.version() != 11)) {
    Refusal r{400, "Bad Request", "malformed CONNECT request: want CONNECT host:port HTTP/1.1\n"};
    emit(*c, Decision::denied, "malformed CONNECT request");
    co_await refuse(c, r);
    co_return;
  }

  auto decision = policy::decide_host(config.allowlist, target->host, target->port);
  c->event.host = decision.host;
  c->event.port = target->port;
  if (!decision.allowed) {
    Refusal r{403, "Forbidden", decision.reason + "\n"};
    emit(*c, Decision::denied, decision.reason);
    co_await refuse(c, r);
    co_return;
  }
  if (tunnels >= limits.max_tunnels) {
    std::string reason = "too many tunnels (at most " + std::to_string(limits.max_tunnels) + ")";
    Refusal r{503, "Service Unavailable", reason + "\n"};
    emit(*c, Decision::denied, reason);
    co_await refuse(c, r);
    co_return;
  }
  ++tunnels;
  struct TunnelSlot {
    std::size_t& count;
    ~TunnelSlot() { --count; }
  } slot{tunnels};

  // Candidate addresses, each decided (SPEC §11: private and link-local ranges refused).
  c->set_deadline(Connection::Phase::connecting, Clock::now() + limits.connect_timeout);
  std::vector<tcp::endpoint> candidates;
  std::string refusal;
  if (decision.literal) {
    candidates.emplace_back(to_asio(*decision.literal), target->port);
  } else if (auto it = config.overrides.find(decision.host); it != config.overrides.end()) {
    const EgressRoute& route = it->second;
    candidates.emplace_back(route.address, route.port != 0 ? route.port : target->port);
  } else {
    std::weak_ptr<Connection> weak = c;
    c->resolver.async_resolve(decision.host, std::to_string(target->port),
                              tcp::resolver::numeric_service,
                              [weak](error_code ec, tcp::resolver::results_type results) {
                                auto conn = weak.lock();
                                if (!conn) return;
                                conn->resolved = true;
                                conn->resolve_error = ec;
                                conn->results = std::move(results);
                                conn->wake.cancel();
                              });
    // getaddrinfo cannot be interrupted: the session waits for its answer or its deadline,
    // whichever comes first, and an answer after that lands on an expired weak pointer.
    while (!c->resolved && !c->closed && !c->timed_out) {
      co_await c->wake.async_wait(tuple_awaitable);
    }
    if (c->closed) {
      emit(*c, Decision::failed, std::string("proxy stopped while resolving"));
      co_return;
    }
    if (!c->resolved || c->resolve_error) {
      std::string reason =
          c->timed_out ? "resolving " + decision.host + " timed out"
                       : "cannot resolve " + decision.host + ": " + c->resolve_error.message();
      Refusal r{502, "Bad Gateway", reason + "\n"};
      emit(*c, Decision::failed, reason);
      co_await refuse(c, r);
      co_return;
    }
    for (const auto& entry : c->results) {
      auto address = to_policy(entry.endpoint().address());
      auto verdict = policy::decide_address(config.allowlist, address, policy::AddressSource::dns);
      if (verdict.allowed) {
        candidates.push_back(entry.endpoint());
      } else if (refusal.empty()) {
        refusal = verdict.reason;
        c->event.address = address.to_string();
      }
    }
    if (candidates.empty()) {
      std::string reason = decision.host + " resolves only to refused addresses (" +
                           (refusal.empty() ? std::string("none") : refusal) + ")";
      Refusal r{403, "Forbidden", reason + "\n"};
      emit(*c, Decision::denied, reason);
      co_await refuse(c, r);
      co_return;
    }
  }

  error_code connect_error;
  bool connected = false;
  for (const auto& endpoint : candidates) {
    if (c->closed || c->timed_out) break;
    error_code ec;
    c->upstream.close(ec);
    auto [cec] = co_await c->upstream.async_connect(endpoint, tuple_awaitable);
    if (!cec) {
      connected = true;
      c->event.address = endpoint.address().to_string();
      break;
    }
    connect_error = cec;
  }
  if (c->closed) {
    emit(*c, Decision::failed, std::string("proxy stopped while connecting"));
    co_return;
  }
  if (!connected) {
    std::string reason = "cannot connect to " + decision.host + ": " +
                         (c->timed_out ? std::string("timed out") : connect_error.message());
    Refusal r{502, "Bad Gateway", reason + "\n"};
    emit(*c, Decision::failed, reason);
    co_await refuse(c, r);
    co_return;
  }

  // Established: the reply, then whatever the client sent early, then both directions.
  static constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection Established\r\n\r\n";
  c->set_deadline(Connection::Phase::replying, Clock::now() + limits.head_timeout);
  auto [wec, wn] =
      co_await asio::async_write(c->client, asio::buffer(kEstablished), tuple_awaitable);
  if (!wec && buffer.size() > 0) {
    auto [eec, en] = co_await asio::async_write(c->upstream, buffer.data(), tuple_awaitable);
    c->event.bytes_up += en;
    wec = eec;
  }
  if (wec || c->closed) {
    c->close("connection error");
    emit(*c, Decision::allowed, decision.reason + "; closed: " + c->closed_by);
    co_return;
  }
  c->set_deadline(Connection::Phase::relaying, Clock::now() + limits.idle_timeout);
  c->open_pumps = 2;
  asio::co_spawn(strand, pump(c, c->client, c->upstream, c->event.bytes_up, limits.idle_timeout),
                 asio::detached);
  asio::co_spawn(strand, pump(c, c->upstream, c->client, c->event.bytes_down, limits.idle_timeout),
                 asio::detached);
  while (c->open_pumps > 0) co_await c->wake.async_wait(tuple_awaitable);
  c->close("end of stream");
  emit(*c, Decision::allowed, decision.reason + "; closed: " + c->closed_by);
}

std::string_view to_string(EgressEvent::Decision d) {
  switch (d) {
    case EgressEvent::Decision::allowed:
      return "allowed";
    case EgressEvent::Decision::denied:
      return "denied";
    case EgressEvent::Decision::failed:
      return "failed";
  }
  return "unknown";
}

EgressProxy::EgressProxy(asio::any_io_executor executor, int listening_fd, EgressProxyConfig config)
    : state_(std::make_shared<State>(executor, std::move(config))) {
  error_code& ec = state_->adopt_error;
  if (listening_fd < 0) {
    ec = asio::error::bad_descriptor;
    return;
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(listening_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ec.assign(errno, boost::system::system_category());
    ::close(listening_fd);
    return;
  }
  if (addr.ss_family != AF_INET && addr.ss_family != AF_INET6) {
    ec = asio::error::address_family_not_supported;
    ::close(listening_fd);
    return;
  }
  state_->acceptor.assign(addr.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), listening_fd, ec);
  if (ec) {
    ::close(listening_fd);
    return;
  }
  // From here the acceptor owns the fd. It must be a listening stream socket.
  int type = 0;
  int listening = 0;
  socklen_t type_len = sizeof type;
  socklen_t listening_len = sizeof listening;
  const int fd = state_->acceptor.native_handle();
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) != 0 || type != SOCK_STREAM ||
      ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &listening_len) != 0 ||
      listening == 0) {
    ec = asio::error::invalid_argument;
    error_code ignored;
    state_->acceptor.close(ignored);
    return;
  }
  port_ = state_->acceptor.local_endpoint(ec).port();
  if (ec) {
    error_code ignored;
    state_->acceptor.close(ignored);
  }
}

EgressProxy::~EgressProxy() { stop(); }

error_code EgressProxy::start() {
  if (state_->adopt_error) return state_->adopt_error;
  asio::dispatch(state_->strand, [st = state_] {
    if (st->started || st->stopping) return;
    st->started = true;
    asio::co_spawn(st->strand, st->accept_loop(st), asio::detached);
  });
  return {};
}

void EgressProxy::stop(std::function<void()> on_drained) {
  asio::dispatch(state_->strand,
                 [st = state_, cb = std::move(on_drained)]() mutable { st->stop(std::move(cb)); });
}

}  // namespace toolwarden::daemon
