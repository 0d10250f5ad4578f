#include "daemon/mcp_handler.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

#include "daemon/log.hpp"
#include "daemon/version.hpp"
#include "protocol/mcp.hpp"

namespace toolwarden::daemon {
namespace asio = boost::asio;
namespace json = boost::json;
using protocol::MessageKind;

asio::awaitable<McpReply> McpHandler::handle(std::shared_ptr<JobState> job, protocol::Message msg) {
  if (msg.kind == MessageKind::response) co_return McpReply{McpReply::Kind::accepted, {}};
  if (msg.kind == MessageKind::notification) {
    if (msg.method == "notifications/cancelled" && msg.params.is_object()) {
      if (const auto* rid = msg.params.get_object().if_contains("requestId")) {
        bool found = jobs_.cancel_request(*job, *rid);
        log_info("call.cancel_requested",
                 {{"job", job->record.id}, {"found", found ? "yes" : "no"}});
      }
    }
    co_return McpReply{McpReply::Kind::accepted, {}};
  }

  const auto& id = msg.id;
  if (msg.method == "initialize") {
    std::string requested;
    if (msg.params.is_object()) {
      if (const auto* v = msg.params.get_object().if_contains("protocolVersion");
          v && v->is_string()) {
        requested = std::string(v->get_string());
      }
    }
    auto version = protocol::negotiate_version(requested);
    co_return McpReply{
        McpReply::Kind::response,
        protocol::make_result(id, protocol::initialize_result(version, TOOLWARDEN_VERSION))};
  }
  if (msg.method == "ping") {
    co_return McpReply{McpReply::Kind::response, protocol::make_result(id, json::object{})};
  }
  if (msg.method == "tools/list") {
    json::array list;
    for (const auto& name : job->grant.tools) {
      if (const Tool* t = tools_.find(name)) {
        list.push_back(protocol::to_json(t->descriptor()));
      } else if (auto c = job->custom_tools.find(name); c != job->custom_tools.end()) {
        list.push_back(protocol::to_json(c->second->descriptor()));
      }
    }
    json::object r;
    r["tools"] = std::move(list);
    co_return McpReply{McpReply::Kind::response, protocol::make_result(id, std::move(r))};
  }
  if (msg.method == "tools/call") {
    CallOutcome out = co_await dispatcher_.call(job, job->record.generation, id, msg.params);
    if (std::holds_alternative<Unauthorized>(out))
      co_return McpReply{McpReply::Kind::unauthorized, {}};
    if (auto* f = std::get_if<RpcFailure>(&out)) {
      co_return McpReply{McpReply::Kind::response, protocol::make_error(id, f->code, f->message)};
    }
    // The result was serialized on the pool; only the envelope is written here.
    McpReply reply{McpReply::Kind::response, {}, {}};
    const auto& text = std::get<Answer>(out).text;
    reply.text.reserve(text.size() + 64);
    reply.text += R"({"jsonrpc":"2.0","id":)";
    reply.text += json::serialize(id);
    reply.text += R"(,"result":)";
    reply.text += text;
    reply.text += '}';
    reply.hold = std::move(std::get<Answer>(out).slot);
    co_return reply;
  }
  co_return McpReply{McpReply::Kind::response,
                     protocol::make_error(id, protocol::rpc_code::kMethodNotFound,
                                          "Method not found: " + msg.method)};
}

}  // namespace toolwarden::daemon
