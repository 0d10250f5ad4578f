// One descriptor across a unix socket (SCM_RIGHTS). Allocation-free, so the cloned child may
// use it too.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace toolwarden::sandbox {

/// Sends `fd` with a one-byte message; true when sent.
inline bool send_fd(int sock, int fd) {
  char byte = 'F';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  return ::sendmsg(sock, &msg, MSG_NOSIGNAL) == 1;
}

/// Receives one descriptor (close-on-exec) without blocking: the descriptor, -1 on EOF or when
/// none came with the message, -2 when nothing is there yet (EAGAIN).
inline int receive_fd(int sock) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0 && errno == EAGAIN) return -2;
  if (n != 1) return -1;
  int fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int))) {
      std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
    }
  }
  return fd;
}

}  // namespace toolwarden::sandbox
