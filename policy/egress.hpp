// Which destinations a custom tool's network capability reaches (SPEC §11): host names from
// the manifest's `hosts` list, IP literals only when listed, and never a loopback, private,
// link-local or otherwise non-global address unless the user listed it. Pure: addresses are
// raw bytes, so this layer needs no socket library; the daemon's CONNECT proxy applies it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace toolwarden::policy {

/// An IPv4 or IPv6 address as bytes in network order (IPv4 uses the first 4).
struct IpAddress {
  bool v6 = false;
  std::array<std::uint8_t, 16> bytes{};

  static IpAddress from_v4(const std::array<std::uint8_t, 4>& b);
  static IpAddress from_v6(const std::array<std::uint8_t, 16>& b);
  /// Canonical text only: dotted-quad IPv4 with decimal parts and no leading zeros, or IPv6
  /// (no brackets, no zone). Odd spellings such as `127.1` or `0x7f.0.0.1` are not addresses
  /// here: they are refused by the callers that look for them (see decide_host).
  static std::optional<IpAddress> parse(std::string_view text);
  std::string to_string() const;

  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

/// The non-global range `a` lies in, e.g. "private 10.0.0.0/8"; nullopt for a global address.
/// IPv4-mapped, IPv4-compatible, NAT64 and 6to4 IPv6 addresses are judged by the IPv4
/// address they carry.
std::optional<std::string> forbidden_range(const IpAddress& a);
inline bool is_forbidden_destination(const IpAddress& a) { return forbidden_range(a).has_value(); }

/// The manifest's `capabilities.network.hosts`, validated and normalized.
class EgressAllowlist {
 public:
  /// Entries: a DNS name (`api.example.com`, case-insensitive, one trailing dot tolerated), a
  /// wildcard `*.example.org` (subdomains only, and at least two labels after `*.`), or an IP
  /// literal (dotted-quad IPv4, IPv6 with or without brackets). Ports are not part of an
  /// entry. On refusal returns nullopt and a message naming the entry.
  static std::optional<EgressAllowlist> from_hosts(const std::vector<std::string>& hosts,
                                                   std::string* error);

  /// `name` is normalized (lowercase, no trailing dot).
  bool lists_name(std::string_view name) const;
  bool lists_address(const IpAddress& a) const;

 private:
  std::set<std::string, std::less<>> names_;
  std::vector<std::string> suffixes_;  // ".example.org" for `*.example.org`
  std::vector<IpAddress> addresses_;
};

struct EgressDecision {
  bool allowed = false;
  std::string reason;
  /// The host as it will be resolved: lowercased, trailing dot removed, IPv6 without
  /// brackets. Set whenever the host could be read, also when denied.
  std::string host;
  /// Set when the request named a listed IP literal: connect to it, no resolution.
  std::optional<IpAddress> literal;
};

/// Lowercase ASCII with one trailing dot removed: the form names are compared and resolved in.
std::string normalize_host_name(std::string_view name);

/// The ports a tunnel may reach.
inline constexpr std::uint16_t kEgressPorts[] = {443, 80};

/// Decides a CONNECT request's host (a DNS name, dotted IPv4 or bracketed IPv6) and port.
/// Anything an IPv4 parser of the inet_aton family would take for an address (`2130706433`,
/// `0x7f.1`, `127.1`, `017700000001`) counts as an IP literal, and an IP literal is allowed
/// only when that exact literal was listed.
EgressDecision decide_host(const EgressAllowlist& allowlist, std::string_view host,
                           std::uint16_t port);

/// Where an address to connect to came from.
enum class AddressSource { dns, resolver_override, listed_literal };

/// Decides one resolved address: a forbidden range is refused unless the address itself is
/// listed or the user's resolver override produced it.
EgressDecision decide_address(const EgressAllowlist& allowlist, const IpAddress& a,
                              AddressSource source);

/// The authority-form target of `CONNECT host:port` (RFC 9110 §9.3.6). `host` keeps the
/// brackets of an IPv6 literal. nullopt when malformed (no port, port 0 or > 65535, ...).
struct ConnectTarget {
  std::string host;
  std::uint16_t port = 0;
};
std::optional<ConnectTarget> parse_connect_target(std::string_view target);

}  // namespace toolwarden::policy
