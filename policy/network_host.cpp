#include "policy/network_host.hpp"

#include <arpa/inet.h>

#include <algorithm>

namespace toolwarden::policy {

namespace {

bool is_strict_ipv4(std::string_view s) {
  int parts = 0;
  std::size_t i = 0;
  while (i <= s.size()) {
    std::size_t dot = s.find('.', i);
    if (dot == std::string_view::npos) dot = s.size();
    std::string_view part = s.substr(i, dot - i);
    if (part.empty() || part.size() > 3 || (part.size() > 1 && part.front() == '0')) return false;
    int n = 0;
    for (char c : part) {
      if (c < '0' || c > '9') return false;
      n = n * 10 + (c - '0');
    }
    if (n > 255) return false;
    ++parts;
    i = dot + 1;
  }
  return parts == 4;
}

std::optional<std::string> normalized_ipv6(std::string_view s) {
  if (s.find('%') != std::string_view::npos) return std::nullopt;  // no zone ids
  std::string text(s);
  in6_addr addr{};
  if (::inet_pton(AF_INET6, text.c_str(), &addr) != 1) return std::nullopt;
  char buf[INET6_ADDRSTRLEN];
  if (::inet_ntop(AF_INET6, &addr, buf, sizeof buf) == nullptr) return std::nullopt;
  return std::string(buf);
}

// A DNS name already lowercased; `*why` names the rule it breaks.
bool is_dns_name(std::string_view s, std::size_t* labels, std::string* why) {
  if (s.empty() || s.size() > 253) {
    *why = "not a host name (1 to 253 characters)";
    return false;
  }
  *labels = 0;
  std::size_t i = 0;
  std::string_view last;
  while (i <= s.size()) {
    std::size_t dot = s.find('.', i);
    if (dot == std::string_view::npos) dot = s.size();
    std::string_view label = s.substr(i, dot - i);
    if (label.empty() || label.size() > 63) {
      *why = "not a host name (empty label or a label over 63 characters)";
      return false;
    }
    for (char c : label) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
        *why = "not a host name (labels are letters, digits and '-')";
        return false;
      }
    }
    if (label.front() == '-' || label.back() == '-') {
      *why = "not a host name (a label starts or ends with '-')";
      return false;
    }
    ++*labels;
    last = label;
    i = dot + 1;
  }
  if (std::all_of(last.begin(), last.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    *why = "not a host name or IP address";  // "127.1" or "2130706433": an IP in disguise
    return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> normalize_network_host(std::string_view host, std::string* why) {
  if (host.empty()) {
    *why = "empty";
    return std::nullopt;
  }
  const std::string port_rule = "a port is not allowed (the proxy connects to ports 443 and 80)";
  if (host.front() == '[') {
    const auto close = host.find(']');
    if (close == std::string_view::npos) {
      *why = "not an IPv6 address";
      return std::nullopt;
    }
    if (close + 1 != host.size()) {
      *why = host[close + 1] == ':' ? port_rule : "not an IPv6 address";
      return std::nullopt;
    }
    auto v6 = normalized_ipv6(host.substr(1, close - 1));
    if (!v6) *why = "not an IPv6 address";
    return v6;
  }
  if (host.find(':') != std::string_view::npos) {
    if (auto v6 = normalized_ipv6(host)) return v6;
    *why = host.find(':') == host.rfind(':') ? port_rule : "not an IPv6 address";
    return std::nullopt;
  }
  std::string lower(host);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  if (std::all_of(lower.begin(), lower.end(),
                  [](char c) { return c == '.' || (c >= '0' && c <= '9'); })) {
    if (is_strict_ipv4(lower)) return lower;
    *why = "not an IPv4 address (four decimal numbers 0-255 without leading zeros)";
    return std::nullopt;
  }
  std::size_t labels = 0;
  if (lower.substr(0, 2) == "*.") {
    if (!is_dns_name(std::string_view(lower).substr(2), &labels, why)) return std::nullopt;
    if (labels < 2) {
      *why = "a wildcard needs a name of at least two labels (\"*.example.com\")";
      return std::nullopt;
    }
    return lower;
  }
  if (lower.find('*') != std::string::npos) {
    *why = "a wildcard is allowed only as a leading \"*.\"";
    return std::nullopt;
  }
  if (!is_dns_name(lower, &labels, why)) return std::nullopt;
  return lower;
}

}  // namespace toolwarden::policy
