// The custom tools' CONNECT proxy (SPEC §11 `network`) in process: a loopback upstream, the
// proxy on its own listening fd, an io_context on a thread, raw blocking clients with
// receive timeouts (so a broken proxy fails a test instead of hanging it).
#include "daemon/egress_proxy.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace toolwarden::daemon {
namespace {
namespace asio = boost::asio;
using asio::ip::tcp;
using namespace std::chrono_literals;
using Decision = EgressEvent::Decision;

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr auto kWait = 5s;  // every blocking read and every wait gives up after this

class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// What the sandbox hands over: a TCP socket listening on 127.0.0.1, made elsewhere.
UniqueFd listening_socket(int backlog = 128) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::listen(fd.get(), backlog), 0);
  return fd;
}

// A blocking client whose reads time out.
class Client {
 public:
  explicit Client(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    timeval tv{static_cast<time_t>(kWait.count()), 0};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }

  bool connected() const { return connected_; }
  bool send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }
  void shutdown_send() { ::shutdown(fd_.get(), SHUT_WR); }

  // The response head (through the blank line); what follows stays buffered.
  std::string read_head() {
    for (;;) {
      if (auto end = pending_.find("\r\n\r\n"); end != std::string::npos) {
        std::string head = pending_.substr(0, end + 4);
        pending_.erase(0, end + 4);
        return head;
      }
      if (!fill()) return std::exchange(pending_, {});
    }
  }
  std::string read_exactly(std::size_t n) {
    while (pending_.size() < n && fill()) {
    }
    std::string out = pending_.substr(0, n);
    pending_.erase(0, out.size());
    return out;
  }
  // Everything until the peer closes. `closed` false when the read timed out instead.
  std::string read_to_end(bool* closed = nullptr) {
    while (fill()) {
    }
    if (closed) *closed = eof_;
    return std::exchange(pending_, {});
  }
  bool eof() const { return eof_; }
  // Reads and counts until the peer closes (throughput: no copies kept).
  std::size_t discard_to_end() {
    std::size_t total = std::exchange(pending_, {}).size();
    std::vector<char> buf(256 * 1024);
    for (;;) {
      ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), 0);
      if (n <= 0) return total;
      total += static_cast<std::size_t>(n);
    }
  }

 private:
  bool fill() {
    char buf[65536];
    ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
    if (n > 0) {
      pending_.append(buf, static_cast<std::size_t>(n));
      return true;
    }
    eof_ = n == 0 || errno == ECONNRESET;
    return false;
  }

  UniqueFd fd_;
  bool connected_ = false;
  bool eof_ = false;
  std::string pending_;
};

// Audit events arrive on the I/O thread; tests wait for them.
class AuditLog {
 public:
  void add(const EgressEvent& e) {
    std::lock_guard lock(m_);
    events_.push_back(e);
    cv_.notify_all();
  }
  // The n-th event (1-based), waiting for it.
  std::optional<EgressEvent> wait_for(std::size_t n) {
    std::unique_lock lock(m_);
    if (!cv_.wait_for(lock, kWait, [&] { return events_.size() >= n; })) return std::nullopt;
    return events_[n - 1];
  }
  std::size_t size() {
    std::lock_guard lock(m_);
    return events_.size();
  }
  std::vector<EgressEvent> all() {
    std::lock_guard lock(m_);
    return events_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<EgressEvent> events_;
};

// Upstream servers: echo (with half-close passed on) and a source of N bytes.
asio::awaitable<void> echo_session(tcp::socket s) {
  std::vector<char> buf(64 * 1024);
  for (;;) {
    auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), kTuple);
    if (n > 0) {
      auto [wec, wn] = co_await asio::async_write(s, asio::buffer(buf.data(), n), kTuple);
      if (wec) co_return;
    }
    if (ec == asio::error::eof) {
      boost::system::error_code ignored;
      s.shutdown(tcp::socket::shutdown_send, ignored);
      co_return;
    }
    if (ec) co_return;
  }
}

asio::awaitable<void> source_session(tcp::socket s, std::size_t total) {
  std::vector<char> buf(256 * 1024, 'x');
  while (total > 0) {
    std::size_t n = std::min(total, buf.size());
    auto [ec, wn] = co_await asio::async_write(s, asio::buffer(buf.data(), n), kTuple);
    if (ec) co_return;
    total -= n;
  }
  boost::system::error_code ignored;
  s.shutdown(tcp::socket::shutdown_send, ignored);
}

asio::awaitable<void> serve(tcp::acceptor& acceptor, std::size_t source_bytes) {
  for (;;) {
    auto [ec, s] = co_await acceptor.async_accept(kTuple);
    if (ec) co_return;
    if (source_bytes > 0) {
      asio::co_spawn(acceptor.get_executor(), source_session(std::move(s), source_bytes),
                     asio::detached);
    } else {
      asio::co_spawn(acceptor.get_executor(), echo_session(std::move(s)), asio::detached);
    }
  }
}

class EgressProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    echo_.open(tcp::v4());
    echo_.bind({asio::ip::address_v4::loopback(), 0});
    echo_.listen();
    asio::co_spawn(ioc_, serve(echo_, 0), asio::detached);
    io_thread_ = std::thread([this] { ioc_.run(); });
  }

  void TearDown() override {
    if (proxy_) {
      EXPECT_TRUE(stop_and_wait()) << "stop() never drained";
      proxy_.reset();
    }
    asio::post(ioc_, [this] {
      boost::system::error_code ec;
      echo_.close(ec);
      source_.close(ec);
    });
    work_.reset();
    ioc_.stop();
    io_thread_.join();
  }

  std::uint16_t echo_port() const { return echo_.local_endpoint().port(); }

  EgressProxyConfig config(std::vector<std::string> hosts, EgressResolveOverrides overrides = {}) {
    std::string err;
    auto list = policy::EgressAllowlist::from_hosts(hosts, &err);
    EXPECT_TRUE(list.has_value()) << err;
    EgressProxyConfig cfg;
    cfg.allowlist = list.value_or(policy::EgressAllowlist{});
    cfg.overrides = std::move(overrides);
    cfg.audit = [this](const EgressEvent& e) { audit_.add(e); };
    return cfg;
  }

  // The usual setup: api.test.example listed and routed to the echo server.
  EgressProxyConfig echo_config() {
    EgressResolveOverrides routes;
    routes["api.test.example"] = EgressRoute{asio::ip::address_v4::loopback(), echo_port()};
    return config({"api.test.example", "localhost"}, std::move(routes));
  }

  std::uint16_t start(EgressProxyConfig cfg) {
    auto fd = listening_socket();
    proxy_ = std::make_unique<EgressProxy>(ioc_.get_executor(), fd.release(), std::move(cfg));
    EXPECT_FALSE(proxy_->start());
    EXPECT_NE(proxy_->port(), 0);
    return proxy_->port();
  }

  bool stop_and_wait() {
    auto done = std::make_shared<std::promise<void>>();
    auto drained = done->get_future();
    proxy_->stop([done] { done->set_value(); });
    return drained.wait_for(kWait) == std::future_status::ready;
  }

  // Sends a CONNECT and returns the response head.
  static std::string connect(Client& c, std::string_view target, std::string_view version = "1.1") {
    std::string req = "CONNECT " + std::string(target) + " HTTP/" + std::string(version) +
                      "\r\nHost: " + std::string(target) + "\r\n\r\n";
    EXPECT_TRUE(c.send(req));
    return c.read_head();
  }

  asio::io_context ioc_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(ioc_);
  tcp::acceptor echo_{ioc_};
  tcp::acceptor source_{ioc_};
  std::thread io_thread_;
  AuditLog audit_;
  std::unique_ptr<EgressProxy> proxy_;
};

::testing::AssertionResult has_status(const std::string& head, int status) {
  std::string want = "HTTP/1.1 " + std::to_string(status) + " ";
  if (head.rfind(want, 0) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "want " << status << ", got: " << head;
}

TEST_F(EgressProxyTest, ListedHostThroughOverrideTunnelsToEcho) {
  auto port = start(echo_config());
  Client c(port);
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(has_status(connect(c, "api.test.example:443"), 200));
  ASSERT_TRUE(c.send("hello through the tunnel"));
  EXPECT_EQ(c.read_exactly(24), "hello through the tunnel");
  c.shutdown_send();  // the echo server's end of stream comes back: half-close is relayed
  bool closed = false;
  EXPECT_EQ(c.read_to_end(&closed), "");
  EXPECT_TRUE(closed);

  auto e = audit_.wait_for(1);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->decision, Decision::allowed);
  EXPECT_EQ(e->host, "api.test.example");
  EXPECT_EQ(e->port, 443);
  EXPECT_EQ(e->address, "127.0.0.1");
  EXPECT_EQ(e->bytes_up, 24u);
  EXPECT_EQ(e->bytes_down, 24u);
  EXPECT_NE(e->reason.find("listed host"), std::string::npos) << e->reason;
}

// Python 3.11's http.client (and so urllib and requests) tunnels with HTTP/1.0.
TEST_F(EgressProxyTest, Http10ConnectAndEarlyDataAreServed) {
  auto port = start(echo_config());
  Client c(port);
  ASSERT_TRUE(c.send("CONNECT API.Test.Example.:443 HTTP/1.0\r\n\r\nearly bytes"));
  ASSERT_TRUE(has_status(c.read_head(), 200));
  EXPECT_EQ(c.read_exactly(11), "early bytes");
}

TEST_F(EgressProxyTest, UnlistedHostIsDeniedAndAudited) {
  auto port = start(echo_config());
  Client c(port);
  std::string head = connect(c, "evil.example:443");
  EXPECT_TRUE(has_status(head, 403));
  bool closed = false;
  std::string body = c.read_to_end(&closed);
  EXPECT_TRUE(closed);
  EXPECT_NE(body.find("not in the allowlist"), std::string::npos) << body;

  auto e = audit_.wait_for(1);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->decision, Decision::denied);
  EXPECT_EQ(e->host, "evil.example");
  EXPECT_EQ(e->bytes_up + e->bytes_down, 0u);
}

TEST_F(EgressProxyTest, CloudMetadataAddressIsDenied) {
  auto port = start(echo_config());
  Client c(port);
  EXPECT_TRUE(has_status(connect(c, "169.254.169.254:80"), 403));
  auto e = audit_.wait_for(1);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->decision, Decision::denied);
  EXPECT_NE(e->reason.find("not listed"), std::string::npos) << e->reason;
}

TEST_F(EgressProxyTest, UnlistedLoopbackLiteralIsDenied) {
  auto port = start(echo_config());
  for (const std::string& target : std::vector<std::string>{
           "127.0.0.1:443", "127.0.0.1:" + std::to_string(echo_port()), "2130706433:443",
           "127.1:80", "[::1]:443", "[::ffff:127.0.0.1]:443"}) {
    Client c(port);
    EXPECT_TRUE(has_status(connect(c, target), 403)) << target;
  }
}

TEST_F(EgressProxyTest, NameResolvingToPrivateAddressIsDenied) {
  auto port = start(echo_config());  // lists "localhost" without an override
  Client c(port);
  EXPECT_TRUE(has_status(connect(c, "localhost:443"), 403));
  std::string body = c.read_to_end();
  EXPECT_NE(body.find("loopback"), std::string::npos) << body;
  auto e = audit_.wait_for(1);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->decision, Decision::denied);
  EXPECT_TRUE(e->address == "127.0.0.1" || e->address == "::1") << e->address;
}

TEST_F(EgressProxyTest, AbsoluteFormGetIsRefusedWith405) {
  auto port = start(echo_config());
  Client c(port);
  ASSERT_TRUE(c.send("GET http://api.test.example/x HTTP/1.1\r\nHost: api.test.example\r\n\r\n"));
  std::string head = c.read_head();
  EXPECT_TRUE(has_status(head, 405));
  EXPECT_NE(head.find("Allow: CONNECT"), std::string::npos) << head;
  EXPECT_NE(c.read_to_end().find("only CONNECT"), std::string::npos);
  auto e = audit_.wait_for(1);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->decision, Decision::denied);
  EXPECT_EQ(e->host, "api.test.example");
}

TEST_F(EgressProxyTest, OversizedHeadIsRefusedAndClosed) {
  auto port = start(echo_config());
  Client c(port);
  std::string req = "CONNECT api.test.example:443 HTTP/1.1\r\nX-Pad: " + std::string(16384, 'a');
  c.send(req);  // may fail part-way once the proxy has answered and closed
  std::string head = c.read_head();
  EXPECT_TRUE(has_status(head, 431));
  bool closed = false;
  c.read_to_end(&closed);
  EXPECT_TRUE(closed);
  auto e = audit_.wait_for(1);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->decision, Decision::denied);
}

TEST_F(EgressProxyTest, MalformedRequestsGet400) {
  auto port = start(echo_config());
  for (std::string_view req :
       {"CONNECT api.test.example HTTP/1.1\r\n\r\n", "CONNECT :443 HTTP/1.1\r\n\r\n",
        "CONNECT api.test.example:443 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
        "NOT HTTP AT ALL\r\n\r\n"}) {
    Client c(port);
    ASSERT_TRUE(c.send(req));
    EXPECT_TRUE(has_status(c.read_head(), 400)) << req;
  }
}

TEST_F(EgressProxyTest, ConnectFailureIs502) {
  auto closed_port = [] {
    auto fd = listening_socket();
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    return ntohs(addr.sin_port);
  }();  // closed again: nothing listens there now
  EgressResolveOverrides routes;
  routes["down.test.example"] = EgressRoute{asio::ip::address_v4::loopback(), closed_port};
  auto port = start(config({"down.test.example"}, std::move(routes)));
  Client c(port);
  EXPECT_TRUE(has_status(connect(c, "down.test.example:443"), 502));
  auto e = audit_.wait_for(1);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->decision, Decision::failed);
}

// A listener whose accept queue is full drops further SYNs: a connect to it hangs.
struct BlackHole {
  UniqueFd listener = listening_socket(0);
  std::vector<UniqueFd> fillers;
  std::uint16_t port() const {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    return ntohs(addr.sin_port);
  }
  BlackHole() {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < 3; ++i) {
      fillers.emplace_back(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      ::connect(fillers.back().get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    }
    std::this_thread::sleep_for(50ms);
  }
};

TEST_F(EgressProxyTest, ConnectTimeoutIs502) {
  BlackHole hole;
  EgressResolveOverrides routes;
  routes["slow.test.example"] = EgressRoute{asio::ip::address_v4::loopback(), hole.port()};
  auto cfg = config({"slow.test.example"}, std::move(routes));
  cfg.limits.connect_timeout = 300ms;
  auto port = start(std::move(cfg));
  Client c(port);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(has_status(connect(c, "slow.test.example:443"), 502));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  auto e = audit_.wait_for(1);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->decision, Decision::failed);
  EXPECT_NE(e->reason.find("timed out"), std::string::npos) << e->reason;
}

TEST_F(EgressProxyTest, StopWhileConnecting) {
  BlackHole hole;
  EgressResolveOverrides routes;
  routes["slow.test.example"] = EgressRoute{asio::ip::address_v4::loopback(), hole.port()};
  auto port = start(config({"slow.test.example"}, std::move(routes)));
  Client c(port);
  ASSERT_TRUE(c.send("CONNECT slow.test.example:443 HTTP/1.1\r\n\r\n"));
  std::this_thread::sleep_for(100ms);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(stop_and_wait());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  bool closed = false;
  c.read_to_end(&closed);
  EXPECT_TRUE(closed);
  auto e = audit_.wait_for(1);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->decision, Decision::failed);
  EXPECT_NE(e->reason.find("stopped"), std::string::npos) << e->reason;
}

TEST_F(EgressProxyTest, TunnelsBeyondTheLimitGet503) {
  auto port = start(echo_config());
  std::vector<std::unique_ptr<Client>> open;
  for (int i = 0; i < 32; ++i) {
    open.push_back(std::make_unique<Client>(port));
    ASSERT_TRUE(has_status(connect(*open.back(), "api.test.example:443"), 200)) << i;
  }
  Client extra(port);
  EXPECT_TRUE(has_status(connect(extra, "api.test.example:443"), 503));
  auto e = audit_.wait_for(1);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->decision, Decision::denied);
  EXPECT_NE(e->reason.find("too many tunnels"), std::string::npos);

  // A closed tunnel frees its slot.
  open.pop_back();
  ASSERT_TRUE(audit_.wait_for(2).has_value());
  Client again(port);
  EXPECT_TRUE(has_status(connect(again, "api.test.example:443"), 200));
  for (auto& c : open) {  // and every tunnel still works
    ASSERT_TRUE(c->send("ping"));
    EXPECT_EQ(c->read_exactly(4), "ping");
  }
}

TEST_F(EgressProxyTest, StopClosesOpenTunnels) {
  auto port = start(echo_config());
  std::vector<std::unique_ptr<Client>> tunnels;
  for (int i = 0; i < 8; ++i) {
    tunnels.push_back(std::make_unique<Client>(port));
    ASSERT_TRUE(has_status(connect(*tunnels.back(), "api.test.example:443"), 200));
    ASSERT_TRUE(tunnels.back()->send("x"));
    EXPECT_EQ(tunnels.back()->read_exactly(1), "x");
  }
  Client idle(port);  // accepted, head never sent
  Client half(port);
  ASSERT_TRUE(half.send("CONNECT api.test.example:443 HTTP/1.1\r\n"));  // head half sent

  ASSERT_TRUE(stop_and_wait());
  for (auto& t : tunnels) {
    bool closed = false;
    t->read_to_end(&closed);
    EXPECT_TRUE(closed);
  }
  bool closed = false;
  idle.read_to_end(&closed);
  EXPECT_TRUE(closed);
  half.read_to_end(&closed);
  EXPECT_TRUE(closed);

  auto events = audit_.all();  // all emitted before on_drained
  ASSERT_EQ(events.size(), 8u);
  for (const auto& e : events) {
    EXPECT_EQ(e.decision, Decision::allowed);
    EXPECT_NE(e.reason.find("proxy stopped"), std::string::npos) << e.reason;
    EXPECT_EQ(e.bytes_up, 1u);
  }
  // The listener is gone, and stop() stays idempotent.
  Client late(port);
  EXPECT_FALSE(late.connected());
  EXPECT_TRUE(stop_and_wait());
}

TEST_F(EgressProxyTest, StopWithTrafficInFlight) {
  auto port = start(echo_config());
  std::vector<std::thread> writers;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(std::make_unique<Client>(port));
    ASSERT_TRUE(has_status(connect(*clients.back(), "api.test.example:443"), 200));
  }
  std::string chunk(1 << 20, 'z');
  for (auto& c : clients) {
    writers.emplace_back([&c, &chunk] {
      while (c->send(chunk)) {
      }
    });
  }
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(stop_and_wait());
  for (auto& c : clients) c->read_to_end();  // unblocks the echo path; writers then fail
  for (auto& w : writers) w.join();
  EXPECT_EQ(audit_.size(), 4u);
}

TEST_F(EgressProxyTest, IdleTunnelIsClosed) {
  auto cfg = echo_config();
  cfg.limits.idle_timeout = 200ms;
  auto port = start(std::move(cfg));
  Client c(port);
  ASSERT_TRUE(has_status(connect(c, "api.test.example:443"), 200));
  bool closed = false;
  c.read_to_end(&closed);
  EXPECT_TRUE(closed);
  auto e = audit_.wait_for(1);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->reason.find("idle timeout"), std::string::npos) << e->reason;
}

TEST_F(EgressProxyTest, SlowHeadIsClosed) {
  auto cfg = echo_config();
  cfg.limits.head_timeout = 200ms;
  auto port = start(std::move(cfg));
  Client c(port);
  ASSERT_TRUE(c.send("CONNECT api.test"));
  const auto t0 = std::chrono::steady_clock::now();
  bool closed = false;
  c.read_to_end(&closed);
  EXPECT_TRUE(closed);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
}

TEST_F(EgressProxyTest, BadListeningFdIsReported) {
  EgressProxy bad(ioc_.get_executor(), -1, echo_config());
  EXPECT_TRUE(bad.start());
  UniqueFd not_listening(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EgressProxy unlistened(ioc_.get_executor(), not_listening.release(), echo_config());
  EXPECT_TRUE(unlistened.start());
  UniqueFd udp(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  EgressProxy datagram(ioc_.get_executor(), udp.release(), echo_config());
  EXPECT_TRUE(datagram.start());
}

TEST(EgressResolveOverrides, Parses) {
  std::string err;
  auto o = parse_egress_resolve_overrides(
      "API.Example.com.=1.2.3.4, six=::1,dev=127.0.0.1:8443,v6p=[::1]:9443,,", &err);
  ASSERT_TRUE(o.has_value()) << err;
  ASSERT_EQ(o->size(), 4u);
  EXPECT_EQ(o->at("api.example.com").address.to_string(), "1.2.3.4");
  EXPECT_EQ(o->at("api.example.com").port, 0);
  EXPECT_EQ(o->at("six").address.to_string(), "::1");
  EXPECT_EQ(o->at("dev").port, 8443);
  EXPECT_EQ(o->at("v6p").address.to_string(), "::1");
  EXPECT_EQ(o->at("v6p").port, 9443);
  auto empty = parse_egress_resolve_overrides("", &err);
  ASSERT_TRUE(empty.has_value()) << err;
  EXPECT_TRUE(empty->empty());
}

TEST(EgressResolveOverrides, RefusesMalformed) {
  for (std::string_view bad :
       {"host", "=1.2.3.4", "host=", "host=not-an-ip", "host=1.2.3.4:0", "host=1.2.3.4:70000",
        "host=[::1", "host=[::1]x", "h o=1.2.3.4", "a=1.2.3.4,a=5.6.7.8", "host=1.2.3.4:"}) {
    std::string err;
    EXPECT_FALSE(parse_egress_resolve_overrides(bad, &err).has_value()) << bad;
    EXPECT_NE(err.find("TOOLWARDEN_EGRESS_RESOLVE"), std::string::npos) << err;
  }
}

// Not part of the suite: `egress_proxy_test --gtest_also_run_disabled_tests
// --gtest_filter='*Throughput*'` prints MB/s through the tunnel and directly.
TEST_F(EgressProxyTest, DISABLED_Throughput) {
  constexpr std::size_t kBytes = std::size_t{1} << 30;
  // The source runs on its own thread, so the proxy's I/O thread relays and nothing else.
  asio::io_context source_ioc(1);
  tcp::acceptor source(source_ioc, {asio::ip::address_v4::loopback(), 0});
  const auto source_port = source.local_endpoint().port();
  asio::co_spawn(source_ioc, serve(source, kBytes), asio::detached);
  std::thread source_thread([&source_ioc] { source_ioc.run(); });

  EgressResolveOverrides routes;
  routes["bulk.test.example"] = EgressRoute{asio::ip::address_v4::loopback(), source_port};
  auto port = start(config({"bulk.test.example"}, std::move(routes)));
  auto measure = [&](bool through_proxy) {
    Client c(through_proxy ? port : source_port);
    if (through_proxy) {
      EXPECT_TRUE(has_status(connect(c, "bulk.test.example:443"), 200));
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t got = c.discard_to_end();
    std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    EXPECT_EQ(got, kBytes);
    return static_cast<double>(got) / 1e6 / dt.count();
  };
  double direct = measure(false);
  double proxied = measure(true);
  std::printf("loopback download of 1 GiB: direct %.0f MB/s, through the proxy %.0f MB/s\n", direct,
              proxied);
  source_ioc.stop();
  source_thread.join();

  // Set-up cost: connect, CONNECT, 200, one echoed byte, close.
  EgressResolveOverrides echo_routes;
  echo_routes["api.test.example"] = EgressRoute{asio::ip::address_v4::loopback(), echo_port()};
  EgressProxy echo_proxy(ioc_.get_executor(), listening_socket().release(),
                         config({"api.test.example"}, std::move(echo_routes)));
  ASSERT_FALSE(echo_proxy.start());
  constexpr int kTunnels = 2000;
  auto round_trips = [&](bool through_proxy) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kTunnels; ++i) {
      Client c(through_proxy ? echo_proxy.port() : echo_port());
      if (through_proxy) {
        EXPECT_TRUE(has_status(connect(c, "api.test.example:443"), 200));
      }
      EXPECT_TRUE(c.send("x"));
      EXPECT_EQ(c.read_exactly(1), "x");
    }
    std::chrono::duration<double, std::micro> dt = std::chrono::steady_clock::now() - t0;
    return dt.count() / kTunnels;
  };
  double direct_us = round_trips(false);
  double proxied_us = round_trips(true);
  std::printf("connect + 1-byte echo, %d sequential: direct %.0f us, through the proxy %.0f us\n",
              kTunnels, direct_us, proxied_us);
}

}  // namespace
}  // namespace toolwarden::daemon
