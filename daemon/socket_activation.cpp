#include "daemon/socket_activation.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace toolwarden::daemon {
namespace {

// A decimal number without sign, spaces or trailing garbage (what systemd writes).
template <typename T>
std::optional<T> parse_decimal(std::string_view text) {
  T value{};
  if (text.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool socket_option(int fd, int name, int* value) {
  socklen_t len = sizeof *value;
  return ::getsockopt(fd, SOL_SOCKET, name, value, &len) == 0;
}

}  // namespace

std::optional<int> passed_fd_count(const char* listen_pid, const char* listen_fds, pid_t self,
                                   std::string* why) {
  if (listen_pid == nullptr) return 0;
  auto pid = parse_decimal<pid_t>(listen_pid);
  if (!pid || *pid <= 0) {
    *why = "LISTEN_PID is not a process id: '" + std::string(listen_pid) + "'";
    return std::nullopt;
  }
  if (*pid != self) return 0;  // meant for another process (an ancestor's, passed along)
  const std::string_view fds = listen_fds == nullptr ? "" : listen_fds;
  auto count = parse_decimal<int>(fds);
  if (!count || *count < 0) {
    *why = "LISTEN_FDS is not a count: '" + std::string(fds) + "'";
    return std::nullopt;
  }
  return *count;
}

std::optional<LoopbackListener> adopt_loopback_listener(UniqueFd fd, std::string* why) {
  const int raw = fd.get();
  struct stat st {};
  if (::fstat(raw, &st) != 0) {
    *why = "descriptor " + std::to_string(raw) + " is not open";
    return std::nullopt;
  }
  if (!S_ISSOCK(st.st_mode)) {
    *why = "descriptor " + std::to_string(raw) + " is not a socket";
    return std::nullopt;
  }
  int domain = 0, type = 0, protocol = 0, listening = 0;
  if (!socket_option(raw, SO_DOMAIN, &domain) || !socket_option(raw, SO_TYPE, &type) ||
      !socket_option(raw, SO_PROTOCOL, &protocol) ||
      !socket_option(raw, SO_ACCEPTCONN, &listening)) {
    *why = std::string("cannot inspect the passed socket: ") + std::strerror(errno);
    return std::nullopt;
  }
  if ((domain != AF_INET && domain != AF_INET6) || type != SOCK_STREAM || protocol != IPPROTO_TCP) {
    *why = "the passed socket is not a TCP socket (ListenStream= with an IP address is needed)";
    return std::nullopt;
  }
  if (listening == 0) {
    *why = "the passed socket is not listening";
    return std::nullopt;
  }

  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(raw, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *why = std::string("cannot read the passed socket's address: ") + std::strerror(errno);
    return std::nullopt;
  }
  LoopbackListener l;
  char text[INET6_ADDRSTRLEN] = "?";
  bool loopback = false;
  if (addr.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(addr);
    loopback = in.sin_addr.s_addr == htonl(INADDR_LOOPBACK);
    l.port = ntohs(in.sin_port);
    ::inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
  } else if (addr.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(addr);
    loopback = IN6_IS_ADDR_LOOPBACK(&in6.sin6_addr);
    l.port = ntohs(in6.sin6_port);
    l.ipv6 = true;
    ::inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
  }
  if (!loopback) {
    *why = std::string("the passed socket is bound to ") + text +
           ", not 127.0.0.1 or [::1]: MCP is served on loopback only";
    return std::nullopt;
  }
  // systemd passes the socket without FD_CLOEXEC; a sandbox must never inherit it.
  const int flags = ::fcntl(raw, F_GETFD);
  if (flags < 0 || ::fcntl(raw, F_SETFD, flags | FD_CLOEXEC) != 0) {
    *why = std::string("cannot mark the passed socket close-on-exec: ") + std::strerror(errno);
    return std::nullopt;
  }
  l.host = l.ipv6 ? "::1" : "127.0.0.1";
  l.fd = std::move(fd);
  return l;
}

std::optional<LoopbackListener> take_activated_listener(std::string* why) {
  auto count =
      passed_fd_count(std::getenv("LISTEN_PID"), std::getenv("LISTEN_FDS"), ::getpid(), why);
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
  if (!count || *count == 0) return std::nullopt;
  if (*count != 1) {
    // One MCP listener is all `serve` has; a second socket (another address, say) would
    // otherwise sit unserved, so the unit is refused rather than half used.
    *why = "expected one socket, got " + std::to_string(*count) +
           " (toolwarden.socket takes a single ListenStream=)";
    return std::nullopt;
  }
  return adopt_loopback_listener(UniqueFd(kFirstPassedFd), why);
}

}  // namespace toolwarden::daemon
