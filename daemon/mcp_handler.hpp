// MCP method routing for one authenticated message (SPEC §5). No HTTP here: the server
// turns a Reply into a status, headers and a body.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <memory>
#include <string>

#include "daemon/dispatcher.hpp"
#include "daemon/jobs.hpp"
#include "daemon/tools/tool.hpp"
#include "protocol/jsonrpc.hpp"

namespace toolwarden::daemon {

struct McpReply {
  enum class Kind { response, accepted, unauthorized } kind = Kind::response;
  boost::json::object body;    // the JSON-RPC response when kind == response
  std::string text;            // or the response already serialized (large tool results)
  std::shared_ptr<void> hold;  // what must live until the reply is written (Answer::slot)
};

class McpHandler {
 public:
  McpHandler(Dispatcher& dispatcher, JobRegistry& jobs, const ToolRegistry& tools)
      : dispatcher_(dispatcher), jobs_(jobs), tools_(tools) {}

  boost::asio::awaitable<McpReply> handle(std::shared_ptr<JobState> job, protocol::Message msg);

 private:
  Dispatcher& dispatcher_;
  JobRegistry& jobs_;
  const ToolRegistry& tools_;
};

}  // namespace toolwarden::daemon
