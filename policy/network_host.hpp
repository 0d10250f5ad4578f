// Host entries of a custom tool's network allowlist (SPEC §11), as the manifest declares them
// and the egress proxy matches them: a DNS name (lowercased; labels of [a-z0-9-], not starting
// or ending with '-'; at most 253 characters; the last label not all digits, so "127.1" is no
// name), "*." and such a name of at least two labels (subdomains only, not the name itself),
// or an IPv4/IPv6 literal (normalised; "[::1]" and "::1" are the same). No ":port": the proxy
// connects to 443 and 80 only.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace toolwarden::policy {

/// The normalised form of a network host entry, or nullopt with `*why`.
std::optional<std::string> normalize_network_host(std::string_view host, std::string* why);

}  // namespace toolwarden::policy
