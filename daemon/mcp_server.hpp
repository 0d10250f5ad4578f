// The MCP listener on loopback (SPEC §5): Streamable HTTP, every request checked in the
// SPEC's order before any of its body is read.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/json/value.hpp>
#include <memory>
#include <optional>

#include "daemon/connections.hpp"
#include "daemon/services.hpp"
#include "protocol/jsonrpc.hpp"

namespace toolwarden::daemon {

class McpServer {
 public:
  McpServer(Services& services, boost::asio::ip::tcp::acceptor acceptor);

  boost::asio::awaitable<void> run();           // accept loop
  void stop(std::function<void()> on_drained);  // close the acceptor and idle connections
  unsigned short port() const { return port_; }

 private:
  boost::asio::awaitable<void> session(boost::asio::ip::tcp::socket socket);

  /// A tools/call whose client sent a progress token and accepts an event stream: answered
  /// like any other when it ends within a second; otherwise the answer becomes an event stream
  /// of notifications/progress (elapsed time, output bytes) ending with the result. `reply`
  /// is set when nothing was written yet (the caller answers normally); otherwise `keep_going`
  /// says whether the connection may carry another request.
  struct Streamed {
    std::optional<McpReply> reply;
    bool keep_going = false;
  };
  boost::asio::awaitable<Streamed> answer_with_progress(boost::beast::tcp_stream& stream,
                                                        std::shared_ptr<JobState> job,
                                                        protocol::Message msg,
                                                        boost::json::value token, bool keep_alive);
  static std::optional<boost::json::value> progress_token(const protocol::Message& msg);

  Services& services_;
  boost::asio::ip::tcp::acceptor acceptor_;
  unsigned short port_;
  ConnectionSet connections_;
};

}  // namespace toolwarden::daemon
