// Listening-socket access for cpp-httplib servers.
//
// cpp-httplib 0.11 listens with a backlog of 5: a burst of new connections (kube-apiserver
// replicas opening their pools, a restart of the clients) overflows the accept queue and the
// excess connections stall for a TCP retransmission timeout (1 s, then 3 s...). WithListener<S>
// exposes the listening socket so that the backlog can be raised after bind (Linux applies a
// second listen() call to an already listening socket) and so that readiness can check that the
// socket is really open.
#pragma once

#include <sys/socket.h>

#include <httplib.h>

namespace aw::server {

inline constexpr int kListenBacklog = 4096;  // the kernel caps it at net.core.somaxconn

template <typename Base>
class WithListener : public Base {
 public:
  using Base::Base;

  // The listening socket, or -1 when not bound or stopped.
  int listener_fd() const {
    socket_t fd = this->svr_sock_;  // httplib's global socket type
    return fd == INVALID_SOCKET ? -1 : static_cast<int>(fd);
  }

  // Raises the accept backlog of the bound socket; false when not bound or listen() fails.
  bool RaiseBacklog(int backlog = kListenBacklog) {
    int fd = listener_fd();
    return fd >= 0 && ::listen(fd, backlog) == 0;
  }
};

}  // namespace aw::server
