// The CONNECT proxy that is a custom tool's only way out (SPEC §11 `network`): one per sandbox
// run, serving the listening socket made inside the sandbox's network namespace. Each
// CONNECT is decided by policy/egress, every resolved address is checked, and every
// decision and every closed tunnel is an audit event. Payload bytes are relayed, counted and
// never logged.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "daemon/egress_routes.hpp"
#include "policy/egress.hpp"

namespace toolwarden::daemon {

struct EgressEvent {
  enum class Decision {
    allowed,  // a tunnel ran; emitted when it closed
    denied,   // refused by the proxy: 403 policy, 400 malformed, 405 method, 431 head, 503 full
    failed,   // allowed, but resolving or connecting failed: 502
  };
  std::string host;  // normalized; empty when the request named none
  std::uint16_t port = 0;
  Decision decision = Decision::denied;
  std::string reason;
  std::string address;           // the address connected to, or the one refused; may be empty
  std::uint64_t bytes_up = 0;    // sandbox → upstream
  std::uint64_t bytes_down = 0;  // upstream → sandbox
  std::chrono::milliseconds duration{0};  // from accept to the end of the connection
};
std::string_view to_string(EgressEvent::Decision d);

struct EgressLimits {
  std::size_t max_head_bytes = 8 * 1024;
  std::chrono::milliseconds head_timeout{10'000};     // whole request head, and each reply
  std::size_t max_tunnels = 32;                       // resolving, connecting or relaying
  std::chrono::milliseconds connect_timeout{10'000};  // resolve + connect
  std::chrono::milliseconds idle_timeout{60'000};     // no byte in either direction
};

struct EgressProxyConfig {
  policy::EgressAllowlist allowlist;
  EgressResolveOverrides overrides;
  /// Called on the proxy's strand, once per refused request and once per closed tunnel; must
  /// not block (hand the event to the store's writer). May run until stop()'s on_drained.
  std::function<void(const EgressEvent&)> audit;
  EgressLimits limits;
};

class EgressProxy {
 public:
  /// Takes ownership of `listening_fd` (a TCP socket already in listen state; closed on
  /// failure too). Never throws for a bad fd: start() reports it.
  EgressProxy(boost::asio::any_io_executor executor, int listening_fd, EgressProxyConfig config);
  /// Calls stop(); sessions still running finish on the executor without this object.
  ~EgressProxy();
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;

  /// Starts accepting. An error when the fd could not be adopted; then nothing runs.
  boost::system::error_code start();
  /// Closes the listener and every connection, tunnels mid-transfer included. Idempotent and
  /// callable from any thread. `on_drained` runs on the proxy's strand once every connection
  /// has ended and emitted its audit event (at once when none is open).
  void stop(std::function<void()> on_drained = {});
  /// The listening port (0 when the fd could not be adopted).
  std::uint16_t port() const { return port_; }

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::uint16_t port_ = 0;
};

}  // namespace toolwarden::daemon
