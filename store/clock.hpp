// Wall-clock helpers shared by the store and the daemon.
#pragma once

#include <cstdint>
#include <string>

namespace toolwarden::store {

/// Seconds since the Unix epoch.
std::int64_t unix_now();

/// RFC 3339 UTC timestamp with milliseconds, e.g. 2026-11-29T14:22:58.123Z.
std::string rfc3339_now();

/// RFC 3339 UTC timestamp (whole seconds) for a Unix time.
std::string rfc3339(std::int64_t unix_seconds);

}  // namespace toolwarden::store
