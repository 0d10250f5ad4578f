#include "daemon/request_checks.hpp"

#include "daemon/http_util.hpp"

namespace toolwarden::daemon {

namespace {

std::string_view path_of(std::string_view target) {
  auto q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
}

bool own_authority(std::string_view value, unsigned short port, std::string_view scheme_prefix) {
  const std::string v = lowercase(value);
  const std::string p = ":" + std::to_string(port);
  for (const char* host : {"127.0.0.1", "localhost", "[::1]"}) {
    if (v == std::string(scheme_prefix) + host + p) return true;
  }
  return false;
}

// RFC 9112 §6.3: with Transfer-Encoding, only a final `chunked` gives the body a length. Beast
// reads no body otherwise, and the bytes meant as one would be parsed as the connection's next
// request (found by fuzz_http). One field only: of several, Beast's parser obeys the last and
// its message::chunked() the first. The value must be a plain list of codings (no parameters,
// nothing a token list could stop at) ending in chunked, so that every reading agrees.
bool framed_by_chunked(const http::request_header<>& req) {
  if (req.count(http::field::transfer_encoding) != 1) return false;
  std::string_view value = req[http::field::transfer_encoding];
  auto is_tchar = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  };
  std::string_view coding;
  for (;;) {
    const auto comma = value.find(',');
    coding = value.substr(0, comma);
    while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t')) {
      coding.remove_prefix(1);
    }
    while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t')) {
      coding.remove_suffix(1);
    }
    if (coding.empty()) return false;
    for (char c : coding)
      if (!is_tchar(c)) return false;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return lowercase(coding) == "chunked";
}

}  // namespace

std::string_view bearer_token(std::string_view v) {
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  if (v.size() < 7 || lowercase(v.substr(0, 7)) != "bearer ") return {};
  v.remove_prefix(7);
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  return v;
}

bool accepts_json(std::string_view accept) {
  if (accept.empty()) return true;
  std::string a = lowercase(accept);
  return a.find("application/json") != std::string::npos || a.find("*/*") != std::string::npos ||
         a.find("application/*") != std::string::npos;
}

bool accepts_event_stream(std::string_view accept) {
  const std::string a = lowercase(accept);
  return a.find("text/event-stream") != std::string::npos;
}

HeaderVerdict check_mcp_headers(const http::request_header<>& req, const CheckPolicy& policy,
                                const Authenticator& authenticate) {
  auto reject = [](http::status s, std::string msg) {
    return HeaderVerdict{HeaderRejection{s, std::move(msg)}, nullptr};
  };
  // Framing comes first: a request whose length is ambiguous is malformed, whatever it asks.
  if (req.count(http::field::transfer_encoding) > 0 && !framed_by_chunked(req)) {
    return reject(http::status::bad_request, "Transfer-Encoding must end in chunked");
  }
  if (path_of(req.target()) != "/mcp") return reject(http::status::not_found, "not found");
  if (req.method() != http::verb::post) {
    return reject(http::status::method_not_allowed, "only POST is supported");
  }
  // DNS rebinding: a browser page can reach 127.0.0.1 under its own name; only our names pass.
  // Exactly one Host (RFC 9112 §3.2): a second one could be read differently by a proxy.
  if (req.count(http::field::host) != 1 || req.count(http::field::origin) > 1) {
    return reject(http::status::forbidden, "Host or Origin is missing or repeated");
  }
  if (!own_authority(req[http::field::host], policy.port, "")) {
    return reject(http::status::forbidden, "Host is not this daemon's loopback address");
  }
  if (auto origin = req[http::field::origin];
      !origin.empty() || req.count(http::field::origin) > 0) {
    bool allowed = own_authority(origin, policy.port, "http://");
    for (const auto& o : policy.allowed_origins)
      allowed = allowed || lowercase(o) == lowercase(origin);
    if (!allowed) return reject(http::status::forbidden, "Origin is not allowed");
  }
  if (req.count(http::field::authorization) != 1) {
    return reject(http::status::unauthorized, "a bearer token is required");
  }
  auto job = authenticate(bearer_token(req[http::field::authorization]));
  if (!job) return reject(http::status::unauthorized, "the token is not valid for a live job");
  if (media_type(req[http::field::content_type]) != "application/json") {
    return reject(http::status::unsupported_media_type, "Content-Type must be application/json");
  }
  if (req.count(http::field::content_length) > 0) {
    const auto declared = req[http::field::content_length];
    std::size_t n = 0;
    for (char c : declared) {
      if (c < '0' || c > '9' || n > policy.max_body_bytes) {
        n = policy.max_body_bytes + 1;
        break;
      }
      n = n * 10 + static_cast<std::size_t>(c - '0');
    }
    if (n > policy.max_body_bytes) return reject(http::status::payload_too_large, "body too large");
  }
  return HeaderVerdict{std::nullopt, std::move(job)};
}

}  // namespace toolwarden::daemon
