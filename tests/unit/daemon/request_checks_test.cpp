// SPEC §5 header checks of POST /mcp, in the SPEC's order: 404 path, 405 method, 403 Host,
// 403 Origin, 401 token, 415 content type, 413 declared size.
#include "daemon/request_checks.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace toolwarden::daemon {
namespace {

constexpr unsigned short kPort = 8123;
const std::string kToken = "tw_0123456789abcdef";

class McpHeaderChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    policy_.port = kPort;
    job_ = std::make_shared<JobState>();
    job_->record.id = "job-1";
    auth_ = [this](std::string_view token) -> std::shared_ptr<JobState> {
      seen_tokens_.emplace_back(token);
      return token == kToken ? job_ : nullptr;
    };
  }

  // A request that passes every check.
  static http::request_header<> good() {
    http::request_header<> h;
    h.method(http::verb::post);
    h.target("/mcp");
    h.version(11);
    h.set(http::field::host, "127.0.0.1:8123");
    h.set(http::field::authorization, "Bearer " + kToken);
    h.set(http::field::content_type, "application/json");
    h.set(http::field::accept, "application/json, text/event-stream");
    h.set(http::field::content_length, "42");
    return h;
  }

  HeaderVerdict check(const http::request_header<>& h) {
    return check_mcp_headers(h, policy_, auth_);
  }

  ::testing::AssertionResult accepted(const http::request_header<>& h) {
    auto v = check(h);
    if (v.rejection) {
      return ::testing::AssertionFailure()
             << "rejected " << static_cast<unsigned>(v.rejection->status) << ": "
             << v.rejection->message;
    }
    if (v.job != job_)
      return ::testing::AssertionFailure() << "accepted without the authenticated job";
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult rejected(const http::request_header<>& h, http::status want) {
    auto v = check(h);
    if (!v.rejection)
      return ::testing::AssertionFailure() << "accepted, want " << static_cast<unsigned>(want);
    if (v.rejection->status != want) {
      return ::testing::AssertionFailure()
             << "status " << static_cast<unsigned>(v.rejection->status) << " ("
             << v.rejection->message << "), want " << static_cast<unsigned>(want);
    }
    if (v.job) return ::testing::AssertionFailure() << "a rejection carries a job";
    if (v.rejection->message.empty()) return ::testing::AssertionFailure() << "empty message";
    return ::testing::AssertionSuccess();
  }

  CheckPolicy policy_;
  std::shared_ptr<JobState> job_;
  std::vector<std::string> seen_tokens_;
  Authenticator auth_;
};

TEST_F(McpHeaderChecks, GoodRequestIsAcceptedWithItsJob) {
  EXPECT_TRUE(accepted(good()));
  ASSERT_EQ(seen_tokens_.size(), 1u);
  EXPECT_EQ(seen_tokens_[0], kToken) << "the authenticator gets the bare token";
}

// ---- 404 -----------------------------------------------------------------------------------

TEST_F(McpHeaderChecks, WrongPathIs404) {
  for (auto target : {"/", "/mcp/x", "/mcp/", "/mcpx", "/MCP", "/Mcp", "/admin", "/healthz",
                      "/metrics", "//mcp", "/x/mcp", "*", "/mcp%2f", "/mcp/../mcp"}) {
    auto h = good();
    h.target(target);
    EXPECT_TRUE(rejected(h, http::status::not_found)) << target;
  }
}

TEST_F(McpHeaderChecks, QueryStringDoesNotChangeThePath) {
  auto h = good();
  h.target("/mcp?session=1");
  EXPECT_TRUE(accepted(h));
  h.target("/mcpx?a=/mcp");
  EXPECT_TRUE(rejected(h, http::status::not_found));
}

// ---- 405 -----------------------------------------------------------------------------------

TEST_F(McpHeaderChecks, NonPostIs405) {
  for (auto verb : {http::verb::get, http::verb::delete_, http::verb::put, http::verb::head,
                    http::verb::options, http::verb::patch}) {
    auto h = good();
    h.method(verb);
    EXPECT_TRUE(rejected(h, http::status::method_not_allowed)) << http::to_string(verb);
  }
}

// ---- 403 Host ------------------------------------------------------------------------------

TEST_F(McpHeaderChecks, OwnHostsAreAccepted) {
  for (auto host : {"127.0.0.1:8123", "localhost:8123", "[::1]:8123"}) {
    auto h = good();
    h.set(http::field::host, host);
    EXPECT_TRUE(accepted(h)) << host;
  }
}

TEST_F(McpHeaderChecks, ForeignHostsAre403) {
  for (auto host : {"evil.com:8123",
                    "evil.com",
                    "127.0.0.1",
                    "localhost",
                    "[::1]",
                    "::1:8123",
                    "127.0.0.1:8124",
                    "127.0.0.1:80",
                    "localhost:81",
                    "[::1]:8124",
                    "127.0.0.1:08123",
                    "127.0.0.1.evil.com:8123",
                    "localhost.evil.com:8123",
                    "evil.localhost:8123",
                    "0.0.0.0:8123",
                    "127.0.0.2:8123",
                    "user@127.0.0.1:8123",
                    "127.0.0.1:8123.evil.com",
                    "127.0.0.1:8123:8123",
                    "",
                    " "}) {
    auto h = good();
    h.set(http::field::host, host);
    EXPECT_TRUE(rejected(h, http::status::forbidden)) << "'" << host << "'";
  }
}

TEST_F(McpHeaderChecks, MissingHostIs403) {
  auto h = good();
  h.erase(http::field::host);
  EXPECT_TRUE(rejected(h, http::status::forbidden));
}

TEST_F(McpHeaderChecks, HostCheckUsesThePolicyPort) {
  policy_.port = 40000;
  EXPECT_TRUE(rejected(good(), http::status::forbidden));
  auto h = good();
  h.set(http::field::host, "localhost:40000");
  EXPECT_TRUE(accepted(h));
}

// RFC 9110/7230 §5.4: a request with more than one Host header is invalid; a second,
// foreign Host must not ride along behind a good first one.
TEST_F(McpHeaderChecks, DuplicateHostHeaderIsRejected) {
  auto h = good();
  h.insert(http::field::host, "evil.com:8123");
  auto v = check(h);
  ASSERT_TRUE(v.rejection.has_value())
      << "two Host headers (127.0.0.1:8123, evil.com:8123) accepted";
  EXPECT_TRUE(v.rejection->status == http::status::forbidden ||
              v.rejection->status == http::status::bad_request)
      << static_cast<unsigned>(v.rejection->status);
}

// ---- 403 Origin ----------------------------------------------------------------------------

TEST_F(McpHeaderChecks, AbsentOriginIsFine) { EXPECT_TRUE(accepted(good())); }

TEST_F(McpHeaderChecks, OwnOriginsAreAccepted) {
  for (auto origin : {"http://127.0.0.1:8123", "http://localhost:8123", "http://[::1]:8123"}) {
    auto h = good();
    h.set(http::field::origin, origin);
    EXPECT_TRUE(accepted(h)) << origin;
  }
}

TEST_F(McpHeaderChecks, ForeignOriginsAre403) {
  for (auto origin :
       {"null", "http://evil.com", "https://evil.com", "http://evil.com:8123", "http://127.0.0.1",
        "http://127.0.0.1:8124", "https://127.0.0.1:8123", "http://localhost",
        "http://127.0.0.1.evil.com:8123", "file://", "127.0.0.1:8123",
        "http://localhost:8123.evil.com", "ws://127.0.0.1:8123", ""}) {
    auto h = good();
    h.set(http::field::origin, origin);
    EXPECT_TRUE(rejected(h, http::status::forbidden)) << "'" << origin << "'";
  }
}

TEST_F(McpHeaderChecks, ConfiguredAllowedOrigin) {
  policy_.allowed_origins = {"https://ide.example.com"};
  auto h = good();
  h.set(http::field::origin, "https://ide.example.com");
  EXPECT_TRUE(accepted(h));
  h.set(http::field::origin, "https://ide.example.com.evil.com");
  EXPECT_TRUE(rejected(h, http::status::forbidden));
  h.set(http::field::origin, "http://ide.example.com");
  EXPECT_TRUE(rejected(h, http::status::forbidden));
  h.set(http::field::origin, "https://other.example.com");
  EXPECT_TRUE(rejected(h, http::status::forbidden));
  h.set(http::field::origin, "http://localhost:8123");
  EXPECT_TRUE(accepted(h)) << "own origins stay allowed";
}

TEST_F(McpHeaderChecks, NoOriginIsAllowedByDefaultBeyondOwn) {
  EXPECT_TRUE(policy_.allowed_origins.empty());
  auto h = good();
  h.set(http::field::origin, "https://ide.example.com");
  EXPECT_TRUE(rejected(h, http::status::forbidden));
}

// ---- 401 -----------------------------------------------------------------------------------

TEST_F(McpHeaderChecks, MissingAuthorizationIs401) {
  auto h = good();
  h.erase(http::field::authorization);
  EXPECT_TRUE(rejected(h, http::status::unauthorized));
}

TEST_F(McpHeaderChecks, InvalidTokenIs401) {
  for (auto value : {"Bearer wrong", "Bearer ", "Bearer", "Basic dHc6dHc=", kToken.c_str(),
                     "Token tw_0123456789abcdef", ""}) {
    auto h = good();
    h.set(http::field::authorization, value);
    EXPECT_TRUE(rejected(h, http::status::unauthorized)) << "'" << value << "'";
  }
}

TEST_F(McpHeaderChecks, AuthenticatorReturningNullIs401) {
  auth_ = [](std::string_view) -> std::shared_ptr<JobState> { return nullptr; };
  EXPECT_TRUE(rejected(good(), http::status::unauthorized));
}

TEST_F(McpHeaderChecks, BearerSchemeIsCaseInsensitive) {
  auto h = good();
  h.set(http::field::authorization, "bearer " + kToken);
  EXPECT_TRUE(accepted(h));
  h.set(http::field::authorization, "BEARER " + kToken);
  EXPECT_TRUE(accepted(h));
}

TEST_F(McpHeaderChecks, TokenInTheUrlIsNeverAccepted) {
  for (auto target : {"/mcp?token=tw_0123456789abcdef", "/mcp?access_token=tw_0123456789abcdef",
                      "/mcp?authorization=Bearer%20tw_0123456789abcdef"}) {
    auto h = good();
    h.erase(http::field::authorization);
    h.target(target);
    EXPECT_TRUE(rejected(h, http::status::unauthorized)) << target;
  }
}

TEST_F(McpHeaderChecks, TwoAuthorizationHeadersAre401) {
  auto h = good();
  h.insert(http::field::authorization, "Bearer other");
  EXPECT_TRUE(rejected(h, http::status::unauthorized));
}

// ---- 415 -----------------------------------------------------------------------------------

TEST_F(McpHeaderChecks, JsonContentTypesAreAccepted) {
  for (auto ct : {"application/json", "application/json; charset=utf-8", "Application/JSON",
                  "application/json;charset=UTF-8"}) {
    auto h = good();
    h.set(http::field::content_type, ct);
    EXPECT_TRUE(accepted(h)) << ct;
  }
}

TEST_F(McpHeaderChecks, OtherContentTypesAre415) {
  for (auto ct : {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                  "application/jsonx", "application/json-patch+json", "text/json",
                  "application/javascript", "application", ""}) {
    auto h = good();
    h.set(http::field::content_type, ct);
    EXPECT_TRUE(rejected(h, http::status::unsupported_media_type)) << "'" << ct << "'";
  }
  auto h = good();
  h.erase(http::field::content_type);
  EXPECT_TRUE(rejected(h, http::status::unsupported_media_type)) << "missing Content-Type";
}

// ---- 413 -----------------------------------------------------------------------------------

TEST_F(McpHeaderChecks, DeclaredLengthOverTheLimitIs413) {
  auto h = good();
  h.set(http::field::content_length, std::to_string(1024 * 1024));
  EXPECT_TRUE(accepted(h)) << "exactly 1 MiB is allowed";
  h.set(http::field::content_length, std::to_string(1024 * 1024 + 1));
  EXPECT_TRUE(rejected(h, http::status::payload_too_large));
  h.set(http::field::content_length, "99999999999999999999999999999");
  EXPECT_TRUE(rejected(h, http::status::payload_too_large)) << "no overflow";
  h.set(http::field::content_length, "18446744073709551617");
  EXPECT_TRUE(rejected(h, http::status::payload_too_large)) << "2^64 + 1 must not wrap";
}

TEST_F(McpHeaderChecks, ConfiguredBodyLimit) {
  policy_.max_body_bytes = 2048;
  auto h = good();
  h.set(http::field::content_length, "2048");
  EXPECT_TRUE(accepted(h));
  h.set(http::field::content_length, "2049");
  EXPECT_TRUE(rejected(h, http::status::payload_too_large));
}

TEST_F(McpHeaderChecks, NoDeclaredLengthPassesTheHeaderCheck) {
  auto h = good();
  h.erase(http::field::content_length);
  EXPECT_TRUE(accepted(h)) << "a chunked body is limited while it is read";
}

// ---- 400 framing ---------------------------------------------------------------------------

// Regression (fuzz_http): "Transfer-Encoding: chunked, identity" passed; Beast then read no
// body, and the bytes sent as the body were parsed as the connection's next request.
TEST_F(McpHeaderChecks, TransferEncodingNotEndingInChunkedIs400) {
  auto h = good();
  h.erase(http::field::content_length);
  for (const char* te :
       {"chunked, identity", "gzip", "identity", "chunked;q=1, gzip", "", "xchunked", "chunked x",
        "a b, chunked", "chunked,", ", chunked", "gzip;level=1, chunked"}) {
    h.set(http::field::transfer_encoding, te);
    EXPECT_TRUE(rejected(h, http::status::bad_request)) << "Transfer-Encoding: " << te;
  }
  for (const char* te : {"chunked", "CHUNKED", "gzip, chunked", "gzip,chunked", " chunked\t"}) {
    h.set(http::field::transfer_encoding, te);
    EXPECT_TRUE(accepted(h)) << "Transfer-Encoding: " << te;
  }
  // Two fields are refused whatever their order: Beast's parser obeys the last, its
  // message::chunked() the first.
  h.set(http::field::transfer_encoding, "chunked");
  h.insert(http::field::transfer_encoding, "gzip");
  EXPECT_TRUE(rejected(h, http::status::bad_request));
  h.set(http::field::transfer_encoding, "gzip");
  h.insert(http::field::transfer_encoding, "chunked");
  EXPECT_TRUE(rejected(h, http::status::bad_request));
}

TEST_F(McpHeaderChecks, AmbiguousFramingIsRejectedBeforeAnythingElse) {
  auto h = good();
  h.target("/other");
  h.erase(http::field::authorization);
  h.set(http::field::transfer_encoding, "gzip");
  EXPECT_TRUE(rejected(h, http::status::bad_request));
  EXPECT_TRUE(seen_tokens_.empty());
}

// ---- precedence ----------------------------------------------------------------------------

TEST_F(McpHeaderChecks, PathBeforeMethod) {
  auto h = good();
  h.method(http::verb::get);
  h.target("/");
  EXPECT_TRUE(rejected(h, http::status::not_found));
}

TEST_F(McpHeaderChecks, MethodBeforeHost) {
  auto h = good();
  h.method(http::verb::get);
  h.set(http::field::host, "evil.com:8123");
  EXPECT_TRUE(rejected(h, http::status::method_not_allowed));
}

TEST_F(McpHeaderChecks, BadHostAndNoTokenIs403AndTheTokenIsNotConsulted) {
  auto h = good();
  h.set(http::field::host, "evil.com:8123");
  h.erase(http::field::authorization);
  EXPECT_TRUE(rejected(h, http::status::forbidden));
  auto h2 = good();
  h2.set(http::field::host, "evil.com:8123");
  EXPECT_TRUE(rejected(h2, http::status::forbidden)) << "even with a valid token";
  EXPECT_TRUE(seen_tokens_.empty()) << "a foreign Host never reaches the authenticator";
}

TEST_F(McpHeaderChecks, HostBeforeOrigin) {
  auto h = good();
  h.set(http::field::host, "evil.com");
  h.set(http::field::origin, "http://evil.com");
  EXPECT_TRUE(rejected(h, http::status::forbidden));
}

TEST_F(McpHeaderChecks, BadOriginAndNoTokenIs403) {
  auto h = good();
  h.set(http::field::origin, "http://evil.com");
  h.erase(http::field::authorization);
  EXPECT_TRUE(rejected(h, http::status::forbidden));
  EXPECT_TRUE(seen_tokens_.empty());
}

TEST_F(McpHeaderChecks, TokenBeforeContentType) {
  auto h = good();
  h.set(http::field::authorization, "Bearer wrong");
  h.set(http::field::content_type, "text/plain");
  EXPECT_TRUE(rejected(h, http::status::unauthorized));
}

TEST_F(McpHeaderChecks, ContentTypeBeforeSize) {
  auto h = good();
  h.set(http::field::content_type, "text/plain");
  h.set(http::field::content_length, "999999999");
  EXPECT_TRUE(rejected(h, http::status::unsupported_media_type));
}

TEST_F(McpHeaderChecks, TokenBeforeSize) {
  auto h = good();
  h.erase(http::field::authorization);
  h.set(http::field::content_length, "999999999");
  EXPECT_TRUE(rejected(h, http::status::unauthorized));
}

// ---- helpers -------------------------------------------------------------------------------

TEST(BearerToken, Parsing) {
  EXPECT_EQ(bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("bearer abc"), "abc");
  EXPECT_EQ(bearer_token("BEARER abc"), "abc");
  EXPECT_EQ(bearer_token("BeArEr abc"), "abc");
  EXPECT_EQ(bearer_token("Bearer   abc  "), "abc");
  EXPECT_EQ(bearer_token("  Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("Bearer tw_A-b.c~d+e/f="), "tw_A-b.c~d+e/f=");
  EXPECT_EQ(bearer_token("Bearer "), "");
  EXPECT_EQ(bearer_token("Bearer"), "");
  EXPECT_EQ(bearer_token("Bearerabc"), "");
  EXPECT_EQ(bearer_token("Basic abc"), "");
  EXPECT_EQ(bearer_token("abc"), "");
  EXPECT_EQ(bearer_token(""), "");
  EXPECT_EQ(bearer_token("Token abc"), "");
}

TEST(AcceptsJson, Values) {
  EXPECT_TRUE(accepts_json(""));
  EXPECT_TRUE(accepts_json("application/json"));
  EXPECT_TRUE(accepts_json("application/json, text/event-stream"));
  EXPECT_TRUE(accepts_json("text/event-stream, application/json"));
  EXPECT_TRUE(accepts_json("APPLICATION/JSON"));
  EXPECT_TRUE(accepts_json("application/json; charset=utf-8"));
  EXPECT_TRUE(accepts_json("*/*"));
  EXPECT_TRUE(accepts_json("application/*"));
  EXPECT_TRUE(accepts_json("text/html, */*;q=0.8"));
  EXPECT_FALSE(accepts_json("text/event-stream"));
  EXPECT_FALSE(accepts_json("TEXT/EVENT-STREAM"));
  EXPECT_FALSE(accepts_json("text/html"));
  EXPECT_FALSE(accepts_json("text/plain, text/event-stream"));
}

}  // namespace
}  // namespace toolwarden::daemon
