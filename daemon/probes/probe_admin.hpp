// The probe methods of the admin API (SPEC §4, §12): snapshot.capture {worktree},
// probe.plan {plan}, probe.run {probe_id}, probe.get {probe_id}, and probe.progress {probe_id}
// (the admin API's runs of that probe in flight: elapsed time and output bytes so far, for the
// CLI's status line). The user's own calls: every snapshot and probe is visible, and a run
// answers with its whole stored output.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <string>
#include <string_view>
#include <variant>

#include "daemon/services.hpp"

namespace toolwarden::daemon {

bool is_probe_admin_method(std::string_view method);

/// The method's result, or the refusal's message ("CODE: reason").
boost::asio::awaitable<std::variant<boost::json::value, std::string>> handle_probe_admin(
    Services& services, std::string method, boost::json::object params);

}  // namespace toolwarden::daemon
