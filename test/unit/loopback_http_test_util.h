// Test helpers for unit tests that stand in for an HTTP peer on loopback (the gateway's allocator
// client and its per-call strand): a listening socket with a kernel-chosen port, and a reader of
// one request (head plus Content-Length body) at a time.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace aw::test_util {

// A listening socket on 127.0.0.1 with a kernel-chosen port.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::listen(fd, 16);
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
};

// Reads one HTTP request head and its Content-Length body from `fd`, consuming it from `carry`
// (bytes read past it stay there); false on EOF.
inline bool ReadRequest(int fd, std::string* carry) {
  for (;;) {
    const size_t head_end = carry->find("\r\n\r\n");
    if (head_end != std::string::npos) {
      size_t length = 0;
      const size_t cl = carry->find("Content-Length: ");
      if (cl != std::string::npos && cl < head_end) length = std::stoul(carry->substr(cl + 16));
      if (carry->size() >= head_end + 4 + length) {
        carry->erase(0, head_end + 4 + length);
        return true;
      }
    }
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    carry->append(buf, static_cast<size_t>(n));
  }
}

}  // namespace aw::test_util
