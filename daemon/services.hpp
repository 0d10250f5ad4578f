// The daemon's parts, created once by `serve` and shared by reference with both listeners.
// Everything mutable here is owned by the I/O thread, except the writer (its own thread)
// and the pool (its threads), which are reached only through daemon/async.hpp.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <string>

#include "daemon/config.hpp"
#include "daemon/dispatcher.hpp"
#include "daemon/jobs.hpp"
#include "daemon/mcp_handler.hpp"
#include "daemon/metrics.hpp"
#include "daemon/paths.hpp"
#include "daemon/tools/custom_tool.hpp"
#include "daemon/tools/tool.hpp"
#include "policy/commands.hpp"
#include "store/writer.hpp"

namespace toolwarden::daemon {

class ProbeService;

struct Services {
  const Dirs& dirs;
  const Config& config;
  store::Writer& writer;
  boost::asio::thread_pool& pool;
  JobRegistry& jobs;
  Metrics& metrics;
  const ToolRegistry& tools;
  Dispatcher& dispatcher;
  McpHandler& mcp;
  const policy::CommandRegistry& commands;
  const CustomToolEnv& custom_tools;
  std::string mcp_url;
  unsigned short port = 0;
  /// Snapshots and probes (SPEC §12); null when the daemon has none.
  ProbeService* probes = nullptr;
};

}  // namespace toolwarden::daemon
