// Secrets and identifiers minted by the daemon (OpenSSL RAND_bytes).
#pragma once

#include <string>
#include <string_view>

namespace toolwarden::daemon {

/// A bearer token: 32 random bytes as unpadded base64url (43 characters).
std::string new_token();

/// A job id: "job_" and 16 hex characters (64 random bits).
std::string new_job_id();

/// An identifier of the daemon's records: `prefix` and 16 hex characters (64 random bits), e.g.
/// "snap_…", "probe_…", "run_…".
std::string new_record_id(std::string_view prefix);

}  // namespace toolwarden::daemon
