#include "daemon/mcp_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <variant>

#include "daemon/http_util.hpp"
#include "daemon/log.hpp"
#include "daemon/request_checks.hpp"
#include "protocol/jsonrpc.hpp"
#include "protocol/mcp.hpp"
#include "store/clock.hpp"

namespace toolwarden::daemon {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace json = boost::json;
using asio::ip::tcp;
using namespace std::chrono_literals;

namespace {
constexpr auto kHeaderTimeout = 10s;
constexpr auto kRequestTimeout = 15s;
constexpr auto kIdleTimeout = 60s;
constexpr auto kWriteTimeout = 15s;
// Lingering close after a rejection that leaves a body unread (as nginx's lingering_close):
// the answer is followed by our FIN, and what the client still sends is read and dropped for
// a bounded time, so its kernel sees no reset and the client reads the answer instead of
// EPIPE. Bounded in time and bytes; a declared length past the byte bound is not drained at
// all (such a client gets the reset), so a flood costs no more than it did without lingering.
constexpr auto kLingerTime = 2s;
constexpr auto kLingerIdle = 500ms;
constexpr std::uint64_t kLingerBytes = 4 * 1024 * 1024;
constexpr auto kProgressInterval = 1s;
// JSON-RPC error for a call whose job was revoked after its event stream began.
constexpr int kJobRevoked = -32001;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
}  // namespace

McpServer::McpServer(Services& services, tcp::acceptor acceptor)
    : services_(services),
      acceptor_(std::move(acceptor)),
      port_(acceptor_.local_endpoint().port()) {}

void McpServer::stop(std::function<void()> on_drained) {
  boost::system::error_code ec;
  acceptor_.close(ec);
  connections_.stop(std::move(on_drained));
}

asio::awaitable<void> McpServer::run() {
  for (;;) {
    auto [ec, socket] = co_await acceptor_.async_accept(tuple_awaitable);
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
      log_warn("mcp.accept_failed", {{"error", ec.message()}});
      // EMFILE and friends: back off briefly instead of spinning.
      asio::steady_timer t(acceptor_.get_executor(), 50ms);
      co_await t.async_wait(tuple_awaitable);
      continue;
    }
    asio::co_spawn(acceptor_.get_executor(), session(std::move(socket)), asio::detached);
  }
}

// `params._meta.progressToken` of a tools/call (a string or an integer), if any.
std::optional<json::value> McpServer::progress_token(const protocol::Message& msg) {
  if (msg.kind != protocol::MessageKind::request || msg.method != "tools/call" ||
      !msg.params.is_object())
    return std::nullopt;
  const auto* meta = msg.params.get_object().if_contains("_meta");
  if (meta == nullptr || !meta->is_object()) return std::nullopt;
  const auto* token = meta->get_object().if_contains("progressToken");
  if (token == nullptr || !(token->is_string() || token->is_int64() || token->is_uint64()))
    return std::nullopt;
  return *token;
}

asio::awaitable<McpServer::Streamed> McpServer::answer_with_progress(beast::tcp_stream& stream,
                                                                     std::shared_ptr<JobState> job,
                                                                     protocol::Message msg,
                                                                     json::value token,
                                                                     bool keep_alive) {
  struct Pending {
    explicit Pending(const asio::any_io_executor& ex) : timer(ex) {}
    std::optional<McpReply> reply;
    asio::steady_timer timer;
  };
  auto ex = co_await asio::this_coro::executor;
  auto pending = std::make_shared<Pending>(ex);
  const json::value request_id = msg.id;
  // The call runs on its own; this coroutine only reports on it. A client that goes away does
  // not cancel it (MCP: disconnection is not cancellation); notifications/cancelled does.
  auto work = [this, pending, job, msg = std::move(msg)]() mutable -> asio::awaitable<void> {
    pending->reply = co_await services_.mcp.handle(job, std::move(msg));
    pending->timer.cancel();
  };
  asio::co_spawn(ex, std::move(work), asio::detached);

  bool streaming = false;
  auto write = [&](std::string_view data) -> asio::awaitable<bool> {
    stream.expires_after(kWriteTimeout);
    auto [ec, n] =
        co_await asio::async_write(stream, http::make_chunk(asio::buffer(data)), tuple_awaitable);
    co_return !ec;
  };
  while (!pending->reply) {
    pending->timer.expires_after(kProgressInterval);
    co_await pending->timer.async_wait(tuple_awaitable);
    if (pending->reply) break;
    if (!streaming) {
      http::response<http::empty_body> head{http::status::ok, 11};
      head.set(http::field::content_type, "text/event-stream");
      head.set(http::field::cache_control, "no-cache");
      head.keep_alive(keep_alive && !connections_.stopping());
      head.chunked(true);
      services_.metrics.count_request(200);
      http::response_serializer<http::empty_body> sr(head);
      stream.expires_after(kWriteTimeout);
      auto [ec, n] = co_await http::async_write_header(stream, sr, tuple_awaitable);
      if (ec) co_return Streamed{std::nullopt, false};
      streaming = true;
    }
    json::object params{{"progressToken", token}};
    std::uint64_t out = 0;
    auto started = std::chrono::steady_clock::now();
    if (auto call = JobRegistry::find_call(*job, request_id)) {
      out = call->output_bytes.load(std::memory_order_relaxed);
      started = call->started;
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - started)
                        .count();
    params["progress"] = ms;  // elapsed milliseconds: grows with every notification
    params["message"] = "running for " + std::to_string(ms / 1000) + " s, " + std::to_string(out) +
                        " bytes of output";
    json::object note{
        {"jsonrpc", "2.0"}, {"method", "notifications/progress"}, {"params", std::move(params)}};
    // Named, not a temporary of the co_await expression (GCC 12 destroys those twice).
    const std::string event = protocol::sse_event(json::serialize(note));
    if (!co_await write(event)) co_return Streamed{std::nullopt, false};
  }
  if (!streaming) co_return Streamed{std::move(pending->reply), true};

  // The headers (200) are out: the answer is the stream's last event. A job revoked meanwhile
  // can no longer answer 401, so it gets a JSON-RPC error and the connection ends.
  McpReply& reply = *pending->reply;
  std::string body;
  bool cont = keep_alive && !connections_.stopping();
  if (reply.kind == McpReply::Kind::unauthorized) {
    body = json::serialize(
        protocol::make_error(request_id, kJobRevoked, "the job was revoked during the call"));
    cont = false;
  } else {
    body = reply.text.empty() ? json::serialize(reply.body) : std::move(reply.text);
  }
  const std::string last = protocol::sse_event(body);
  if (!co_await write(last)) co_return Streamed{std::nullopt, false};
  stream.expires_after(kWriteTimeout);
  auto [ec, n] = co_await asio::async_write(stream, http::make_chunk_last(), tuple_awaitable);
  co_return Streamed{std::nullopt, !ec && cont};
}

asio::awaitable<void> McpServer::session(tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  ConnectionSet::Guard guard(connections_, [&stream] {
    boost::system::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream.socket().close(ec);
  });
  beast::flat_buffer buffer;
  CheckPolicy policy{port_, services_.config.allowed_origins, services_.config.max_body_bytes};
  Authenticator authenticate = [this](std::string_view token) {
    return services_.jobs.authenticate(token, store::unix_now());
  };

  // Writes one response; false when the connection must end afterwards.
  auto send = [&](Response res) -> asio::awaitable<bool> {
    services_.metrics.count_request(static_cast<int>(res.result_int()));
    if (connections_.stopping()) res.keep_alive(false);
    stream.expires_after(kWriteTimeout);
    auto [ec, n] = co_await http::async_write(stream, res, tuple_awaitable);
    co_return !ec && res.keep_alive();
  };
  // A rejection before the body was read closes the connection, so no unread body bytes
  // can ever be taken for the next request.
  auto reject = [&](http::status status, std::string message,
                    std::uint64_t linger_bytes = kLingerBytes) -> asio::awaitable<void> {
    auto res = make_response(status, json::serialize(json::object{{"error", message}}),
                             "application/json", false);
    if (status == http::status::method_not_allowed) res.set(http::field::allow, "POST");
    if (status == http::status::unauthorized) res.set(http::field::www_authenticate, "Bearer");
    services_.metrics.count_request(static_cast<int>(res.result_int()));
    stream.expires_after(kWriteTimeout);
    auto [wec, wn] = co_await http::async_write(stream, res, tuple_awaitable);
    if (!wec && linger_bytes > 0 && !connections_.stopping()) {
      boost::system::error_code ec;
      stream.socket().shutdown(tcp::socket::shutdown_send, ec);
      if (ec) co_return;
      const auto until = std::chrono::steady_clock::now() + kLingerTime;
      while (!connections_.stopping()) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= until) break;
        stream.expires_at(std::min(until, now + kLingerIdle));
        buffer.consume(buffer.size());
        auto [rec, rn] =
            co_await stream.async_read_some(buffer.prepare(16 * 1024), tuple_awaitable);
        if (rec) break;  // the client closed (it read the answer), went quiet, or reset
        if (rn >= linger_bytes) break;
        linger_bytes -= rn;
      }
      buffer.consume(buffer.size());
    }
  };

  bool first = true;
  while (!connections_.stopping()) {
    if (!first && buffer.size() == 0) {
      // Idle keep-alive: wait for the next request's first bytes.
      stream.expires_after(kIdleTimeout);
      auto [ec, n] = co_await stream.async_read_some(buffer.prepare(4096), tuple_awaitable);
      if (ec) break;
      buffer.commit(n);
    }
    first = false;
    const auto deadline = std::chrono::steady_clock::now() + kRequestTimeout;

    http::request_parser<http::empty_body> header_parser;
    header_parser.header_limit(kHeaderLimit);
    // The declared size is checked after auth and content type (SPEC §5 order), not here.
    header_parser.body_limit(boost::none);
    stream.expires_after(kHeaderTimeout);
    auto [hec, hn] =
        co_await http::async_read_header(stream, buffer, header_parser, tuple_awaitable);
    // Beast's header_limit starts afresh after a request line that came in an earlier read
    // (the first read is 512 bytes), so a header up to that line's length over 8 KiB passed
    // (found by fuzz_http); `hn` is the header's exact size.
    if (hec == http::error::header_limit || (!hec && hn > kHeaderLimit)) {
      co_await reject(http::status::request_header_fields_too_large,
                      "request headers exceed 8 KiB");
      break;
    }
    if (hec == http::error::end_of_stream || hec == beast::error::timeout ||
        hec == asio::error::operation_aborted || hec == asio::error::connection_reset) {
      break;
    }
    if (hec) {
      co_await reject(http::status::bad_request, "malformed HTTP request");
      break;
    }
    guard.set_busy(true);
    // What a lingering close may drain: the declared body, unless it is past the bound.
    const auto declared = header_parser.content_length();
    const std::uint64_t linger_bytes = declared && *declared > kLingerBytes ? 0 : kLingerBytes;
    HeaderVerdict verdict = check_mcp_headers(header_parser.get(), policy, authenticate);
    if (verdict.rejection) {
      log_debug("mcp.rejected",
                {{"status", std::to_string(static_cast<int>(verdict.rejection->status))}});
      co_await reject(verdict.rejection->status, verdict.rejection->message, linger_bytes);
      break;
    }
    const bool has_protocol_version = header_parser.get().count("MCP-Protocol-Version") > 0;
    const std::string protocol_version(header_parser.get()["MCP-Protocol-Version"]);
    const bool want_json = accepts_json(header_parser.get()[http::field::accept]);
    const bool can_stream = accepts_event_stream(header_parser.get()[http::field::accept]);

    http::request_parser<http::string_body> parser(std::move(header_parser));
    parser.body_limit(services_.config.max_body_bytes);
    stream.expires_at(deadline);
    auto [bec, bn] = co_await http::async_read(stream, buffer, parser, tuple_awaitable);
    if (bec == http::error::body_limit) {
      co_await reject(http::status::payload_too_large, "body exceeds the size limit", linger_bytes);
      break;
    }
    if (bec) break;  // timeout, reset or garbage mid-body: nothing sensible to answer
    auto request = parser.release();
    const bool keep_alive = request.keep_alive();

    auto rpc_error = [&](int code, std::string msg) {
      return make_response(http::status::bad_request,
                           json::serialize(protocol::make_error(nullptr, code, msg)),
                           "application/json", keep_alive);
    };
    auto parsed = protocol::parse_message(request.body());
    if (auto* bad = std::get_if<protocol::Rejection>(&parsed)) {
      bool cont = co_await send(rpc_error(bad->rpc_code, bad->message));
      guard.set_busy(false);
      if (!cont) break;
      continue;
    }
    if (has_protocol_version && !protocol::is_supported_version(protocol_version)) {
      bool cont = co_await send(rpc_error(protocol::rpc_code::kInvalidRequest,
                                          "Unsupported MCP-Protocol-Version: " + protocol_version));
      guard.set_busy(false);
      if (!cont) break;
      continue;
    }

    auto& message = std::get<protocol::Message>(parsed);
    std::optional<McpReply> early;
    if (auto token = progress_token(message); token && can_stream) {
      // A long call whose client asked for progress: the answer becomes an event stream once
      // the first notification is due; a quick call is answered as any other.
      auto streamed = co_await answer_with_progress(stream, verdict.job, std::move(message), *token,
                                                    keep_alive);
      if (!streamed.reply) {
        guard.set_busy(false);
        if (!streamed.keep_going) break;
        continue;
      }
      early = std::move(streamed.reply);
    }
    // (No co_await inside a conditional expression: GCC 12 miscompiles it.)
    McpReply reply;
    if (early) {
      reply = std::move(*early);
    } else {
      reply = co_await services_.mcp.handle(verdict.job, std::move(message));
    }
    Response res;
    switch (reply.kind) {
      case McpReply::Kind::unauthorized:
        res = make_response(http::status::unauthorized,
                            json::serialize(json::object{{"error", "the job was revoked"}}),
                            "application/json", false);
        res.set(http::field::www_authenticate, "Bearer");
        break;
      case McpReply::Kind::accepted:
        res = make_response(http::status::accepted, "", "", keep_alive);
        break;
      case McpReply::Kind::response: {
        std::string body = reply.text.empty() ? json::serialize(reply.body) : std::move(reply.text);
        if (want_json) {
          res = make_response(http::status::ok, std::move(body), "application/json", keep_alive);
        } else {
          res = make_response(http::status::ok, protocol::sse_event(body), "text/event-stream",
                              keep_alive);
        }
        break;
      }
    }
    bool cont = co_await send(std::move(res));
    guard.set_busy(false);
    if (!cont) break;
  }
  boost::system::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
}

}  // namespace toolwarden::daemon
