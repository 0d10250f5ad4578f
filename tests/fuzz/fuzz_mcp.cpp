// Fuzzes JSON-RPC/MCP decoding (SPEC §5): a request body through protocol::parse_message, then
// the daemon's McpHandler for the message it yields, plus the UTF-8 helpers answers rely on.
//
// Input: one HTTP body. The handler runs with a real job registry and the real built-in tool
// registry (tools/list), and a Dispatcher whose registry is empty: its tools/call decoding
// (params, name) runs and ends at "Unknown tool" before any slot, store write or tool run.
#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/serialize.hpp>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "daemon/config.hpp"
#include "daemon/dispatcher.hpp"
#include "daemon/jobs.hpp"
#include "daemon/log.hpp"
#include "daemon/mcp_handler.hpp"
#include "daemon/metrics.hpp"
#include "daemon/tools/builtin.hpp"
#include "policy/path_rules.hpp"
#include "protocol/jsonrpc.hpp"
#include "protocol/mcp.hpp"
#include "sandbox/supervisor.hpp"
#include "store/store.hpp"
#include "store/writer.hpp"
#include "tests/fuzz/fuzz_check.hpp"
#include "tests/fuzz/json_near.hpp"

namespace {
namespace asio = boost::asio;
namespace json = boost::json;
namespace tw = toolwarden;
using tw::daemon::McpReply;
using tw::protocol::Message;
using tw::protocol::MessageKind;
namespace rpc_code = tw::protocol::rpc_code;
using tw::fuzz::json_near;

// A fresh state dir for the store the Dispatcher is built on (it is never written to).
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tw-fuzz-mcp-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// The daemon's parts McpHandler needs, built once per process as `serve` builds them.
struct Daemon {
  TempDir dir;
  tw::daemon::Config config;
  tw::store::Writer writer{tw::store::Store(dir.path / "store.db")};
  asio::thread_pool pool{1};
  tw::sandbox::Supervisor supervisor;
  tw::daemon::JobRegistry jobs{config.max_concurrent_calls};
  tw::daemon::Metrics metrics;
  tw::daemon::ToolRegistry no_tools;
  tw::daemon::ToolRegistry tools;
  tw::daemon::Dispatcher dispatcher{writer, pool, supervisor, jobs, metrics, no_tools, config};
  tw::daemon::McpHandler handler{dispatcher, jobs, tools};
  std::shared_ptr<tw::daemon::JobState> job = std::make_shared<tw::daemon::JobState>();
  std::shared_ptr<tw::daemon::CallState> call_7, call_seven;
  asio::io_context io;

  Daemon() {
    tw::daemon::set_log_level(tw::daemon::LogLevel::error);
    tw::daemon::register_builtin_tools(tools, std::make_shared<const tw::policy::SensitiveNames>(),
                                       std::make_shared<const tw::policy::CommandRegistry>(),
                                       std::make_shared<const tw::daemon::SandboxReadiness>());
    job->record.id = "job_fuzz";
    job->record.token_sha256 = std::string(64, '0');
    job->record.expires_at = std::numeric_limits<std::int64_t>::max();
    job->grant.worktree = "/nonexistent";
    job->grant.access = tw::policy::Access::write;
    job->grant.allowed = {tw::policy::Scope{}};
    job->grant.tools = {"local_search", "local_read", "local_list", "local_edit", "local_test"};
    jobs.add(job);
    // Two in-flight calls that notifications/cancelled may name: 7 and "7" are different ids.
    call_7 = jobs.begin_call(*job, json::value(7));
    call_seven = jobs.begin_call(*job, json::value("7"));
  }
  ~Daemon() {
    pool.join();
    writer.stop();
  }
};

Daemon& daemon() {
  static Daemon d;
  return d;
}

McpReply handle(Message msg) {
  auto& d = daemon();
  std::optional<McpReply> reply;
  std::exception_ptr failure;
  asio::co_spawn(d.io, d.handler.handle(d.job, std::move(msg)),
                 [&](std::exception_ptr e, McpReply r) {
                   failure = e;
                   reply = std::move(r);
                 });
  d.io.restart();
  d.io.run();
  FUZZ_CHECK(!failure, "the handler threw");
  FUZZ_CHECK(reply.has_value(), "the handler did not complete on the I/O thread alone");
  return std::move(*reply);
}

std::optional<json::value> parse_json(std::string_view text, std::size_t max_depth) {
  json::parse_options opts;
  opts.max_depth = max_depth;
  json::error_code ec;
  auto v = json::parse(text, ec, json::storage_ptr(), opts);
  if (ec) return std::nullopt;
  return v;
}

// Nesting of arrays and objects in the text, counted outside strings: an oracle for the
// SPEC's depth limit that does not rely on the parser's own bookkeeping.
std::size_t bracket_depth(std::string_view s) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return deepest;
}

// Two UTF-8 validators (policy's for paths, protocol's repair for answers) and Boost.JSON's
// must agree on what UTF-8 is.
void check_utf8(std::string_view s) {
  const bool valid = tw::policy::is_valid_utf8(s);
  const std::string repaired = tw::protocol::valid_utf8(s);
  FUZZ_CHECK(valid == (repaired == s), "validators disagree");
  FUZZ_CHECK(tw::policy::is_valid_utf8(repaired), "repair left invalid UTF-8");
  FUZZ_CHECK(tw::protocol::valid_utf8(repaired) == repaired, "repair is not idempotent");
  if (s.find_first_of("\"\\") != std::string_view::npos) return;
  for (unsigned char c : s)
    if (c < 0x20) return;
  const bool json_ok = parse_json("\"" + std::string(s) + "\"", 64).has_value();
  FUZZ_CHECK(json_ok == valid, std::string("Boost.JSON says ") + (json_ok ? "valid" : "invalid"));
}

bool finite_numbers(const json::value& v) {
  if (v.is_double()) return std::isfinite(v.get_double());
  if (v.is_array()) {
    for (const auto& e : v.get_array())
      if (!finite_numbers(e)) return false;
  }
  if (v.is_object()) {
    for (const auto& kv : v.get_object())
      if (!finite_numbers(kv.value())) return false;
  }
  return true;
}

void walk_strings(const json::value& v, std::size_t depth) {
  FUZZ_CHECK(depth <= tw::protocol::kMaxJsonDepth, "deeper than the limit");
  if (v.is_string()) {
    FUZZ_CHECK(tw::policy::is_valid_utf8(v.get_string()), "invalid UTF-8 string");
  } else if (v.is_array()) {
    for (const auto& e : v.get_array()) walk_strings(e, depth + 1);
  } else if (v.is_object()) {
    for (const auto& kv : v.get_object()) {
      FUZZ_CHECK(tw::policy::is_valid_utf8(kv.key()), "invalid UTF-8 key");
      walk_strings(kv.value(), depth + 1);
    }
  }
}

void check_message(std::string_view body, const Message& m) {
  FUZZ_CHECK(bracket_depth(body) <= tw::protocol::kMaxJsonDepth, "too deep, yet accepted");
  FUZZ_CHECK(tw::policy::is_valid_utf8(m.method), "method is not UTF-8");
  FUZZ_CHECK(m.params.is_null() || m.params.is_object() || m.params.is_array(), "params");
  walk_strings(m.params, 1);
  const bool id_ok = m.id.is_string() || m.id.is_int64() || m.id.is_uint64() || m.id.is_double();
  switch (m.kind) {
    case MessageKind::request:
      FUZZ_CHECK(id_ok, "request without a valid id");
      break;
    case MessageKind::notification:
      FUZZ_CHECK(m.id.is_null(), "notification id");
      break;
    case MessageKind::response:
      FUZZ_CHECK(id_ok && m.method.empty(), "response with a method or without an id");
      break;
  }

  // Decoded → encoded → decoded gives the same message.
  json::object envelope{{"jsonrpc", "2.0"}};
  if (m.kind != MessageKind::notification) envelope["id"] = m.id;
  if (m.kind == MessageKind::response) {
    envelope["result"] = nullptr;
  } else {
    envelope["method"] = m.method;
    if (!m.params.is_null()) envelope["params"] = m.params;
  }
  const std::string again_text = json::serialize(envelope);
  auto again = tw::protocol::parse_message(again_text);
  const auto* a = std::get_if<Message>(&again);
  FUZZ_CHECK(a && a->kind == m.kind && json_near(a->id, m.id) && a->method == m.method &&
                 json_near(a->params, m.params),
             "round trip changed the message: " + again_text);
}

void check_reply(const Message& m, const McpReply& reply) {
  auto& d = daemon();
  if (m.kind != MessageKind::request) {
    FUZZ_CHECK(reply.kind == McpReply::Kind::accepted, "a notification or response is answered");
    return;
  }
  FUZZ_CHECK(reply.kind == McpReply::Kind::response && reply.text.empty(), m.method);
  const auto& body = reply.body;
  const std::string text = json::serialize(body);
  // The answer travels as one SSE data line when the client asks for a stream.
  FUZZ_CHECK(text.find_first_of("\r\n") == std::string::npos, "raw newline in " + text);
  const auto sse = tw::protocol::sse_event(text);
  FUZZ_CHECK(sse == "event: message\ndata: " + text + "\n\n", sse);
  auto reparsed = parse_json(text, 64);
  FUZZ_CHECK(reparsed && json_near(*reparsed, json::value(body)), text);

  FUZZ_CHECK(body.at("jsonrpc") == "2.0" && body.at("id") == m.id, text);
  const auto* result = body.if_contains("result");
  const auto* error = body.if_contains("error");
  FUZZ_CHECK((result == nullptr) != (error == nullptr), text);
  if (m.method == "initialize") {
    FUZZ_CHECK(result != nullptr, text);
    const auto& answered = result->at("protocolVersion").as_string();
    FUZZ_CHECK(tw::protocol::is_supported_version(answered), text);
    const json::value* asked = nullptr;
    if (m.params.is_object()) asked = m.params.get_object().if_contains("protocolVersion");
    if (asked && asked->is_string() && tw::protocol::is_supported_version(asked->get_string())) {
      FUZZ_CHECK(answered == asked->get_string(), text);
    } else {
      FUZZ_CHECK(answered == tw::protocol::kProtocolVersions.back(), text);
    }
    FUZZ_CHECK(result->at("serverInfo").at("name") == "toolwarden", text);
  } else if (m.method == "ping") {
    FUZZ_CHECK(result != nullptr && result->is_object() && result->get_object().empty(), text);
  } else if (m.method == "tools/list") {
    FUZZ_CHECK(result != nullptr, text);
    const auto& listed = result->at("tools").as_array();
    FUZZ_CHECK(listed.size() == d.job->grant.tools.size(), text);
    for (std::size_t i = 0; i < listed.size(); ++i) {
      FUZZ_CHECK(listed[i].at("name").as_string() == d.job->grant.tools[i], text);
      FUZZ_CHECK(listed[i].at("inputSchema").is_object(), text);
    }
  } else if (m.method == "tools/call") {
    FUZZ_CHECK(error != nullptr && error->at("code") == rpc_code::kInvalidParams, text);
  } else {
    FUZZ_CHECK(error != nullptr && error->at("code") == rpc_code::kMethodNotFound, text);
  }
}

// notifications/cancelled cancels the named call and no other.
void check_cancellation(const Message& m) {
  auto& d = daemon();
  const json::value* named = nullptr;
  if (m.kind == MessageKind::notification && m.method == "notifications/cancelled" &&
      m.params.is_object()) {
    named = m.params.get_object().if_contains("requestId");
  }
  for (const auto* call : {&d.call_7, &d.call_seven}) {
    const bool cancelled = (*call)->cancelled();
    FUZZ_CHECK(cancelled == (named != nullptr && *named == (*call)->request_id),
               "cancellation of call " + json::serialize((*call)->request_id));
    (*call)->cancel.store(static_cast<int>(tw::daemon::CancelReason::none));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto body = toolwarden::fuzz::as_text(data, size);
  check_utf8(body);

  auto parsed = tw::protocol::parse_message(body);
  if (const auto* bad = std::get_if<tw::protocol::Rejection>(&parsed)) {
    FUZZ_CHECK(bad->http_status == 400 && !bad->message.empty(), bad->message);
    // -32700 exactly when the body is not JSON within the depth limit, or holds a number no
    // double can hold (it would come back out as "Infinity", which is not JSON).
    const auto value = parse_json(body, tw::protocol::kMaxJsonDepth);
    const bool is_json = value && finite_numbers(*value);
    FUZZ_CHECK(bad->rpc_code == (is_json ? rpc_code::kInvalidRequest : rpc_code::kParseError),
               bad->message);
    if (!value && bracket_depth(body) <= tw::protocol::kMaxJsonDepth) {
      FUZZ_CHECK(!parse_json(body, 10000).has_value(), "valid JSON within the depth refused");
    }
    return 0;
  }
  auto& message = std::get<Message>(parsed);
  check_message(body, message);
  const Message copy = message;
  check_reply(copy, handle(std::move(message)));
  check_cancellation(copy);
  return 0;
}
