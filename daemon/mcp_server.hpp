// The MCP listener on loopback (SPEC §5): Streamable HTTP, every request checked in the
// SPEC's order before any of its body is read.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "daemon/connections.hpp"
#include "daemon/services.hpp"

namespace toolwarden::daemon {

class McpServer {
 public:
  McpServer(Services& services, boost::asio::ip::tcp::acceptor acceptor);

  boost::asio::awaitable<void> run();           // accept loop
  void stop(std::function<void()> on_drained);  // close the acceptor and idle connections
  unsigned short port() const { return port_; }

 private:
  boost::asio::awaitable<void> session(boost::asio::ip::tcp::socket socket);

  Services& services_;
  boost::asio::ip::tcp::acceptor acceptor_;
  unsigned short port_;
  ConnectionSet connections_;
};

}  // namespace toolwarden::daemon
