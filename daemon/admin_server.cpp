#include "daemon/admin_server.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>

#include "daemon/admin_api.hpp"
#include "daemon/http_util.hpp"
#include "daemon/log.hpp"
#include "store/clock.hpp"

namespace toolwarden::daemon {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace json = boost::json;
using local = asio::local::stream_protocol;
using namespace std::chrono_literals;

namespace {
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t kAdminBodyLimit = 1024 * 1024;
using AdminStream = beast::basic_stream<local, asio::any_io_executor>;
}  // namespace

AdminServer::AdminServer(Services& services, local::acceptor acceptor)
    : services_(services), acceptor_(std::move(acceptor)) {}

void AdminServer::stop(std::function<void()> on_drained) {
  boost::system::error_code ec;
  acceptor_.close(ec);
  connections_.stop(std::move(on_drained));
}

asio::awaitable<void> AdminServer::run() {
  for (;;) {
    auto [ec, socket] = co_await acceptor_.async_accept(tuple_awaitable);
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
      log_warn("admin.accept_failed", {{"error", ec.message()}});
      asio::steady_timer t(acceptor_.get_executor(), 50ms);
      co_await t.async_wait(tuple_awaitable);
      continue;
    }
    asio::co_spawn(acceptor_.get_executor(), session(std::move(socket)), asio::detached);
  }
}

asio::awaitable<void> AdminServer::session(local::socket socket) {
  ucred cred{};
  socklen_t len = sizeof cred;
  const bool same_user =
      ::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
      cred.uid == ::geteuid();
  AdminStream stream(std::move(socket));
  ConnectionSet::Guard guard(connections_, [&stream] { stream.close(); });

  auto send = [&](Response res) -> asio::awaitable<bool> {
    if (connections_.stopping()) res.keep_alive(false);
    stream.expires_after(15s);
    auto [ec, n] = co_await http::async_write(stream, res, tuple_awaitable);
    co_return !ec && res.keep_alive();
  };

  if (!same_user) {
    // Read (and discard) the request first, so the peer sees the 403 rather than a reset.
    beast::flat_buffer discard;
    http::request_parser<http::empty_body> probe;
    probe.header_limit(kHeaderLimit);
    probe.body_limit(64 * 1024);
    stream.expires_after(5s);
    co_await http::async_read_header(stream, discard, probe, tuple_awaitable);
    log_warn("admin.peer_refused",
             {{"uid", std::to_string(cred.uid)}, {"pid", std::to_string(cred.pid)}});
    co_await send(make_response(http::status::forbidden, "{\"error\":\"forbidden\"}\n",
                                "application/json", false));
    co_return;
  }

  beast::flat_buffer buffer;
  while (!connections_.stopping()) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(kAdminBodyLimit);
    stream.expires_after(60s);
    auto [ec, n] = co_await http::async_read(stream, buffer, parser, tuple_awaitable);
    if (ec) {
      if (ec == http::error::header_limit || ec == http::error::body_limit) {
        co_await send(make_response(http::status::payload_too_large, "{\"error\":\"too large\"}\n",
                                    "application/json", false));
      }
      break;
    }
    guard.set_busy(true);
    auto req = parser.release();
    const bool keep = req.keep_alive();
    Response res;
    if (req.target() == "/healthz" && req.method() == http::verb::get) {
      res = make_response(http::status::ok, "{\"status\":\"ok\"}\n", "application/json", keep);
    } else if (req.target() == "/metrics" && req.method() == http::verb::get) {
      const auto now = store::unix_now();
      res = make_response(http::status::ok,
                          services_.metrics.render(services_.jobs.live_count(now),
                                                   services_.jobs.calls_in_flight()),
                          "text/plain; version=0.0.4", keep);
    } else if (req.target() == "/admin") {
      if (req.method() != http::verb::post) {
        res = make_response(http::status::method_not_allowed, "{\"error\":\"POST only\"}\n",
                            "application/json", keep);
        res.set(http::field::allow, "POST");
      } else {
        auto parsed = protocol::parse_message(req.body());
        if (auto* bad = std::get_if<protocol::Rejection>(&parsed)) {
          res = make_response(
              http::status::bad_request,
              json::serialize(protocol::make_error(nullptr, bad->rpc_code, bad->message)),
              "application/json", keep);
        } else {
          auto& msg = std::get<protocol::Message>(parsed);
          log_debug("admin.request", {{"method", msg.method}});
          json::object answer = co_await handle_admin(services_, std::move(msg));
          res = make_response(http::status::ok, json::serialize(answer), "application/json", keep);
        }
      }
    } else {
      res = make_response(http::status::not_found, "{\"error\":\"not found\"}\n",
                          "application/json", keep);
    }
    bool cont = co_await send(std::move(res));
    guard.set_busy(false);
    if (!cont) break;
  }
}

}  // namespace toolwarden::daemon
