// Counters for GET /metrics (Prometheus text format). Owned by the I/O thread: only code on
// the I/O executor touches them, so no locks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace toolwarden::daemon {

class Metrics {
 public:
  void count_request(int status) { ++requests_[status]; }
  void count_call(const std::string& tool, const std::string& code) { ++calls_[{tool, code}]; }
  std::string render(std::size_t jobs_live, std::size_t calls_in_flight) const;

 private:
  std::map<int, std::uint64_t> requests_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> calls_;
};

}  // namespace toolwarden::daemon
