#include "policy/egress.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace toolwarden::policy {
namespace {

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (lower(c) >= 'a' && lower(c) <= 'f'); }
bool is_letter(char c) { return lower(c) >= 'a' && lower(c) <= 'z'; }

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    auto pos = s.find(sep);
    parts.push_back(s.substr(0, pos));
    if (pos == std::string_view::npos) return parts;
    s.remove_prefix(pos + 1);
  }
}

// True when every dot-separated part is a number in C notation (decimal, 0-octal, 0x-hex):
// the spellings inet_aton, and getaddrinfo through it, may take for an IPv4 address
// (`2130706433`, `0x7f.1`, `127.1`, `017700000001`). Deliberately wider than inet_aton (no
// range check), so nothing it accepts slips through as a "name".
bool looks_like_ipv4_number(std::string_view s) {
  if (s.empty()) return false;
  for (auto part : split(s, '.')) {
    if (part.empty()) return false;
    std::string_view digits = part;
    bool hex = false;
    if (part.size() >= 2 && part[0] == '0' && lower(part[1]) == 'x') {
      digits = part.substr(2);
      hex = true;
    }
    for (char c : digits) {
      if (hex ? !is_hex(c) : !is_digit(c)) return false;
    }
  }
  return true;
}

// A normalized DNS host name: labels of 1-63 letters, digits, '-' or '_' (not at a label's
// ends for '-'), 253 chars at most, and a last label that starts with a letter, so nothing
// numeric is ever sent to the resolver as a "name".
bool is_host_name(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  auto labels = split(s, '.');
  for (auto label : labels) {
    if (label.empty() || label.size() > 63) return false;
    if (label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!(is_letter(c) || is_digit(c) || c == '-' || c == '_')) return false;
    }
  }
  return is_letter(labels.back().front());
}

std::optional<IpAddress> parse_v6(std::string_view text) {
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN || text.find('%') != text.npos) {
    return std::nullopt;  // zone ids name a local interface: never a destination
  }
  char buf[INET6_ADDRSTRLEN] = {};
  std::memcpy(buf, text.data(), text.size());
  std::array<std::uint8_t, 16> b{};
  if (inet_pton(AF_INET6, buf, b.data()) != 1) return std::nullopt;
  return IpAddress::from_v6(b);
}

std::optional<IpAddress> parse_v4(std::string_view text) {
  // inet_pton(AF_INET) takes only four decimal parts and refuses leading zeros.
  if (text.empty() || text.size() >= INET_ADDRSTRLEN) return std::nullopt;
  char buf[INET_ADDRSTRLEN] = {};
  std::memcpy(buf, text.data(), text.size());
  std::array<std::uint8_t, 4> b{};
  if (inet_pton(AF_INET, buf, b.data()) != 1) return std::nullopt;
  return IpAddress::from_v4(b);
}

// The IPv4 address carried inside an IPv6 one, for the forms that route to it.
std::optional<IpAddress> embedded_v4(const IpAddress& a) {
  static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static constexpr std::uint8_t kCompat[12] = {};
  static constexpr std::uint8_t kNat64[12] = {0, 0x64, 0xff, 0x9b};
  const auto* b = a.bytes.data();
  if (std::memcmp(b, kMapped, 12) == 0 || std::memcmp(b, kCompat, 12) == 0 ||
      std::memcmp(b, kNat64, 12) == 0) {
    return IpAddress::from_v4({b[12], b[13], b[14], b[15]});
  }
  if (b[0] == 0x20 && b[1] == 0x02) return IpAddress::from_v4({b[2], b[3], b[4], b[5]});  // 6to4
  return std::nullopt;
}

struct Range {
  std::array<std::uint8_t, 16> prefix;
  int bits;
  const char* name;
};

bool in_range(const std::array<std::uint8_t, 16>& b, const Range& r) {
  int full = r.bits / 8;
  if (std::memcmp(b.data(), r.prefix.data(), full) != 0) return false;
  int rest = r.bits % 8;
  if (rest == 0) return true;
  auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return (b[full] & mask) == (r.prefix[full] & mask);
}

std::string describe(const Range& r, bool v6) {
  IpAddress p{v6, r.prefix};
  return std::string(r.name) + " " + p.to_string() + "/" + std::to_string(r.bits);
}

// IANA special-purpose ranges that must not be reached from a sandbox (RFC 6890 and
// successors): the host itself, the local networks and cloud metadata services behind them.
const Range kV4Ranges[] = {
    {{0}, 8, "\"this network\""},
    {{10}, 8, "private"},
    {{100, 64}, 10, "shared address space (CGNAT)"},
    {{127}, 8, "loopback"},
    {{169, 254}, 16, "link-local (incl. cloud metadata)"},
    {{172, 16}, 12, "private"},
    {{192, 0, 0}, 24, "IETF protocol assignments"},
    {{192, 168}, 16, "private"},
    {{198, 18}, 15, "benchmarking"},
    {{224}, 4, "multicast"},
    {{240}, 4, "reserved (incl. broadcast)"},
};
const Range kV6Ranges[] = {
    {{}, 128, "unspecified"},
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 128, "loopback"},
    {{0, 0x64, 0xff, 0x9b, 0, 1}, 48, "local-use NAT64"},
    {{0x01, 0x00}, 64, "discard-only"},
    {{0xfc}, 7, "unique local"},
    {{0xfe, 0x80}, 10, "link-local"},
    {{0xfe, 0xc0}, 10, "site-local"},
    {{0xff}, 8, "multicast"},
};

// Same address as seen by a comparison: an IPv4-mapped IPv6 address is its IPv4 address.
IpAddress unmapped(const IpAddress& a) {
  static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (a.v6 && std::memcmp(a.bytes.data(), kMapped, 12) == 0) {
    return IpAddress::from_v4({a.bytes[12], a.bytes[13], a.bytes[14], a.bytes[15]});
  }
  return a;
}

EgressDecision denied(std::string host, std::string reason) {
  return EgressDecision{false, std::move(reason), std::move(host), std::nullopt};
}

}  // namespace

// One trailing dot is the DNS root: "a.com." names "a.com".
std::string normalize_host_name(std::string_view s) {
  if (!s.empty() && s.back() == '.') s.remove_suffix(1);
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), lower);
  return out;
}

IpAddress IpAddress::from_v4(const std::array<std::uint8_t, 4>& b) {
  IpAddress a;
  std::copy(b.begin(), b.end(), a.bytes.begin());
  return a;
}

IpAddress IpAddress::from_v6(const std::array<std::uint8_t, 16>& b) { return IpAddress{true, b}; }

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
  if (text.find(':') != text.npos) return parse_v6(text);
  return parse_v4(text);
}

std::string IpAddress::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf);
  return buf;
}

std::optional<std::string> forbidden_range(const IpAddress& a) {
  if (!a.v6) {
    for (const auto& r : kV4Ranges) {
      if (in_range(a.bytes, r)) return describe(r, false);
    }
    return std::nullopt;
  }
  for (const auto& r : kV6Ranges) {
    if (in_range(a.bytes, r)) return describe(r, true);
  }
  if (auto v4 = embedded_v4(a)) {
    if (auto inner = forbidden_range(*v4)) return "IPv6 form of " + v4->to_string() + ", " + *inner;
  }
  return std::nullopt;
}

std::optional<EgressAllowlist> EgressAllowlist::from_hosts(const std::vector<std::string>& hosts,
                                                           std::string* error) {
  EgressAllowlist list;
  auto fail = [&](const std::string& entry, std::string_view why) {
    if (error) *error = "network.hosts entry \"" + entry + "\": " + std::string(why);
    return std::nullopt;
  };
  for (const auto& entry : hosts) {
    std::string_view e = entry;
    if (e.size() >= 2 && e.front() == '[' && e.back() == ']') {
      auto a = parse_v6(e.substr(1, e.size() - 2));
      if (!a) return fail(entry, "not an IPv6 address");
      list.addresses_.push_back(unmapped(*a));
      continue;
    }
    if (e.find(':') != e.npos) {
      auto a = parse_v6(e);
      if (!a) return fail(entry, "not an IPv6 address (entries take no port)");
      list.addresses_.push_back(unmapped(*a));
      continue;
    }
    if (e.starts_with("*.")) {
      std::string suffix = normalize_host_name(e.substr(2));
      if (!is_host_name(suffix)) return fail(entry, "not a valid wildcard host name");
      if (suffix.find('.') == suffix.npos) {
        return fail(entry, "a wildcard needs at least two labels after \"*.\"");
      }
      list.suffixes_.push_back("." + suffix);
      continue;
    }
    std::string name = normalize_host_name(e);
    if (looks_like_ipv4_number(name)) {
      auto a = parse_v4(e);
      if (!a) return fail(entry, "an IPv4 address must be written as four decimal parts");
      list.addresses_.push_back(*a);
      continue;
    }
    if (!is_host_name(name)) return fail(entry, "not a valid host name");
    list.names_.insert(std::move(name));
  }
  return list;
}

bool EgressAllowlist::lists_name(std::string_view name) const {
  if (names_.contains(name)) return true;
  return std::any_of(suffixes_.begin(), suffixes_.end(), [&](const std::string& suffix) {
    return name.size() > suffix.size() && name.ends_with(suffix);
  });
}

bool EgressAllowlist::lists_address(const IpAddress& a) const {
  return std::find(addresses_.begin(), addresses_.end(), unmapped(a)) != addresses_.end();
}

EgressDecision decide_host(const EgressAllowlist& allowlist, std::string_view host,
                           std::uint16_t port) {
  if (std::find(std::begin(kEgressPorts), std::end(kEgressPorts), port) == std::end(kEgressPorts)) {
    return denied(normalize_host_name(host),
                  "port " + std::to_string(port) + " is not allowed (only 443 and 80)");
  }
  if (host.empty()) return denied("", "empty host");
  if (host.front() == '[') {
    std::string inner(host.substr(1, host.size() >= 2 ? host.size() - 2 : 0));
    auto a = host.back() == ']' ? parse_v6(inner) : std::nullopt;
    if (!a) return denied(std::string(host), "malformed IPv6 literal");
    if (!allowlist.lists_address(*a)) {
      return denied(a->to_string(), "IP literal " + a->to_string() + " is not listed");
    }
    return EgressDecision{true, "listed IP literal", a->to_string(), *a};
  }
  std::string name = normalize_host_name(host);
  if (looks_like_ipv4_number(name)) {
    auto a = parse_v4(host);  // the exact spelling, trailing dot included, must be canonical
    if (!a) {
      return denied(name, "IP literal " + std::string(host) +
                              " is not in dotted-quad form; such spellings are refused");
    }
    if (!allowlist.lists_address(*a)) {
      return denied(name, "IP literal " + a->to_string() + " is not listed");
    }
    return EgressDecision{true, "listed IP literal", a->to_string(), *a};
  }
  if (!is_host_name(name)) return denied(name, "not a valid host name");
  if (!allowlist.lists_name(name)) return denied(name, "host " + name + " is not in the allowlist");
  return EgressDecision{true, "listed host", name, std::nullopt};
}

EgressDecision decide_address(const EgressAllowlist& allowlist, const IpAddress& a,
                              AddressSource source) {
  std::string text = a.to_string();
  if (allowlist.lists_address(a)) return EgressDecision{true, "listed address", text, a};
  if (source == AddressSource::resolver_override) {
    return EgressDecision{true, "resolver override", text, a};
  }
  if (auto range = forbidden_range(a)) {
    return denied(text, "address " + text + " is in a forbidden range: " + *range);
  }
  return EgressDecision{true, "global address", text, a};
}

std::optional<ConnectTarget> parse_connect_target(std::string_view target) {
  std::string_view host;
  std::string_view port;
  if (target.starts_with('[')) {
    auto close = target.find(']');
    if (close == target.npos || close + 1 >= target.size() || target[close + 1] != ':') {
      return std::nullopt;
    }
    host = target.substr(0, close + 1);
    port = target.substr(close + 2);
  } else {
    auto colon = target.rfind(':');
    if (colon == target.npos) return std::nullopt;
    host = target.substr(0, colon);
    port = target.substr(colon + 1);
    if (host.find(':') != host.npos) return std::nullopt;  // an IPv6 literal needs brackets
  }
  if (host.empty() || port.empty() || port.size() > 5) return std::nullopt;
  if (!std::all_of(port.begin(), port.end(), is_digit)) return std::nullopt;
  unsigned value = 0;
  std::from_chars(port.data(), port.data() + port.size(), value);
  if (value == 0 || value > 65535) return std::nullopt;
  return ConnectTarget{std::string(host), static_cast<std::uint16_t>(value)};
}

}  // namespace toolwarden::policy
