// Socket activation for `serve` (the sd_listen_fds(3) protocol, without libsystemd): systemd's
// toolwarden.socket, or systemd-socket-activate, passes the MCP listener as descriptor 3.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "sandbox/unique_fd.hpp"

namespace toolwarden::daemon {

/// The first passed descriptor (SD_LISTEN_FDS_START).
inline constexpr int kFirstPassedFd = 3;

/// A listening TCP socket bound to 127.0.0.1 or ::1, the only addresses the MCP Host and
/// Origin checks (SPEC §5) know as the daemon's own.
struct LoopbackListener {
  UniqueFd fd;
  bool ipv6 = false;
  std::string host;  // "127.0.0.1" or "::1"
  unsigned short port = 0;
};

/// How many descriptors $LISTEN_PID / $LISTEN_FDS pass to process `self`: 0 when the variables
/// are absent or name another process. nullopt, with *why, when they are malformed.
std::optional<int> passed_fd_count(const char* listen_pid, const char* listen_fds, pid_t self,
                                   std::string* why);

/// Takes `fd` as the MCP listener if it is a listening TCP socket bound to 127.0.0.1:PORT or
/// [::1]:PORT, and marks it close-on-exec so no sandbox inherits it. nullopt, with *why, for
/// anything else (the fd is then closed).
std::optional<LoopbackListener> adopt_loopback_listener(UniqueFd fd, std::string* why);

/// What `serve` calls once, first thing: reads the activation variables and removes them (and
/// $LISTEN_FDNAMES) from the environment, so nothing the daemon starts mistakes them for its
/// own. nullopt with *why empty: not socket-activated. nullopt with *why set: activated with
/// something other than exactly one loopback TCP listener, which `serve` refuses (exit 2).
std::optional<LoopbackListener> take_activated_listener(std::string* why);

}  // namespace toolwarden::daemon
