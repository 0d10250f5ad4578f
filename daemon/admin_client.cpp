#include "daemon/admin_client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace toolwarden::daemon {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;

json::value admin_call(const std::filesystem::path& socket_path, const std::string& method,
                       const json::object& params) {
  asio::io_context ioc;
  asio::local::stream_protocol::socket socket(ioc);
  boost::system::error_code ec;
  socket.connect(asio::local::stream_protocol::endpoint(socket_path.string()), ec);
  if (ec) {
    throw DaemonUnreachable("cannot reach the daemon at " + socket_path.string() + ": " +
                            ec.message() +
                            " (is `toolwarden serve` running with the same --runtime-dir?)");
  }
  json::object body;
  body["jsonrpc"] = "2.0";
  body["id"] = 1;
  body["method"] = method;
  body["params"] = params;
  http::request<http::string_body> req{http::verb::post, "/admin", 11};
  req.set(http::field::host, "localhost");
  req.set(http::field::content_type, "application/json");
  req.body() = json::serialize(body);
  req.keep_alive(false);
  req.prepare_payload();
  http::write(socket, req, ec);
  if (ec) throw DaemonUnreachable("cannot send to the daemon: " + ec.message());
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(256 * 1024 * 1024);
  http::read(socket, buffer, parser, ec);
  if (ec) throw DaemonUnreachable("no answer from the daemon: " + ec.message());
  auto res = parser.release();
  if (res.result() == http::status::forbidden) {
    throw AdminRefused("the daemon refused this user (admin socket is for its own uid only)");
  }
  json::value answer = json::parse(res.body(), ec);
  if (ec || !answer.is_object()) throw AdminRefused("the daemon sent an unreadable answer");
  const auto& o = answer.get_object();
  if (const auto* err = o.if_contains("error")) {
    const auto* msg = err->is_object() ? err->get_object().if_contains("message") : nullptr;
    throw AdminRefused(msg != nullptr && msg->is_string() ? std::string(msg->get_string())
                                                          : "refused");
  }
  const auto* result = o.if_contains("result");
  if (result == nullptr) throw AdminRefused("the daemon's answer has no result");
  return *result;
}

}  // namespace toolwarden::daemon
