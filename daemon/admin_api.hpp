// The admin JSON-RPC methods (SPEC §4). Their results are exactly what the CLI prints.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include "daemon/services.hpp"
#include "protocol/jsonrpc.hpp"

namespace toolwarden::daemon {

/// JSON-RPC error code for a refused admin operation (bad parameters, unknown job).
inline constexpr int kAdminRefused = -32000;

/// Answers one admin request with a JSON-RPC response object.
boost::asio::awaitable<boost::json::object> handle_admin(Services& services, protocol::Message msg);

/// Loads the store's jobs into the registry at start-up.
void restore_jobs(store::Store& store, JobRegistry& jobs, const CustomToolEnv& custom_tools);

/// The JSON shape of one event, as `audit --json` prints it.
boost::json::object event_to_json(const store::Event& e);

}  // namespace toolwarden::daemon
