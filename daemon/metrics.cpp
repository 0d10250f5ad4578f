#include "daemon/metrics.hpp"

namespace toolwarden::daemon {

std::string Metrics::render(std::size_t jobs_live, std::size_t calls_in_flight) const {
  std::string out;
  out += "# HELP toolwarden_http_requests_total MCP HTTP requests answered, by status.\n";
  out += "# TYPE toolwarden_http_requests_total counter\n";
  for (const auto& [status, n] : requests_) {
    out += "toolwarden_http_requests_total{status=\"" + std::to_string(status) + "\"} " +
           std::to_string(n) + "\n";
  }
  out += "# HELP toolwarden_tool_calls_total Tool calls completed, by tool and code.\n";
  out += "# TYPE toolwarden_tool_calls_total counter\n";
  for (const auto& [key, n] : calls_) {
    // Tool names and codes are [a-zA-Z0-9_] only, so no label escaping is needed.
    out += "toolwarden_tool_calls_total{tool=\"" + key.first + "\",code=\"" + key.second + "\"} " +
           std::to_string(n) + "\n";
  }
  out += "# HELP toolwarden_jobs_live Jobs neither revoked nor expired.\n";
  out += "# TYPE toolwarden_jobs_live gauge\n";
  out += "toolwarden_jobs_live " + std::to_string(jobs_live) + "\n";
  out += "# HELP toolwarden_calls_in_flight Tool calls running now.\n";
  out += "# TYPE toolwarden_calls_in_flight gauge\n";
  out += "toolwarden_calls_in_flight " + std::to_string(calls_in_flight) + "\n";
  return out;
}

}  // namespace toolwarden::daemon
