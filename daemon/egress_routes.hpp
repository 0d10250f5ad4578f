// Resolver overrides for the egress proxy, from the daemon's environment
// (TOOLWARDEN_EGRESS_RESOLVE). For tests and local development only: they let a listed host
// name reach a server on this machine, which the proxy would otherwise refuse as loopback.
#pragma once

#include <boost/asio/ip/address.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace toolwarden::daemon {

/// Where a resolver override sends a host: an address, and a port that replaces the requested
/// one when non-zero (so a test server on an unprivileged loopback port can stand in for :443).
struct EgressRoute {
  boost::asio::ip::address address;
  std::uint16_t port = 0;
};
/// Normalized host name (lowercase, no trailing dot) → route.
using EgressResolveOverrides = std::map<std::string, EgressRoute, std::less<>>;

/// For tests and local development only: `host=1.2.3.4,other=::1,dev=127.0.0.1:8443,
/// six=[::1]:8443`. Overridden answers skip DNS and the forbidden-range check (the user set
/// them); the host must still be in the tool's allowlist.
inline constexpr std::string_view kEgressResolveEnv = "TOOLWARDEN_EGRESS_RESOLVE";
std::optional<EgressResolveOverrides> parse_egress_resolve_overrides(std::string_view text,
                                                                     std::string* error);

/// Makes this process look host names up in /etc/hosts and DNS only (glibc's `files` and
/// `dns`, whatever /etc/nsswitch.conf lists): the binary is normally a static PIE, and a static
/// glibc loads any other NSS module with dlopen, which brings a second, shared libc into the
/// process. Call it before any thread looks a name up. False if glibc refused.
bool pin_host_lookups();

}  // namespace toolwarden::daemon
