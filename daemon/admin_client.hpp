// The CLI's side of the admin socket: one JSON-RPC call per connection, synchronous.
#pragma once

#include <boost/json/value.hpp>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace toolwarden::daemon {

/// The daemon is not reachable (not running, wrong runtime dir).
class DaemonUnreachable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The daemon answered with a JSON-RPC error; what() is its message.
class AdminRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

boost::json::value admin_call(const std::filesystem::path& socket, const std::string& method,
                              const boost::json::object& params);

}  // namespace toolwarden::daemon
