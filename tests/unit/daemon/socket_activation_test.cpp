// Socket activation (sd_listen_fds(3)): which environments pass sockets to `serve`, and which
// passed sockets it accepts as its MCP listener — a listening TCP socket on 127.0.0.1 or ::1
// only, because the Host/Origin checks of SPEC §5 know no other address as the daemon's own.
#include "daemon/socket_activation.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace toolwarden::daemon {
namespace {

UniqueFd tcp_socket(int family, const char* address, bool listening) {
  UniqueFd fd(::socket(family, SOCK_STREAM, 0));
  EXPECT_TRUE(fd) << "socket()";
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (family == AF_INET) {
    auto& in = reinterpret_cast<sockaddr_in&>(ss);
    in.sin_family = AF_INET;
    EXPECT_EQ(::inet_pton(AF_INET, address, &in.sin_addr), 1);
    len = sizeof in;
  } else {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(ss);
    in6.sin6_family = AF_INET6;
    EXPECT_EQ(::inet_pton(AF_INET6, address, &in6.sin6_addr), 1);
    len = sizeof in6;
  }
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) return UniqueFd();
  if (listening) {
    EXPECT_EQ(::listen(fd.get(), 4), 0);
  }
  return fd;
}

unsigned short port_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len), 0);
  return ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in&>(ss).sin_port
                                       : reinterpret_cast<sockaddr_in6&>(ss).sin6_port);
}

::testing::AssertionResult refused(UniqueFd fd, std::string_view needle) {
  std::string why;
  auto l = adopt_loopback_listener(std::move(fd), &why);
  if (l) return ::testing::AssertionFailure() << "accepted";
  if (why.find(needle) == std::string::npos)
    return ::testing::AssertionFailure() << "reason '" << why << "' lacks '" << needle << "'";
  return ::testing::AssertionSuccess();
}

TEST(PassedFdCount, NoVariablesMeansNotActivated) {
  std::string why;
  EXPECT_EQ(passed_fd_count(nullptr, nullptr, 42, &why), 0);
  EXPECT_EQ(passed_fd_count(nullptr, "1", 42, &why), 0) << "LISTEN_FDS alone names nobody";
  EXPECT_TRUE(why.empty());
}

TEST(PassedFdCount, CountsOnlyForTheNamedProcess) {
  std::string why;
  EXPECT_EQ(passed_fd_count("42", "1", 42, &why), 1);
  EXPECT_EQ(passed_fd_count("42", "3", 42, &why), 3);
  EXPECT_EQ(passed_fd_count("41", "1", 42, &why), 0) << "meant for another process";
  EXPECT_EQ(passed_fd_count("42", "0", 42, &why), 0);
  EXPECT_TRUE(why.empty()) << why;
}

TEST(PassedFdCount, MalformedVariablesAreRefusedWithTheReason) {
  for (const char* pid : {"", "x", "-1", "0", "42 ", "+42", "99999999999999999999"}) {
    std::string why;
    EXPECT_FALSE(passed_fd_count(pid, "1", 42, &why).has_value()) << "LISTEN_PID=" << pid;
    EXPECT_NE(why.find("LISTEN_PID"), std::string::npos) << why;
  }
  for (const char* fds : {"", "one", "-1", "1x"}) {
    std::string why;
    EXPECT_FALSE(passed_fd_count("42", fds, 42, &why).has_value()) << "LISTEN_FDS=" << fds;
    EXPECT_NE(why.find("LISTEN_FDS"), std::string::npos) << why;
  }
  std::string why;
  EXPECT_FALSE(passed_fd_count("42", nullptr, 42, &why).has_value()) << "LISTEN_FDS missing";
}

TEST(AdoptLoopbackListener, TakesAListeningIpv4LoopbackSocketAndMarksItCloseOnExec) {
  UniqueFd fd = tcp_socket(AF_INET, "127.0.0.1", true);
  ASSERT_TRUE(fd);
  const int raw = fd.get();
  const unsigned short port = port_of(raw);
  ASSERT_EQ(::fcntl(raw, F_SETFD, 0), 0);  // as systemd passes it
  std::string why;
  auto l = adopt_loopback_listener(std::move(fd), &why);
  ASSERT_TRUE(l) << why;
  EXPECT_EQ(l->fd.get(), raw);
  EXPECT_FALSE(l->ipv6);
  EXPECT_EQ(l->host, "127.0.0.1");
  EXPECT_EQ(l->port, port);
  EXPECT_NE(::fcntl(raw, F_GETFD) & FD_CLOEXEC, 0) << "a sandbox could inherit the listener";
}

TEST(AdoptLoopbackListener, TakesAListeningIpv6LoopbackSocket) {
  UniqueFd fd = tcp_socket(AF_INET6, "::1", true);
  if (!fd) GTEST_SKIP() << "no IPv6 loopback on this machine";
  std::string why;
  auto l = adopt_loopback_listener(std::move(fd), &why);
  ASSERT_TRUE(l) << why;
  EXPECT_TRUE(l->ipv6);
  EXPECT_EQ(l->host, "::1");
}

TEST(AdoptLoopbackListener, RefusesASocketThatIsNotListening) {
  EXPECT_TRUE(refused(tcp_socket(AF_INET, "127.0.0.1", false), "not listening"));
}

TEST(AdoptLoopbackListener, RefusesOtherLoopbackAndWildcardAddresses) {
  // 127.0.0.2 is on lo but is not an address the Host check accepts; nothing is accepted on
  // these sockets, they exist for the address check only.
  EXPECT_TRUE(refused(tcp_socket(AF_INET, "127.0.0.2", true), "bound to 127.0.0.2"));
  EXPECT_TRUE(refused(tcp_socket(AF_INET, "0.0.0.0", true), "bound to 0.0.0.0"));
  UniqueFd v6any = tcp_socket(AF_INET6, "::", true);
  if (v6any) {
    EXPECT_TRUE(refused(std::move(v6any), "bound to ::"));
  }
}

TEST(AdoptLoopbackListener, RefusesDatagramAndUnixSockets) {
  UniqueFd udp(::socket(AF_INET, SOCK_DGRAM, 0));
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(udp.get(), reinterpret_cast<sockaddr*>(&in), sizeof in), 0);
  EXPECT_TRUE(refused(std::move(udp), "not a TCP socket"));

  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  UniqueFd other(pair[1]);
  EXPECT_TRUE(refused(UniqueFd(pair[0]), "not a TCP socket"));
}

TEST(AdoptLoopbackListener, RefusesWhatIsNotASocket) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  UniqueFd write_end(p[1]);
  EXPECT_TRUE(refused(UniqueFd(p[0]), "not a socket"));
  EXPECT_TRUE(refused(UniqueFd(::open("/dev/null", O_RDONLY)), "not a socket"));
}

TEST(TakeActivatedListener, RemovesTheVariablesEvenWhenTheyNameAnotherProcess) {
  ::setenv("LISTEN_PID", "1", 1);  // init's, never this test's
  ::setenv("LISTEN_FDS", "1", 1);
  ::setenv("LISTEN_FDNAMES", "mcp", 1);
  std::string why;
  EXPECT_FALSE(take_activated_listener(&why).has_value());
  EXPECT_TRUE(why.empty()) << why;
  EXPECT_EQ(std::getenv("LISTEN_PID"), nullptr);
  EXPECT_EQ(std::getenv("LISTEN_FDS"), nullptr);
  EXPECT_EQ(std::getenv("LISTEN_FDNAMES"), nullptr);
}

TEST(TakeActivatedListener, RefusesMoreThanOneSocket) {
  ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
  ::setenv("LISTEN_FDS", "2", 1);
  std::string why;
  EXPECT_FALSE(take_activated_listener(&why).has_value());
  EXPECT_NE(why.find("expected one socket, got 2"), std::string::npos) << why;
  EXPECT_EQ(std::getenv("LISTEN_PID"), nullptr);
}

TEST(TakeActivatedListener, AdoptsDescriptorThree) {
  UniqueFd fd = tcp_socket(AF_INET, "127.0.0.1", true);
  ASSERT_TRUE(fd);
  const unsigned short port = port_of(fd.get());
  // Whatever held descriptor 3 in this test process is set aside and put back afterwards.
  UniqueFd saved(::fcntl(kFirstPassedFd, F_DUPFD_CLOEXEC, 10));
  ASSERT_EQ(::dup2(fd.get(), kFirstPassedFd), kFirstPassedFd);
  ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
  ::setenv("LISTEN_FDS", "1", 1);
  std::string why;
  auto l = take_activated_listener(&why);
  ASSERT_TRUE(l) << why;
  EXPECT_EQ(l->fd.get(), kFirstPassedFd);
  EXPECT_EQ(l->port, port);
  l->fd.reset();
  if (saved) ::dup2(saved.get(), kFirstPassedFd);
}

}  // namespace
}  // namespace toolwarden::daemon
