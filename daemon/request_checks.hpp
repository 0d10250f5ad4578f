// The header checks of SPEC §5, in the SPEC's order, on a request whose body is still unread.
// Kept apart from the sockets so that unit tests and fuzzers drive the real checks.
#pragma once

#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/jobs.hpp"

namespace toolwarden::daemon {

namespace http = boost::beast::http;

struct CheckPolicy {
  unsigned short port = 0;
  std::vector<std::string> allowed_origins;  // beyond the daemon's own
  std::size_t max_body_bytes = 1024 * 1024;
};

struct HeaderRejection {
  http::status status;
  std::string message;
};

struct HeaderVerdict {
  std::optional<HeaderRejection> rejection;
  std::shared_ptr<JobState> job;  // the authenticated job when not rejected
};

using Authenticator = std::function<std::shared_ptr<JobState>(std::string_view token)>;

/// 400 a Transfer-Encoding not ending in chunked (RFC 9112 §6.3), then SPEC §5: 404 path,
/// 405 method, 403 Host, 403 Origin, 401 token, 415 content type, 413 declared size.
HeaderVerdict check_mcp_headers(const http::request_header<>& req, const CheckPolicy& policy,
                                const Authenticator& authenticate);

/// The bearer token of an Authorization header value, or empty.
std::string_view bearer_token(std::string_view authorization);

/// True when an Accept header admits an application/json answer (absent admits anything).
bool accepts_json(std::string_view accept);
/// True when the client named text/event-stream (needed to stream progress notifications).
bool accepts_event_stream(std::string_view accept);

}  // namespace toolwarden::daemon
