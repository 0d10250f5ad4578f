// Secrets and identifiers minted by the daemon (OpenSSL RAND_bytes).
#pragma once

#include <string>

namespace toolwarden::daemon {

/// A bearer token: 32 random bytes as unpadded base64url (43 characters).
std::string new_token();

/// A job id: "job_" and 16 hex characters (64 random bits).
std::string new_job_id();

}  // namespace toolwarden::daemon
