#include "daemon/egress_routes.hpp"

#include <nss.h>

#include <algorithm>
#include <charconv>

#include "policy/egress.hpp"

namespace toolwarden::daemon {
namespace {

std::optional<std::uint16_t> parse_port(std::string_view s) {
  unsigned v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v == 0 || v > 65535) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(v);
}

}  // namespace

std::optional<EgressResolveOverrides> parse_egress_resolve_overrides(std::string_view text,
                                                                     std::string* error) {
  EgressResolveOverrides out;
  auto fail = [&](std::string_view entry, std::string_view why) {
    if (error) {
      // Appended piecewise: GCC 12 warns falsely (-Warray-bounds) on a chain of operator+.
      error->assign(kEgressResolveEnv).append(" entry \"").append(entry).append("\": ");
      error->append(why);
    }
    return std::nullopt;
  };
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string_view entry = text.substr(0, comma);
    text = comma == text.npos ? std::string_view{} : text.substr(comma + 1);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    if (entry.empty()) continue;

    auto eq = entry.find('=');
    if (eq == entry.npos || eq == 0) return fail(entry, "want host=address");
    std::string host = policy::normalize_host_name(entry.substr(0, eq));
    const bool host_ok = !host.empty() && std::all_of(host.begin(), host.end(), [](char ch) {
      return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' ||
             ch == '.';
    });
    if (!host_ok) return fail(entry, "not a host name");

    std::string_view value = entry.substr(eq + 1);
    std::string_view address = value;
    std::string_view port;
    if (value.starts_with('[')) {
      auto close = value.find(']');
      if (close == value.npos) return fail(entry, "unclosed '['");
      address = value.substr(1, close - 1);
      auto rest = value.substr(close + 1);
      if (!rest.empty()) {
        if (rest.front() != ':') return fail(entry, "want [address]:port");
        port = rest.substr(1);
        if (port.empty()) return fail(entry, "empty port");
      }
    } else if (std::count(value.begin(), value.end(), ':') == 1) {
      auto colon = value.find(':');
      address = value.substr(0, colon);
      port = value.substr(colon + 1);
      if (port.empty()) return fail(entry, "empty port");
    }
    boost::system::error_code ec;
    auto parsed = boost::asio::ip::make_address(address, ec);
    if (ec) return fail(entry, "not an IP address");
    EgressRoute route{parsed, 0};
    if (!port.empty()) {
      auto p = parse_port(port);
      if (!p) return fail(entry, "not a port (1-65535)");
      route.port = *p;
    }
    if (!out.emplace(std::move(host), route).second) return fail(entry, "host given twice");
  }
  return out;
}

bool pin_host_lookups() { return __nss_configure_lookup("hosts", "files dns") == 0; }

}  // namespace toolwarden::daemon
