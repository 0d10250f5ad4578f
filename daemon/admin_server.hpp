// The admin listener on <runtime dir>/admin.sock (SPEC §4): HTTP/1.1 for the daemon's own
// uid only (SO_PEERCRED); anyone else gets 403 and the connection closes.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include "daemon/connections.hpp"
#include "daemon/services.hpp"

namespace toolwarden::daemon {

class AdminServer {
 public:
  AdminServer(Services& services, boost::asio::local::stream_protocol::acceptor acceptor);

  boost::asio::awaitable<void> run();
  void stop(std::function<void()> on_drained);

 private:
  boost::asio::awaitable<void> session(boost::asio::local::stream_protocol::socket socket);

  Services& services_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  ConnectionSet connections_;
};

}  // namespace toolwarden::daemon
