// Fuzzes the MCP listener's request handling (SPEC §5): raw bytes from a client, read with
// Beast's request parsers under the limits McpServer::session sets (header ≤ kHeaderLimit,
// the body limit only after the header checks), then check_mcp_headers with a real
// JobRegistry behind the token check, then the body through protocol::parse_message and the
// MCP-Protocol-Version check. Keep-alive requests are read one after another from the same
// bytes, as the session does; a rejection ends the connection, as it does there.
//
// Input: the bytes of one connection. Each input is read all at once and in small pieces, and
// both readings must agree (TCP may cut a request anywhere); each request let through is
// written out again and must read back the same.
#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <limits>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "daemon/config.hpp"
#include "daemon/http_util.hpp"
#include "daemon/jobs.hpp"
#include "daemon/request_checks.hpp"
#include "protocol/jsonrpc.hpp"
#include "protocol/mcp.hpp"
#include "store/clock.hpp"
#include "store/digest.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace {
namespace beast = boost::beast;
namespace http = beast::http;
namespace tw = toolwarden;
using tw::daemon::CheckPolicy;

constexpr unsigned short kPort = 41234;
constexpr std::string_view kToken = "tw_fuzz_token_0123456789abcdef";
constexpr std::string_view kAllowedOrigin = "https://ide.example";

struct Daemon {
  tw::daemon::Config config;
  CheckPolicy policy{kPort, {std::string(kAllowedOrigin)}, config.max_body_bytes};
  tw::daemon::JobRegistry jobs{config.max_concurrent_calls};
  tw::daemon::Authenticator authenticate;
  boost::asio::io_context io;

  Daemon() {
    auto job = std::make_shared<tw::daemon::JobState>();
    job->record.id = "job_fuzz";
    job->record.token_sha256 = tw::store::sha256_hex(kToken);
    job->record.expires_at = std::numeric_limits<std::int64_t>::max();
    jobs.add(job);
    authenticate = [this](std::string_view token) {
      return jobs.authenticate(token, tw::store::unix_now());
    };
  }
};

Daemon& daemon() {
  static Daemon d;
  return d;
}

// What the session does with one request: where it ended, the HTTP status (0: the connection
// just ends) and, for a request that reached the MCP handler, its target and body.
struct Outcome {
  enum Stage { bad_header, header_check, bad_body, handled } stage;
  int status = 0;
  std::string detail;
  // Which error a malformed header or body reports first may depend on where the bytes were
  // cut (431 or 400; 413 or a cut-short body): equal when they end at the same stage. The
  // checks' verdicts and what reaches the handler must be the same exactly.
  bool operator==(const Outcome& o) const {
    if (stage != o.stage) return false;
    if (stage == bad_header || stage == bad_body) return true;
    return status == o.status && detail == o.detail;
  }
};

std::string show(const http::request_header<>& h) {
  std::ostringstream out;
  out << h;
  return out.str();
}

bool own_host(std::string_view host) {
  const std::string h = tw::daemon::lowercase(host);
  const std::string p = ":" + std::to_string(kPort);
  return h == "127.0.0.1" + p || h == "localhost" + p || h == "[::1]" + p;
}

// SPEC §5 on a request the checks let through.
void check_accepted_header(const http::request_header<>& h) {
  const std::string text = show(h);
  auto target = h.target();
  FUZZ_CHECK(target.substr(0, target.find('?')) == "/mcp", text);
  FUZZ_CHECK(h.method() == http::verb::post, text);
  FUZZ_CHECK(h.count(http::field::host) == 1 && own_host(h[http::field::host]), text);
  if (h.count(http::field::origin) > 0) {
    const std::string origin = tw::daemon::lowercase(h[http::field::origin]);
    const std::string p = ":" + std::to_string(kPort);
    FUZZ_CHECK(h.count(http::field::origin) == 1 &&
                   (origin == "http://127.0.0.1" + p || origin == "http://localhost" + p ||
                    origin == "http://[::1]" + p || origin == kAllowedOrigin),
               text);
  }
  FUZZ_CHECK(h.count(http::field::authorization) == 1 &&
                 tw::daemon::bearer_token(h[http::field::authorization]) == kToken,
             text);
  FUZZ_CHECK(tw::daemon::media_type(h[http::field::content_type]) == "application/json", text);
}

// RFC 9112 §6.3 on a request read to its end: its length could not be read two ways. Framing
// is what Beast's parser decided (`chunked`, `declared`), not what the headers seem to say.
void check_framing(const http::request<http::string_body>& req, bool chunked,
                   boost::optional<std::uint64_t> declared) {
  const std::string text = show(req.base());
  const bool has_te = req.count(http::field::transfer_encoding) > 0;
  FUZZ_CHECK(!has_te || chunked, "a body framed by a coding other than chunked:\n" + text);
  FUZZ_CHECK(!(declared && has_te), "Content-Length and Transfer-Encoding both:\n" + text);
  if (declared) FUZZ_CHECK(req.body().size() == *declared, text);
  FUZZ_CHECK(req.body().size() <= daemon().config.max_body_bytes, text);
}

// Each request that reached the MCP handler is also written out again (Beast's serializer:
// the header as it was checked, and the body read) into `rewritten`. The header as checked,
// because Beast appends a chunked body's trailer fields to the header once the body is read;
// the session reads nothing from the header after that but keep-alive.
std::vector<Outcome> serve(std::string_view bytes, std::size_t piece,
                           std::vector<std::string>* rewritten = nullptr) {
  auto& d = daemon();
  beast::test::stream stream(d.io, bytes);
  if (piece > 0) stream.read_size(piece);
  stream.close_remote();
  beast::flat_buffer buffer;
  std::vector<Outcome> outcomes;
  for (int n = 0; n < 16; ++n) {
    http::request_parser<http::empty_body> header_parser;
    header_parser.header_limit(tw::daemon::kHeaderLimit);
    header_parser.body_limit(boost::none);
    beast::error_code ec;
    const auto header_bytes = http::read_header(stream, buffer, header_parser, ec);
    if (ec == http::error::header_limit || (!ec && header_bytes > tw::daemon::kHeaderLimit)) {
      outcomes.push_back({Outcome::bad_header, 431, ""});
      break;
    }
    if (ec == http::error::end_of_stream) break;
    if (ec) {
      outcomes.push_back({Outcome::bad_header, 400, ""});
      break;
    }
    auto verdict = tw::daemon::check_mcp_headers(header_parser.get(), d.policy, d.authenticate);
    if (verdict.rejection) {
      FUZZ_CHECK(verdict.job == nullptr, "a rejection carries a job");
      outcomes.push_back({Outcome::header_check, static_cast<int>(verdict.rejection->status), ""});
      break;
    }
    FUZZ_CHECK(verdict.job != nullptr, "accepted without a job");
    check_accepted_header(header_parser.get());
    const http::request_header<> checked = header_parser.get();
    const bool chunked = header_parser.chunked();
    const auto declared = header_parser.content_length();
    const bool has_version = header_parser.get().count("MCP-Protocol-Version") > 0;
    const std::string version(header_parser.get()["MCP-Protocol-Version"]);

    http::request_parser<http::string_body> parser(std::move(header_parser));
    parser.body_limit(d.config.max_body_bytes);
    http::read(stream, buffer, parser, ec);
    if (ec == http::error::body_limit) {
      outcomes.push_back({Outcome::bad_body, 413, ""});
      break;
    }
    if (ec) {
      outcomes.push_back({Outcome::bad_body, 0, ""});
      break;
    }
    auto request = parser.release();
    check_framing(request, chunked, declared);
    auto parsed = tw::protocol::parse_message(request.body());
    int status = 200;
    if (std::holds_alternative<tw::protocol::Rejection>(parsed)) {
      status = 400;
    } else if (has_version && !tw::protocol::is_supported_version(version)) {
      status = 400;
    }
    outcomes.push_back(
        {Outcome::handled, status, std::string(request.target()) + " " + request.body()});
    if (rewritten != nullptr) {
      std::ostringstream out;
      out << http::request<http::string_body>(checked, request.body());
      rewritten->push_back(out.str());
    }
    if (!request.keep_alive()) break;
  }
  return outcomes;
}

std::string describe(const std::vector<Outcome>& outcomes) {
  static constexpr const char* kStages[] = {"bad header", "header check", "bad body", "handled"};
  std::string out;
  for (const auto& o : outcomes) {
    out += std::string("[") + kStages[o.stage] + " " + std::to_string(o.status) + " " +
           o.detail.substr(0, 80) + "]";
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = toolwarden::fuzz::as_text(data, size);
  std::vector<std::string> rewritten;
  const auto whole = serve(bytes, 0, &rewritten);
  const auto pieces = serve(bytes, 1 + size % 7);
  FUZZ_CHECK(whole == pieces, "the reading depends on how the bytes were cut:\n  all at once " +
                                  describe(whole) + "\n  in pieces of " +
                                  std::to_string(1 + size % 7) + " " + describe(pieces));
  // A request that was let through means the same when written out again and re-read.
  for (std::size_t i = 0; i < rewritten.size(); ++i) {
    const auto again = serve(rewritten[i], 0);
    FUZZ_CHECK(!again.empty() && again.front() == whole[i], "re-read differs:\n" + rewritten[i]);
  }
  return 0;
}
